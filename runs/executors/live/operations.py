"""The control plane's typed operations: names, descriptions and JSON Schemas.

Each operation the agent may call has one JSON Schema (draft 2020-12, ``additionalProperties:
false``) that is both what the MCP server advertises as the tool's ``inputSchema`` and what
:func:`argument_problems` validates against. The schemas stay inside the subset every runtime
passes on to its model (no ``oneOf``/``if``/``$ref``): rules that depend on another field — such
as "``kind: questions`` needs ``questions``" — are checked in Python by :func:`argument_problems`
and reported in the same list, so one schema error names every problem at once.

Answers the human side gives to an interaction are typed per kind (:data:`ANSWER_SCHEMAS`) and
checked by :func:`answer_problems`:

* ``questions`` → ``{"answers": {questionId: text}}``
* ``suggest_tasks`` → ``{"accepted": [index or title], "rejected": [index or title]}``
* ``checkbox`` → ``{"checked": [option]}``
* ``item_verdicts`` → ``{"verdicts": {itemId: "accept" | "reject"}}``
* ``confirmation`` → ``{"confirmed": bool, "note"?: str}``

This module is pure: no clock, no I/O, no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

#: Kinds of human interaction an agent can request.
INTERACTION_KINDS = ("questions", "suggest_tasks", "checkbox", "item_verdicts", "confirmation")
#: Dispositions of a finished task (``finish_task``).
DISPOSITIONS = ("done", "needs_review", "blocked")
#: Statuses of one verification inside a run result.
VERIFICATION_STATUSES = ("passed", "failed", "not_run")
#: Verdicts for one item of an ``item_verdicts`` interaction.
ITEM_VERDICTS = ("accept", "reject")

_TEXT = {"type": "string", "minLength": 1, "maxLength": 20000}
_SHORT = {"type": "string", "minLength": 1, "maxLength": 500}
_TASK_ID = {
    "type": "string",
    "pattern": "^task-[0-9]+$",
    "description": "A task id such as task-1 (the source task, the default) or task-2.",
}
_MUTATION_PROPERTIES = {
    "idempotencyKey": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "description": "Optional. Repeating a call with the same key returns the first result (duplicate: true) and changes nothing.",
    },
    "expectedRevision": {
        "type": "integer",
        "minimum": 0,
        "description": "Optional. The board revision you last read; a stale revision is refused with a conflict error.",
    },
}


@dataclass(frozen=True)
class Operation:
    """One typed operation: ``name``, a ``description`` for the agent, the arguments'
    ``input_schema`` (JSON Schema object) and whether it only reads (``read_only``)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "description", "inputSchema", "readOnly"}`` as the brief's ``operations()``."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": _copy(self.input_schema),
            "readOnly": self.read_only,
        }


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value


