"""The scoring core piece by piece: JavaScript number semantics, validation, the scoring rules.

Pure tests: no database. Expected values that depend on JavaScript were computed with Node 20
(``Math.round(x*1000)/1000``, ``String(x)``, ``Array.reduce``).
"""

from __future__ import annotations

import ast
import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runs.evaluation.observation_schema import (
    BASE_OBSERVATION_JSON_SCHEMA,
    OBSERVATION_JSON_SCHEMA,
    SECRET_SHAPED_MESSAGE,
    check_observation,
    js_string,
    js_trim,
    reference_validation_error,
    validate_observation,
)
from runs.evaluation.observations import unavailable_observation
from runs.evaluation.scoring import (
    CANDIDATE_FAILED_REASON,
    DEFAULT_WEIGHTS,
    DIMENSIONS,
    REFERENCE_TRACE_EXPECTATIONS,
    SCORING_VERSION,
    ObservationError,
    js_number,
    js_sum,
    json_number,
    round_half_up,
    score_observation,
)
from tests.reference import REPO_ROOT, reference_cases, scoring_vectors

pytestmark = pytest.mark.database_free

OPTIONS = {"bundleId": "runner-live-v2-ede6023f7ccf4a1f"}


def vector_observation(vector_id: str) -> dict[str, Any]:
    vectors = scoring_vectors()
    return copy.deepcopy(next(item for item in vectors["observations"] if item["id"] == vector_id)["observation"])


def completed() -> dict[str, Any]:
    """A valid completed observation on which every dimension scores 1."""
    return vector_observation("dev-completed-completion-robustness")


def dimension(scorecard: dict[str, Any], name: str) -> dict[str, Any]:
    return scorecard["dimensions"][name]


# --- JavaScript numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "places", "expected"),
    [
        (0.8125, 3, 0.813),  # half goes up; round() gives 0.812
        (-0.0625, 3, -0.062),  # half goes toward +infinity, not away from zero
        (2.675, 3, 2.675),
        (2.675, 2, 2.68),  # 2.675 * 100 is 267.5 as a double; round(2.675, 2) gives 2.67
        (1.0005, 3, 1.001),  # 1.0005 * 1000 is 1000.5; round(1.0005, 3) gives 1.0
        (0.49999999999999994, 0, 0.0),  # floor(x + 0.5) would give 1
        (0.8999999999999999, 3, 0.9),
        (1, 3, 1.0),
    ],
)
def test_round_half_up_matches_javascript_math_round(value: float, places: int, expected: float) -> None:
    assert round_half_up(value, places) == expected


def test_a_small_negative_rounds_to_a_zero_that_prints_as_javascripts_zero() -> None:
    assert round_half_up(-0.0004) == 0  # JavaScript gives -0, which String() and JSON print as 0
    assert js_number(round_half_up(-0.0004)) == "0"
    assert json_number(round_half_up(-0.0004)) == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1e+21"),
        (123456789012345680000.0, "123456789012345680000"),
        (120000, "120000"),
        (0.26, "0.26"),
        (-0.0, "0"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (-1.5e-10, "-1.5e-10"),
    ],
)
def test_js_number_prints_like_javascript(value: float, expected: str) -> None:
    assert js_number(value) == expected


def test_js_sum_adds_left_to_right_without_compensation() -> None:
    weights = [0.2, 0.15, 0.1, 0.0, 0.2, 0.25]
    assert js_sum(weights) == 0.8999999999999999
    assert math.fsum(weights) == 0.9  # what a compensated sum (Python 3.12's sum()) gives
    assert js_sum([]) == 0.0


def test_json_number_prints_integral_doubles_without_a_fraction() -> None:
    assert json.dumps([json_number(1.0), json_number(0.0), json_number(0.25), json_number(1e21)]) == "[1, 0, 0.25, 1e+21]"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("a", "a"), (None, "null"), (True, "true"), (2.0, "2"), (["a", None, 1.5], "a,,1.5"), ({}, "[object Object]")],
)
def test_js_string_interpolates_like_a_template_literal(value: Any, expected: str) -> None:
    assert js_string(value) == expected


# --- validation -----------------------------------------------------------------------------


def test_both_schemas_are_valid_draft_2020_12_schemas() -> None:
    Draft202012Validator.check_schema(OBSERVATION_JSON_SCHEMA)
    Draft202012Validator.check_schema(BASE_OBSERVATION_JSON_SCHEMA)


