"""Observation documents evalhub builds or checks itself (pure functions, no database)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from runs.observations import (
    OBSERVATION_SCHEMA,
    finite_json,
    missing_environment_message,
    observation_problems,
    unavailable_observation,
)
from tests.reference import reference_dir

CASE = {"id": "final-response", "assertions": {"requiredOperationIds": ["finish_task"]}}
CANDIDATE = {
    "id": "acpx-claude-sonnet",
    "provider": "acpx",
    "budget": {"maxLatencyMs": 180000, "maxAttempts": 3, "maxCostUsd": 1.5, "maxTotalTokens": 100000},
}


def vector(vector_id: str) -> dict[str, Any]:
    vectors = json.loads((reference_dir() / "scoring-vectors.json").read_text(encoding="utf-8"))
    return next(item for item in vectors["observations"] if item["id"] == vector_id)["observation"]


def unavailable(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "case": CASE,
        "candidate": CANDIDATE,
        "classification": "skipped",
        "code": "qualification_environment_missing",
        "category": "qualification",
        "retryable": False,
        "message": missing_environment_message(["ANTHROPIC_API_KEY"]),
    }
    values.update(overrides)
    return unavailable_observation(**values)


def test_the_skipped_shape_equals_the_reference_vector() -> None:
    assert unavailable() == vector("dev-skipped-env")


def test_the_message_is_the_reason_of_one_failing_check_in_each_group() -> None:
    observation = unavailable(message="went wrong")
    for group in ("lifecycle", "continuation", "presentation"):
        assert observation[group]["checks"] == [{"id": "execution-unavailable", "passed": False, "reason": "went wrong"}]
    assert observation["failure"]["message"] == "went wrong"


def test_check_lists_are_independent_copies() -> None:
    observation = unavailable()
    observation["lifecycle"]["checks"][0]["reason"] = "changed"
    assert observation["continuation"]["checks"][0]["reason"] != "changed"


def test_a_case_without_operations_expects_no_calls() -> None:
    observation = unavailable(case={"id": "cancellation-permissions", "assertions": {}})
    assert observation["base"]["expectedCalls"] == []


def test_the_budget_is_copied_not_shared() -> None:
    observation = unavailable()
    observation["base"]["budget"]["maxCostUsd"] = 99
    assert CANDIDATE["budget"]["maxCostUsd"] == 1.5


@pytest.mark.parametrize("classification", ["completed", "candidate_failure", "", "SKIPPED"])
def test_only_skipped_and_infrastructure_failure_are_unavailable(classification: str) -> None:
    with pytest.raises(ValueError, match=r"^an unavailable execution is skipped or an infrastructure failure, not "):
        unavailable(classification=classification)


def test_an_unknown_failure_category_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^unknown failure category 'network'$"):
        unavailable(category="network")


def test_the_missing_message_lists_names_in_order() -> None:
    assert missing_environment_message(["OPENROUTER_API_KEY", "OPENAI_API_KEY"]) == (
        "required qualification environment is missing: OPENROUTER_API_KEY, OPENAI_API_KEY"
    )


# --- finite_json (known-failure-modes B9) --------------------------------------------------------------


def test_non_finite_numbers_become_null_everywhere() -> None:
    value = {"a": math.nan, "b": [math.inf, 1.5, {"c": -math.inf}], "d": (1, math.nan), "e": "NaN", "f": 0, "g": None}
    assert finite_json(value) == {"a": None, "b": [None, 1.5, {"c": None}], "d": [1, None], "e": "NaN", "f": 0, "g": None}
    json.dumps(finite_json(value), allow_nan=False)


def test_finite_json_does_not_change_its_input() -> None:
    value = {"metrics": {"costUsd": math.nan}}
    finite_json(value)
    assert math.isnan(value["metrics"]["costUsd"])


# --- observation_problems ---------------------------------------------------------------------------------


def valid() -> dict[str, Any]:
    return {"schema": OBSERVATION_SCHEMA, "classification": "completed", "metrics": {"attempts": 1, "toolCount": 0}}


def test_a_minimal_observation_has_no_problems() -> None:
    assert observation_problems(valid()) == []
    assert observation_problems(vector("dev-skipped-env")) == []
    assert observation_problems(vector("dev-infra")) == []


@pytest.mark.parametrize(
    ("change", "problems"),
    [
        ({"schema": "v0"}, ["observation schema must be paperclip.runner.workflow-observation.v1"]),
        ({"classification": "ok"}, ["classification must be one of completed, candidate_failure, infrastructure_failure, skipped"]),
        ({"metrics": None}, ["metrics must be an object"]),
        ({"classification": "infrastructure_failure"}, ["skipped and infrastructure_failure observations require failure metadata"]),
        ({"failure": "boom"}, ["failure must be an object"]),
        ({"when": object()}, ["observation must hold only JSON values (objects, lists, text, numbers, true, false, null)"]),
    ],
)
def test_unusable_observations_are_described(change: dict[str, Any], problems: list[str]) -> None:
    assert observation_problems({**valid(), **change}) == problems


@pytest.mark.parametrize("value", [None, [], "observation", 3])
def test_a_non_object_is_refused(value: Any) -> None:
    assert observation_problems(value) == ["observation must be a JSON object"]


def test_a_self_referencing_observation_is_refused() -> None:
    observation = valid()
    observation["base"] = observation
    assert observation_problems(observation) == [
        "observation must hold only JSON values (objects, lists, text, numbers, true, false, null)"
    ]
