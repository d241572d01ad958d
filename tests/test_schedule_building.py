"""Building and selecting schedules: reproduces the reference's golden vectors exactly, and
checks evalhub's decisions for inputs the reference refuses or mishandles (docs/DESIGN.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from schedules.building import (
    CANDIDATE_SCHEMA,
    DEFAULT_SEED,
    SCHEDULE_SCHEMA,
    ScheduleError,
    build_schedule,
    execution_id,
    nightly_candidates,
    second_slot_offset,
    select_schedule,
)
from tests.reference import golden_vectors, reference_cases, reference_manifest_slots

pytestmark = pytest.mark.database_free

GOLDEN = golden_vectors()
GENERATED_AT = "2026-08-24T00:00:00.000Z"


def json_round_trip(document: Any) -> Any:
    # json.dumps fails on Decimal, tuples turn into lists: both would hide a mismatch otherwise.
    return json.loads(json.dumps(document))


def build(**overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "seed": DEFAULT_SEED,
        "rotation_day": 0,
        "generated_at": GENERATED_AT,
        "slots": reference_manifest_slots(),
        "cases": reference_cases(),
    }
    arguments.update(overrides)
    return build_schedule(**arguments)


def make_slots(count: int, *, candidates_per_slot: int = 1) -> list[dict[str, Any]]:
    """``count`` slots ``s0, s1, ...``; slot ``sN`` holds candidates ``sN-c0, sN-c1, ...``."""
    return [
        {
            "id": f"s{slot}",
            "candidates": [
                {
                    "schema": CANDIDATE_SCHEMA,
                    "id": f"s{slot}-c{index}",
                    "slotId": f"s{slot}",
                    "tier": "inexpensive" if slot == 0 else "strong",
                    "budget": {"maxLatencyMs": 1000, "maxAttempts": 1, "maxCostUsd": 0.1, "maxTotalTokens": 10},
                }
                for index in range(candidates_per_slot)
            ],
        }
        for slot in range(count)
    ]


def slots_met_by_case(schedule: dict[str, Any]) -> dict[str, list[str]]:
    """Each case's slot ids in entry order, repeated repetitions collapsed."""
    met: dict[str, list[str]] = {}
    for entry in schedule["entries"]:
        slots = met.setdefault(entry["caseId"], [])
        if entry["slotId"] not in slots:
            slots.append(entry["slotId"])
    return met


# --- golden vectors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vector",
    GOLDEN["schedules"],
    ids=[f"{v['input']['seed']}-day{v['input']['rotationDay']}" for v in GOLDEN["schedules"]],
)
def test_schedule_reproduces_the_reference_output_exactly(vector: dict[str, Any]) -> None:
    given = vector["input"]
    schedule = build_schedule(
        seed=given["seed"],
        rotation_day=given["rotationDay"],
        generated_at=given["generatedAt"],
        slots=json_round_trip(reference_manifest_slots()),
        cases=reference_cases(),
    )
    assert json_round_trip(schedule) == json_round_trip(vector["output"])
    # Same keys in the same order too, so tools diffing the JSON text see no change.
    assert json.dumps(schedule) == json.dumps(vector["output"])


@pytest.mark.parametrize("day", range(7))
def test_nightly_line_up_matches_the_reference_for_every_rotation_day(day: int) -> None:
    line_up = nightly_candidates(reference_manifest_slots(), day)
    assert [candidate["id"] for candidate in line_up] == (GOLDEN["resolved_nightly_candidates_by_day"][day])


def test_upstream_spec_execution_ids_for_day_zero() -> None:
    schedule = build()
    ids = {(entry["caseId"], entry["candidateId"], entry["repetition"]): entry["executionId"] for entry in schedule["entries"]}
    assert ids[("final-response", "codex-luna", 1)] == "rwe-453d278ebeaabe66"
    assert ids[("final-response", "codex-luna", 2)] == "rwe-f90426516d8ad456"
    assert ids[("final-response", "codex-luna", 3)] == "rwe-74d582f4ae889a0e"
    assert ids[("final-response", "acpx-claude-sonnet", 1)] == "rwe-3bc25cbe1d93cec3"


