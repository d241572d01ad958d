"""Observation documents evalhub builds or checks itself (pure functions, no database)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from runs.evaluation.observations import (
    OBSERVATION_SCHEMA,
    finite_json,
    missing_environment_message,
    observation_problems,
    unavailable_observation,
)
from tests.reference import scoring_vectors

pytestmark = pytest.mark.database_free

CASE = {"id": "final-response", "assertions": {"requiredOperationIds": ["finish_task"]}}
CANDIDATE = {
    "id": "acpx-claude-sonnet",
    "provider": "acpx",
    "budget": {"maxLatencyMs": 180000, "maxAttempts": 3, "maxCostUsd": 1.5, "maxTotalTokens": 100000},
}


def vector(vector_id: str) -> dict[str, Any]:
    vectors = scoring_vectors()
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


# --- finite_json (docs/failure-modes.md B9) --------------------------------------------------------------


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


def _walked_problems(observation: dict[str, Any]) -> list[str]:
    """``validate_observation`` without its compiled yes/no check: both schemas always walked."""
    from runs.evaluation import observation_schema as schema

    problems = list(schema._non_json_problems(observation, ""))
    problems.extend(schema._schema_problems(schema._OBSERVATION_VALIDATOR, observation, ""))
    if isinstance(observation.get("base"), dict):
        problems.extend(schema._schema_problems(schema._BASE_VALIDATOR, observation["base"], "base"))
    problems.extend(schema._rule_problems(observation))
    return problems


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*path, index)))
    return found


def _replaced(document: Any, path: tuple, value: Any) -> Any:
    import copy

    changed = copy.deepcopy(document)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


@pytest.mark.parametrize("replacement", [None, True, 0, 1.5, -1, "", "x", [], [1], {}, {"id": ""}, "final-response"], ids=repr)
def test_the_compiled_check_agrees_with_walking_the_schemas(replacement: Any) -> None:
    """Every field of a valid observation replaced by a wrong value: the compiled check (asked
    first) and the full walk of both schemas list the same problems."""
    from runs.evaluation.observation_schema import validate_observation
    from tests.builders import completed_observation

    valid = completed_observation({"executionId": "rwe-0123456789abcdef", "caseId": "final-response", "candidateId": "codex-luna"})
    assert validate_observation(valid) == _walked_problems(valid) == []
    for path in _paths(valid)[1:]:
        changed = _replaced(valid, path, replacement)
        assert validate_observation(changed) == _walked_problems(changed), path


def _walked_scoring_problems(observation: Any) -> list[str]:
    """``scoring_problems`` as it was before the compiled check: both scored schemas walked."""
    from runs.evaluation import observation_schema as schema

    problems = list(schema._non_json_problems(observation, ""))
    problems.extend(schema._schema_problems(schema._SCORED_VALIDATOR, observation, ""))
    if isinstance(observation.get("base"), dict):
        problems.extend(schema._schema_problems(schema._SCORED_BASE_VALIDATOR, observation["base"], "base"))
    problems.extend(schema._rule_problems(observation))
    return problems


@pytest.mark.parametrize("replacement", [None, True, 0, 1.5, -1, "", "x", [], [1], {}, {"id": ""}, "final-response"], ids=repr)
def test_the_scorers_compiled_check_agrees_with_walking_its_schemas(replacement: Any) -> None:
    """The scorer's check (``scoring_problems``) asks the compiled scored schemas first: every
    field of a valid observation replaced by a wrong value lists the same problems as walking them."""
    from runs.evaluation.observation_schema import scoring_problems
    from tests.builders import completed_observation

    valid = completed_observation({"executionId": "rwe-0123456789abcdef", "caseId": "final-response", "candidateId": "codex-luna"})
    assert scoring_problems(valid) == _walked_scoring_problems(valid) == []
    for path in _paths(valid)[1:]:
        changed = _replaced(valid, path, replacement)
        assert scoring_problems(changed) == _walked_scoring_problems(changed), path
