"""SIGTERM handled as Ctrl-C, for commands that run executions in their own process.

Python's default for SIGTERM is to die at once: a runtime started in a process group of its own
(``runs.executors.live.runtimes``) would then keep running with nobody to stop it. Inside
:func:`terminate_as_interrupt` SIGTERM raises :class:`Terminated` instead, so the executor's
``finally`` blocks kill their runtime's process group before the process exits. Used by
``manage.py nightly --execute`` (``runs.dispatch``) and ``python -m runs.executors.live run-case``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM to a process inside :func:`terminate_as_interrupt`: handled as Ctrl-C is."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) in the
    main thread, as Ctrl-C does. Outside the main thread, or where a handler is already installed
    (a worker's, ``runs.leases.install_worker_signal_handlers``), nothing changes."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def on_terminate(signum: int, frame: object) -> None:
        raise Terminated("SIGTERM")

    signal.signal(signal.SIGTERM, on_terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
