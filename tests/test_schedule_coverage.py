"""Coverage of the weekly rotation: the reference's four invariants, the coverage matrix and the
per-candidate load."""

from __future__ import annotations

from typing import Any

import pytest

from schedules.building import DEFAULT_SEED, ScheduleError, build_schedule, select_schedule
from schedules.coverage import (
    COVERAGE_DESCRIPTIONS,
    COVERAGE_INVARIANTS,
    coverage_matrix,
    failed_invariants,
    schedule_coverage,
    slot_load,
    week_schedules,
)
from tests.reference import golden_vectors, reference_cases, reference_manifest_slots

pytestmark = pytest.mark.database_free

GOLDEN = golden_vectors()
ALL_TRUE = dict.fromkeys(COVERAGE_INVARIANTS, True)


def coverage(slots: list[dict[str, Any]] | None = None, **kwargs: Any) -> dict[str, bool]:
    return schedule_coverage(
        seed=kwargs.get("seed", DEFAULT_SEED),
        slots=reference_manifest_slots() if slots is None else slots,
        cases=kwargs.get("cases", reference_cases()),
    )


def make_slots(count: int, *, tiers: list[list[str]] | None = None) -> list[dict[str, Any]]:
    """Slots ``s0..``; ``tiers[s]`` lists the tiers of slot ``s``'s candidates (one strong each
    by default, the last slot inexpensive)."""
    tiers = tiers or [["strong"]] * (count - 1) + [["inexpensive"]]
    return [
        {
            "id": f"s{slot}",
            "candidates": [
                {"id": f"s{slot}-c{index}", "slotId": f"s{slot}", "tier": tier, "budget": {"maxCostUsd": 0.1}}
                for index, tier in enumerate(tiers[slot])
            ],
        }
        for slot in range(count)
    ]


def test_default_seed_coverage_matches_the_reference() -> None:
    assert coverage() == GOLDEN["coverage_default_seed"]


def test_invariants_are_listed_in_the_reference_order_with_descriptions() -> None:
    assert list(COVERAGE_INVARIANTS) == list(GOLDEN["coverage_default_seed"])
    assert list(COVERAGE_DESCRIPTIONS) == list(COVERAGE_INVARIANTS)
    assert all(description.strip() for description in COVERAGE_DESCRIPTIONS.values())


def test_week_is_built_from_the_twenty_fourth_to_the_thirtieth_of_august() -> None:
    week = week_schedules(seed=DEFAULT_SEED, slots=reference_manifest_slots(), cases=reference_cases())
    assert [s["generatedAt"] for s in week] == [
        "2026-08-24T00:00:00.000Z",
        "2026-08-25T00:00:00.000Z",
        "2026-08-26T00:00:00.000Z",
        "2026-08-27T00:00:00.000Z",
        "2026-08-28T00:00:00.000Z",
        "2026-08-29T00:00:00.000Z",
        "2026-08-30T00:00:00.000Z",
    ]
    assert [s["rotationDay"] for s in week] == list(range(7))
    # The entries do not depend on generatedAt, so they equal the golden day-d schedules.
    golden = [v["output"] for v in GOLDEN["schedules"] if v["input"]["seed"] == DEFAULT_SEED]
    assert [s["entries"] for s in week] == [g["entries"] for g in golden]


def test_coverage_fails_when_no_inexpensive_candidate_is_scheduled() -> None:
    slots = reference_manifest_slots()
    for candidate in slots[2]["candidates"]:  # opencode-inexpensive
        candidate["tier"] = "strong"
    result = coverage(slots)
    assert result == {**ALL_TRUE, "strongAndInexpensiveNightly": False}
    assert failed_invariants(result) == ["strongAndInexpensiveNightly"]


def test_candidate_beyond_the_seventh_in_a_slot_never_plays() -> None:
    # Slot 0 plays candidates[d mod 8] for d = 0..6, so s0-c7 is never in rotation.
    slots = make_slots(2, tiers=[["strong"] * 8, ["inexpensive"]])
    result = coverage(slots)
    assert result["everyConcreteCandidateInRotation"] is False
    assert failed_invariants(result) == ["everyConcreteCandidateInRotation"]


def test_fifteen_slots_cannot_all_meet_one_case_in_a_week() -> None:
    # A case meets at most 2 slots a night, 14 over seven nights: fewer than 15.
    result = coverage(make_slots(15))
    assert result["everyWorkflowCoversEverySlot"] is False


def test_more_slots_than_a_night_can_fill_fail_every_slot_nightly() -> None:
    # One case fills two slots a night, so six slots can never all play.
    cases = [{"id": "final-response", "repetitions": 1}]
    result = coverage(make_slots(6), cases=cases)
    assert result["everySlotNightly"] is False
    # Over the week its first slot walks through (0 + d) mod 6: all six.
    assert result["everyWorkflowCoversEverySlot"] is True


def test_one_slot_alternating_tiers_is_never_strong_and_inexpensive_on_one_night() -> None:
    result = coverage(make_slots(1, tiers=[["strong", "inexpensive"]]))
    assert result == {**ALL_TRUE, "strongAndInexpensiveNightly": False}


def test_failed_invariants_lists_nothing_when_all_hold() -> None:
    assert failed_invariants(ALL_TRUE) == []


def test_failed_invariants_treats_a_missing_invariant_as_failed() -> None:
    partial = {"everySlotNightly": True, "strongAndInexpensiveNightly": False}
    assert failed_invariants(partial) == [
        "everyConcreteCandidateInRotation",
        "everyWorkflowCoversEverySlot",
        "strongAndInexpensiveNightly",
    ]