def test_validation_lists_every_problem_at_once() -> None:
    observation = completed()
    observation["classification"] = "infrastructure_failure"  # without failure metadata
    observation["provider"] = "claude"
    observation["candidateId"] = " \u00a0"
    observation["presentation"]["checks"] = []
    observation["lifecycle"]["checks"][1]["id"] = "terminal-authority"
    observation["metrics"]["attempts"] = -1
    observation["traceLineage"]["frameCount"] = "42"
    del observation["base"]["trace"]["terminalPresent"]
    observation["base"]["efficiency"]["costUsd"] = float("nan")

    assert validate_observation(observation) == [
        "base.efficiency.costUsd must be a finite number",
        "provider must be one of: codex, opencode, acpx",
        "presentation.checks must have at least 1 item",
        "traceLineage.frameCount must be an integer",
        "metrics.attempts must be at least 0",
        "failure is required when classification is infrastructure_failure or skipped",
        "base.trace.terminalPresent is required",
        "candidateId must not be blank",
        "lifecycle.checks has repeated ids: terminal-authority",
    ]
    # The reference stops at its first rule that fails, in its own order and words.
    assert reference_validation_error(observation) == "workflow observation identity is invalid"


def test_each_missing_field_is_named_once() -> None:
    observation = completed()
    del observation["metrics"]
    del observation["artifactDigests"]
    assert validate_observation(observation) == ["metrics is required", "artifactDigests is required"]


def test_problems_never_quote_the_offending_value() -> None:
    secret = "sk-" + "a1B2" * 8
    observation = completed()
    observation["provider"] = secret
    observation["base"]["trace"]["runId"] = [secret]
    observation["failure"] = {"code": "x", "category": "candidate", "retryable": False, "message": f"key {secret}"}
    problems = validate_observation(observation)
    assert len(problems) == 3
    assert not any(secret in problem for problem in problems)


def test_a_document_that_is_not_an_object_is_one_problem() -> None:
    assert validate_observation(["not", "an", "object"]) == ["observation must be a JSON object"]


def test_the_reference_order_puts_the_schema_first_and_prints_a_missing_case_as_undefined() -> None:
    observation = completed()
    observation["schema"] = "paperclip.runner.workflow-observation.v0"
    observation["candidateId"] = ""
    assert reference_validation_error(observation) == "unsupported workflow observation schema for completion-robustness"
    del observation["caseId"]
    assert reference_validation_error(observation) == "unsupported workflow observation schema for undefined"


def test_the_reference_checks_groups_in_order_and_counts_repeated_ids() -> None:
    observation = completed()
    observation["continuation"]["checks"].append(dict(observation["continuation"]["checks"][0]))
    observation["presentation"]["checks"] = []
    assert reference_validation_error(observation) == "completion-robustness continuation checks must be non-empty and unique"


def test_a_null_failure_satisfies_the_reference_but_not_the_schema() -> None:
    observation = vector_observation("dev-skipped-env")
    observation["failure"] = None
    assert reference_validation_error(observation) is None
    assert validate_observation(observation) == ["failure must be an object"]


@pytest.mark.parametrize(
    ("message", "secret_shaped"),
    [
        ("upstream replied 401 for Bearer abcdEFGH1234ijkl5678", True),
        ("BEARER\u00a0abcdEFGH1234ijkl5678", True),  # JavaScript's \s includes no-break space
        ("key sk-ABCDEFGHijklmnop", True),
        ("key SK-abcdefghijklmnop", True),  # the i flag
        ("key sk-abcdefghijklmno", False),  # 15 characters
        ("xsk-abcdefghijklmnop", False),  # \b is ASCII: x-s is no word boundary
        ("\u017fk-abcdefghijklmnop", False),  # long s is not s without the u flag
        ("éBearer abcdefghijklmnop", True),  # é is not a word character: boundary before B
        ("Bearer abcdefghijklmnoé", False),  # nor after the token: no \b at its end
    ],
)
def test_the_secret_shape_is_the_reference_regex_with_javascript_semantics(message: str, secret_shaped: bool) -> None:
    assert bool(SECRET_SHAPED_MESSAGE.search(message)) is secret_shaped


def test_blank_means_blank_to_javascripts_trim() -> None:
    assert js_trim("\ufeff\u3000\u2028") == ""  # str.strip keeps U+FEFF
    assert js_trim("\x1c\x85") == "\x1c\x85"  # str.strip removes these, trim() does not
    observation = completed()
    observation["candidateId"] = "\x1c"
    assert reference_validation_error(observation) is None
    assert validate_observation(observation) == []


def test_an_observation_scoring_cannot_read_gets_a_summary_message() -> None:
    observation = completed()
    del observation["base"]["observedCalls"]
    observation["base"]["trace"]["runId"] = 5
    observation["metrics"]["attempts"] = -1  # ignored by scoring, but still listed among the problems
    with pytest.raises(ObservationError) as raised:
        check_observation(observation)
    assert str(raised.value) == "observation is invalid: base.observedCalls is required; base.trace.runId must be a string"
    assert raised.value.problems == [
        "metrics.attempts must be at least 0",
        "base.observedCalls is required",
        "base.trace.runId must be a string",
    ]
    assert isinstance(raised.value, ValueError)


