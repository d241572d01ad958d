"""Coverage of the weekly rotation: the four invariants a nightly must satisfy, and the views of it
that the coverage page shows.

Pure functions over the same plain data as :mod:`schedules.building`. They follow the
reference's ``runnerLiveScheduleCoverage``: build the seven schedules of rotation days 0..6
(generated at 2026-08-24 .. 2026-08-30 midnight UTC) and check them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schedules.building import ROTATION_DAYS, build_schedule

COVERAGE_INVARIANTS: tuple[str, ...] = (
    "everySlotNightly",
    "everyConcreteCandidateInRotation",
    "everyWorkflowCoversEverySlot",
    "strongAndInexpensiveNightly",
)
COVERAGE_DESCRIPTIONS: dict[str, str] = {
    "everySlotNightly": "Every night's schedule plays every slot at least once.",
    "everyConcreteCandidateInRotation": (
        "Every candidate of every slot is played on at least one rotation day."
    ),
    "everyWorkflowCoversEverySlot": (
        "Over the seven rotation days, every workflow case meets every slot."
    ),
    "strongAndInexpensiveNightly": (
        "Every night plays at least one strong and at least one inexpensive candidate."
    ),
}


def week_schedules(
    *, seed: str, slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The seven schedules of rotation days 0..6, as the reference's coverage check builds them.

    Day ``d`` is generated at ``2026-08-{24+d}T00:00:00.000Z``. Returns schedule documents
    (see :func:`schedules.building.build_schedule`, which raises ``ScheduleError`` for bad input).
    """
    return [
        build_schedule(
            seed=seed,
            rotation_day=day,
            generated_at=f"2026-08-{24 + day:02d}T00:00:00.000Z",
            slots=slots,
            cases=cases,
        )
        for day in range(ROTATION_DAYS)
    ]


def schedule_coverage(
    *, seed: str, slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> dict[str, bool]:
    """The four coverage invariants over the week, keyed as in :data:`COVERAGE_INVARIANTS`.

    Follows ``runnerLiveScheduleCoverage`` exactly: a slot counts on a night when an entry
    plays it; "strong and inexpensive" looks only at line-up candidates that have entries.
    Raises ``ScheduleError`` when the schedules cannot be built.
    """
    schedules = week_schedules(seed=seed, slots=slots, cases=cases)
    slot_count = len(slots)
    all_candidate_ids = {candidate["id"] for slot in slots for candidate in slot["candidates"]}
    seen_candidate_ids = {
        entry["candidateId"] for schedule in schedules for entry in schedule["entries"]
    }

    every_slot_nightly = all(
        len({entry["slotId"] for entry in schedule["entries"]}) == slot_count
        for schedule in schedules
    )
    every_workflow_covers_every_slot = all(
        len(
            {
                entry["slotId"]
                for schedule in schedules
                for entry in schedule["entries"]
                if entry["caseId"] == case["id"]
            }
        )
        == slot_count
        for case in cases
    )
    strong_and_inexpensive_nightly = all(
        _plays_tier(schedule, "strong") and _plays_tier(schedule, "inexpensive")
        for schedule in schedules
    )
    return {
        "everySlotNightly": every_slot_nightly,
        "everyConcreteCandidateInRotation": all_candidate_ids <= seen_candidate_ids,
        "everyWorkflowCoversEverySlot": every_workflow_covers_every_slot,
        "strongAndInexpensiveNightly": strong_and_inexpensive_nightly,
    }


def _plays_tier(schedule: Mapping[str, Any], tier: str) -> bool:
    played = {entry["candidateId"] for entry in schedule["entries"]}
    return any(
        candidate["id"] in played and candidate.get("tier") == tier
        for candidate in schedule["candidates"]
    )


def failed_invariants(coverage: Mapping[str, bool]) -> list[str]:
    """The invariants of :data:`COVERAGE_INVARIANTS` that do not hold, in that order.

    A missing key counts as failed, so a truncated coverage document never passes.
    """
    return [name for name in COVERAGE_INVARIANTS if coverage.get(name) is not True]


def coverage_matrix(
    *, seed: str, slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> dict[str, list[list[str]]]:
    """Which slots each workflow case meets on each rotation day, for the coverage page.

    Returns ``{case_id: [slot ids on day 0, ..., slot ids on day 6]}`` with cases in catalog
    order and each day's slot ids in slot order. Raises ``ScheduleError`` for bad input.
    """
    slot_order = {slot["id"]: index for index, slot in enumerate(slots)}
    matrix: dict[str, list[list[str]]] = {case["id"]: [] for case in cases}
    for schedule in week_schedules(seed=seed, slots=slots, cases=cases):
        met: dict[str, set[str]] = {case_id: set() for case_id in matrix}
        for entry in schedule["entries"]:
            met[entry["caseId"]].add(entry["slotId"])
        for case_id, slot_ids in met.items():
            matrix[case_id].append(sorted(slot_ids, key=slot_order.__getitem__))
    return matrix


def slot_load(schedule: Mapping[str, Any]) -> dict[str, int]:
    """How many entries each line-up candidate has in a schedule (or selection).

    Returns ``{candidate_id: count}`` in line-up order, including candidates with no entries.
    """
    load = {candidate["id"]: 0 for candidate in schedule["candidates"]}
    for entry in schedule["entries"]:
        load[entry["candidateId"]] = load.get(entry["candidateId"], 0) + 1
    return load
