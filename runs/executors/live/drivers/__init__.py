"""Runtime drivers: the only runtime-specific part of a live execution (``contracts.Driver``).

``DRIVERS`` maps a runtime key to the dotted path of its driver class; import lazily with
:func:`driver_class` so that importing this package never imports a driver (nor reads settings).
"""

from __future__ import annotations

from importlib import import_module

#: Runtime key → dotted path of its :class:`runs.executors.live.contracts.Driver` subclass.
DRIVERS: dict[str, str] = {
    "codex": "runs.executors.live.drivers.codex.CodexAppServerDriver",
    "opencode": "runs.executors.live.drivers.opencode.OpencodeServerDriver",
}


def driver_class(runtime: str) -> type:
    """The driver class for ``runtime`` (a key of :data:`DRIVERS`); ``KeyError`` for an unknown key."""
    module_name, _, class_name = DRIVERS[runtime].rpartition(".")
    return getattr(import_module(module_name), class_name)