def test_what_scoring_does_not_read_is_accepted_with_a_note() -> None:
    observation = completed()
    observation["metrics"]["attempts"] = -1
    observation["base"]["finalState"]["observed"] = "gone"
    assert check_observation(observation) == [
        "accepted as the reference scorer accepts it: metrics.attempts must be at least 0",
        "accepted as the reference scorer accepts it: base.finalState.observed must be one of: unchanged, mutated",
    ]
    assert check_observation(completed()) == []


def test_evalhubs_own_unavailable_observations_are_valid_and_unscored() -> None:
    observation = unavailable_observation(
        case={"id": "final-response", "assertions": {"requiredOperationIds": ["finish_task"]}},
        candidate={"id": "codex-luna", "provider": "codex", "budget": {"maxLatencyMs": 180000, "maxCostUsd": 1.5}},
        classification="infrastructure_failure",
        code="provider_unavailable",
        category="provider",
        retryable=True,
        message="the runtime did not start",
    )
    assert validate_observation(observation) == []
    scorecard = score_observation(observation, OPTIONS)
    assert scorecard["overall"] == {"score": None, "gatePassed": None, "passed": None}


# --- scoring rules --------------------------------------------------------------------------


def test_a_perfect_observation_scores_integral_ones_as_json_ints() -> None:
    scorecard = score_observation(completed(), OPTIONS)
    assert list(scorecard) == ["schema", "bundleId", "caseId", "candidateId", "classification", "dimensions", "overall"]
    assert list(scorecard["dimensions"]) == list(DIMENSIONS)
    assert '"score": 1.0' not in json.dumps(scorecard)
    assert scorecard["overall"] == {"score": 1, "gatePassed": True, "passed": True}


def test_a_candidate_failure_always_fails_the_lifecycle_gate() -> None:
    observation = completed()
    observation["classification"] = "candidate_failure"  # every check still passes
    scorecard = score_observation(observation, OPTIONS)
    lifecycle = dimension(scorecard, "lifecycle_integrity")
    assert (lifecycle["score"], lifecycle["passed"], lifecycle["reasons"]) == (0, False, [CANDIDATE_FAILED_REASON])
    assert scorecard["overall"] == {"score": 0, "gatePassed": False, "passed": False}


def test_an_unscored_execution_keeps_the_default_weights_whatever_the_options() -> None:
    observation = vector_observation("dev-skipped-env")
    scorecard = score_observation(observation, {**OPTIONS, "weights": {"presentation_fidelity": 0.9}})
    assert dimension(scorecard, "presentation_fidelity")["weight"] == 0.25
    assert all(entry["reasons"] == ["execution was not scoreable"] for entry in scorecard["dimensions"].values())


def test_thresholds_decide_passing_and_weights_the_mean() -> None:
    observation = completed()
    observation["presentation"]["checks"][0]["passed"] = False
    strict = score_observation(observation, OPTIONS)
    assert dimension(strict, "presentation_fidelity")["reasons"] == ["check failed: first-visible-progress"]
    assert strict["overall"] == {"score": 0.9375, "gatePassed": True, "passed": False}

    lenient = score_observation(
        observation, {**OPTIONS, "thresholds": {"presentation_fidelity": 0.75}, "weights": {"presentation_fidelity": 0}}
    )
    assert dimension(lenient, "presentation_fidelity")["passed"] is True
    assert lenient["overall"] == {"score": 1, "gatePassed": True, "passed": True}


def test_all_weights_zero_gives_an_overall_score_of_zero() -> None:
    weights = {name: 0 for name, weight in DEFAULT_WEIGHTS.items() if weight}
    scorecard = score_observation(completed(), {**OPTIONS, "weights": weights})
    assert scorecard["overall"] == {"score": 0, "gatePassed": True, "passed": True}


def test_no_budget_scores_efficiency_one_with_a_reason() -> None:
    observation = completed()
    observation["base"]["budget"] = {}
    assert dimension(score_observation(observation, OPTIONS), "quality_efficiency")["reasons"] == ["no efficiency budget declared"]


def test_a_limit_without_an_observed_value_counts_as_a_miss() -> None:
    observation = completed()
    del observation["base"]["efficiency"]["totalTokens"]
    quality = dimension(score_observation(observation, OPTIONS), "quality_efficiency")
    assert (quality["score"], quality["reasons"]) == (0.75, ["no observed totalTokens to check against budget"])