def test_execution_id_hashes_seed_day_case_candidate_and_repetition() -> None:
    assert execution_id(DEFAULT_SEED, 0, "final-response", "codex-luna", 1) == ("rwe-453d278ebeaabe66")
    assert execution_id(DEFAULT_SEED, 0, "final-response", "codex-luna", 2) == ("rwe-f90426516d8ad456")


def test_reference_catalog_gives_forty_entries() -> None:
    # 4 core cases x 2 slots x 3 repetitions + 8 other cases x 2 slots x 1 (the reference's schedule).
    schedule = build()
    assert schedule["expectedExecutions"] == len(schedule["entries"]) == 40


# --- inputs are taken from the data, echoed and copied ---------------------------------------


def test_repetitions_come_from_the_case_data() -> None:
    cases = reference_cases()
    cases[2]["repetitions"] = 2  # verification-policy: 1 in the catalog
    schedule = build(cases=cases)
    verification = [e for e in schedule["entries"] if e["caseId"] == "verification-policy"]
    assert [e["repetition"] for e in verification] == [1, 2, 1, 2]
    assert schedule["expectedExecutions"] == 42


def test_generated_at_is_echoed_exactly_as_given() -> None:
    schedule = build(generated_at="2026-08-24T02:00:00+02:00")
    assert schedule["generatedAt"] == "2026-08-24T02:00:00+02:00"


def test_schedule_document_header() -> None:
    schedule = build(seed="my-seed", rotation_day=3)
    assert schedule["schema"] == SCHEDULE_SCHEMA == "paperclip.runner.live-eval-schedule.v1"
    assert schedule["seed"] == "my-seed"
    assert schedule["rotationDay"] == 3


def test_rotation_day_given_as_digits_builds_the_same_schedule() -> None:
    assert build(rotation_day="3") == build(rotation_day=3)


def test_changing_the_schedule_does_not_change_the_manifest() -> None:
    slots = reference_manifest_slots()
    schedule = build(slots=slots)
    schedule["candidates"][0]["model"] = "changed"
    schedule["entries"][0]["budget"]["maxCostUsd"] = 99
    assert slots == reference_manifest_slots()


def test_nightly_candidates_plays_day_modulo_slot_size() -> None:
    slots = make_slots(2, candidates_per_slot=3)
    assert [c["id"] for c in nightly_candidates(slots, 4)] == ["s0-c1", "s1-c1"]
    assert [c["id"] for c in nightly_candidates(slots, 6)] == ["s0-c0", "s1-c0"]


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("day", [-1, 7, 13, True, 3.0, "seven", None])
def test_rotation_day_outside_zero_to_six_is_refused(day: object) -> None:
    message = f"rotation day must be a whole number from 0 to 6, not {day!r}"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(rotation_day=day)


@pytest.mark.parametrize("seed", ["", "   ", None])
def test_blank_seed_is_refused(seed: object) -> None:
    message = f"schedule seed must be a non-blank string, not {seed!r}"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(seed=seed)


def test_overlong_seed_is_refused() -> None:
    with pytest.raises(ScheduleError, match=re.escape("schedule seed must be at most 200 characters, not 201")):
        build(seed="x" * 201)
    assert build(seed="x" * 200)["seed"] == "x" * 200


def test_unparseable_generated_at_is_refused() -> None:
    with pytest.raises(ScheduleError, match=re.escape("generated-at time 'tonight' is not")):
        build(generated_at="tonight")


def test_no_slots_is_refused() -> None:
    message = "the candidate manifest has no slots: add at least one slot"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(slots=[])


def test_slot_without_candidates_is_refused_by_name() -> None:
    slots = reference_manifest_slots()
    slots[2]["candidates"] = []
    message = "slot 'opencode-inexpensive' has no candidates: add at least one"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(slots=slots)


