"""Coverage of the weekly rotation: the four invariants a nightly must satisfy, and the views of it
that the coverage page shows.

Pure functions over the same plain data as :mod:`schedules.building`. They follow the
reference's ``runnerLiveScheduleCoverage``: build the seven schedules of rotation days 0..6
(generated at 2026-08-24 .. 2026-08-30 midnight UTC) and check them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schedules.building import ROTATION_DAYS, build_week, check_week_inputs, playing_candidate, second_slot_offset

COVERAGE_INVARIANTS: tuple[str, ...] = (
    "everySlotNightly",
    "everyConcreteCandidateInRotation",
    "everyWorkflowCoversEverySlot",
    "strongAndInexpensiveNightly",
)
COVERAGE_DESCRIPTIONS: dict[str, str] = {
    "everySlotNightly": "Every night's schedule plays every slot at least once.",
    "everyConcreteCandidateInRotation": ("Every candidate of every slot is played on at least one rotation day."),
    "everyWorkflowCoversEverySlot": ("Over the seven rotation days, every workflow case meets every slot."),
    "strongAndInexpensiveNightly": ("Every night plays at least one strong and at least one inexpensive candidate."),
}


def week_schedules(*, seed: str, slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The seven schedules of rotation days 0..6, as the reference's coverage check builds them.

    Day ``d`` is generated at ``2026-08-{24+d}T00:00:00.000Z``. Returns schedule documents
    (see :func:`schedules.building.build_schedule`, which raises ``ScheduleError`` for bad input)
    that share the manifest's candidate documents: read them, do not change them.
    """
    # Built for reading: the inputs checked once, the line-ups not copied (``build_week``).
    return build_week(seed=seed, generated_at=_WEEK_TIMES, slots=slots, cases=cases)


#: The most distinct slots one workflow case can meet in a week: two a night, seven nights.
SLOTS_A_CASE_MEETS_A_WEEK = 2 * ROTATION_DAYS


def slots_each_case_must_meet(slot_count: int, *, reachable: bool = False) -> int:
    """How many distinct slots ``everyWorkflowCoversEverySlot`` asks each case to meet in the week:
    every slot (the reference), or with ``reachable`` at most :data:`SLOTS_A_CASE_MEETS_A_WEEK`."""
    return min(slot_count, SLOTS_A_CASE_MEETS_A_WEEK) if reachable else slot_count


def schedule_coverage(
    *, seed: str, slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]], reachable: bool = False
) -> dict[str, bool]:
    """The four coverage invariants over the week, keyed as in :data:`COVERAGE_INVARIANTS`.

    Follows ``runnerLiveScheduleCoverage`` exactly: a slot counts on a night when an entry
    plays it; "strong and inexpensive" looks only at line-up candidates that have entries.
    With ``reachable``, "every workflow covers every slot" asks each case to meet
    :func:`slots_each_case_must_meet` distinct slots (the same for 14 slots or fewer).
    Raises ``ScheduleError`` when the schedules cannot be built (the inputs are checked as
    :func:`week_schedules` checks them).

    The invariants read only which slots each case meets each night, and that is arithmetic on
    positions (:func:`schedules.building.build_schedule`'s rule: case ``c`` meets slots
    ``(c + d) mod N`` and ``ceil(N/2)`` after it, every case has at least one repetition), so the
    seven nights are worked out from the positions without building their entries or hashing
    their execution ids; ``tests/test_schedule_coverage.py`` checks the result against the
    built schedules over many catalogs.
    """
    check_week_inputs(seed=seed, generated_at=_WEEK_TIMES, slots=slots, cases=cases)
    slot_count, case_count = len(slots), len(cases)
    offset = second_slot_offset(slot_count)
    # Which slot positions case 0 meets on night d, the rest by shifting: case c on night d is
    # case 0 on night c + d, so one set per "c + d" from 0 to K + 5 serves the whole week.
    met_at_shift = [_slots_met_at(shift, slot_count, offset) for shift in range(case_count + ROTATION_DAYS - 1)]
    nights = [_union(met_at_shift[day : day + case_count], slot_count) for day in range(ROTATION_DAYS)]
    every_slot_nightly = all(len(played) == slot_count for played in nights)

    all_candidate_ids = {candidate["id"] for slot in slots for candidate in slot["candidates"]}
    seen_candidate_ids: set[str] = set()
    strong_and_inexpensive_nightly = True
    for day, played in enumerate(nights):
        line_up = [playing_candidate(slots[index]["candidates"], day) for index in sorted(played)]
        seen_candidate_ids.update(candidate["id"] for candidate in line_up)
        tiers = {candidate.get("tier") for candidate in line_up}
        strong_and_inexpensive_nightly = strong_and_inexpensive_nightly and {"strong", "inexpensive"} <= tiers

    target = slots_each_case_must_meet(slot_count, reachable=reachable)
    every_workflow_covers_every_slot = all(
        len(_union(met_at_shift[index : index + ROTATION_DAYS], slot_count)) >= target for index in range(case_count)
    )
    return {
        "everySlotNightly": every_slot_nightly,
        "everyConcreteCandidateInRotation": all_candidate_ids <= seen_candidate_ids,
        "everyWorkflowCoversEverySlot": every_workflow_covers_every_slot,
        "strongAndInexpensiveNightly": strong_and_inexpensive_nightly,
    }


# The week the reference's coverage check builds (see :func:`week_schedules`).
_WEEK_TIMES = tuple(f"2026-08-{24 + day:02d}T00:00:00.000Z" for day in range(ROTATION_DAYS))


def _slots_met_at(shift: int, slot_count: int, offset: int) -> frozenset[int]:
    """The slot positions a case meets when its index plus the night is ``shift``."""
    first = shift % slot_count
    return frozenset({first, (first + offset) % slot_count})


def _union(sets: Sequence[frozenset[int]], slot_count: int) -> set[int]:
    """The union of ``sets``, stopping once it holds every one of ``slot_count`` positions."""
    union: set[int] = set()
    for positions in sets:
        union |= positions
        if len(union) == slot_count:
            break
    return union


def failed_invariants(coverage: Mapping[str, bool]) -> list[str]:
    """The invariants of :data:`COVERAGE_INVARIANTS` that do not hold, in that order.

    A missing key counts as failed, so a truncated coverage document never passes.
    """
    return [name for name in COVERAGE_INVARIANTS if coverage.get(name) is not True]


def coverage_matrix(*, seed: str, slots: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]) -> dict[str, list[list[str]]]:
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
