"""Read-side queries for the schedule pages: tonight's schedule, the weekly coverage, and the
catalog with this week's line-up and each candidate's qualification status."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from candidates.models import Candidate, Slot
from candidates.services import catalog_lineup, catalog_queryset
from evalhub.secrets import redact
from schedules.building import ROTATION_DAYS, CeilingProjection, ScheduleError, ceiling_projection, playing_candidate, rotation_day
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
    #: Slots without candidates, left out of the schedule built now (a saved one is as it was built).
    unscheduled_slots: list[str] = field(default_factory=list)
    projection: CeilingProjection | None = None
    #: Candidates whose catalog model is no longer the one the saved schedule runs tonight.
    model_changes: list[ModelChange] = field(default_factory=list)


@dataclass(frozen=True)
class ModelChange:
    """A candidate edited after a schedule was saved: the schedule keeps ``scheduled``, the catalog says ``current``."""

    candidate_id: str
    scheduled: str
    current: str


def model_changes(document: Mapping[str, Any]) -> list[ModelChange]:
    """The line-up candidates whose model in the catalog differs from the schedule's snapshot (one query)."""
    scheduled = {str(c.get("id")): str(c.get("model")) for c in document.get("candidates", []) if isinstance(c, dict)}
    # values_list() skips the models' from_db() redaction: a model written around validation may
    # hold a secret, and this is shown on the Tonight page.
    current = {key: redact(model) for key, model in Candidate.objects.filter(key__in=list(scheduled)).values_list("key", "model")}
    return [ModelChange(key, model, current[key]) for key, model in scheduled.items() if key in current and current[key] != model]


def tonight_schedule(*, seed: str, now: dt.datetime, ceiling_usd: Decimal) -> TonightSchedule:
    """Tonight's schedule — the saved one of ``seed`` for tonight's night and rotation day — with
    its worst case against ``ceiling_usd`` (USD; the nightly run's own ceiling once it exists) and,
    once saved, the candidates edited since (five queries at most)."""
    night = now.astimezone(dt.UTC).date()
    titles = dict(WorkflowCase.objects.values_list("key", "title"))
    # The night's own rotation day: a selection run on another day (``nightly --rotation-day``)
    # saves a schedule for the same night that is not tonight's.
    schedule = Schedule.objects.filter(seed=seed, night=night, rotation_day=rotation_day(iso_timestamp(now))).first()
    if schedule is not None:
        entries = list(schedule.entries.order_by("position"))
        runs = list(schedule.runs.select_related("refresh_of").order_by("-created_at", "-id"))
        nightly = next((run for run in runs if run.trigger == "nightly"), None)
        document = schedule.to_document(entries)
        ceiling = nightly.cost_ceiling_usd if nightly is not None else ceiling_usd
        return TonightSchedule(
            night,
            True,
            document,
            schedule,
            runs,
            titles,
            projection=ceiling_projection(document["entries"], ceiling),
            model_changes=model_changes(document),
        )
    slots, unscheduled = catalog_lineup()
    try:
        document = preview_schedule(seed=seed, now=now, slots=slots)
    except ScheduleError as exc:
        return TonightSchedule(night, False, None, case_titles=titles, error=str(exc), unscheduled_slots=unscheduled)
    return TonightSchedule(
        night,
        False,
        document,
        case_titles=titles,
        unscheduled_slots=unscheduled,
        projection=ceiling_projection(document["entries"], ceiling_usd),
    )


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
    #: Slots without candidates: not scheduled, so not in the grid.
    unscheduled_slots: list[str] = field(default_factory=list)


def coverage_overview(*, seed: str, now: dt.datetime) -> CoverageOverview:
    """Load the catalog once (three queries) and run the pure coverage functions on it."""
    slots, unscheduled = catalog_lineup()
    cases = catalog_cases()
    slot_ids = [slot["id"] for slot in slots]
    current_day = rotation_day(iso_timestamp(now))
    try:
        holds = schedule_coverage(seed=seed, slots=slots, cases=cases)
        matrix = coverage_matrix(seed=seed, slots=slots, cases=cases)
    except ScheduleError as exc:
        return CoverageOverview(seed, [], [], slot_ids, current_day, error=str(exc), unscheduled_slots=unscheduled)
    invariants = [
        {"name": name, "description": COVERAGE_DESCRIPTIONS[name], "holds": holds.get(name) is True} for name in COVERAGE_INVARIANTS
    ]
    titles = {case["id"]: case["title"] for case in cases}
    rows = []
    for case_id, days in matrix.items():
        met = {slot_id for day in days for slot_id in day}
        rows.append(CoverageRow(case_id, titles.get(case_id, ""), days, len(met), len(met) == len(slot_ids)))
    return CoverageOverview(seed, invariants, rows, slot_ids, current_day, unscheduled_slots=unscheduled)


# --- the catalog and this week's line-up ---------------------------------------------------------


@dataclass(frozen=True)
class VariableStatus:
    """A required environment variable's name and whether it is set (non-empty). Never its value."""

    name: str
    is_set: bool


@dataclass(frozen=True)
class CandidateRow:
    candidate: Candidate
    plays_this_week: bool
    environment: list[VariableStatus]


@dataclass(frozen=True)
class SlotRow:
    slot: Slot
    candidates: list[CandidateRow]


def catalog_overview(*, environ: Mapping[str, str], rotation_day: int) -> list[SlotRow]:
    """Slots in order with their candidates (two queries). A variable set to an empty string
    counts as missing, as it does when a run qualifies a candidate (docs/failure-modes.md B8)."""
    rows = []
    for slot in catalog_queryset():
        candidates = list(slot.candidates.all())
        playing = playing_candidate(candidates, rotation_day)
        rows.append(
            SlotRow(
                slot,
                [
                    CandidateRow(
                        candidate,
                        candidate is playing,
                        [
                            VariableStatus(name, bool(environ.get(name)))
                            for name in (candidate.required_environment if isinstance(candidate.required_environment, list) else [])
                            if isinstance(name, str)
                        ],
                    )
                    for candidate in candidates
                ],
            )
        )
    return rows