def test_duplicate_slot_id_is_refused() -> None:
    slots = make_slots(2)
    slots[1]["id"] = "s0"
    with pytest.raises(ScheduleError, match=re.escape("slot 's0' appears twice in the candidate manifest")):
        nightly_candidates(slots, 0)


def test_candidate_in_two_slots_is_refused() -> None:
    slots = reference_manifest_slots()
    slots[4]["candidates"].append({**slots[0]["candidates"][0], "slotId": "acpx-codex"})
    message = "candidate 'codex-luna' appears twice in the candidate manifest"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(slots=slots)


def test_candidate_whose_slot_id_disagrees_with_its_slot_is_refused() -> None:
    slots = reference_manifest_slots()
    slots[0]["candidates"][0]["slotId"] = "acpx-codex"
    message = "candidate 'codex-luna' has slotId 'acpx-codex' but sits in slot 'codex-strong'"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(slots=slots)


def test_no_cases_is_refused() -> None:
    with pytest.raises(ScheduleError, match=re.escape("a schedule needs at least one workflow case")):
        build(cases=[])


def test_duplicate_case_is_refused() -> None:
    cases = reference_cases()
    cases.append(cases[0])
    message = "workflow case 'final-response' appears twice"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(cases=cases)


@pytest.mark.parametrize("repetitions", [0, -1, 101, True, 2.0, "3", None])
def test_case_repetitions_must_be_a_whole_number_from_one_to_a_hundred(
    repetitions: object,
) -> None:
    cases = [{"id": "final-response", "repetitions": repetitions}]
    message = f"workflow case 'final-response' repetitions must be a whole number from 1 to 100, not {repetitions!r}"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        build(cases=cases)


# --- manifests with N != 5 slots (DESIGN: second slot = (first + ceil(N/2)) mod N) -----------


@pytest.mark.parametrize(("slot_count", "offset"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3), (7, 4)])
def test_second_slot_offset_is_half_the_slots_rounded_up(slot_count: int, offset: int) -> None:
    assert second_slot_offset(slot_count) == offset


@pytest.mark.parametrize("slot_count", [0, -1, True])
def test_second_slot_offset_needs_at_least_one_slot(slot_count: int) -> None:
    with pytest.raises(ScheduleError, match="a schedule needs at least one slot"):
        second_slot_offset(slot_count)


def test_one_slot_plays_each_case_once_per_repetition() -> None:
    schedule = build(slots=make_slots(1))
    # 4 core cases x 3 + 8 cases x 1, all in the one slot.
    assert schedule["expectedExecutions"] == 20
    met = slots_met_by_case(schedule)
    assert len(met) == 12
    assert all(slots == ["s0"] for slots in met.values())
    assert len({entry["executionId"] for entry in schedule["entries"]}) == 20


def test_two_slots_give_every_case_both_slots() -> None:
    met = slots_met_by_case(build(slots=make_slots(2), rotation_day=0))
    assert met["final-response"] == ["s0", "s1"]  # case 0: first 0, second (0+1) mod 2
    assert met["rich-activity"] == ["s1", "s0"]  # case 1: first 1, second 0


def test_three_slots_put_the_second_slot_two_along() -> None:
    met = slots_met_by_case(build(slots=make_slots(3), rotation_day=0))
    assert met["final-response"] == ["s0", "s2"]
    assert met["rich-activity"] == ["s1", "s0"]
    assert met["verification-policy"] == ["s2", "s1"]
    met = slots_met_by_case(build(slots=make_slots(3), rotation_day=1))
    assert met["final-response"] == ["s1", "s0"]