def _schema(properties: Mapping[str, Any], required: tuple[str, ...] = (), *, mutating: bool) -> dict[str, Any]:
    props = dict(properties)
    if mutating:
        props.update(_MUTATION_PROPERTIES)
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _mutation(name: str, description: str, properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> Operation:
    return Operation(name, description, _schema(properties, required, mutating=True), read_only=False)


def _read(name: str, description: str, properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> Operation:
    return Operation(name, description, _schema(properties, required, mutating=False), read_only=True)


OPERATIONS: tuple[Operation, ...] = (
    _mutation(
        "report_progress",
        "Tell the human what you are doing now (a short progress note shown while you work).",
        {"message": _TEXT, "percent": {"type": "integer", "minimum": 0, "maximum": 100}},
        ("message",),
    ),
    _mutation(
        "write_document",
        "Create or revise a document attached to a task (key 'plan' is the task's plan). Each write makes a new revision.",
        {
            "key": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_.-]{0,63}$"},
            "body": _TEXT,
            "title": _SHORT,
            "taskId": _TASK_ID,
        },
        ("key", "body"),
    ),
    _mutation(
        "request_human_input",
        "Ask the human and wait for the answer. kind 'questions' needs 'questions' "
        "(each {id, text, options?}); 'suggest_tasks' needs 'options' (the suggested task titles); "
        "'checkbox' needs 'options'; 'item_verdicts' needs 'items' (each {id, text}); "
        "'confirmation' needs only 'prompt'. End your turn after asking; you are woken with the answer.",
        {
            "kind": {"type": "string", "enum": list(INTERACTION_KINDS)},
            "prompt": _TEXT,
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 20,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "maxLength": 64},
                        "text": _TEXT,
                        "options": {"type": "array", "minItems": 1, "maxItems": 20, "items": _SHORT},
                    },
                    "required": ["id", "text"],
                    "additionalProperties": False,
                },
            },
            "options": {"type": "array", "minItems": 1, "maxItems": 20, "items": _SHORT},
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 50,
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 64}, "text": _TEXT},
                    "required": ["id", "text"],
                    "additionalProperties": False,
                },
            },
            "taskId": _TASK_ID,
        },
        ("kind", "prompt"),
    ),
    _mutation(
        "finish_task",
        "Report the final result of your run on the task: a summary (shown to the human as your "
        "answer), a disposition (done, needs_review or blocked; default done) and the "
        "verifications you ran or could not run. Call it once per run.",
        {
            "summary": _TEXT,
            "disposition": {"type": "string", "enum": list(DISPOSITIONS)},
            "verifications": {
                "type": "array",
                "maxItems": 50,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": _SHORT,
                        "status": {"type": "string", "enum": list(VERIFICATION_STATUSES)},
                        "reason": _SHORT,
                    },
                    "required": ["name", "status"],
                    "additionalProperties": False,
                },
            },
            "taskId": _TASK_ID,
        },
        ("summary",),
    ),
    _mutation(
        "request_review",
        "Ask the human to review and confirm your work; the task waits in review until they decide.",
        {"summary": _TEXT, "taskId": _TASK_ID},
        ("summary",),
    ),
    _mutation(
        "block_task",
        "Mark a task blocked, with the reason you cannot go on.",
        {"reason": _TEXT, "taskId": _TASK_ID},
        ("reason",),
    ),
    _mutation(
        "create_task",
        "Create a child task of the source task, optionally assigned to another agent (see list_agents).",
        {"title": _SHORT, "description": _TEXT, "assignee": {"type": "string", "minLength": 1, "maxLength": 64}},
        ("title", "description"),
    ),
    _mutation(
        "set_dependencies",
        "Say which tasks must be done before a task can go on; the task is blocked until they are. An empty list clears its dependencies.",
        {
            "taskId": _TASK_ID,
            "blockedBy": {"type": "array", "maxItems": 20, "uniqueItems": True, "items": _TASK_ID},
        },
        ("taskId", "blockedBy"),
    ),
    _read(
        "get_task_context",
        "Read a task (default the source task): its status, comments, documents, interactions, children and the board revision.",
        {"taskId": _TASK_ID},
    ),
    _read(
        "get_task_history",
        "Read the ordered changes made to a task (default the source task).",
        {"taskId": _TASK_ID},
    ),
    _read("list_documents", "List a task's documents with their latest revision.", {"taskId": _TASK_ID}),
    _read(
        "read_document",
        "Read the latest revision of a task's document.",
        {"key": {"type": "string", "minLength": 1, "maxLength": 64}, "taskId": _TASK_ID},
        ("key",),
    ),
    _read(
        "search_tasks",
        "Find tasks whose title or description contains the query (case-insensitive).",
        {"query": {"type": "string", "minLength": 1, "maxLength": 200}},
        ("query",),
    ),
    _read("list_agents", "List the agents tasks can be assigned to.", {}),
    _read(
        "get_agent",
        "Read one agent by id.",
        {"agentId": {"type": "string", "minLength": 1, "maxLength": 64}},
        ("agentId",),
    ),
)

_BY_NAME = {operation.name: operation for operation in OPERATIONS}
_VALIDATORS = {operation.name: Draft202012Validator(operation.input_schema) for operation in OPERATIONS}


def operation_names() -> tuple[str, ...]:
    """The operation names in their stable order."""
    return tuple(_BY_NAME)


def get_operation(name: str) -> Operation | None:
    """The operation called ``name``, or ``None`` when there is none."""
    return _BY_NAME.get(name)


