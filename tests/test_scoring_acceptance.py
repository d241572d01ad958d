"""Scoring accepts what the reference scorer accepts (docs/scoring.md).

``scoreRunnerWorkflow`` spreads the options' weights over its defaults, gives a gate weight 0
whatever was asked, reads ``thresholds?.[dimension] ?? 1`` and never looks at most of an
observation (``metrics``, ``provider``, a check's ``evidenceIds``...). evalhub scores those
documents exactly as the reference does and says what it ignored in notes: on standard error for
``manage.py score`` and ``manage.py report``, in ``notes`` beside the scorecards for
``POST /api/score/``. The documents themselves are never changed.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.evaluation.observation_schema import ObservationError, check_observation, validate_observation
from runs.evaluation.renderers import render_json
from runs.evaluation.scoring import DIMENSIONS, score_observation, score_observation_noted
from tests.reference import scoring_vectors

BUNDLE = "runner-live-v2-ede6023f7ccf4a1f"
OPTIONS = {"bundleId": BUNDLE}
GATE_WEIGHTS = {"hard_invariants": 3, "lifecycle_integrity": 0.7}
# Synthetic, built by concatenation so no secret-shaped literal sits in the source.
SYNTHETIC_KEY = "sk-" + "Z9y8" * 5


def vector(vector_id: str) -> dict[str, Any]:
    return copy.deepcopy(next(item for item in scoring_vectors()["observations"] if item["id"] == vector_id))


def scored_vectors() -> list[dict[str, Any]]:
    return [item for item in scoring_vectors()["observations"] if "scorecard" in item]


def completed() -> dict[str, Any]:
    return vector("dev-completed-completion-robustness")["observation"]


def scored(observation: dict[str, Any], options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Scorecard and notes, checking on the way that the arguments are left as they were."""
    before = copy.deepcopy((observation, options))
    result = score_observation_noted(observation, options)
    assert (observation, options) == before
    return result


# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize("item", scored_vectors(), ids=lambda item: item["id"])
def test_a_weighted_gate_scores_as_the_reference_with_the_gate_weighing_zero(item: dict[str, Any]) -> None:
    options = {**item["options"], "weights": {**item["options"].get("weights", {}), **GATE_WEIGHTS}}

    scorecard, notes = scored(item["observation"], options)

    assert scorecard == item["scorecard"]
    assert json.dumps(scorecard) == json.dumps(item["scorecard"])
    assert notes == [
        "weights.hard_invariants ignored: a gate dimension always weighs 0",
        "weights.lifecycle_integrity ignored: a gate dimension always weighs 0",
    ]


def test_custom_weights_with_a_gate_weight_give_the_reference_custom_scorecard() -> None:
    item = vector("dev-custom-options")
    assert item["options"]["weights"] == {"continuation_integrity": 0.5}  # the reference's own custom options
    options = {**item["options"], "weights": {"hard_invariants": 1, **item["options"]["weights"]}}
    assert scored(item["observation"], options)[0] == item["scorecard"]


IGNORED_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"weight": {"semantic_outcome": 9}}, "unknown scoring option(s) ignored: weight"),
    ({"traceExpectations": {}, "zeta": 1}, "unknown scoring option(s) ignored: traceExpectations, zeta"),
    ({"weights": {"presentation": 1}}, "weights: unknown dimension(s) ignored: presentation"),
    ({"thresholds": {"overall": 0}}, "thresholds: unknown dimension(s) ignored: overall"),
    ({"weights": [0.5]}, "scoring option weights ignored: it is not an object"),
    ({"weights": 2}, "scoring option weights ignored: it is not an object"),
    ({"thresholds": "lenient"}, "scoring option thresholds ignored: it is not an object"),
    ({"thresholds": {"presentation_fidelity": None}}, "thresholds.presentation_fidelity is null: the default threshold 1 applies"),
]


@pytest.mark.parametrize(("extra", "note"), IGNORED_OPTIONS)
def test_options_the_reference_ignores_change_nothing_and_are_noted(extra: dict[str, Any], note: str) -> None:
    observation = completed()
    observation["presentation"]["checks"][0]["passed"] = False  # so a threshold would show

    scorecard, notes = scored(observation, {**OPTIONS, **extra})

    assert scorecard == score_observation(observation, OPTIONS)
    assert len(notes) == 1 and notes[0].startswith(note)


