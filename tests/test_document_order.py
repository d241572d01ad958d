"""Stored reference documents keep their key order on every database (PostgreSQL's jsonb would sort them)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from schedules.models import Schedule
from schedules.services import preview_schedule, save_schedule
from tests.reference import golden_vectors

pytestmark = pytest.mark.django_db


def test_a_saved_schedule_reads_back_byte_identical_to_the_reference(reference_catalog) -> None:
    vector = golden_vectors()["schedules"][3]
    given = vector["input"]
    document = preview_schedule(
        seed=given["seed"], rotation_day=given["rotationDay"], generated_at=given["generatedAt"], now=dt.datetime.now(dt.UTC)
    )
    schedule, _ = save_schedule(document, night=dt.date(2026, 8, 24))
    reread = Schedule.objects.get(pk=schedule.pk)
    assert json.dumps(reread.to_document()) == json.dumps(vector["output"])
    entry = reread.entries.order_by("position").first()
    expected = next(c for c in vector["output"]["candidates"] if c["id"] == entry.candidate_key)
    assert json.dumps(entry.candidate) == json.dumps(expected)