def _where(path: Any) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def _schema_problems(validator: Draft202012Validator, value: Any) -> list[str]:
    errors = sorted(validator.iter_errors(value), key=lambda error: (list(map(str, error.absolute_path)), error.message))
    return [f"{_where(error.absolute_path)}: {error.message}" for error in errors]


def argument_problems(name: str, arguments: Any) -> list[str]:
    """Every problem with ``arguments`` for operation ``name``, as readable lines (empty = valid).

    Lines look like ``"questions[0]: 'id' is a required property"``; JSON Schema problems come
    first, then the cross-field rules (which arguments a ``request_human_input`` kind needs, unique
    question and item ids, options of a question unique). Raises ``KeyError`` for an unknown
    operation name.
    """
    validator = _VALIDATORS[name]
    problems = _schema_problems(validator, arguments)
    if name == "request_human_input" and isinstance(arguments, Mapping):
        problems += _interaction_request_problems(arguments)
    return problems


_NEEDS = {"questions": "questions", "suggest_tasks": "options", "checkbox": "options", "item_verdicts": "items"}


def _interaction_request_problems(arguments: Mapping[str, Any]) -> list[str]:
    kind = arguments.get("kind")
    if kind not in INTERACTION_KINDS:
        return []
    problems = []
    needed = _NEEDS.get(kind)
    if needed and needed not in arguments:
        problems.append(f"{needed}: kind '{kind}' needs '{needed}'")
    for field in ("questions", "options", "items"):
        if field in arguments and field != needed:
            problems.append(f"{field}: not used by kind '{kind}'; remove it")
    for field in ("questions", "items"):
        entries = arguments.get(field)
        if isinstance(entries, list):
            ids = [entry.get("id") for entry in entries if isinstance(entry, Mapping)]
            duplicates = sorted({i for i in ids if isinstance(i, str) and ids.count(i) > 1})
            if duplicates:
                problems.append(f"{field}: ids must be unique; repeated: {', '.join(duplicates)}")
    lists = [("options", arguments.get("options"))]
    if isinstance(arguments.get("questions"), list):
        lists += [
            (f"questions[{n}].options", question.get("options"))
            for n, question in enumerate(arguments["questions"])
            if isinstance(question, Mapping)
        ]
    for where, values in lists:
        if isinstance(values, list):
            repeated = sorted({v for v in values if isinstance(v, str) and values.count(v) > 1})
            if repeated:
                problems.append(f"{where}: options must be unique; repeated: {', '.join(repeated)}")
    return problems


#: The JSON Schema of a (possibly partial) answer, per interaction kind.
ANSWER_SCHEMAS: Mapping[str, Mapping[str, Any]] = {
    "questions": {
        "type": "object",
        "properties": {"answers": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string", "minLength": 1}}},
        "required": ["answers"],
        "additionalProperties": False,
    },
    "suggest_tasks": {
        "type": "object",
        "properties": {
            "accepted": {"type": "array", "items": {"type": ["integer", "string"], "minimum": 0, "minLength": 1}},
            "rejected": {"type": "array", "items": {"type": ["integer", "string"], "minimum": 0, "minLength": 1}},
        },
        "additionalProperties": False,
    },
    "checkbox": {
        "type": "object",
        "properties": {"checked": {"type": "array", "uniqueItems": True, "items": {"type": "string"}}},
        "required": ["checked"],
        "additionalProperties": False,
    },
    "item_verdicts": {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": {"type": "string", "enum": list(ITEM_VERDICTS)},
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    },
    "confirmation": {
        "type": "object",
        "properties": {"confirmed": {"type": "boolean"}, "note": {"type": "string"}},
        "required": ["confirmed"],
        "additionalProperties": False,
    },
}
_ANSWER_VALIDATORS = {kind: Draft202012Validator(schema) for kind, schema in ANSWER_SCHEMAS.items()}


def answer_problems(kind: str, answer: Any) -> list[str]:
    """JSON Schema problems of an answer for an interaction of ``kind`` (empty = well-formed).

    Only the shape is checked here; whether the ids and options exist in the interaction is the
    control plane's check. Raises ``KeyError`` for an unknown kind.
    """
    return _schema_problems(_ANSWER_VALIDATORS[kind], answer)