def test_a_threshold_on_a_gate_decides_the_gate_as_in_the_reference() -> None:
    observation = completed()
    observation["lifecycle"]["checks"][0]["passed"] = False  # lifecycle 6/7

    strict = score_observation(observation, OPTIONS)
    lenient = score_observation(observation, {**OPTIONS, "thresholds": {"lifecycle_integrity": 0.5}})

    assert strict["overall"] == {"score": 0, "gatePassed": False, "passed": False}
    assert lenient["dimensions"]["lifecycle_integrity"]["passed"] is True
    assert lenient["overall"] == {"score": 1, "gatePassed": True, "passed": True}


def test_a_negative_weight_is_used_as_given() -> None:
    observation = completed()
    observation["presentation"]["checks"][0]["passed"] = False  # presentation 3/4
    weights = {
        "semantic_outcome": 1,
        "trajectory_restraint": 0,
        "trace_completeness": 0,
        "quality_efficiency": 0,
        "continuation_integrity": 0,
        "presentation_fidelity": -0.5,
    }

    scorecard, notes = scored(observation, {**OPTIONS, "weights": weights})

    # (1·1 + 0.75·-0.5) / (1 - 0.5): the reference does not clamp the overall score.
    assert scorecard["overall"] == {"score": 1.25, "gatePassed": True, "passed": False}
    assert scorecard["dimensions"]["presentation_fidelity"]["weight"] == -0.5
    assert notes == ["weights.presentation_fidelity is negative (-0.5): it is used as given"]


@pytest.mark.parametrize(
    ("weight", "printed"),
    [(1, "1"), (1.0, "1"), (-0.0, "0"), (0, "0"), (0.25, "0.25"), (1e300, "1e+300")],
)
def test_weights_print_as_javascript_prints_them(weight: float, printed: str) -> None:
    scorecard, notes = scored(completed(), {**OPTIONS, "weights": {"presentation_fidelity": weight}})

    assert json.dumps(scorecard["dimensions"]["presentation_fidelity"]["weight"]) == printed
    assert scorecard["overall"]["score"] == 1  # every dimension scores 1, whatever its weight
    assert notes == []


def test_a_blank_bundle_id_is_carried_as_given_with_a_note() -> None:
    scorecard, notes = scored(completed(), {"bundleId": ""})
    assert scorecard["bundleId"] == ""
    assert notes == ["bundleId is blank: the scorecard carries it as given"]


# --- the observation ------------------------------------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(observation: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = observation
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return change


_DELETE = object()

IGNORED_FIELDS: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("unknown provider", _set("provider", "claude-code")),
    ("no metrics", _set("metrics", _DELETE)),
    ("negative metrics", _set("metrics.attempts", -1)),
    ("fractional tool count", _set("metrics.toolCount", 1.5)),
    ("metrics of text", _set("metrics.settlementMs", "slow")),
    ("no PRP event list", _set("observedPrpEventTypes", _DELETE)),
    ("digests not a list", _set("artifactDigests", "none")),
    ("odd check evidence", _set("presentation.checks.0.evidenceIds", 5)),
    ("failure on a completed row", _set("failure", {"code": "", "category": "weather", "retryable": "no", "message": "m"})),
    ("no legacy caseId", _set("base.caseId", _DELETE)),
    ("unknown provenance", _set("base.provenance", {"source": "elsewhere"})),
    ("fractional frame count", _set("traceLineage.frameCount", 41.5)),
    ("trace reference not text", _set("traceLineage.traceRef", 7)),
]


@pytest.mark.parametrize(("label", "change"), IGNORED_FIELDS, ids=[label for label, _ in IGNORED_FIELDS])
def test_fields_the_reference_scorer_never_reads_are_accepted_with_a_note(label: str, change: Callable[[dict[str, Any]], None]) -> None:
    observation = completed()
    change(observation)

    scorecard, notes = scored(observation, OPTIONS)

    assert scorecard == score_observation(completed(), OPTIONS)
    problems = validate_observation(observation)
    assert notes == ["accepted as the reference scorer accepts it: " + problem for problem in problems]
    assert problems, label  # evalhub's full schema still sees it; scoring only notes it


