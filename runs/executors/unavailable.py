"""Executors for live runtimes that this build cannot start yet."""

from __future__ import annotations

from typing import Any

from runs.executors.base import ExecutionRequest, Executor, InfrastructureError


class UnavailableRuntimeExecutor(Executor):
    """Reports a non-retryable ``runtime_unavailable`` infrastructure failure for every entry.

    Stands in for the live runtime drivers (Codex app-server, opencode server, ACP) until they
    ship, so a candidate whose credentials are present is recorded honestly as "not run" rather
    than silently skipped or counted as a model failure.
    """

    def __init__(self, runtime_name: str) -> None:
        self.runtime_name = runtime_name

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        raise InfrastructureError(
            "runtime_unavailable",
            False,
            f"the {self.runtime_name} runtime is not available in this evalhub build, so "
            f"{request.candidate.get('id', 'this candidate')} was not run",
        )


class CodexAppServerUnavailable(UnavailableRuntimeExecutor):
    def __init__(self) -> None:
        super().__init__("Codex app-server")


class OpencodeServerUnavailable(UnavailableRuntimeExecutor):
    def __init__(self) -> None:
        super().__init__("opencode server")


class AcpxRuntimeUnavailable(UnavailableRuntimeExecutor):
    def __init__(self) -> None:
        super().__init__("ACP (acpx)")
