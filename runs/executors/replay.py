"""The ``replay`` executor: returns stored observations instead of calling any runtime.

Like Django's locmem mail backend, it reads a process-local store that tests (and the replay
lane) fill: ``REPLAY_STORE[execution_id]`` is either an observation dict, an
:class:`InfrastructureError`, any other exception to raise, or a list of those consumed one per
attempt (to script "fail once, then succeed"). An entry with nothing stored raises a
non-retryable ``replay_missing`` infrastructure error.
"""

from __future__ import annotations

import copy
from typing import Any

from runs.executors.base import ExecutionRequest, Executor, InfrastructureError

REPLAY_STORE: dict[str, Any] = {}
#: Every request the executor received, in order (for tests to count calls).
REPLAY_CALLS: list[ExecutionRequest] = []


class ReplayExecutor(Executor):
    runtime_name = "replay"

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        REPLAY_CALLS.append(request)
        execution_id = str(request.entry["executionId"])
        stored = REPLAY_STORE.get(execution_id)
        if isinstance(stored, list):
            if not stored:
                stored = None
            else:
                stored = stored.pop(0)
        if stored is None:
            raise InfrastructureError("replay_missing", False, f"no stored observation for {execution_id}")
        if isinstance(stored, BaseException):
            raise stored
        try:
            return _copy_json(stored, 0)
        except _NotPlain:
            return copy.deepcopy(stored)


#: How deep :func:`_copy_json` goes before leaving a document to ``copy.deepcopy`` (evalhub.jsonio's bound).
_MAX_DEPTH = 64


class _NotPlain(Exception):
    """A stored value that is not plain JSON (a tuple, a set, a NaN kept as a float is fine) or nests too deep."""


def _copy_json(value: Any, depth: int) -> Any:
    """A copy of a document of plain JSON values (dicts with text keys, lists, text, numbers,
    booleans, null), several times faster than ``copy.deepcopy``; :class:`_NotPlain` for anything
    else (its caller deep-copies it: a test may store any value, even one that holds itself)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if depth > _MAX_DEPTH:
        raise _NotPlain
    if kind is dict:
        return {key: _copy_json(child, depth + 1) if type(key) is str else _not_plain() for key, child in value.items()}
    if kind is list:
        return [_copy_json(child, depth + 1) for child in value]
    raise _NotPlain


def _not_plain() -> Any:
    raise _NotPlain


def reset_replay() -> None:
    """Empty the store and the call log (tests call this between cases)."""
    REPLAY_STORE.clear()
    REPLAY_CALLS.clear()