def test_coverage_of_an_empty_manifest_is_an_error_not_a_pass() -> None:
    with pytest.raises(ScheduleError, match="the candidate manifest has no slots"):
        coverage([])


def test_coverage_matrix_follows_the_rotation_for_final_response() -> None:
    matrix = coverage_matrix(seed=DEFAULT_SEED, slots=reference_manifest_slots(), cases=reference_cases())
    assert list(matrix) == [case["id"] for case in reference_cases()]
    # Case index 0 on day d: slots (0 + d) mod 5 and that plus 3, listed in slot order.
    assert matrix["final-response"] == [
        ["codex-strong", "acpx-claude"],  # 0, 3
        ["opencode-strong", "acpx-codex"],  # 1, 4
        ["codex-strong", "opencode-inexpensive"],  # 2, 0
        ["opencode-strong", "acpx-claude"],  # 3, 1
        ["opencode-inexpensive", "acpx-codex"],  # 4, 2
        ["codex-strong", "acpx-claude"],  # 0, 3
        ["opencode-strong", "acpx-codex"],  # 1, 4
    ]


def test_coverage_matrix_shows_every_case_meeting_every_slot_over_the_week() -> None:
    slot_ids = {slot["id"] for slot in reference_manifest_slots()}
    matrix = coverage_matrix(seed=DEFAULT_SEED, slots=reference_manifest_slots(), cases=reference_cases())
    for days in matrix.values():
        assert len(days) == 7
        assert all(len(day) == 2 for day in days)
        assert {slot for day in days for slot in day} == slot_ids


def test_day_zero_load_per_candidate_matches_the_upstream_spec() -> None:
    schedule = build_schedule(
        seed=DEFAULT_SEED,
        rotation_day=0,
        generated_at="2026-08-24T00:00:00.000Z",
        slots=reference_manifest_slots(),
        cases=reference_cases(),
    )
    assert slot_load(schedule) == {
        "codex-luna": 7,
        "opencode-kimi": 11,
        "opencode-gpt-oss": 4,
        "acpx-claude-sonnet": 11,
        "acpx-codex-sol": 7,
    }


def test_load_of_a_selection_counts_only_the_selected_entries() -> None:
    schedule = build_schedule(
        seed=DEFAULT_SEED,
        rotation_day=0,
        generated_at="2026-08-24T00:00:00.000Z",
        slots=reference_manifest_slots(),
        cases=reference_cases(),
    )
    selected = select_schedule(schedule, case_ids=["final-response"])
    assert slot_load(selected) == {"codex-luna": 3, "acpx-claude-sonnet": 3}


def coverage_of_built_week(*, slots: list[dict[str, Any]], cases: list[dict[str, Any]], reachable: bool) -> dict[str, bool]:
    """The four invariants read off the seven built schedules, entry by entry, the way the
    reference's ``runnerLiveScheduleCoverage`` reads them (the oracle for the arithmetic)."""
    week = week_schedules(seed=DEFAULT_SEED, slots=slots, cases=cases)
    slot_ids = [slot["id"] for slot in slots]
    all_candidates = {candidate["id"] for slot in slots for candidate in slot["candidates"]}
    seen = {entry["candidateId"] for schedule in week for entry in schedule["entries"]}
    met = {case["id"]: {entry["slotId"] for s in week for entry in s["entries"] if entry["caseId"] == case["id"]} for case in cases}
    target = min(len(slots), 14) if reachable else len(slots)

    def tiers(schedule: dict[str, Any]) -> set[str]:
        played = {entry["candidateId"] for entry in schedule["entries"]}
        return {candidate["tier"] for candidate in schedule["candidates"] if candidate["id"] in played}

    return {
        "everySlotNightly": all({entry["slotId"] for entry in s["entries"]} == set(slot_ids) for s in week),
        "everyConcreteCandidateInRotation": all_candidates <= seen,
        "everyWorkflowCoversEverySlot": all(len(slots_met) >= target for slots_met in met.values()),
        "strongAndInexpensiveNightly": all({"strong", "inexpensive"} <= tiers(s) for s in week),
    }


@pytest.mark.parametrize("reachable", [False, True])
def test_coverage_arithmetic_agrees_with_the_built_week_over_many_catalogs(reachable: bool) -> None:
    # schedule_coverage works the week out from slot positions without building it: every shape
    # of catalog here (1..17 slots, 1..9 candidates in a slot, both tiers or one, 1..30 cases with
    # 1..3 repetitions) must give what the built schedules say, and the shapes must reach both
    # answers of every invariant (or the comparison would prove little).
    import random

    chooser = random.Random(15)
    answers: dict[str, set[bool]] = {name: set() for name in COVERAGE_INVARIANTS}
    for _ in range(300):
        slot_count = chooser.randint(1, 17)
        tiers = [[chooser.choice(["strong", "inexpensive"]) for _ in range(chooser.randint(1, 9))] for _ in range(slot_count)]
        slots = make_slots(slot_count, tiers=tiers)
        cases = [{"id": f"case-{index}", "repetitions": chooser.randint(1, 3)} for index in range(chooser.randint(1, 30))]
        expected = coverage_of_built_week(slots=slots, cases=cases, reachable=reachable)
        assert schedule_coverage(seed=DEFAULT_SEED, slots=slots, cases=cases, reachable=reachable) == expected, (slot_count, tiers, cases)
        for name, value in expected.items():
            answers[name].add(value)
    if reachable:
        # Two slots a night and the second ceil(N/2) after the first: every case reaches
        # min(N, 14) slots in a week whatever the catalog, so this invariant only ever holds.
        assert answers.pop("everyWorkflowCoversEverySlot") == {True}
    assert all(seen == {True, False} for seen in answers.values()), answers
