"""The format of a scripted-model script, and its loader.

A script tells :class:`runs.executors.live.scripted_model.ScriptedModelServer` what to answer to each
model request of one conversation::

    {
      "name": "finish-at-once",                 # route name: /scripts/<name>/v1/...
      "description": "optional, for people",
      "finalText": "optional text once the steps run out",
      "steps": [                                # one step answers one model request
        {"outputs": [                           # one model response, outputs in order
            {"say": "Starting."},
            {"call": "finish_task", "arguments": {"summary": "done"}},
            {"call": "exec_command", "arguments": {"cmd": "ls"},      # a runtime's own tool, and
             "alternatives": [{"call": "bash", "arguments": {"command": "ls", "description": "List"}}]},
            {"echoKey": true},                  # says "Authorization: <header value>" back
            {"repeat": "x", "times": 1300}      # a long text: "x" * 1300
         ],
         "usage": {"input": 120, "cachedInput": 20, "output": 30, "reasoning": 5},   # tokens
         "delayMs": 0},                         # milliseconds to wait before answering
        {"fail": {"status": 503, "code": "server_error", "message": "...", "type": "...",
                  "retryAfter": 2, "times": 1}, "delayMs": 0},   # retryAfter in seconds
        {"fail": {"status": 529, "midStream": true}},   # Anthropic Messages: the stream starts
                                                          # (200), then an ``error`` event
        {"drop": true, "times": 1, "outputs": [...]}   # headers + part of the stream, then cut
      ]
    }

``call`` names the tool *without* the MCP server prefix (``finish_task``); the server resolves it
against the tools the request offers. ``alternatives`` name the same action in the tool set of
another runtime (codex's ``exec_command`` is opencode's ``bash``, its ``apply_patch`` opencode's
``write``): the first one the request offers is called when the runtime does not offer ``call``. ``times`` on a ``fail`` or ``drop`` step limits how often
that step misbehaves across the whole server; without it, the step misbehaves every time.

:func:`load_script` validates against :data:`SCRIPT_SCHEMA` (JSON Schema 2020-12) and raises
:class:`ValueError` naming every problem with its location (``steps[1].fail.status: ...``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

# "errorMessage" is not a JSON Schema keyword (validators ignore it); load_script shows it
# instead of jsonschema's generic text when an anyOf/oneOf/not/false rule fails.
_COUNT = {"type": "integer", "minimum": 0}

_ALTERNATIVE = {
    "type": "object",
    "properties": {"call": {"type": "string", "minLength": 1}, "arguments": {"type": "object"}},
    "required": ["call"],
    "additionalProperties": False,
}

_OUTPUT = {
    "type": "object",
    "properties": {
        "call": {"type": "string", "minLength": 1},
        "arguments": {"type": "object"},
        "alternatives": {"type": "array", "items": _ALTERNATIVE, "minItems": 1},
        "say": {"type": "string"},
        "echoKey": {"const": True},
        "repeat": {"type": "string", "minLength": 1},
        "times": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
    },
    "additionalProperties": False,
    "oneOf": [
        {"required": ["call"]},
        {"required": ["say"]},
        {"required": ["echoKey"]},
        {"required": ["repeat"]},
    ],
    "errorMessage": "an output needs exactly one of 'call', 'say', 'echoKey' or 'repeat'",
    "dependentRequired": {"arguments": ["call"], "alternatives": ["call"], "repeat": ["times"], "times": ["repeat"]},
}

_FAIL = {
    "type": "object",
    "properties": {
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "code": {"type": ["string", "null"]},
        "type": {"type": "string"},
        "message": {"type": "string"},
        "retryAfter": {"type": "number", "minimum": 0},
        "times": {"type": "integer", "minimum": 1},
        "midStream": {"type": "boolean"},
    },
    "required": ["status"],
    "additionalProperties": False,
}

_STEP = {
    "type": "object",
    "properties": {
        "outputs": {"type": "array", "items": _OUTPUT, "minItems": 1},
        "usage": {
            "type": "object",
            "properties": {"input": _COUNT, "cachedInput": _COUNT, "output": _COUNT, "reasoning": _COUNT},
            "additionalProperties": False,
        },
        "delayMs": {"type": "integer", "minimum": 0},
        "fail": _FAIL,
        "drop": {"const": True},
        "times": {"type": "integer", "minimum": 1},
    },
    "additionalProperties": False,
    "allOf": [
        {
            "anyOf": [{"required": ["outputs"]}, {"required": ["fail"]}, {"required": ["drop"]}],
            "errorMessage": "a step needs 'outputs', 'fail' or 'drop'",
        },
        {
            "not": {"required": ["fail", "drop"]},
            "errorMessage": "a step cannot both 'fail' and 'drop'",
        },
        {
            "not": {"required": ["fail", "outputs"]},
            "errorMessage": "a 'fail' step has no 'outputs' (the request fails before any output)",
        },
        {
            "if": {"not": {"required": ["outputs"]}},
            "then": {
                "not": {"required": ["usage"]},
                "errorMessage": "'usage' only applies to a step with 'outputs'",
            },
        },
        {
            "if": {"not": {"required": ["drop"]}},
            "then": {
                "not": {"required": ["times"]},
                "errorMessage": "step-level 'times' only applies to a 'drop' step (a 'fail' step takes fail.times)",
            },
        },
    ],
}

#: JSON Schema (2020-12) of one script.
SCRIPT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "evalhub scripted-model script",
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"},
        "description": {"type": "string"},
        "finalText": {"type": "string", "minLength": 1},
        "steps": {"type": "array", "items": _STEP, "minItems": 1},
    },
    "required": ["name", "steps"],
    "additionalProperties": False,
}

_VALIDATOR = Draft202012Validator(SCRIPT_SCHEMA)
_COMBINATORS = {"anyOf", "oneOf", "not", "if", "then", "false"}


def _location(error: ValidationError) -> str:
    parts = ""
    for key in error.absolute_path:
        parts += f"[{key}]" if isinstance(key, int) else (f".{key}" if parts else str(key))
    return parts or "(script)"


def _message(error: ValidationError) -> str:
    if error.validator in _COMBINATORS:
        custom = error.schema.get("errorMessage") if isinstance(error.schema, Mapping) else None
        if custom:
            return custom
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown key(s)")
    return error.message


def script_problems(script: Any) -> list[str]:
    """Every schema problem of ``script`` as ``"<location>: <what is wrong>"``, in document
    order; ``[]`` when it is valid."""
    errors = sorted(_VALIDATOR.iter_errors(script), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [f"{_location(e)}: {_message(e)}" for e in errors]
    if not problems:
        for index, step in enumerate(script["steps"]):
            usage = step.get("usage") or {}
            if usage.get("cachedInput", 0) > usage.get("input", usage.get("cachedInput", 0)):
                problems.append(f"steps[{index}].usage: cachedInput is part of input, so it cannot exceed it")
    return list(dict.fromkeys(problems))


def load_script(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Validate a script and return a private copy of it.

    ``source`` is a mapping (the script itself) or the path of a JSON file holding one.
    Raises :class:`ValueError` ``"script <where>: <problem>; <problem>..."`` listing every
    problem with its location, or saying the file is missing or not JSON.
    """
    if isinstance(source, Mapping):
        where = repr(source.get("name", "(unnamed)"))
        script: Any = copy.deepcopy(dict(source))
    else:
        path = Path(source)
        where = str(path)
        try:
            script = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"script {where}: no such file") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"script {where}: not valid JSON ({exc})") from None
    problems = script_problems(script)
    if problems:
        raise ValueError(f"script {where}: " + "; ".join(problems))
    return script


def load_scripts_dir(directory: str | Path) -> dict[str, dict[str, Any]]:
    """Load every ``*.json`` script in ``directory`` (not recursive), keyed by script name.

    Raises :class:`ValueError` for an invalid script, a missing directory, or two files
    declaring the same name.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise ValueError(f"scripts directory {folder}: not a directory")
    scripts: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    for path in sorted(folder.glob("*.json")):
        script = load_script(path)
        name = script["name"]
        if name in scripts:
            raise ValueError(f"script {path}: name {name!r} is already used by {origin[name]}")
        scripts[name] = script
        origin[name] = path
    return scripts