def test_extra_keys_anywhere_are_accepted_silently_as_the_reference_schema_allows_them() -> None:
    observation = completed()
    observation["nightlyNote"] = "x"
    observation["base"]["trace"]["spanId"] = "s-1"
    observation["presentation"]["checks"][1]["weight"] = 2
    observation["traceLineage"]["frames"] = []

    assert scored(observation, OPTIONS) == (score_observation(completed(), OPTIONS), [])


def test_numbers_in_any_json_form_score_alike() -> None:
    observation = completed()
    observation["traceLineage"]["frameCount"] = 42.0
    observation["base"]["efficiency"] = {"latencyMs": 71000.0, "totalTokens": 3.3e4, "costUsd": 0.27, "attempts": 1.0}
    observation["base"]["budget"]["maxCostUsd"] = 8e-1
    observation["metrics"]["costUsd"] = -0.0
    observation["metrics"]["totalTokens"] = 1e300

    assert scored(observation, OPTIONS) == (score_observation(completed(), OPTIONS), [])


def test_fields_scoring_reads_loosely_score_as_the_reference_scores_them() -> None:
    observation = completed()
    observation["presentation"]["checks"][0] = {"id": "", "passed": False}
    observation["presentation"]["checks"][1] = {"id": "substantive-response", "passed": False, "reason": None}
    observation["base"]["finalState"]["observed"] = "gone"

    scorecard, notes = scored(observation, OPTIONS)

    presentation = scorecard["dimensions"]["presentation_fidelity"]
    assert (presentation["score"], presentation["reasons"]) == (0.5, ["check failed: ", "check failed: substantive-response"])
    semantic = scorecard["dimensions"]["semantic_outcome"]
    assert (semantic["score"], semantic["reasons"]) == (0, ["control-plane state gone, expected mutated"])
    assert notes == [
        "accepted as the reference scorer accepts it: presentation.checks[0].id must not be empty",
        "accepted as the reference scorer accepts it: presentation.checks[1].reason must be a string",
        "accepted as the reference scorer accepts it: base.finalState.observed must be one of: unchanged, mutated",
    ]


def test_a_null_failure_satisfies_the_reference_on_a_skipped_row() -> None:
    item = vector("dev-skipped-env")
    observation = item["observation"]
    observation["failure"] = None  # the reference only asks that the key is there

    scorecard, notes = scored(observation, item["options"])

    assert scorecard == item["scorecard"]
    assert notes == ["accepted as the reference scorer accepts it: failure must be an object"]


REFUSED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("no observed calls", _set("base.observedCalls", _DELETE), "base.observedCalls is required"),
    ("calls not text", _set("base.expectedCalls", [1]), "base.expectedCalls[0] must be a string"),
    ("unknown classification", _set("classification", "passed"), "classification must be one of"),
    ("check verdict not a boolean", _set("lifecycle.checks.0.passed", 1), "lifecycle.checks[0].passed must be true or false"),
    ("reason not text", _set("lifecycle.checks.0.reason", 5), "lifecycle.checks[0].reason must be a string or null"),
    ("capture not text", _set("traceLineage.capture", True), "traceLineage.capture must be a string"),
    ("frames of text", _set("traceLineage.frameCount", "42"), "traceLineage.frameCount must be a number"),
    ("no trace lineage", _set("traceLineage", _DELETE), "traceLineage is required"),
    ("failure without a message", _set("failure", {"code": "x"}), "failure.message is required"),
    ("a value JSON cannot hold", _set("metrics.costUsd", float("nan")), "metrics.costUsd must be a finite number"),
]


@pytest.mark.parametrize(("label", "change", "problem"), REFUSED, ids=[label for label, _, _ in REFUSED])
def test_what_the_scorer_cannot_score_is_still_refused(label: str, change: Callable[[dict[str, Any]], None], problem: str) -> None:
    observation = completed()
    change(observation)

    with pytest.raises(ObservationError) as raised:
        check_observation(observation)

    assert str(raised.value).startswith("observation is invalid: " + problem), label
    assert problem in "; ".join(raised.value.problems)


