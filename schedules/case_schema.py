"""The JSON schema of a workflow case's ``steps`` and ``assertions`` (the reference workflow case schema).

Pure data plus one function: no ORM. ``WorkflowCase.clean()`` runs :func:`case_problems` so the
admin, the API and manifest loading reject the same things with the same words.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

STEP_PARAMETERS: dict[str, dict[str, Any]] = {
    "run_start": {"taskMode": {"enum": ["ask", "execute", "plan"]}},
    "interaction_response": {
        "interaction": {"enum": ["questions", "suggest_tasks", "checkbox", "item_verdicts"]},
        "partial": {"type": "boolean"},
    },
    "steer": {"delivery": {"enum": ["queued", "active_turn"]}, "duplicate": {"type": "boolean"}},
    "review_decision": {"decision": {"enum": ["approve", "reject"]}},
    "permission_decision": {"decision": {"enum": ["allow_once", "accept_for_session", "deny"]}},
    "cancel": {"actor": {"enum": ["operator", "control_plane"]}},
    "process_restart": {"phase": {"enum": ["provider_turn", "semantic_result", "finalization"]}},
    "child_completion": {"childProvider": {"enum": ["codex", "opencode", "acpx"]}},
}
REQUIRED_STEP_PARAMETER = {
    "run_start": "taskMode",
    "interaction_response": "interaction",
    "steer": "delivery",
    "review_decision": "decision",
    "permission_decision": "decision",
    "cancel": "actor",
    "process_restart": "phase",
    "child_completion": "childProvider",
}
STEP_KINDS = tuple(STEP_PARAMETERS)

_string_list = {"type": "array", "items": {"type": "string", "minLength": 1}}
_unique_string_list = {**_string_list, "uniqueItems": True}

ASSERTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "issueStatus": {"enum": ["todo", "in_progress", "blocked", "in_review", "done", "cancelled"]},
        "runStatus": {"enum": ["succeeded", "failed", "cancelled", "yielded"]},
        "semanticDisposition": {"enum": ["done", "needs_review", "blocked", "yielded"]},
        "maxAttempts": {"type": "integer", "minimum": 1},
        "maxRuns": {"type": "integer", "minimum": 1},
        "commentCount": {"type": "integer", "minimum": 0},
        "recoveryOwner": {"enum": ["none", "agent", "human", "board"]},
        "responseSource": {
            "enum": [
                "existing_issue_comment",
                "final_agent_message",
                "semantic_result_summary",
                "adapter_final",
                "none",
            ]
        },
        "orderedMarkers": _string_list,
        "requiredPrpEventTypes": _unique_string_list,
        "forbiddenPrpEventTypes": _unique_string_list,
        "requiredActivityFamilies": _unique_string_list,
        "artifactDigests": _string_list,
        "requiredOperationIds": _unique_string_list,
        "trace": {
            "type": "object",
            "additionalProperties": False,
            "required": ["capture"],
            "properties": {
                "capture": {"enum": ["on", "off", "either"]},
                "digestVerified": {"type": "boolean"},
                "ordered": {"type": "boolean"},
                "dispositions": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"enum": ["mapped", "generic", "ignored", "rejected", "operator_only"]},
                },
                "lineage": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"enum": ["one_to_one", "one_to_many", "many_to_one"]},
                },
            },
        },
    },
}
ASSERTION_KEYS = tuple(ASSERTIONS_SCHEMA["properties"])

STEPS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["kind"],
        "properties": {"kind": {"enum": list(STEP_KINDS)}},
        "allOf": [
            {
                "if": {"properties": {"kind": {"const": kind}}, "required": ["kind"]},
                "then": {
                    "properties": {"kind": {"const": kind}, **parameters},
                    "required": ["kind", REQUIRED_STEP_PARAMETER[kind]],
                    "additionalProperties": False,
                },
            }
            for kind, parameters in STEP_PARAMETERS.items()
        ],
    },
}

#: ``STEPS_SCHEMA`` as OpenAPI 3.0 writes it (no ``if``/``then``): one alternative per step kind.
STEPS_OPENAPI_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "items": {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"type": "string", "enum": [kind]}, **parameters},
                "required": ["kind", REQUIRED_STEP_PARAMETER[kind]] if kind in REQUIRED_STEP_PARAMETER else ["kind"],
                "additionalProperties": False,
            }
            for kind, parameters in STEP_PARAMETERS.items()
        ]
    },
}

_steps_validator = Draft202012Validator(STEPS_SCHEMA)
_assertions_validator = Draft202012Validator(ASSERTIONS_SCHEMA)


_TYPE_WORDS = {
    "array": "a list",
    "object": "an object",
    "boolean": "true or false",
    "integer": "a whole number",
    "string": "text",
}


def _where(prefix: str, path: Any) -> str:
    parts = [prefix]
    for part in path:
        parts.append(f"[{part + 1}]" if isinstance(part, int) else f".{part}")
    return "".join(parts)


def _describe(error: Any, prefix: str) -> str:
    where = _where(prefix, error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if prefix == "assertions" and not error.absolute_path:
            return f"unknown assertion key {', '.join(extra)}: use one of {', '.join(ASSERTION_KEYS)}"
        return f"{where} has unknown field {', '.join(extra)}"
    if error.validator == "enum" and error.absolute_path and error.absolute_path[-1] == "kind":
        return f"{where} is an unknown step kind: use one of {', '.join(STEP_KINDS)}"
    if error.validator == "enum":
        return f"{where} must be one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "required":
        return f"{where} is missing {error.message.split(' ')[0]}"
    if error.validator == "minItems" and not error.absolute_path:
        return f"{prefix} needs at least one step"
    if error.validator == "uniqueItems":
        return f"{where} has duplicate items"
    if error.validator == "type":
        return f"{where} must be {_TYPE_WORDS.get(error.validator_value, error.validator_value)}"
    if error.validator == "minimum":
        return f"{where} must be at least {error.validator_value}"
    if error.validator == "minLength":
        return f"{where} must not be blank"
    if error.validator == "const":
        return f"{where} is not allowed for this step kind"
    return f"{where}: {error.message}"


def steps_problems(steps: Any) -> list[str]:
    """Problems with a case's ``steps`` list, as sentences; empty when the steps are valid."""
    errors = sorted(_steps_validator.iter_errors(steps), key=lambda e: (list(e.absolute_path), e.validator))
    return list(dict.fromkeys(_describe(error, "steps") for error in errors if error.validator not in {"allOf", "if"}))


def assertions_problems(assertions: Any) -> list[str]:
    """Problems with a case's ``assertions`` object, as sentences; empty when valid.

    Besides the schema, an event type may not be both required and forbidden (as the reference refuses it).
    """
    errors = sorted(_assertions_validator.iter_errors(assertions), key=lambda e: (list(e.absolute_path), e.validator))
    problems = [_describe(error, "assertions") for error in errors]
    if isinstance(assertions, dict):
        required = assertions.get("requiredPrpEventTypes")
        forbidden = assertions.get("forbiddenPrpEventTypes")
        if isinstance(required, list) and isinstance(forbidden, list):
            both = [event for event in required if event in forbidden]
            if both:
                problems.append(f"event type {', '.join(map(str, both))} is both required and forbidden")
    return list(dict.fromkeys(problems))
