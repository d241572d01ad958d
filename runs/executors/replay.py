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
        return copy.deepcopy(stored)


def reset_replay() -> None:
    """Empty the store and the call log (tests call this between cases)."""
    REPLAY_STORE.clear()
    REPLAY_CALLS.clear()