@pytest.mark.parametrize("item", [item for item in scoring_vectors()["observations"] if "error" in item], ids=lambda item: item["id"])
def test_what_the_reference_refuses_is_refused_with_its_message(item: dict[str, Any]) -> None:
    with pytest.raises(ObservationError, match="^" + item["error"] + "$"):
        score_observation(item["observation"], {**item["options"], "weights": GATE_WEIGHTS})


# --- manage.py score, POST /api/score/, manage.py report ------------------------------------


def _write(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "input.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_manage_py_score_prints_the_reference_scorecard_and_notes_on_stderr(tmp_path: Path) -> None:
    item = vector("dev-custom-options")
    options = {**item["options"], "weights": {**item["options"]["weights"], "hard_invariants": 0.4}, SYNTHETIC_KEY: 1}
    observation = item["observation"]
    del observation["metrics"]
    out, err = io.StringIO(), io.StringIO()

    call_command("score", _write(tmp_path, [{"observation": observation, "options": options}]), stdout=out, stderr=err)

    assert out.getvalue() == render_json([item["scorecard"]])
    assert err.getvalue().splitlines() == [
        "item 0: unknown scoring option(s) ignored: [REDACTED]; the options are bundleId, weights, thresholds",
        "item 0: weights.hard_invariants ignored: a gate dimension always weighs 0",
        "item 0: accepted as the reference scorer accepts it: metrics is required",
    ]


@pytest.mark.django_db
def test_post_score_returns_the_reference_scorecard_with_notes_beside_it(reader_client) -> None:
    item = vector("dev-custom-options")
    options = {**item["options"], "weights": {**item["options"]["weights"], "lifecycle_integrity": 2}}
    clean = vector("dev-completed-completion-robustness")
    body = [
        {"observation": clean["observation"], "options": clean["options"]},
        {"observation": item["observation"], "options": options},
    ]

    response = reader_client.post("/api/score/?notes=true", data=json.dumps(body), content_type="application/json")

    assert response.status_code == 200
    assert response.json() == {
        "results": [clean["scorecard"], item["scorecard"]],
        "notes": [{"index": 1, "notes": ["weights.lifecycle_integrity ignored: a gate dimension always weighs 0"]}],
    }


def _report_input(observation: dict[str, Any], scorecard: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": "live",
        "bundle": {"id": BUNDLE, "runnerVersion": "0.1.0", "promptPolicyId": "runner-live-workflow-v1", "providerVersions": {}},
        "generatedAt": "2026-08-24T04:00:00.000Z",
        "results": [
            {
                "scenarioId": observation["caseId"],
                "candidateId": observation["candidateId"],
                "observation": observation,
                "scorecard": scorecard,
            }
        ],
    }


@pytest.mark.django_db
def test_manage_py_report_accepts_what_the_reference_report_accepts(tmp_path: Path, reference_catalog: None) -> None:
    clean = vector("dev-completed-completion-robustness")
    expected = io.StringIO()
    call_command(
        "report", _write(tmp_path, _report_input(clean["observation"], clean["scorecard"])), "--format", "markdown", stdout=expected
    )

    observation = copy.deepcopy(clean["observation"])
    observation["provider"] = "claude-code"
    del observation["observedPrpEventTypes"]
    # Scored by the reference with a gate weight: the same scorecard.
    scorecard = score_observation(observation, {**clean["options"], "weights": GATE_WEIGHTS})
    document = {**_report_input(observation, scorecard), "nightly": True}
    out, err = io.StringIO(), io.StringIO()

    call_command("report", _write(tmp_path, document), "--format", "markdown", stdout=out, stderr=err)

    assert out.getvalue() == expected.getvalue()
    assert err.getvalue().splitlines() == [
        "unknown input key(s) ignored: nightly; the keys are baselineReady, bundle, generatedAt, history, results, source, traceability",
        "results item 1: accepted as the reference scorer accepts it: observedPrpEventTypes is required",
        "results item 1: accepted as the reference scorer accepts it: provider must be one of: codex, opencode, acpx",
    ]


@pytest.mark.django_db
def test_manage_py_report_still_refuses_an_observation_that_cannot_be_scored(tmp_path: Path, reference_catalog: None) -> None:
    clean = vector("dev-completed-completion-robustness")
    observation = clean["observation"]
    del observation["base"]["trace"]
    del observation["metrics"]  # only noted: not the reason for the refusal

    with pytest.raises(CommandError) as caught:
        call_command("report", _write(tmp_path, _report_input(observation, clean["scorecard"])), stdout=io.StringIO())

    assert str(caught.value) == "results item 1 has an invalid observation: base.trace is required"


def test_every_dimension_is_named_in_the_unknown_dimension_note() -> None:
    _, notes = scored(completed(), {**OPTIONS, "weights": {"total": 1}})
    assert notes == [f"weights: unknown dimension(s) ignored: total; the dimensions are {', '.join(DIMENSIONS)}"]


def test_trace_lists_are_needed_only_by_a_case_that_expects_them() -> None:
    observation = completed()  # completion-robustness expects no dispositions or lineage kinds
    del observation["traceLineage"]["dispositions"]
    observation["traceLineage"]["capture"] = "partial"  # neither on nor off: the optional-capture check

    scorecard, notes = scored(observation, OPTIONS)

    reference = completed()
    reference["traceLineage"]["capture"] = "off"  # scores the same: capture is not "on"
    assert scorecard == score_observation(reference, OPTIONS)
    assert notes == [
        "accepted as the reference scorer accepts it: traceLineage.dispositions is required",
        "accepted as the reference scorer accepts it: traceLineage.capture must be one of: on, off",
    ]

    lineage_case = vector("dev-completed-trace-lineage-full")["observation"]
    del lineage_case["traceLineage"]["lineage"]
    with pytest.raises(
        ObservationError, match="^observation is invalid: traceLineage.lineage is required: case trace-lineage expects lineage$"
    ):
        score_observation(lineage_case, OPTIONS)


@pytest.mark.django_db
def test_manage_py_report_carries_a_blank_bundle_id_and_a_null_failure_as_the_reference(tmp_path: Path, reference_catalog: None) -> None:
    item = vector("dev-skipped-env")
    observation = item["observation"]
    observation["failure"] = None
    document = _report_input(observation, score_observation(observation, item["options"]))
    document["bundle"]["id"] = ""
    out, err = io.StringIO(), io.StringIO()

    call_command("report", _write(tmp_path, document), "--format", "junit", stdout=out, stderr=err)

    assert '<skipped message="not scoreable" />' in out.getvalue()
    assert err.getvalue().splitlines() == [
        "bundle.id is blank: the report carries it as given",
        "results item 1: accepted as the reference scorer accepts it: failure must be an object",
    ]


def test_the_observation_is_checked_before_the_options_as_in_the_reference() -> None:
    item = vector("dev-invalid-wrong-schema")
    with pytest.raises(ObservationError, match="^" + item["error"] + "$"):
        score_observation(item["observation"], {"weights": "x"})


@pytest.mark.parametrize(
    "weights",
    [{"hard_invariants": "heavy"}, {"lifecycle_integrity": None}, {"hard_invariants": 10**400}],
)
def test_any_value_of_a_gate_weight_is_ignored(weights: dict[str, Any]) -> None:
    scorecard, notes = scored(completed(), {**OPTIONS, "weights": weights})
    assert scorecard == score_observation(completed(), OPTIONS)
    assert len(notes) == 1 and "ignored: a gate dimension always weighs 0" in notes[0]


def test_weights_and_thresholds_of_an_unscored_row_are_never_read() -> None:
    item = vector("dev-infra")
    options = {**item["options"], "weights": {"semantic_outcome": "heavy"}, "thresholds": {"presentation_fidelity": 0.5}}

    scorecard, notes = scored(item["observation"], options)

    assert scorecard == item["scorecard"]
    assert notes == ["weights.semantic_outcome must be a finite number; ignored: the execution is infrastructure_failure, not scored"]