def test_six_slots_put_the_second_slot_three_along() -> None:
    met = slots_met_by_case(build(slots=make_slots(6), rotation_day=0))
    assert met["final-response"] == ["s0", "s3"]
    assert met["steering-causality"] == ["s4", "s1"]  # catalog index 4
    met = slots_met_by_case(build(slots=make_slots(6), rotation_day=2))
    assert met["planning-lifecycle"] == ["s1", "s4"]  # index 5: (5 + 2) mod 6 = 1
    assert build(slots=make_slots(6))["expectedExecutions"] == 40


# --- selection --------------------------------------------------------------------------------


def selection_summary(selected: dict[str, Any]) -> dict[str, Any]:
    """The shape the golden vectors record for a selection."""
    return {
        "expectedExecutions": selected["expectedExecutions"],
        "executionIds": [entry["executionId"] for entry in selected["entries"]],
        "candidates": [candidate["id"] for candidate in selected["candidates"]],
    }


def selection_base() -> dict[str, Any]:
    """The schedule the reference's selection vectors select from (``selectionsBase``)."""
    base = GOLDEN["selectionsBase"]
    return build(seed=base["seed"], rotation_day=base["rotationDay"], generated_at=base["generatedAt"])


def run_golden_selection(selection: dict[str, Any], schedule: dict[str, Any] | None = None) -> dict[str, Any] | str:
    try:
        selected = select_schedule(
            selection_base() if schedule is None else schedule,
            candidate_ids=selection.get("candidateIds", ()),
            case_ids=selection.get("caseIds", ()),
            limit=selection.get("limit"),
        )
    except ScheduleError as error:
        return f"ERROR: {error}"
    return json_round_trip(selection_summary(selected))


@pytest.mark.parametrize("vector", GOLDEN["selections"], ids=[json.dumps(vector["selection"]) for vector in GOLDEN["selections"]])
def test_selection_matches_the_reference_on_its_base_schedule(vector: dict[str, Any]) -> None:
    result = run_golden_selection(vector["selection"])
    expected = vector["result"]
    if isinstance(expected, str):
        # evalhub appends the week's line-up to the reference's message (docs/DESIGN.md).
        assert isinstance(result, str) and result.startswith(expected)
    else:
        assert result == expected


def test_golden_candidate_selection_shape_matches_the_reference() -> None:
    expected = GOLDEN["selections"][0]
    assert expected["selection"] == {"candidateIds": ["codex-luna"], "limit": 2}
    result = run_golden_selection(expected["selection"], build())
    assert isinstance(result, dict)
    assert result["expectedExecutions"] == expected["result"]["expectedExecutions"] == 2
    assert result["candidates"] == expected["result"]["candidates"] == ["codex-luna"]
    # On the default seed's day 0, codex-luna's first entries are final-response reps 1 and 2.
    assert result["executionIds"] == ["rwe-453d278ebeaabe66", "rwe-f90426516d8ad456"]


def test_selection_keeps_schedule_order_and_shrinks_the_line_up() -> None:
    schedule = build()
    selected = select_schedule(schedule, case_ids=["final-response", "trace-lineage"])
    assert [(e["caseId"], e["candidateId"]) for e in selected["entries"]] == [
        (e["caseId"], e["candidateId"]) for e in schedule["entries"] if e["caseId"] in {"final-response", "trace-lineage"}
    ]
    # final-response (index 0) meets slots 0 and 3; trace-lineage (index 11) slots 1 and 4.
    assert [c["id"] for c in selected["candidates"]] == ["codex-luna", "opencode-kimi", "acpx-claude-sonnet", "acpx-codex-sol"]
    assert selected["expectedExecutions"] == 8
    assert {key: selected[key] for key in ("schema", "seed", "rotationDay", "generatedAt")} == {
        key: schedule[key] for key in ("schema", "seed", "rotationDay", "generatedAt")
    }


def test_selection_does_not_change_the_full_schedule() -> None:
    schedule = build()
    before = json.dumps(schedule)
    selected = select_schedule(schedule, candidate_ids=["codex-luna"], limit=1)
    selected["entries"][0]["budget"]["maxCostUsd"] = 0
    assert json.dumps(schedule) == before


