"""Observation documents evalhub builds itself (pure: no ORM, no clock, no environment).

``paperclip.runner.workflow-observation.v1`` is the reference schema. The
unscored shape below is the reference's, used for executions that never produced evidence:
skipped (qualification, cost ceiling) and infrastructure failures (as the reference nightly script records them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

OBSERVATION_SCHEMA = "paperclip.runner.workflow-observation.v1"
CLASSIFICATIONS = ("completed", "candidate_failure", "infrastructure_failure", "skipped")
FAILURE_CATEGORIES = ("candidate", "provider", "qualification", "orchestration")


def provenance(case_id: str, *, scripted: bool = False) -> dict[str, str]:
    """An observation's ``base.provenance``: ``{source: "live_model", behavior: <case>}`` for a
    measurement (the reference's), and for a run against evalhub's scripted model the
    reference's ``fixture`` source — the model's side was a fixed script, not a live model —
    with ``behavior`` ``scripted-model:<case>``, so the observation itself says it is scripted."""
    if scripted:
        return {"source": "fixture", "behavior": f"{SCRIPTED_BEHAVIOR_PREFIX}{case_id}"}
    return {"source": "live_model", "behavior": case_id}


#: ``base.provenance.behavior`` of a scripted observation starts with this.
SCRIPTED_BEHAVIOR_PREFIX = "scripted-model:"


def unavailable_observation(
    *,
    case: Mapping[str, Any],
    candidate: Mapping[str, Any],
    classification: str,
    code: str,
    category: str,
    retryable: bool,
    message: str,
    scripted: bool = False,
) -> dict[str, Any]:
    """The reference's unscored observation for an execution that produced no evidence.

    ``case`` is a workflow case document (``id``, ``assertions``), ``candidate`` a candidate
    document (``id``, ``provider``, ``budget``). ``classification`` is ``skipped`` or
    ``infrastructure_failure``; ``message`` must already be redacted. Each check group holds one
    failing ``execution-unavailable`` check whose reason is the message; metrics are all zero.
    ``scripted``: the execution ran against evalhub's scripted model (see :func:`provenance`).
    Raises ``ValueError`` for any other classification or an unknown category.
    """
    if classification not in {"skipped", "infrastructure_failure"}:
        raise ValueError(f"an unavailable execution is skipped or an infrastructure failure, not {classification!r}")
    if category not in FAILURE_CATEGORIES:
        raise ValueError(f"unknown failure category {category!r}")
    check = {"id": "execution-unavailable", "passed": False, "reason": message}
    case_id = case["id"]
    return {
        "schema": OBSERVATION_SCHEMA,
        "caseId": case_id,
        "candidateId": candidate["id"],
        "provider": candidate["provider"],
        "classification": classification,
        "base": {
            "caseId": case_id,
            "provenance": provenance(case_id, scripted=scripted),
            "controlPlaneOwned": False,
            "expectedCalls": list(case.get("assertions", {}).get("requiredOperationIds", [])),
            "observedCalls": [],
            "forbiddenCalls": [],
            "finalState": {"expected": "mutated", "observed": "unchanged"},
            "authorization": {"expected": "allowed", "observed": "absent"},
            "trace": {"receiptIds": [], "terminalPresent": False},
            "efficiency": {"latencyMs": 0, "totalTokens": 0, "costUsd": 0, "attempts": 0},
            "budget": dict(candidate["budget"]),
        },
        "lifecycle": {"checks": [dict(check)], "attempts": 0, "runs": 0, "recoveryOwner": "none"},
        "continuation": {"checks": [dict(check)]},
        "presentation": {"checks": [dict(check)], "responseSource": "none", "commentCount": 0},
        "traceLineage": {
            "capture": "off",
            "frameCount": 0,
            "byteCount": 0,
            "digestVerified": False,
            "ordered": False,
            "dispositions": [],
            "lineage": [],
        },
        "metrics": {
            "timeToFirstVisibleProgressMs": 0,
            "settlementMs": 0,
            "attempts": 0,
            "toolCount": 0,
            "totalTokens": 0,
            "costUsd": 0,
        },
        "observedPrpEventTypes": [],
        "artifactDigests": [],
        "failure": {"code": code, "category": category, "retryable": retryable, "message": message},
    }


def missing_environment_message(names: list[str]) -> str:
    """The reference's qualification message, naming the variables (never their values)."""
    return f"required qualification environment is missing: {', '.join(names)}"


def finite_json(value: Any) -> Any:
    """A copy of JSON-like ``value`` with every NaN or infinite float replaced by ``None``.

    Executors compute metrics (cost per token with no tokens, a latency that never ended) that
    come out non-finite; JSON has no such numbers, SQLite's ``JSON_VALID`` and PostgreSQL's
    ``jsonb`` both refuse them, and the API could not render them (docs/failure-modes.md B9).
    Tuples become lists; other values are returned unchanged.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(child) for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(child) for child in value]
    return value


def observation_problems(observation: Any) -> list[str]:
    """Minimal structural checks on an observation an executor returned (empty when usable).

    The full reference schema validation arrives with scoring; until then evalhub refuses to
    store a document without the fields the run pages and cost accounting read.
    """
    if not isinstance(observation, dict):
        return ["observation must be a JSON object"]
    try:
        json.dumps(observation)
    except (TypeError, ValueError):  # a set, a datetime, an object, a reference cycle
        return ["observation must hold only JSON values (objects, lists, text, numbers, true, false, null)"]
    problems = []
    if observation.get("schema") != OBSERVATION_SCHEMA:
        problems.append(f"observation schema must be {OBSERVATION_SCHEMA}")
    if observation.get("classification") not in CLASSIFICATIONS:
        problems.append(f"classification must be one of {', '.join(CLASSIFICATIONS)}")
    if not isinstance(observation.get("metrics"), dict):
        problems.append("metrics must be an object")
    failure = observation.get("failure")
    if observation.get("classification") in {"skipped", "infrastructure_failure"} and not isinstance(failure, dict):
        problems.append("skipped and infrastructure_failure observations require failure metadata")
    if failure is not None and not isinstance(failure, dict):
        problems.append("failure must be an object")
    return problems
