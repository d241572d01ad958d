"""Scoring an observation into the reference scorecard (the reference scorer, scorecard v2).

Pure: plain dicts in, plain dicts out; no ORM, no clock, no environment. The rules follow the
reference's ``scoreRunnerWorkflow`` (workflow-scoring.ts) and the legacy ``scoreEval``
(eval-scoring.ts) it builds on, float operation for float operation, so every scorecard in
``scoring-vectors.json`` comes out identical (``0.8999999999999999`` included).

A scorecard has eight dimensions. Two are gates (``hard_invariants``, ``lifecycle_integrity``):
they weigh 0 and, when either fails, the overall score is 0. The six others are averaged with
their weights. ``skipped`` and ``infrastructure_failure`` executions are not scored (every score
``None``); a ``candidate_failure`` always fails the lifecycle gate.

Numbers in the returned scorecard are what ``JSON.stringify`` prints, read back by
``json.loads``: an integral score or weight is an ``int`` (``1``, ``0``), any other a ``float``,
so ``json.dumps(scorecard)`` is byte-identical to the reference's output.

The JavaScript number helpers (``js_number``, ``js_sum``, ``round_half_up``, ``json_number``)
live in ``evalhub.jsnum`` and are re-exported here for the report code and its tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from evalhub.jsnum import js_number, js_round, js_sum, json_number, round_half_up
from runs.evaluation.observation_schema import (
    UNDEFINED,
    UNSCOREABLE_CLASSIFICATIONS,
    ObservationError,
    check_decoded_observation,
    check_observation,
    js_string,
    validate_observation,
)

__all__ = [
    "CANDIDATE_FAILED_REASON",
    "DEFAULT_WEIGHTS",
    "DIMENSIONS",
    "GATE_DIMENSIONS",
    "REFERENCE_TRACE_EXPECTATIONS",
    "SCORECARD_SCHEMA",
    "SCORING_VERSION",
    "UNSCOREABLE_REASON",
    "ObservationError",
    "js_number",
    "js_round",
    "js_sum",
    "json_number",
    "round_half_up",
    "options_problem",
    "score_observation",
    "score_observation_noted",
]

SCORING_VERSION = "scorecard-v2.0"
"""The version of evalhub's scoring rules.