def test_duplicate_ids_in_a_selection_are_harmless() -> None:
    schedule = build()
    assert select_schedule(schedule, candidate_ids=["codex-luna", "codex-luna"], case_ids=["final-response"] * 2) == select_schedule(
        schedule, candidate_ids=["codex-luna"], case_ids=["final-response"]
    )


def test_unknown_candidate_error_names_the_week_and_its_line_up() -> None:
    message = (
        "unknown Runner live eval candidate: opencode-glm (not in rotation day 0's line-up: "
        "codex-luna, opencode-kimi, opencode-gpt-oss, acpx-claude-sonnet, acpx-codex-sol)"
    )
    # opencode-glm is a real candidate, but it plays on odd rotation days only.
    with pytest.raises(ScheduleError, match=re.escape(message)):
        select_schedule(build(rotation_day=0), candidate_ids=["opencode-glm"])
    assert select_schedule(build(rotation_day=1), candidate_ids=["opencode-glm"])["entries"]


def test_unknown_case_is_refused() -> None:
    with pytest.raises(ScheduleError, match="^unknown Runner live eval case: no-such-case$"):
        select_schedule(build(), case_ids=["no-such-case"])


@pytest.mark.parametrize("limit", [0, -3, True, 2.0, "2"])
def test_limit_must_be_a_positive_integer(limit: object) -> None:
    with pytest.raises(ScheduleError, match="^Runner live eval selection limit must be a positive integer$"):
        select_schedule(build(), limit=limit)


def test_limit_larger_than_the_schedule_keeps_everything() -> None:
    assert select_schedule(build(), limit=1000)["expectedExecutions"] == 40


def test_selection_that_matches_nothing_is_refused() -> None:
    # On day 0 rich-activity (index 1) meets slots 1 and 4: codex-luna never plays it.
    with pytest.raises(ScheduleError, match="^Runner live eval selection matched no scheduled executions$"):
        select_schedule(build(), candidate_ids=["codex-luna"], case_ids=["rich-activity"])


def test_selection_checks_candidates_then_cases_then_limit() -> None:
    schedule = build()
    with pytest.raises(ScheduleError, match="^unknown Runner live eval candidate: nobody"):
        select_schedule(schedule, candidate_ids=["nobody"], case_ids=["nothing"], limit=0)
    with pytest.raises(ScheduleError, match="^unknown Runner live eval case: nothing$"):
        select_schedule(schedule, case_ids=["nothing"], limit=0)


def test_a_single_string_instead_of_a_list_of_ids_is_refused() -> None:
    message = "candidate ids must be a list of ids, not the single string 'codex-luna'"
    with pytest.raises(ScheduleError, match=re.escape(message)):
        select_schedule(build(), candidate_ids="codex-luna")  # type: ignore[arg-type]


def test_built_ids_are_execution_ids_for_text_in_any_unicode_form() -> None:
    # The build hashes a shared seed:day:case:candidate: prefix for ASCII ids and falls back to
    # execution_id() (which hashes the identity's NFC form) for the rest: both must agree with it.
    slots = reference_manifest_slots()
    slots[0]["candidates"][0]["id"] = "codex-lun\u0061\u0301"  # NFD "luná"
    cases = reference_cases()
    cases[0]["id"] = "final-r\u00e9sponse"  # NFC
    cases[1]["id"] = "caf\u0065\u0301"  # NFD
    for day in range(7):
        schedule = build_schedule(seed=DEFAULT_SEED, rotation_day=day, generated_at=GENERATED_AT, slots=slots, cases=cases)
        for entry in schedule["entries"]:
            assert entry["executionId"] == execution_id(DEFAULT_SEED, day, entry["caseId"], entry["candidateId"], entry["repetition"]), (
                entry
            )
    assert execution_id(DEFAULT_SEED, 0, "caf\u0065\u0301", "x", 1) == execution_id(DEFAULT_SEED, 0, "caf\u00e9", "x", 1)
