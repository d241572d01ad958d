"""The reference observation schema and the validation every observation passes before it is stored.

Pure: no ORM, no clock, no environment; the one state it keeps is the JSON texts of documents found
valid in this process (``remember_valid_observation``), a verdict by content.

An observation (``paperclip.runner.workflow-observation.v1``, the reference schema) is checked in two
ways that agree on what is invalid:

* ``validate_observation`` lists *every* problem, in evalhub's words, each naming the field
  (``"lifecycle.checks must have at least 1 item"``). It applies ``OBSERVATION_JSON_SCHEMA`` (the
  reference's ``runner-workflow-observation.v1.schema.json``, as data),
  ``BASE_OBSERVATION_JSON_SCHEMA`` (the legacy ``base`` observation, which the reference schema
  only calls an object) and the reference rules a JSON schema cannot say (blank identifiers,
  duplicate check ids, secret-shaped failure messages). Messages never echo a field's value
  (only repeated check ids are named), so a secret in a wrong place is not copied into an error.
* ``reference_validation_error`` gives the one message the reference's
  ``assertRunnerWorkflowObservation`` (workflow-contracts.ts) throws: its *first* failed rule,
  in its order and its exact words (``"rich-activity presentation checks must be non-empty and
  unique"``). Tools written for the reference compare these texts.

Scoring refuses less than ``validate_observation`` lists, because the reference scorer refuses
less: ``scoring_problems`` keeps only what stops a document from being scored (the reference's
own rules, fields the scorer reads in a shape it cannot use, values JSON cannot hold). The rest
(a missing ``metrics``, an unknown ``provider``, a check id that is empty...) the reference
scores without reading, so ``check_observation`` accepts the document and returns a note for
each; docs/scoring.md lists every rule. ``check_observation`` raises ``ObservationError``
carrying the reference message when the reference rejects the document (else a summary of the
blocking problems) and the full problem list.

Where stored observations are written (runs/stored_observations.py) the full ``validate_observation`` still
applies: evalhub's own executors always produce complete documents. ``base`` must have the
shape of the legacy observation (the reference's ``EvalObservation`` type) and numbers must be
finite: scoring reads those fields, and where a missing or mistyped one would make the
reference crash with a ``TypeError`` (or count a ``runId`` of ``5`` as a present id), evalhub
says which field is wrong instead. Every document the reference rejects is rejected here too.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator, ValidationError

from evalhub.jsnum import js_number
from runs.evaluation.observations import CLASSIFICATIONS, FAILURE_CATEGORIES, OBSERVATION_SCHEMA

WORKFLOW_CASE_IDS = (
    "final-response",
    "rich-activity",
    "verification-policy",
    "governed-interaction",
    "steering-causality",
    "planning-lifecycle",
    "review-lifecycle",
    "delegation-return",
    "completion-robustness",
    "restart-recovery",
    "cancellation-permissions",
    "trace-lineage",
)
PROVIDERS = ("codex", "opencode", "acpx")
UNSCOREABLE_CLASSIFICATIONS = ("infrastructure_failure", "skipped")
CHECK_GROUPS = ("lifecycle", "continuation", "presentation")

_STRINGS = {"type": "array", "items": {"type": "string"}}

# The reference's spec/evals/schemas/runner-workflow-observation.v1.schema.json, unchanged.
OBSERVATION_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://paperclip.dev/schemas/runner-workflow-observation.v1.schema.json",
    "title": "RunnerWorkflowObservation v1",
    "type": "object",
    "required": [
        "schema",
        "caseId",
        "candidateId",
        "provider",
        "classification",
        "base",
        "lifecycle",
        "continuation",
        "presentation",
        "traceLineage",
        "metrics",
        "observedPrpEventTypes",
        "artifactDigests",
    ],
    "properties": {
        "schema": {"const": OBSERVATION_SCHEMA},
        "caseId": {"enum": list(WORKFLOW_CASE_IDS)},
        "candidateId": {"type": "string", "minLength": 1},
        "provider": {"enum": list(PROVIDERS)},
        "classification": {"enum": list(CLASSIFICATIONS)},
        "base": {"type": "object"},
        "lifecycle": {"$ref": "#/$defs/evidence"},
        "continuation": {"$ref": "#/$defs/evidence"},
        "presentation": {"$ref": "#/$defs/evidence"},
        "traceLineage": {
            "type": "object",
            "required": ["capture", "frameCount", "byteCount", "digestVerified", "ordered", "dispositions", "lineage"],
            "properties": {
                "capture": {"enum": ["on", "off"]},
                "frameCount": {"type": "integer", "minimum": 0},
                "byteCount": {"type": "integer", "minimum": 0},
                "digestVerified": {"type": "boolean"},
                "ordered": {"type": "boolean"},
                "dispositions": _STRINGS,
                "lineage": _STRINGS,
                "traceRef": {"type": "string"},
            },
        },
        "metrics": {
            "type": "object",
            "required": ["attempts", "toolCount"],
            "properties": {
                "timeToFirstVisibleProgressMs": {"type": "number", "minimum": 0},
                "settlementMs": {"type": "number", "minimum": 0},
                "attempts": {"type": "integer", "minimum": 0},
                "toolCount": {"type": "integer", "minimum": 0},
                "totalTokens": {"type": "number", "minimum": 0},
                "costUsd": {"type": "number", "minimum": 0},
            },
        },
        "observedPrpEventTypes": _STRINGS,
        "artifactDigests": _STRINGS,
        "failure": {
            "type": "object",
            "required": ["code", "category", "retryable", "message"],
            "properties": {
                "code": {"type": "string", "minLength": 1},
                "category": {"enum": list(FAILURE_CATEGORIES)},
                "retryable": {"type": "boolean"},
                "message": {"type": "string"},
            },
        },
    },
    "allOf": [
        {
            "if": {
                "properties": {"classification": {"enum": list(UNSCOREABLE_CLASSIFICATIONS)}},
                "required": ["classification"],
            },
            "then": {"required": ["failure"]},
        }
    ],
    "$defs": {
        "check": {
            "type": "object",
            "required": ["id", "passed"],
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "passed": {"type": "boolean"},
                "reason": {"type": "string"},
                "evidenceIds": _STRINGS,
            },
        },
        "evidence": {
            "type": "object",
            "required": ["checks"],
            "properties": {"checks": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/check"}}},
        },
    },
}

_LIMITS = {"type": "number"}

# evalhub's schema for ``base``: the reference's EvalObservation type (eval-scoring.ts) as JSON.
BASE_OBSERVATION_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "EvalObservation (the legacy observation in an observation's base)",
    "type": "object",
    "required": [
        "caseId",
        "controlPlaneOwned",
        "expectedCalls",
        "observedCalls",
        "forbiddenCalls",
        "finalState",
        "authorization",
        "trace",
    ],
    "properties": {
        "caseId": {"type": "string"},
        "provenance": {
            "type": "object",
            "required": ["source"],
            "properties": {
                "source": {"enum": ["live_model", "deterministic_fault_harness", "fixture"]},
                "behavior": {"type": "string"},
                "counterpart": {"enum": ["green", "red"]},
                "faultInjection": {
                    "type": "object",
                    "required": ["id", "class", "evidenceIds"],
                    "properties": {"id": {"type": "string"}, "class": {"type": "string"}, "evidenceIds": _STRINGS},
                },
            },
        },
        "controlPlaneOwned": {"type": "boolean"},
        "expectedCalls": _STRINGS,
        "observedCalls": _STRINGS,
        "forbiddenCalls": _STRINGS,
        "finalState": {
            "type": "object",
            "required": ["expected", "observed"],
            "properties": {
                "expected": {"enum": ["unchanged", "mutated"]},
                "observed": {"enum": ["unchanged", "mutated"]},
            },
        },
        "authorization": {
            "type": "object",
            "required": ["expected", "observed"],
            "properties": {
                "expected": {"enum": ["allowed", "denied", "absent"]},
                "observed": {"enum": ["allowed", "denied", "absent"]},
            },
        },
        "trace": {
            "type": "object",
            "required": ["receiptIds", "terminalPresent"],
            "properties": {
                "runId": {"type": "string"},
                "sessionId": {"type": "string"},
                "turnId": {"type": "string"},
                "itemId": {"type": "string"},
                "receiptIds": _STRINGS,
                "terminalPresent": {"type": "boolean"},
                # PRP events; scoring reads a handful of fields and tolerates any others.
                "wireEvents": {"type": "array", "items": {"type": "object"}},
            },
        },
        "efficiency": {
            "type": "object",
            "properties": {"latencyMs": _LIMITS, "totalTokens": _LIMITS, "costUsd": _LIMITS, "attempts": _LIMITS},
        },
        "budget": {
            "type": "object",
            "properties": {
                "maxLatencyMs": _LIMITS,
                "maxTotalTokens": _LIMITS,
                "maxCostUsd": _LIMITS,
                "maxAttempts": _LIMITS,
            },
        },
    },
}

# What the reference scorer itself needs (``scoreRunnerWorkflow`` and ``scoreEval``): the fields it
# reads, in the types its arithmetic and its scorecard need. Everything else the two schemas
# above ask for (provider, metrics, observedPrpEventTypes, artifactDigests, failure's code,
# category and retryable, check evidenceIds, base.caseId and provenance, non-negative integer
# counts, the enums of finalState and authorization) the reference scores without looking at,
# so scoring accepts a document that breaks them and notes each (docs/scoring.md).
_SCORED_CHECK = {
    "type": "object",
    "required": ["id", "passed"],
    # `reason ?? fallback`: a null reason falls back to "check failed: <id>".
    "properties": {"id": {"type": "string"}, "passed": {"type": "boolean"}, "reason": {"type": ["string", "null"]}},
}
_SCORED_EVIDENCE = {
    "type": "object",
    "required": ["checks"],
    "properties": {"checks": {"type": "array", "minItems": 1, "items": _SCORED_CHECK}},
}
SCORED_OBSERVATION_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "What scoring reads of an observation",
    "type": "object",
    "required": [
        "schema",
        "caseId",
        "candidateId",
        "classification",
        "base",
        "lifecycle",
        "continuation",
        "presentation",
        "traceLineage",
    ],
    "properties": {
        "schema": OBSERVATION_JSON_SCHEMA["properties"]["schema"],
        "caseId": OBSERVATION_JSON_SCHEMA["properties"]["caseId"],
        "candidateId": {"type": "string", "minLength": 1},
        # The scorecard repeats it and a report counts by it: it must be one of the four.
        "classification": OBSERVATION_JSON_SCHEMA["properties"]["classification"],
        "base": {"type": "object"},
        "lifecycle": _SCORED_EVIDENCE,
        "continuation": _SCORED_EVIDENCE,
        "presentation": _SCORED_EVIDENCE,
        # dispositions and lineage are read only for a case that expects some (scoring.py checks).
        "traceLineage": {
            "type": "object",
            "required": ["capture", "frameCount", "byteCount", "digestVerified", "ordered"],
            "properties": {
                "capture": {"type": "string"},  # compared with "on" and "off" only
                "frameCount": {"type": "number"},
                "byteCount": {"type": "number"},
                "digestVerified": {"type": "boolean"},
                "ordered": {"type": "boolean"},
                "dispositions": _STRINGS,
                "lineage": _STRINGS,
            },
        },
        # `failure?.message.match(...)`: a null failure is skipped, an object needs a text message.
        "failure": {
            "type": ["object", "null"],
            "if": {"type": "object"},
            "then": {"required": ["message"], "properties": {"message": {"type": "string"}}},
        },
    },
    "allOf": OBSERVATION_JSON_SCHEMA["allOf"],
}
_SCORED_BASE_PROPERTIES = BASE_OBSERVATION_JSON_SCHEMA["properties"]
_STATE_PAIR = {
    "type": "object",
    "required": ["expected", "observed"],
    "properties": {"expected": {"type": "string"}, "observed": {"type": "string"}},
}
SCORED_BASE_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "What scoring reads of an observation's base",
    "type": "object",
    "required": [
        "controlPlaneOwned",
        "expectedCalls",
        "observedCalls",
        "forbiddenCalls",
        "finalState",
        "authorization",
        "trace",
    ],
    "properties": {
        **{
            name: _SCORED_BASE_PROPERTIES[name]
            for name in ("controlPlaneOwned", "expectedCalls", "observedCalls", "forbiddenCalls", "trace", "efficiency", "budget")
        },
        "finalState": _STATE_PAIR,
        "authorization": _STATE_PAIR,
    },
}

_OBSERVATION_VALIDATOR = Draft202012Validator(OBSERVATION_JSON_SCHEMA)
_BASE_VALIDATOR = Draft202012Validator(BASE_OBSERVATION_JSON_SCHEMA)
_SCORED_VALIDATOR = Draft202012Validator(SCORED_OBSERVATION_JSON_SCHEMA)
_SCORED_BASE_VALIDATOR = Draft202012Validator(SCORED_BASE_JSON_SCHEMA)
# The same two schemas compiled to Python code: a yes/no answer some 40 times faster than walking
# them with jsonschema, asked first. Only a document they refuse is walked again to list every
# problem in evalhub's words, so the messages stay jsonschema's. They are only trusted on plain
# JSON values (they read a tuple as an array; ``_non_json_problems`` refuses it first).
# The case id is left to Python there (``in`` the catalog given): a catalog stored in the database
# names cases of its own, and recompiling per catalog would cost more than the check saves.
_OBSERVATION_ACCEPTS = fastjsonschema.compile(
    {**OBSERVATION_JSON_SCHEMA, "properties": {**OBSERVATION_JSON_SCHEMA["properties"], "caseId": {}}}
)
_BASE_ACCEPTS = fastjsonschema.compile(BASE_OBSERVATION_JSON_SCHEMA)
# The scorer's two schemas, likewise: a report scores every stored observation of its run, and
# walking them with jsonschema was most of a report's own time.
_SCORED_ACCEPTS = fastjsonschema.compile(
    {**SCORED_OBSERVATION_JSON_SCHEMA, "properties": {**SCORED_OBSERVATION_JSON_SCHEMA["properties"], "caseId": {}}}
)
_SCORED_BASE_ACCEPTS = fastjsonschema.compile(SCORED_BASE_JSON_SCHEMA)

# JavaScript's \s (WhiteSpace and LineTerminator; String.prototype.trim strips the same set).
# The reference regexes have no u flag, so \b is ASCII-only but \s is not: Python needs both.
_JS_SPACE = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))  # U+2000..U+200A
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# /\b(?:sk-[A-Za-z0-9]{16,}|Bearer\s+\S{16,})\b/i from assertRunnerWorkflowObservation.
SECRET_SHAPED_MESSAGE = re.compile(
    rf"\b(?:sk-[A-Za-z0-9]{{16,}}|Bearer[{_JS_SPACE}]+[^{_JS_SPACE}]{{16,}})\b",
    re.ASCII | re.IGNORECASE,
)

_TYPE_WORDS = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


class ObservationError(ValueError):
    """An observation failed validation.

    ``str(error)`` is the reference's message when the reference rejects the document too
    (``reference_validation_error``), otherwise ``"observation is invalid: "`` followed by the
    problems joined with ``"; "``. ``problems`` is the full list from ``validate_observation``.
    """

    def __init__(self, problems: Sequence[str], message: str | None = None) -> None:
        self.problems = list(problems)
        super().__init__(message or "observation is invalid: " + "; ".join(self.problems))


def catalog_case_ids(case_ids: Iterable[str] | None = None) -> tuple[str, ...]:
    """The workflow case ids an observation may name: the reference's twelve, in their order,
    then the other ids of ``case_ids`` (a catalog's own cases), sorted."""
    if case_ids is None:
        return WORKFLOW_CASE_IDS
    extra = sorted({case_id for case_id in case_ids if isinstance(case_id, str)} - set(WORKFLOW_CASE_IDS))
    return (*WORKFLOW_CASE_IDS, *extra) if extra else WORKFLOW_CASE_IDS


@functools.lru_cache(maxsize=64)
def _observation_validator(case_ids: tuple[str, ...]) -> Draft202012Validator:
    """The reference schema's validator with ``caseId`` one of ``case_ids``."""
    if case_ids == WORKFLOW_CASE_IDS:
        return _OBSERVATION_VALIDATOR
    properties = {**OBSERVATION_JSON_SCHEMA["properties"], "caseId": {"enum": list(case_ids)}}
    return Draft202012Validator({**OBSERVATION_JSON_SCHEMA, "properties": properties})


@functools.lru_cache(maxsize=64)
def _scored_validator(case_ids: tuple[str, ...]) -> Draft202012Validator:
    """The scored schema's validator with ``caseId`` one of ``case_ids``."""
    if case_ids == WORKFLOW_CASE_IDS:
        return _SCORED_VALIDATOR
    properties = {**SCORED_OBSERVATION_JSON_SCHEMA["properties"], "caseId": {"enum": list(case_ids)}}
    return Draft202012Validator({**SCORED_OBSERVATION_JSON_SCHEMA, "properties": properties})


def validate_observation(observation: Any, *, case_ids: Iterable[str] | None = None) -> list[str]:
    """Every problem with ``observation`` as a reference observation; empty when it is valid.

    ``observation`` is the parsed JSON document (a dict). Problems come in a fixed order: values
    JSON cannot hold (NaN, infinities, tuples, sets...), then the reference JSON schema, then the
    legacy ``base`` schema, then the reference rules a schema cannot express: a candidateId of
    only whitespace, duplicate check ids in a group, a ``failure.message`` that looks like a
    credential. Each problem names the field by its path (``traceLineage.frameCount``,
    ``presentation.checks[1].id``) and never quotes the value. Never raises.

    ``case_ids``: the workflow cases of the catalog the observation comes from, besides the
    reference's twelve (which are always known; see :func:`catalog_case_ids`).
    """
    if not isinstance(observation, dict):
        return ["observation must be a JSON object"]
    return _validation_problems(observation, catalog_case_ids(case_ids), _non_json_list(observation), list(_rule_problems(observation)))


def validate_plain_observation(observation: dict[str, Any], *, case_ids: Iterable[str] | None = None) -> list[str]:
    """:func:`validate_observation` of a document the caller built of plain JSON values only —
    dicts with text keys, lists, text, booleans, None, finite floats and ints within ±1e308, the
    exact types (what the orchestration's stored form is made of, ``runs.stored_observations.stored_form``)
    — without walking it again to find that out. The same problems, in the same order, as
    :func:`validate_observation` for such a document."""
    return _validation_problems(observation, catalog_case_ids(case_ids), [], list(_rule_problems(observation)))


def _validation_problems(observation: dict[str, Any], known: tuple[str, ...], non_json: list[str], rules: list[str]) -> list[str]:
    """:func:`validate_observation` of a dict, given its :func:`_non_json_list` and :func:`_rule_problems`."""
    problems = list(non_json)
    base = observation.get("base")
    if problems or not _schemas_accept(observation, known):
        problems.extend(_schema_problems(_observation_validator(known), observation, ""))
        if isinstance(base, dict):
            problems.extend(_schema_problems(_BASE_VALIDATOR, base, "base"))
    problems.extend(rules)
    return problems


def _schemas_accept(observation: dict[str, Any], case_ids: tuple[str, ...]) -> bool:
    """Whether both compiled schemas accept ``observation`` (plain JSON values only) and its
    case id is one of ``case_ids``."""
    if not isinstance(observation.get("caseId"), str) or observation["caseId"] not in case_ids:
        return False
    try:
        _OBSERVATION_ACCEPTS(observation)
        # The reference schema requires ``base`` to be an object; the base schema reads it then.
        _BASE_ACCEPTS(observation["base"])
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def reference_validation_error(observation: Any, *, case_ids: Iterable[str] | None = None) -> str | None:
    """The message the reference's ``assertRunnerWorkflowObservation`` throws, or ``None``.

    Follows workflow-contracts.ts rule by rule, in its order, and stops at the first failure:
    unsupported schema (``"unsupported workflow observation schema for <caseId>"``, the caseId
    printed as JavaScript would, ``undefined`` when missing); unknown caseId or a candidateId
    that is empty after JavaScript's ``trim()`` (``"workflow observation identity is invalid"``);
    an empty lifecycle, continuation or presentation check list or one with a repeated id
    (``"<caseId> <group> checks must be non-empty and unique"``); ``infrastructure_failure`` or
    ``skipped`` without a ``failure`` key (``"<caseId> <classification> requires failure
    metadata"``); a ``failure.message`` matching the reference's secret regex (``"<caseId>
    failure metadata contains secret-shaped data"``).

    The reference checks nothing else (no types, no metrics): a document it accepts may still
    have problems in ``validate_observation``. Where the reference would crash with a
    ``TypeError`` reading a malformed field, the rule reading it fails when its message still
    describes the document (a candidateId that is not text is an invalid identity; a check list
    that is not a list is not a non-empty unique list) and is skipped otherwise (a failure
    message that is not text is not secret-shaped).

    ``case_ids``: the catalog's own cases, known besides the reference's (:func:`catalog_case_ids`).
    """
    if not isinstance(observation, dict):
        # value.schema of a non-object is undefined (null crashes): the schema is unsupported.
        return "unsupported workflow observation schema for undefined"
    case_text = js_string(observation.get("caseId", UNDEFINED))
    if observation.get("schema") != OBSERVATION_SCHEMA:
        return f"unsupported workflow observation schema for {case_text}"
    candidate_id = observation.get("candidateId")
    case_id = observation.get("caseId")
    if (
        not isinstance(case_id, str)
        or case_id not in catalog_case_ids(case_ids)
        or not isinstance(candidate_id, str)
        or js_trim(candidate_id) == ""
    ):
        return "workflow observation identity is invalid"
    for group in CHECK_GROUPS:
        evidence = observation.get(group)
        checks = evidence.get("checks") if isinstance(evidence, dict) else None
        if not isinstance(checks, list) or not checks or not _js_unique(checks):
            return f"{case_text} {group} checks must be non-empty and unique"
    classification = observation.get("classification")
    if classification in UNSCOREABLE_CLASSIFICATIONS and "failure" not in observation:
        return f"{case_text} {classification} requires failure metadata"
    failure = observation.get("failure")
    message = failure.get("message") if isinstance(failure, dict) else None
    if isinstance(message, str) and SECRET_SHAPED_MESSAGE.search(message):
        return f"{case_text} failure metadata contains secret-shaped data"
    return None


def scoring_problems(observation: Any, *, case_ids: Iterable[str] | None = None) -> list[str]:
    """The problems that stop ``observation`` from being scored; empty when it can be.

    Those are: values JSON cannot hold, what the reference's ``assertRunnerWorkflowObservation``
    refuses (schema, identity, check lists, failure metadata, secret-shaped messages) and what
    the reference scorer reads but could not score or put in a scorecard (``base``'s calls,
    states and trace, the trace lineage, check verdicts and reasons, the classification). Same
    wording and order as ``validate_observation``, whose problems are a superset. Never raises.
    ``case_ids``: the catalog's own cases (see :func:`validate_observation`).
    """
    if not isinstance(observation, dict):
        return ["observation must be a JSON object"]
    return _scoring_problems(observation, catalog_case_ids(case_ids), _non_json_list(observation), list(_rule_problems(observation)))


def _scoring_problems(observation: dict[str, Any], known: tuple[str, ...], non_json: list[str], rules: list[str]) -> list[str]:
    """:func:`scoring_problems` of a dict, given its :func:`_non_json_list` and :func:`_rule_problems`."""
    problems = list(non_json)
    if problems or not _scored_schemas_accept(observation, known):
        problems.extend(_schema_problems(_scored_validator(known), observation, ""))
        base = observation.get("base")
        if isinstance(base, dict):
            problems.extend(_schema_problems(_SCORED_BASE_VALIDATOR, base, "base"))
    problems.extend(rules)
    return problems


def _scored_schemas_accept(observation: dict[str, Any], case_ids: tuple[str, ...]) -> bool:
    """Whether both compiled scored schemas accept ``observation`` (plain JSON values only) and
    its case id is one of ``case_ids`` (as :func:`_schemas_accept` for the reference schemas)."""
    if not isinstance(observation.get("caseId"), str) or observation["caseId"] not in case_ids:
        return False
    try:
        _SCORED_ACCEPTS(observation)
        base = observation.get("base")
        if isinstance(base, dict):
            _SCORED_BASE_ACCEPTS(base)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


IGNORED_NOTE_PREFIX = "accepted as the reference scorer accepts it: "


def check_observation(observation: Any, *, case_ids: Iterable[str] | None = None) -> list[str]:
    """Raise ``ObservationError`` if ``observation`` cannot be scored; else the notes on it.

    Refused (``scoring_problems`` not empty): the error's message is
    ``reference_validation_error(observation)`` when the reference refuses the document too (so
    it equals the reference's error text), else ``"observation is invalid: "`` and the blocking
    problems; its ``problems`` are every problem of ``validate_observation`` followed by any
    blocking one worded differently there.

    Accepted: returns one note per ``validate_observation`` problem that the reference scorer
    ignores (``"accepted as the reference scorer accepts it: metrics is required"``), in order,
    possibly none. The document is not modified. ``case_ids``: the catalog's own cases (see
    :func:`validate_observation`).
    """
    if isinstance(observation, dict):
        # Both lists start from one walk of the document and one pass of the rules.
        known = catalog_case_ids(case_ids)
        non_json, rules = _non_json_list(observation), list(_rule_problems(observation))
        blocking = _scoring_problems(observation, known, non_json, rules)
        every = _validation_problems(observation, known, non_json, rules)
    else:
        blocking = scoring_problems(observation, case_ids=case_ids)
        every = validate_observation(observation, case_ids=case_ids)
    if blocking:
        problems = every + [problem for problem in blocking if problem not in every]
        summary = "observation is invalid: " + "; ".join(blocking)
        raise ObservationError(problems, reference_validation_error(observation, case_ids=case_ids) or summary)
    return [IGNORED_NOTE_PREFIX + problem for problem in every]


# The JSON texts of documents ``validate_observation`` found nothing wrong with in this process
# (:func:`remember_valid_observation`), oldest first, at most ``_VALID_TEXTS_KEPT``: a verdict
# kept by the document's content, so a document changed since (by anyone) is checked again.
_VALID_TEXTS: dict[str, None] = {}
_VALID_TEXTS_KEPT = 1024
_VALID_TEXTS_LOCK = threading.Lock()


def _json_text(observation: Any) -> str | None:
    try:
        return json.dumps(observation, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None


def remember_valid_observation(observation: dict[str, Any]) -> str | None:
    """Remember, by its JSON text, that ``validate_observation`` found no problem with
    ``observation`` (call only then: the caller has just checked it), for
    :func:`check_decoded_observation` of the same document read back from its row. Returns that
    text (``json.dumps`` with ``ensure_ascii=False, allow_nan=False``), or None when the document
    has none and nothing was remembered."""
    text = _json_text(observation)
    if text is None:
        return None
    with _VALID_TEXTS_LOCK:
        _VALID_TEXTS.pop(text, None)
        _VALID_TEXTS[text] = None
        while len(_VALID_TEXTS) > _VALID_TEXTS_KEPT:
            del _VALID_TEXTS[next(iter(_VALID_TEXTS))]
    return text


def check_decoded_observation(observation: Any, *, case_ids: Iterable[str] | None = None, text: str | None = None) -> list[str]:
    """:func:`check_observation` of a document just decoded from JSON text (a stored row's
    column: plain JSON values only), answered without checking it again when the very same
    document — the same JSON text, key order and value types included — was found valid in
    this process (:func:`remember_valid_observation`) and its case id is one of ``case_ids``'s:
    a document with no ``validate_observation`` problem has no scoring problem either (those are
    a subset) and no note. Anything else is checked in full.

    Only for decoded documents: a tuple or a non-string key has the JSON text of a list or a
    string key and is not valid, so an in-memory document goes to :func:`check_observation`.

    ``text``: the JSON text ``observation`` was decoded from (a row's column, read beside it), so
    the document need not be encoded again to be looked up; a text not remembered (a row written
    by another encoder, or changed since) is not a verdict: the document's own text is looked up
    as without it."""
    if isinstance(observation, dict) and observation.get("caseId") in catalog_case_ids(case_ids):
        if text is not None and text in _VALID_TEXTS:
            return []
        text = _json_text(observation)
        if text is not None and text in _VALID_TEXTS:
            return []
    return check_observation(observation, case_ids=case_ids)


class _Undefined:
    """JavaScript's ``undefined``: a key that is absent (as opposed to ``null``)."""

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for a JSON value (as a template literal prints it).

    ``UNDEFINED`` -> ``"undefined"``, ``None`` -> ``"null"``, booleans -> ``"true"``/``"false"``,
    numbers as ``Number::toString`` (``1.0`` -> ``"1"``), arrays joined with ``","`` (null
    elements print empty), objects -> ``"[object Object]"``. The reference interpolates document
    values this way into its messages.
    """
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join("" if item is None or item is UNDEFINED else js_string(item) for item in value)
    return "[object Object]"


def js_trim(text: str) -> str:
    """JavaScript's ``String.prototype.trim``: strips JS whitespace, which differs from
    ``str.strip`` (JS strips U+FEFF; Python also strips U+001C..U+001F and U+0085)."""
    return text.strip(_JS_SPACE)


def _js_unique(checks: list[Any]) -> bool:
    """``new Set(checks.map((check) => check.id)).size === checks.length``.

    A ``Set`` compares with SameValueZero: ``"1"`` and ``1`` differ, missing ids are all the
    same ``undefined``, two objects are never equal.
    """
    keys = set()
    for check in checks:
        if not isinstance(check, dict):
            return False  # the reference's check.id on null crashes; a non-object is no check
        keys.add(_same_value_zero_key(check.get("id", UNDEFINED)))
    return len(keys) == len(checks)


def _same_value_zero_key(value: Any) -> tuple[str, Any]:
    if value is UNDEFINED:
        return ("undefined", None)
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, (int, float)):
        number = float(value)
        return ("number", "NaN" if math.isnan(number) else number)  # -0.0 == 0.0 already
    if isinstance(value, str):
        return ("string", value)
    return ("object", id(value))


#: The largest integer a JSON number may be here (a larger one is not a finite double).
MAX_JSON_INTEGER = int(1e308)


def _non_json_list(value: Any) -> list[str]:
    """:func:`_non_json_problems` of a whole document, as a list: a document of plain JSON values
    (every stored one) is recognised by one quick walk, and only another is walked for messages."""
    return [] if _plain_json(value) else list(_non_json_problems(value, ""))


def _plain_json(value: Any) -> bool:
    """Whether ``value`` holds only what :func:`_non_json_problems` accepts (no messages built)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is dict:
        return all(type(key) is str and _plain_json(child) for key, child in value.items())
    if kind is list:
        return all(_plain_json(child) for child in value)
    if kind is int:
        return abs(value) <= MAX_JSON_INTEGER
    if kind is float:
        return math.isfinite(value)
    return False  # subclasses and other types: the full walk decides (and words it)


def _non_json_problems(value: Any, path: str) -> Iterator[str]:
    """Values a JSON document cannot hold: non-finite numbers, non-text keys, other types."""
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                yield f"{_label(path)} has a key that is not text"
                continue
            yield from _non_json_problems(child, _join(path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _non_json_problems(child, f"{path}[{index}]")
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield f"{_label(path)} must be a finite number"
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_JSON_INTEGER:
        # JSON numbers are doubles in the reference: a bigger integer cannot be scored (float() overflows).
        yield f"{_label(path)} is too large: numbers must fit a double (at most 1e308)"
    elif value is not None and not isinstance(value, (str, int)):  # bool is an int
        yield f"{_label(path)} is not a JSON value"


def _schema_problems(validator: Draft202012Validator, instance: Any, prefix: str) -> Iterator[str]:
    reported_required: set[tuple[Any, ...]] = set()
    for error in validator.iter_errors(instance):
        path = _error_path(error, prefix)
        if error.validator == "required":
            # jsonschema reports one error per missing property; report each property once.
            key = (path, tuple(error.schema_path))
            if key in reported_required:
                continue
            reported_required.add(key)
            conditional = "then" in error.schema_path
            for name in error.validator_value:
                if isinstance(error.instance, dict) and name not in error.instance:
                    when = " when classification is infrastructure_failure or skipped" if conditional else ""
                    yield f"{_join(path, name)} is required{when}"
        else:
            yield _describe(error, path)


def _describe(error: ValidationError, path: str) -> str:
    label = _label(path)
    value = error.validator_value
    if error.validator == "type":
        types = [value] if isinstance(value, str) else list(value)
        return f"{label} must be " + " or ".join(_TYPE_WORDS.get(name, name) for name in types)
    if error.validator == "enum":
        return f"{label} must be one of: " + ", ".join(js_string(option) for option in value)
    if error.validator == "const":
        return f"{label} must be {js_string(value)}"
    if error.validator == "minLength":
        return f"{label} must not be empty"
    if error.validator == "minItems":
        return f"{label} must have at least {value} item" + ("" if value == 1 else "s")
    if error.validator == "minimum":
        return f"{label} must be at least {js_number(value)}"
    return f"{label} is invalid ({error.validator})"


def _rule_problems(observation: dict[str, Any]) -> Iterator[str]:
    """The reference rules that the JSON schema does not express."""
    candidate_id = observation.get("candidateId")
    if isinstance(candidate_id, str) and candidate_id and js_trim(candidate_id) == "":
        yield "candidateId must not be blank"
    for group in CHECK_GROUPS:
        evidence = observation.get(group)
        checks = evidence.get("checks") if isinstance(evidence, dict) else None
        if not isinstance(checks, list):
            continue
        # Only text ids can repeat in the reference's sense (a list or object id is a schema problem).
        counts = Counter(check.get("id") for check in checks if isinstance(check, dict) and isinstance(check.get("id"), str))
        repeated = [check_id for check_id, count in counts.items() if count > 1]
        if repeated:
            yield f"{group}.checks has repeated ids: " + ", ".join(repeated)
    failure = observation.get("failure")
    message = failure.get("message") if isinstance(failure, dict) else None
    if isinstance(message, str) and SECRET_SHAPED_MESSAGE.search(message):
        yield "failure.message contains secret-shaped data (an API key or bearer token); redact it"


def _error_path(error: ValidationError, prefix: str) -> str:
    path = prefix
    for part in error.absolute_path:
        path = f"{path}[{part}]" if isinstance(part, int) else _join(path, part)
    return path


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _label(path: str) -> str:
    return path or "observation"