def test_the_case_trace_expectation_comes_from_the_caller() -> None:
    observation = completed()  # a trace was captured
    scorecard = score_observation(observation, OPTIONS, trace_expectations={"completion-robustness": {"capture": "off"}})
    trace = dimension(scorecard, "trace_completeness")
    assert (trace["score"], trace["reasons"]) == (0, ["capture-off execution retained provider trace data"])


def test_the_reference_trace_expectations_are_the_catalogs() -> None:
    catalog = {case["id"]: case["assertions"].get("trace") for case in reference_cases()}
    assert {case_id: trace for case_id, trace in catalog.items() if trace} == {
        case_id: {key: list(value) if isinstance(value, tuple) else value for key, value in expected.items()}
        for case_id, expected in REFERENCE_TRACE_EXPECTATIONS.items()
    }


def _tool_result(operation_id: str, receipt_id: str) -> dict[str, Any]:
    envelope = {
        "schema": "paperclip.prp.semantic_tool.v1",
        "schemaVersion": 1,
        "phase": "result",
        "operationId": operation_id,
        "operationReceiptId": receipt_id,
    }
    return {
        "eventType": "mcp_app.tool_result",
        "runId": "run-1",
        "normalizedSessionId": "session-1",
        "turnId": "turn-1",
        "itemId": "item-1",
        "payload": {"semantic_tool": envelope},
    }


def test_wire_events_supply_the_trace_when_present() -> None:
    observation = completed()  # one observed call: finish_task
    trace = observation["base"]["trace"]
    trace.update(receiptIds=[], terminalPresent=False)  # ignored once wireEvents are given
    trace["wireEvents"] = [_tool_result("finish_task", "receipt-1"), {"eventType": "run.terminal", "payload": {}}]
    assert dimension(score_observation(observation, OPTIONS), "trace_completeness")["score"] == 1

    trace["wireEvents"][0] = _tool_result("create_task", "receipt-1")  # receipt for another call
    assert dimension(score_observation(observation, OPTIONS), "trace_completeness")["reasons"] == ["trace missing receipt-per-call"]


def test_a_stop_reason_on_the_wire_must_be_a_valid_receipt() -> None:
    observation = completed()
    stop_reason = {"schema": "paperclip.prp.stop_reason.v1", "schemaVersion": 1, "receiptId": "r-1", "decisionId": ""}
    observation["base"]["trace"]["wireEvents"] = [
        _tool_result("finish_task", "receipt-1"),
        {"eventType": "run.terminal", "payload": {"stopReason": stop_reason}},
    ]
    trace = dimension(score_observation(observation, OPTIONS), "trace_completeness")
    assert (trace["score"], trace["reasons"]) == (6 / 7, ["trace missing stop-reason-receipt"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (None, "scoring options must be an object with a bundleId"),
        ({}, "scoring options need a bundleId (text)"),
        ({"bundleId": 7}, "scoring options need a bundleId (text)"),
        ({**OPTIONS, "weights": {"semantic_outcome": None}}, "weights.semantic_outcome must be a finite number, not null"),
        ({**OPTIONS, "weights": {"semantic_outcome": "0.5"}}, "weights.semantic_outcome must be a finite number"),
        ({**OPTIONS, "thresholds": {"semantic_outcome": True}}, "thresholds.semantic_outcome must be a finite number"),
        ({**OPTIONS, "weights": {"semantic_outcome": 10**400}}, "weights.semantic_outcome is too large"),
        ({**OPTIONS, "weights": {"semantic_outcome": 1e308, "trajectory_restraint": 1e308}}, "weights are too large"),
    ],
)
def test_invalid_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        score_observation(completed(), options)


def test_null_weights_and_thresholds_mean_the_defaults_as_in_the_reference() -> None:
    scorecard = score_observation(completed(), {**OPTIONS, "weights": None, "thresholds": None})
    assert scorecard == score_observation(completed(), OPTIONS)


def test_the_scoring_version_is_a_scorecard_v2_revision() -> None:
    assert re.fullmatch(r"scorecard-v2\.\d+", SCORING_VERSION)


# --- purity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["runs/evaluation/scoring.py", "runs/evaluation/observation_schema.py"])
def test_the_scoring_core_imports_nothing_from_django(module: str) -> None:
    tree = ast.parse((REPO_ROOT / module).read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.split(".")[0] in {"django", "os", "time", "datetime"}]


def test_the_scoring_core_loads_without_django_settings() -> None:
    code = (
        "import sys, runs.evaluation.scoring; "
        "assert not [m for m in sys.modules if m == 'django.db' or m.startswith('django.db.')], 'django.db loaded'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=Path(REPO_ROOT), check=True, env={"PATH": ""})
