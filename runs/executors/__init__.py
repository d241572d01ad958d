"""The executor registry: adapter key → dotted path of an :class:`Executor` class.

``settings.EVALHUB["EXECUTORS"]`` overrides entries (for example to point every adapter at the
replay executor in tests, or to switch on a live driver). Classes are imported lazily, when an
execution first needs them.

This module is the executors' whole face to the app: the rest of evalhub imports from here (or
the shared shapes beside it: ``base``, ``candidate``, ``providers``, ``trace``), never from a
plugin such as ``runs.executors.live`` (an import-linter contract holds it). What the app asks of
the executors as a whole — checks, health, clean-up, reading a stored trace — is a function here
that asks every registered executor class (:meth:`Executor.system_checks`...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from evalhub.conf import evalhub_setting
from runs.executors.base import ExecutionRequest, Executor, InfrastructureError
from runs.executors.trace import TraceIntegrityError, read_artifact

if TYPE_CHECKING:
    from django.core.checks import CheckMessage

__all__ = [
    "DEFAULT_EXECUTORS",
    "ExecutionRequest",
    "Executor",
    "InfrastructureError",
    "TraceIntegrityError",
    "executor_class",
    "executor_classes",
    "executor_for",
    "executor_paths",
    "read_artifact",
    "remove_abandoned_work",
    "runtime_problems",
    "system_checks",
]

DEFAULT_EXECUTORS: dict[str, str] = {
    "codex_app_server": "runs.executors.live.executor.CodexAppServerExecutor",
    "opencode_server": "runs.executors.live.executor.OpencodeServerExecutor",
    "acpx_runtime": "runs.executors.live.executor.AcpxRuntimeExecutor",
    "replay": "runs.executors.replay.ReplayExecutor",
}


def executor_paths() -> dict[str, str]:
    """The registry in force: defaults overlaid with ``EVALHUB["EXECUTORS"]``."""
    return {**DEFAULT_EXECUTORS, **(evalhub_setting("EXECUTORS") or {})}


def executor_class(adapter: str) -> type[Executor]:
    """The executor class registered for ``adapter``.

    Raises :class:`InfrastructureError` (``executor_not_registered``, not retryable) when no
    executor is registered for the adapter, or its dotted path cannot be imported.
    """
    path = executor_paths().get(adapter)
    if not path:
        raise InfrastructureError("executor_not_registered", False, f"no executor is registered for adapter {adapter}")
    try:
        return import_string(path)
    except ImportError:
        raise InfrastructureError(
            "executor_not_registered", False, f"the executor for adapter {adapter} ({path}) cannot be imported"
        ) from None


def executor_for(adapter: str) -> Executor:
    """A new executor instance for ``adapter``. Raises :class:`InfrastructureError` as
    :func:`executor_class` does."""
    return executor_class(adapter)()


def executor_classes(*, with_defaults: bool = False) -> list[type[Executor]]:
    """Every distinct registered executor class, in registry order; ``with_defaults``: the
    built-in ones (:data:`DEFAULT_EXECUTORS`) too, even where the registry points their adapters
    elsewhere. A path that cannot be imported is left out: the execution that needs it reports
    ``executor_not_registered``."""
    paths = [*executor_paths().values(), *(DEFAULT_EXECUTORS.values() if with_defaults else ())]
    classes: list[type[Executor]] = []
    for path in dict.fromkeys(paths):
        try:
            found = import_string(path)
        except ImportError:
            continue
        if isinstance(found, type) and issubclass(found, Executor) and found not in classes:
            classes.append(found)
    return classes


def _each_hook(name: str, *, with_defaults: bool = False) -> Iterator[Callable[[], Any]]:
    """The classmethod ``name`` of every registered executor class (see :func:`executor_classes`),
    each distinct implementation once (the three live executors share theirs, and must not report
    it three times)."""
    seen: set[Any] = set()
    for cls in executor_classes(with_defaults=with_defaults):
        hook = getattr(cls, name)
        function = getattr(hook, "__func__", hook)
        if function in seen:
            continue
        seen.add(function)
        yield hook


def system_checks() -> list[CheckMessage]:
    """Every registered executor's :meth:`Executor.system_checks`, in registry order (``evalhub.checks``)."""
    return [message for hook in _each_hook("system_checks") for message in hook()]


def runtime_problems() -> list[str]:
    """Every registered executor's :meth:`Executor.runtime_problems`: one sentence per missing or
    wrong runtime, empty when all is installed (``runs.health``)."""
    return [problem for hook in _each_hook("runtime_problems") for problem in hook()]


def remove_abandoned_work() -> list[Path]:
    """Every executor's :meth:`Executor.remove_abandoned_work`: what executions of a killed
    process left, removed (``runs.recovery.recover_before_executing``). The built-in executors
    are asked even when the registry points their adapters elsewhere (tests, a replay machine):
    what a killed process left before the switch is still on the disk."""
    return [folder for hook in _each_hook("remove_abandoned_work", with_defaults=True) for folder in hook()]