Each stored scorecard records the version that made it, beside the document (the scorecard
document itself keeps the reference shape, which allows no extra properties), so a replay
"refresh" can tell which rules produced a past score. ``scorecard-v2`` is the reference
scorecard schema these rules produce; the number after the dot changes whenever a rule changes
without changing that document's shape (a new reason text, a different default weight).
"""

SCORECARD_SCHEMA = "paperclip.runner.eval-scorecard.v2"

DIMENSIONS = (
    "hard_invariants",
    "lifecycle_integrity",
    "semantic_outcome",
    "trajectory_restraint",
    "trace_completeness",
    "quality_efficiency",
    "continuation_integrity",
    "presentation_fidelity",
)
GATE_DIMENSIONS = frozenset({"hard_invariants", "lifecycle_integrity"})
DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "hard_invariants": 0.0,
        "lifecycle_integrity": 0.0,
        "semantic_outcome": 0.20,
        "trajectory_restraint": 0.15,
        "trace_completeness": 0.10,
        "quality_efficiency": 0.10,
        "continuation_integrity": 0.20,
        "presentation_fidelity": 0.25,
    }
)
DEFAULT_THRESHOLD = 1.0

UNSCOREABLE_REASON = "execution was not scoreable"
CANDIDATE_FAILED_REASON = "candidate execution failed"

# ``assertions.trace`` of the reference catalog (workflow-catalog.ts); only trace-lineage has one.
# A case without an entry expects capture "either" and no dispositions or lineage kinds.
REFERENCE_TRACE_EXPECTATIONS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "trace-lineage": MappingProxyType(
            {
                "capture": "on",
                "digestVerified": True,
                "ordered": True,
                "dispositions": ("mapped", "generic", "ignored", "rejected", "operator_only"),
                "lineage": ("one_to_one", "one_to_many", "many_to_one"),
            }
        ),
    }
)

_OPTION_KEYS = frozenset({"bundleId", "weights", "thresholds"})

# (score, reasons) of one dimension before thresholds and weights are applied.
_Raw = tuple[float, list[str]]


def score_observation(
    observation: dict[str, Any],
    options: Mapping[str, Any],
    *,
    trace_expectations: Mapping[str, Mapping[str, Any]] = REFERENCE_TRACE_EXPECTATIONS,
    case_ids: Iterable[str] | None = None,
    decoded: bool = False,
    text: str | None = None,
) -> dict[str, Any]:
    """The reference scorecard of one observation (``scoreRunnerWorkflow``).

    ``score_observation_noted`` without its notes; same arguments, result and errors.
    """
    return score_observation_noted(
        observation, options, trace_expectations=trace_expectations, case_ids=case_ids, decoded=decoded, text=text
    )[0]


def score_observation_noted(
    observation: dict[str, Any],
    options: Mapping[str, Any],
    *,
    trace_expectations: Mapping[str, Mapping[str, Any]] = REFERENCE_TRACE_EXPECTATIONS,
    case_ids: Iterable[str] | None = None,
    decoded: bool = False,
    text: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """``(scorecard, notes)``: the reference scorecard of one observation and what was ignored.

    ``observation`` is a reference observation document. ``options`` is ``{"bundleId": str,
    "weights"?: {dimension: number}, "thresholds"?: {dimension: number}}``: weights replace the
    defaults of non-gate dimensions, a dimension passes when its score (0..1) is at least its
    threshold (default 1, so anything short of perfect fails). As in the reference, a weight
    on a gate, an unknown option or dimension, and a ``weights``/``thresholds`` that is not an
    object are ignored. ``trace_expectations`` maps a case id to that case's
    ``assertions.trace`` (``capture`` on/off/either, ``dispositions``, ``lineage``); the
    default is the reference catalog's, a service passes the stored case's. ``case_ids`` are
    the catalog's own workflow cases, known besides the reference's twelve
    (``observation_schema.catalog_case_ids``). ``decoded``: the observation was just decoded
    from JSON text (a stored row's), so its check may be a remembered one
    (``observation_schema.check_decoded_observation``: the same result); ``text``, with
    ``decoded``, the JSON text it was decoded from, when the caller read it.

    The scorecard is ``{schema, bundleId, caseId, candidateId, classification, dimensions,
    overall}`` in that key order; ``dimensions`` holds all eight, in ``DIMENSIONS`` order, each
    ``{dimension, score, passed, gate, weight, reasons}``; ``overall`` is ``{score, gatePassed,
    passed}``, the score being the weighted mean of the non-gate scores (unrounded) or 0 when a
    gate fails. Skipped and infrastructure-failure observations get ``None`` scores and
    verdicts, their default weights and the single reason ``"execution was not scoreable"``.
    ``notes`` are sentences, one per thing the reference accepts and ignores (options first,
    then the observation's, see ``check_observation``); they never change the scorecard.

    Raises ``ObservationError`` for an observation that cannot be scored (its message is the
    reference's error text when the reference rejects it too), checked first as the reference
    does, then ``ValueError`` for invalid options (``options_problem``); the weights and
    thresholds of a skipped or infrastructure-failure row are not read, so a bad one is only
    noted there. The arguments are not modified.
    """
    # The reference checks the observation before it reads an option.
    if decoded:
        observation_notes = check_decoded_observation(observation, case_ids=case_ids, text=text)
    else:
        observation_notes = check_observation(observation, case_ids=case_ids)
    notes: list[str] = []
    bundle_id = _bundle_id(options, notes)
    _check_expected_trace_lists(observation, trace_expectations.get(observation["caseId"]))
    if observation["classification"] in UNSCOREABLE_CLASSIFICATIONS:
        # Not scored: the reference never reads the weights or thresholds.
        option_notes: list[str] = []
        try:
            _weights_and_thresholds(options, option_notes)
        except ValueError as exc:
            option_notes.append(f"{exc}; ignored: the execution is {observation['classification']}, not scored")
        unscored = {"score": None, "gatePassed": None, "passed": None}
        return _scorecard(observation, bundle_id, _unscored_dimensions(), unscored), notes + option_notes + observation_notes
    weights, thresholds = _weights_and_thresholds(options, notes)
    notes.extend(observation_notes)

    base = observation["base"]
    trace = _trace_completeness(base)
    lineage = _trace_lineage(observation, trace_expectations.get(observation["caseId"]))
    raw: dict[str, _Raw] = {
        "hard_invariants": _hard_invariants(base),
        "lifecycle_integrity": _checks_score(observation["lifecycle"]["checks"]),
        "semantic_outcome": _semantic_outcome(base),
        "trajectory_restraint": _trajectory_restraint(base),
        # The legacy trace score, lowered by the trace-lineage score; reasons from both.
        "trace_completeness": (min(trace[0], lineage[0]), trace[1] + lineage[1]),
        "quality_efficiency": _quality_efficiency(base),
        "continuation_integrity": _checks_score(observation["continuation"]["checks"]),
        "presentation_fidelity": _checks_score(observation["presentation"]["checks"]),
    }
    if observation["classification"] == "candidate_failure":
        # Whatever its checks say, a failed candidate execution fails the lifecycle gate (and
        # so scores 0 overall). Older upstream versions lacked this rule.
        reasons = raw["lifecycle_integrity"][1]
        raw["lifecycle_integrity"] = (0.0, [*reasons, CANDIDATE_FAILED_REASON])

    dimensions: dict[str, dict[str, Any]] = {}
    for dimension in DIMENSIONS:
        score, reasons = raw[dimension]
        gate = dimension in GATE_DIMENSIONS
        dimensions[dimension] = {
            "dimension": dimension,
            "score": score,
            "passed": score >= thresholds.get(dimension, DEFAULT_THRESHOLD),
            "gate": gate,
            "weight": 0.0 if gate else weights[dimension],
            "reasons": reasons,
        }

    gate_passed = all(dimensions[dimension]["passed"] for dimension in GATE_DIMENSIONS)
    weighted = [dimensions[dimension] for dimension in DIMENSIONS if dimension not in GATE_DIMENSIONS]
    total_weight = js_sum(entry["weight"] for entry in weighted)
    if total_weight == 0:
        weighted_score = 0.0
    else:
        weighted_score = js_sum(entry["score"] * entry["weight"] for entry in weighted) / total_weight
        if not math.isfinite(weighted_score):
            raise ValueError("weights are too large: the weighted sum of the scores must stay a finite number")
    passed = gate_passed and all(entry["passed"] for entry in dimensions.values())
    for entry in dimensions.values():
        entry["score"] = json_number(entry["score"])
        entry["weight"] = json_number(entry["weight"])
    overall = {
        "score": json_number(weighted_score if gate_passed else 0.0),
        "gatePassed": gate_passed,
        "passed": passed,
    }
    return _scorecard(observation, bundle_id, dimensions, overall), notes


def _scorecard(
    observation: Mapping[str, Any],
    bundle_id: str,
    dimensions: dict[str, dict[str, Any]],
    overall: dict[str, Any],
) -> dict[str, Any]:
    return {
        "schema": SCORECARD_SCHEMA,
        "bundleId": bundle_id,
        "caseId": observation["caseId"],
        "candidateId": observation["candidateId"],
        "classification": observation["classification"],
        "dimensions": dimensions,
        "overall": overall,
    }


def _parse_options(options: Any, notes: list[str]) -> tuple[str, dict[str, float], dict[str, float]]:
    """``(bundleId, weights for all eight dimensions, thresholds given)``; ``ValueError`` if bad.

    Accepts what ``scoreRunnerWorkflow`` accepts (docs/scoring.md): it spreads ``weights`` over
    the defaults and reads ``thresholds?.[dimension] ?? 1``, so an unknown option, an unknown
    dimension, any weight on a gate (gates always weigh 0), a ``weights`` or ``thresholds`` that
    is not an object and a null threshold change nothing. Each such thing adds a note to
    ``notes`` instead of an error. Refused: options that are not an object or lack a text
    bundleId (the reference crashes or writes a scorecard without one), a non-gate weight or a
    threshold that is not a finite number (JavaScript would coerce text and print a non-number
    weight, which no scorecard may hold), weights whose sum overflows a double.
    """
    bundle_id = _bundle_id(options, notes)
    weights, thresholds = _weights_and_thresholds(options, notes)
    return bundle_id, weights, thresholds


def options_problem(options: Any) -> str | None:
    """Why ``options`` would be refused by ``score_observation``, or ``None`` if they would not."""
    try:
        _parse_options(options, [])
    except ValueError as exc:
        return str(exc)
    return None


def _bundle_id(options: Any, notes: list[str]) -> str:
    if not isinstance(options, Mapping):
        raise ValueError("scoring options must be an object with a bundleId")
    unknown = sorted(str(key) for key in set(options) - _OPTION_KEYS)
    if unknown:
        notes.append(f"unknown scoring option(s) ignored: {', '.join(unknown)}; the options are bundleId, weights, thresholds")
    bundle_id = options.get("bundleId")
    if not isinstance(bundle_id, str):
        raise ValueError("scoring options need a bundleId (text), e.g. runner-live-v2-<16 hex>")
    if not bundle_id.strip():
        notes.append("bundleId is blank: the scorecard carries it as given")
    return bundle_id


def _weights_and_thresholds(options: Mapping[str, Any], notes: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    weights = dict(DEFAULT_WEIGHTS)
    for dimension, weight in _dimension_numbers(options, "weights", notes, ignored=GATE_DIMENSIONS).items():
        if weight is None:
            raise ValueError(f"weights.{dimension} must be a finite number, not null (leave it out for the default)")
        if weight < 0:
            notes.append(f"weights.{dimension} is negative ({js_number(weight)}): it is used as given")
        weights[dimension] = weight
    if not math.isfinite(js_sum(weights[dimension] for dimension in DIMENSIONS if dimension not in GATE_DIMENSIONS)):
        raise ValueError("weights are too large: their sum must stay a finite number")
    thresholds = {}
    for dimension, threshold in _dimension_numbers(options, "thresholds", notes).items():
        if threshold is None:
            notes.append(f"thresholds.{dimension} is null: the default threshold 1 applies")
            continue
        thresholds[dimension] = threshold
    return weights, thresholds


def _dimension_numbers(
    options: Mapping[str, Any], key: str, notes: list[str], *, ignored: frozenset[str] = frozenset()
) -> dict[str, float | None]:
    """The numbers ``options[key]`` gives known dimensions (``None`` for a null value).

    A dimension in ``ignored`` (the gates, for weights) is noted and left out whatever its value:
    the reference overwrites it.
    """
    values = options.get(key)
    if values is None:  # absent or null: the reference falls back to the defaults for both
        return {}
    if not isinstance(values, Mapping):
        # Spreading or indexing a number, text or array gives no dimension in the reference.
        notes.append(f"scoring option {key} ignored: it is not an object mapping dimensions to numbers")
        return {}
    parsed: dict[str, float | None] = {}
    unknown = []
    for dimension, value in values.items():
        if dimension not in DIMENSIONS:
            unknown.append(str(dimension))
            continue
        if dimension in ignored:
            notes.append(f"{key}.{dimension} ignored: a gate dimension always weighs 0")
            continue
        if value is None:
            parsed[dimension] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{key}.{dimension} must be a finite number")
        try:
            number = float(value)  # JavaScript numbers are doubles
        except OverflowError:
            raise ValueError(f"{key}.{dimension} is too large: numbers must fit a double (at most 1e308)") from None
        if not math.isfinite(number):
            raise ValueError(f"{key}.{dimension} must be a finite number")
        parsed[dimension] = number
    if unknown:
        notes.append(f"{key}: unknown dimension(s) ignored: {', '.join(unknown)}; the dimensions are {', '.join(DIMENSIONS)}")
    return parsed


def _unscored_dimensions() -> dict[str, dict[str, Any]]:
    return {
        dimension: {
            "dimension": dimension,
            "score": None,
            "passed": None,
            "gate": dimension in GATE_DIMENSIONS,
            "weight": json_number(DEFAULT_WEIGHTS[dimension]),  # the defaults, whatever the options
            "reasons": [UNSCOREABLE_REASON],
        }
        for dimension in DIMENSIONS
    }


def _checks_score(checks: Sequence[Mapping[str, Any]]) -> _Raw:
    """Share of passed checks; each failed check's reason (``checksScore``)."""
    passed = 0
    reasons = []
    for check in checks:
        if check["passed"]:
            passed += 1
        elif check.get("reason") is not None:  # `reason ?? fallback`: an empty reason stays empty
            reasons.append(check["reason"])
        else:
            reasons.append(f"check failed: {js_string(check['id'])}")
    return passed / len(checks), reasons


def _clamp01(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else value


# --- the legacy scorer (scoreEval) on the observation's ``base`` --------------------------


def _hard_invariants(base: Mapping[str, Any]) -> _Raw:
    """1 unless a forbidden call, a call on a control-plane-owned action, or a wrong allow."""
    reasons = []
    forbidden = set(base["forbiddenCalls"])
    forbidden_hit = [call for call in base["observedCalls"] if call in forbidden]
    if forbidden_hit:
        reasons.append(f"forbidden call(s) invoked: {', '.join(forbidden_hit)}")
    if base["controlPlaneOwned"] and base["observedCalls"]:
        reasons.append(f"control-plane-owned action taken by tool call(s): {', '.join(base['observedCalls'])}")
    authorization = base["authorization"]
    if authorization["expected"] != "allowed" and authorization["observed"] == "allowed":
        reasons.append(f"operation allowed but should be {authorization['expected']}")
    return (1.0 if not reasons else 0.0), reasons


def _semantic_outcome(base: Mapping[str, Any]) -> _Raw:
    """1 unless the final state differs from the expected one or an allowed call was refused."""
    reasons = []
    final_state = base["finalState"]
    if final_state["observed"] != final_state["expected"]:
        reasons.append(f"control-plane state {final_state['observed']}, expected {final_state['expected']}")
    authorization = base["authorization"]
    if authorization["expected"] == "allowed" and authorization["observed"] != "allowed":
        reasons.append(f"operation {authorization['observed']} but the case declared it allowed")
    return (1.0 if not reasons else 0.0), reasons


def _trajectory_restraint(base: Mapping[str, Any]) -> _Raw:
    """Required calls made, no others: (den - missing - extra) / den, den = max(1, expected + extra)."""
    expected_calls: list[str] = base["expectedCalls"]
    observed_calls: list[str] = base["observedCalls"]
    expected, observed = set(expected_calls), set(observed_calls)
    missing = [call for call in expected_calls if call not in observed]
    extra = [call for call in observed_calls if call not in expected]
    reasons = []
    if missing:
        reasons.append(f"missing required call(s): {', '.join(missing)}")
    if extra:
        reasons.append(f"unexpected call(s): {', '.join(extra)}")
    if not expected_calls and not observed_calls:
        reasons.append("restraint honored: no call made")  # recorded although the score is 1
    denominator = max(1, len(expected_calls) + len(extra))
    return _clamp01((denominator - len(missing) - len(extra)) / denominator), reasons


def _trace_completeness(base: Mapping[str, Any]) -> _Raw:
    """Share present of run/session/turn/item ids, the terminal and a receipt per call.

    With ``trace.wireEvents`` the PRP events supply those (``traceEvidenceFromPrpEvents``),
    receipts must match the observed calls one to one, and a terminal stop reason, if any,
    must be a valid receipt.
    """
    observed_calls: list[str] = base["observedCalls"]
    trace = base["trace"]
    wire = None if "wireEvents" not in trace else _trace_from_prp_events(trace["wireEvents"], observed_calls)
    evidence = trace if wire is None else wire
    receipt_ids = evidence["receiptIds"]
    receipts_complete = (
        len(receipt_ids) >= len(observed_calls)
        and all(len(receipt_id) > 0 for receipt_id in receipt_ids)
        and (wire is None or wire["semanticReceiptsMatchCalls"])
    )
    checks = [
        ("runId", _js_truthy(evidence.get("runId", UNDEFINED))),
        ("sessionId", _js_truthy(evidence.get("sessionId", UNDEFINED))),
        ("turnId", _js_truthy(evidence.get("turnId", UNDEFINED))),
        ("itemId", _js_truthy(evidence.get("itemId", UNDEFINED))),
        ("terminal", bool(evidence["terminalPresent"])),
        ("receipt-per-call", receipts_complete),
    ]
    if wire is not None and wire["stopReasonPresent"]:
        checks.append(("stop-reason-receipt", wire["stopReasonReceiptValid"]))
    reasons = [f"trace missing {label}" for label, present in checks if not present]
    present_count = sum(1 for _, present in checks if present)
    return _clamp01(present_count / len(checks)), reasons


def _quality_efficiency(base: Mapping[str, Any]) -> _Raw:
    """Share of declared budget limits met; an unobserved quantity counts as a miss."""
    budget = base.get("budget")
    if not budget:
        return 1.0, ["no efficiency budget declared"]
    efficiency = base.get("efficiency") or {}
    limits = [
        ("latencyMs", "maxLatencyMs"),
        ("totalTokens", "maxTotalTokens"),
        ("costUsd", "maxCostUsd"),
        ("attempts", "maxAttempts"),
    ]
    declared = [(label, efficiency.get(label), budget[limit_key]) for label, limit_key in limits if limit_key in budget]
    if not declared:
        return 1.0, ["no efficiency budget declared"]
    reasons = []
    within = 0
    for label, observed, limit in declared:
        if observed is None:  # absent (the schema allows no null)
            reasons.append(f"no observed {label} to check against budget")
        elif float(observed) <= float(limit):
            within += 1
        else:
            # float(): JavaScript holds every number as a double, even a huge integer.
            reasons.append(f"{label} {js_number(float(observed))} exceeds budget {js_number(float(limit))}")
    return _clamp01(within / len(declared)), reasons


# --- trace lineage (traceLineageScore) ----------------------------------------------------


def _check_expected_trace_lists(observation: Mapping[str, Any], expected: Mapping[str, Any] | None) -> None:
    """``ObservationError`` when the case expects dispositions or lineage kinds the trace cannot list.

    The reference reads ``traceLineage.dispositions`` / ``.lineage`` only for such a case (and
    crashes when they are missing there); for the others they are ignored, noted if missing.
    """
    lineage = observation["traceLineage"]
    problems = [
        f"traceLineage.{key} is required: case {observation['caseId']} expects {key}"
        for key in ("dispositions", "lineage")
        if (expected or {}).get(key) and key not in lineage
    ]
    if problems:
        raise ObservationError([*validate_observation(observation), *problems], "observation is invalid: " + "; ".join(problems))


def _trace_lineage(observation: Mapping[str, Any], expected: Mapping[str, Any] | None) -> _Raw:
    """Checks of the provider trace against the case's ``assertions.trace``; share passed."""
    lineage = observation["traceLineage"]
    expected = expected or {}
    capture = expected.get("capture") or "either"
    checks: list[dict[str, Any]] = []
    if capture == "off":
        checks.append(
            {
                "id": "capture-off-isolation",
                "passed": lineage["capture"] == "off"
                and lineage["frameCount"] == 0
                and lineage["byteCount"] == 0
                and "traceRef" not in lineage,
                "reason": "capture-off execution retained provider trace data",
            }
        )
    elif capture == "on" or lineage["capture"] == "on":
        checks.append(
            {
                "id": "capture-present",
                "passed": lineage["capture"] == "on" and lineage["frameCount"] > 0 and lineage["byteCount"] > 0,
                "reason": "provider trace capture is empty",
            }
        )
        checks.append(
            {
                "id": "frame-digests",
                "passed": lineage["digestVerified"],
                "reason": "provider trace frame digest or byte length did not verify",
            }
        )
        checks.append(
            {
                "id": "frame-order",
                "passed": lineage["ordered"],
                "reason": "provider trace frame or debug sequence is not strictly ordered",
            }
        )
    else:
        checks.append({"id": "capture-optional", "passed": True})
    for disposition in expected.get("dispositions") or ():
        checks.append(
            {
                "id": f"disposition-{disposition}",
                "passed": disposition in lineage["dispositions"],
                "reason": f"provider trace did not exercise {disposition} mapping",
            }
        )
    for kind in expected.get("lineage") or ():
        checks.append(
            {
                "id": f"lineage-{kind}",
                "passed": kind in lineage["lineage"],
                "reason": f"provider trace did not exercise {kind} lineage",
            }
        )
    return _checks_score(checks)


# --- PRP wire events (traceEvidenceFromPrpEvents, prpSemanticToolResultReceipts) ----------

_SEMANTIC_TOOL_SCHEMA = "paperclip.prp.semantic_tool.v1"
_STOP_REASON_SCHEMA = "paperclip.prp.stop_reason.v1"


def _trace_from_prp_events(events: Sequence[Mapping[str, Any]], observed_calls: Sequence[str]) -> dict[str, Any]:
    """Trace evidence read from PRP events instead of the flat ``trace`` fields."""
    receipts = [envelope for event in events if (envelope := _semantic_result(event)) is not None]
    receipt_calls = [js_string(receipt.get("operationId", UNDEFINED)) for receipt in receipts]
    matches_calls = len(receipt_calls) == len(observed_calls) and all(
        receipt_calls[index] == call and _non_empty_text(receipts[index].get("operationReceiptId"))
        for index, call in enumerate(observed_calls)
    )
    terminal = next((event for event in events if event.get("eventType") == "run.terminal"), None)
    terminal_payload = _record(terminal.get("payload")) if terminal is not None else None
    stop_reason = _record(terminal_payload.get("stopReason")) if terminal_payload is not None else None
    stop_reason_valid = stop_reason is None or (
        stop_reason.get("schema") == _STOP_REASON_SCHEMA
        and _is_js_one(stop_reason.get("schemaVersion"))
        and _non_empty_text(stop_reason.get("receiptId"))
        and _non_empty_text(stop_reason.get("decisionId"))
    )
    correlated = next((event for event in events if event.get("eventType") == "mcp_app.tool_result"), None)
    if correlated is None:
        correlated = next((event for event in events if "turnId" in event), None)
    correlated = correlated or {}
    return {
        "runId": events[0].get("runId", UNDEFINED) if events else UNDEFINED,
        "sessionId": correlated.get("normalizedSessionId", UNDEFINED),
        "turnId": correlated.get("turnId", UNDEFINED),
        "itemId": correlated.get("itemId", UNDEFINED),
        "receiptIds": [receipt["operationReceiptId"] for receipt in receipts if isinstance(receipt.get("operationReceiptId"), str)],
        "terminalPresent": terminal is not None,
        "semanticReceiptsMatchCalls": matches_calls,
        "stopReasonPresent": stop_reason is not None,
        "stopReasonReceiptValid": stop_reason_valid,
    }


def _semantic_result(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The semantic tool result envelope an ``mcp_app.tool_result`` event carries, if any."""
    if event.get("eventType") != "mcp_app.tool_result":
        return None
    payload = _record(event.get("payload"))
    envelope = _record(payload.get("semantic_tool")) if payload is not None else None
    if (
        envelope is None
        or envelope.get("schema") != _SEMANTIC_TOOL_SCHEMA
        or not _is_js_one(envelope.get("schemaVersion"))
        or envelope.get("phase") != "result"
    ):
        return None
    return envelope


def _record(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _is_js_one(value: Any) -> bool:
    """``value === 1`` in JavaScript: the number one (``1`` or ``1.0``), never ``true``."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value == 1


def _non_empty_text(value: Any) -> bool:
    return isinstance(value, str) and len(value) > 0


def _js_truthy(value: Any) -> bool:
    """JavaScript's ``Boolean(value)`` for a JSON value: empty arrays and objects are true."""
    if value is UNDEFINED or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == value and value != 0  # NaN and 0 are false
    if isinstance(value, str):
        return value != ""
    return True
