"""The executor registry: adapter key → dotted path of an :class:`Executor` class.

``settings.EVALHUB["EXECUTORS"]`` overrides entries (for example to point every adapter at the
replay executor in tests, or to switch on a live driver). Classes are imported lazily, when an
execution first needs them.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from evalhub.conf import evalhub_setting
from runs.executors.base import ExecutionRequest, Executor, InfrastructureError

__all__ = ["DEFAULT_EXECUTORS", "ExecutionRequest", "Executor", "InfrastructureError", "executor_for", "executor_paths"]

DEFAULT_EXECUTORS: dict[str, str] = {
    "codex_app_server": "runs.executors.live.executor.CodexAppServerExecutor",
    "opencode_server": "runs.executors.live.executor.OpencodeServerExecutor",
    "acpx_runtime": "runs.executors.live.executor.AcpxRuntimeExecutor",
    "replay": "runs.executors.replay.ReplayExecutor",
}


def executor_paths() -> dict[str, str]:
    """The registry in force: defaults overlaid with ``EVALHUB["EXECUTORS"]``."""
    return {**DEFAULT_EXECUTORS, **(evalhub_setting("EXECUTORS") or {})}


def executor_for(adapter: str) -> Executor:
    """A new executor instance for ``adapter``.

    Raises :class:`InfrastructureError` (``executor_not_registered``, not retryable) when no
    executor is registered for the adapter, or its dotted path cannot be imported.
    """
    path = executor_paths().get(adapter)
    if not path:
        raise InfrastructureError("executor_not_registered", False, f"no executor is registered for adapter {adapter}")
    try:
        executor_class = import_string(path)
    except ImportError:
        raise InfrastructureError(
            "executor_not_registered", False, f"the executor for adapter {adapter} ({path}) cannot be imported"
        ) from None
    return executor_class()
