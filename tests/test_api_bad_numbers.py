"""Numbers a client can send that the database or the float arithmetic cannot hold: each is a 400
saying what to fix, never a 500 (docs/failure-modes.md B9)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from runs.models import Execution
from tests.reference import scoring_vectors

pytestmark = pytest.mark.django_db

HUGE = "9" * 4301  # past Python's 4,300-digit limit for int(): int() itself raises


def valid_item(**weights: object) -> dict:
    vector = next(vector for vector in scoring_vectors()["observations"] if "scorecard" in vector)
    return {"observation": vector["observation"], "options": {**vector["options"], "weights": weights}}


@pytest.mark.parametrize(
    "weights",
    [
        {"semantic_outcome": 1e308, "trajectory_restraint": 1e308, "quality_efficiency": 1e308},
        {"semantic_outcome": 10**400},
    ],
    ids=["sum-overflows", "integer-past-a-double"],
)
def test_weights_too_large_to_add_up_are_a_400_naming_them(reader_client: Client, weights: dict) -> None:
    response = reader_client.post("/api/score/", data=json.dumps([valid_item(**weights)]), content_type="application/json")

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["index"] == 0
    assert "weights" in error["problems"][0]


@pytest.mark.parametrize(
    ("url", "name"),
    [
        (f"/api/schedules/preview/?limit={HUGE}", "limit"),
        (f"/api/schedules/preview/?rotation_day={HUGE}", "rotation_day"),
        ("/api/comparisons/?current=9223372036854775808&previous=1", "current"),
        ("/api/comparisons/?current=1&previous=9223372036854775808", "previous"),
        (f"/api/comparisons/?current={HUGE}&previous=1", "current"),
    ],
)
def test_a_number_past_what_the_database_or_int_holds_is_a_400_naming_the_parameter(reader_client: Client, url: str, name: str) -> None:
    response = reader_client.get(url)

    assert response.status_code == 400
    assert list(response.json()) == [name]


def test_an_attempt_number_past_int_is_a_400(reference_catalog, reader_client: Client) -> None:
    response = reader_client.get(f"/api/executions/1/trace/?attempt={HUGE}")

    assert response.status_code == 400
    assert list(response.json()) == ["attempt"]


def test_the_trace_method_is_405_not_the_trace_action(staff_client: Client) -> None:
    for url in ("/api/executions/", "/api/executions/1/"):
        response = staff_client.generic("TRACE", url)

        assert response.status_code == 405, url
        assert response.json() == {"detail": 'Method "TRACE" not allowed.'}
        assert "TRACE" not in response["Allow"]
    assert not Execution.objects.exists()
