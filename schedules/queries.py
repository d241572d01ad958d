"""Read-side queries for the schedule pages: tonight's schedule and the weekly coverage."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from candidates.services import catalog_slots
from schedules.building import ROTATION_DAYS, ScheduleError, rotation_day
from schedules.coverage import COVERAGE_DESCRIPTIONS, COVERAGE_INVARIANTS, coverage_matrix, schedule_coverage
from schedules.models import Schedule, WorkflowCase
from schedules.services import catalog_cases, iso_timestamp, preview_schedule

#: The rotation days, for the coverage grid's columns.
DAYS = tuple(range(ROTATION_DAYS))


@dataclass
class TonightSchedule:
    """Tonight's (UTC) schedule: the saved one when it exists, else one built now (``saved`` false).

    ``document`` is the reference schedule document (``None`` when it could not be built, and
    then ``error`` says why); ``runs`` are the saved schedule's runs, newest first.
    """

    night: dt.date
    saved: bool
    document: dict[str, Any] | None
    schedule: Schedule | None = None
    runs: list[Any] = field(default_factory=list)
    case_titles: dict[str, str] = field(default_factory=dict)
    error: str = ""


def tonight_schedule(*, seed: str, now: dt.datetime) -> TonightSchedule:
    night = now.astimezone(dt.UTC).date()
    titles = dict(WorkflowCase.objects.values_list("key", "title"))
    schedule = Schedule.objects.filter(seed=seed, night=night).order_by("-id").first()
    if schedule is not None:
        entries = list(schedule.entries.order_by("position"))
        runs = list(schedule.runs.order_by("-created_at", "-id"))
        return TonightSchedule(night, True, schedule.to_document(entries), schedule, runs, titles)
    try:
        document = preview_schedule(seed=seed, now=now)
    except ScheduleError as exc:
        return TonightSchedule(night, False, None, case_titles=titles, error=str(exc))
    return TonightSchedule(night, False, document, case_titles=titles)


@dataclass
class CoverageRow:
    case_id: str
    title: str
    days: list[list[str]]
    slots_met: int
    covers_every_slot: bool


@dataclass
class CoverageOverview:
    """The four invariants (name, description, holds) and the case × rotation-day grid."""

    seed: str
    invariants: list[dict[str, Any]]
    rows: list[CoverageRow]
    slot_ids: list[str]
    current_day: int
    error: str = ""


def coverage_overview(*, seed: str, now: dt.datetime) -> CoverageOverview:
    """Load the catalog once (three queries) and run the pure coverage functions on it."""
    slots = catalog_slots()
    cases = catalog_cases()
    slot_ids = [slot["id"] for slot in slots]
    current_day = rotation_day(iso_timestamp(now))
    try:
        holds = schedule_coverage(seed=seed, slots=slots, cases=cases)
        matrix = coverage_matrix(seed=seed, slots=slots, cases=cases)
    except ScheduleError as exc:
        return CoverageOverview(seed, [], [], slot_ids, current_day, error=str(exc))
    invariants = [
        {"name": name, "description": COVERAGE_DESCRIPTIONS[name], "holds": holds.get(name) is True}
        for name in COVERAGE_INVARIANTS
    ]
    titles = {case["id"]: case["title"] for case in cases}
    rows = []
    for case_id, days in matrix.items():
        met = {slot_id for day in days for slot_id in day}
        rows.append(CoverageRow(case_id, titles.get(case_id, ""), days, len(met), len(met) == len(slot_ids)))
    return CoverageOverview(seed, invariants, rows, slot_ids, current_day)

