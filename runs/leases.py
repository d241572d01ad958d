"""Leases on running executions, their heartbeat, interruption, and surviving database blips.

An execution is claimed with an owner (``host:pid``) and a lease; while its executor runs, a
heartbeat thread extends the lease every ``HEARTBEAT_SECONDS`` and looks for three reasons to
stop: the run was cancelled, the lease was taken back by the reaper (this process was presumed
dead), or the process was asked to shut down (SIGTERM/SIGINT to a worker). It then interrupts the
executor by raising :class:`ExecutionInterrupted` in the thread that runs it (a signal delivered
to the main thread, so blocking waits are woken too); the live executor's ``finally`` kills the
runtime's process group on the way out.

Workers (django-q2's ``post_spawn``) install :func:`install_worker_signal_handlers`: SIGTERM or
SIGINT interrupts the current execution, which the orchestration hands back (another worker
runs it), and the worker exits; an idle worker exits at once. The bound is the time the
executor needs to unwind — seconds — never the length of the night.

:func:`db_retry` retries a bookkeeping write through a database blip: the connection is closed
and reopened, with backoff, for up to ``DB_RETRY_SECONDS``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from evalhub.conf import evalhub_setting
from evalhub.secrets import redact

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Why an execution was interrupted.
CANCELLED = "cancelled"
SHUTDOWN = "shutdown"
LEASE_LOST = "lease_lost"

#: The signal a heartbeat sends to the main thread to interrupt the executor running there.
INTERRUPT_SIGNAL = signal.SIGUSR1

_shutdown = threading.Event()
_current: Guard | None = None
#: Set by ``manage.py worker``'s main process when it is asked to stop; its worker processes,
#: forked after it was created, see it (a semaphore shared across ``fork``).
_cluster_stop: Any = None


class ExecutionInterrupted(BaseException):
    """Raised inside a running executor to stop it; ``reason`` is ``cancelled``, ``shutdown`` or
    ``lease_lost``. A ``BaseException`` so that an executor's ``except Exception`` does not swallow it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def owner_id() -> str:
    """This process as a lease owner: ``host:pid`` (read on each call: a forked worker has its own pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_seconds() -> float:
    return float(evalhub_setting("LEASE_SECONDS"))


def heartbeat_seconds() -> float:
    return float(evalhub_setting("HEARTBEAT_SECONDS"))


def lease_until(now: dt.datetime | None = None) -> dt.datetime:
    """When a lease taken or extended now expires."""
    return (now or timezone.now()) + dt.timedelta(seconds=lease_seconds())


def shutdown_requested() -> bool:
    """Whether this process was asked to stop: SIGTERM/SIGINT to it, or its cluster stopping."""
    return _shutdown.is_set() or (_cluster_stop is not None and _cluster_stop.is_set())


def prepare_cluster_shutdown() -> None:
    """Create the cluster-wide stop flag; call in the cluster's main process before it forks."""
    global _cluster_stop
    _cluster_stop = multiprocessing.get_context("fork").Event()


def signal_cluster_shutdown() -> None:
    """Tell every worker process of this cluster to hand back its execution and stop."""
    if _cluster_stop is not None:
        _cluster_stop.set()


def request_shutdown() -> None:
    """Ask this process to stop: the current execution is interrupted and handed back."""
    _shutdown.set()
    guard = _current
    if guard is not None:
        guard.interrupt(SHUTDOWN)


def reset_shutdown() -> None:
    """Forget a shutdown request (tests)."""
    _shutdown.clear()


def db_retry(write: Callable[[], _T], *, what: str, deadline_s: float | None = None) -> _T:
    """Run ``write`` (a bookkeeping write, its own transaction), retrying through a database blip.

    On ``OperationalError``/``InterfaceError`` the connection is closed (Django reopens it on the
    next query) and ``write`` is called again after 0.05 s, doubling up to 2 s, until
    ``deadline_s`` (default ``DB_RETRY_SECONDS``) has passed; then the error is raised. Inside an
    outer transaction nothing can be retried, so the error is raised at once.
    """
    deadline = time.monotonic() + (float(evalhub_setting("DB_RETRY_SECONDS")) if deadline_s is None else deadline_s)
    delay = 0.05
    while True:
        try:
            return write()
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            logger.warning("%s: the database is unavailable (%s); retrying in %.2f s", what, redact(str(exc)), delay)
            with contextlib.suppress(Exception):
                connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


class Guard:
    """The lease on one running execution: the heartbeat and the interruption of its executor.

    ``beat`` is called by the heartbeat thread every ``interval`` seconds; it extends the lease
    and returns the reason to stop, if any (``cancelled``, ``lease_lost``). Use :meth:`running`
    around the start and end of the execution and :meth:`call` around the executor call itself:
    only inside :meth:`call` is the executor interrupted; outside it the reason is kept in
    :attr:`reason` for the orchestration to act on.
    """

    def __init__(self, beat: Callable[[], str | None], *, interval: float) -> None:
        self._beat = beat
        self._interval = interval
        self._stop = threading.Event()
        self._beating = threading.Lock()
        self._last = 0.0
        self._main = threading.current_thread() is threading.main_thread()
        self.reason: str | None = None
        self.in_call = False

    def interrupt(self, reason: str) -> None:
        """Stop the execution for ``reason`` (the first reason wins)."""
        if self.reason is None:
            self.reason = reason
        if self.in_call and self._main:
            with contextlib.suppress(Exception):
                signal.pthread_kill(threading.main_thread().ident, INTERRUPT_SIGNAL)

    def _due(self, now: float) -> bool:
        """Whether a beat is due (called by the heartbeat thread every tick)."""
        return now - self._last >= self._interval

    def _tick(self) -> bool:
        """One tick of the heartbeat thread for this guard: look for a shutdown and, when due, beat.
        Returns whether the database was used."""
        if shutdown_requested():
            self.interrupt(SHUTDOWN)
        if not self._due(time.monotonic()):
            return False
        with self._beating:
            if self._stop.is_set():
                return False
            self._last = time.monotonic()
            try:
                reason = self._beat()
            except Exception as exc:  # a missed beat: the lease has room for the next one
                logger.warning("heartbeat failed: %s", redact(f"{type(exc).__name__}: {exc}"))
                with contextlib.suppress(Exception):
                    connection.close()
                return True
        if reason is not None:
            self.interrupt(reason)
        return True

    @contextlib.contextmanager
    def running(self) -> Iterator[Guard]:
        """Beat while the block runs; this guard is the process's current one meanwhile.

        The beats come from one heartbeat thread per process (started with the first guard),
        shared by every guard that is running: starting and joining a thread per execution cost
        more than a no-op execution's own bookkeeping."""
        global _current
        # Only the main thread's guard is the current one: the stop signal is handled there, and
        # guards running in other threads (finishing in any order) must never leave one behind.
        previous = _current
        if self._main:
            _current = self
        self._last = time.monotonic()
        _HEART.add(self)
        try:
            if shutdown_requested():
                self.reason = self.reason or SHUTDOWN
            yield self
        finally:
            # Waits for a beat in progress: once this returns, the guard's lease is never touched again.
            with self._beating:
                self._stop.set()
            _HEART.remove(self)
            if self._main:
                _current = previous

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """The executor call: interruptible while it runs (``ExecutionInterrupted`` raised in it)."""
        previous_handler = None
        if self._main:

            def on_interrupt(signum: int, frame: object) -> None:
                if self.in_call:
                    self.in_call = False
                    raise ExecutionInterrupted(self.reason or SHUTDOWN)

            previous_handler = signal.signal(INTERRUPT_SIGNAL, on_interrupt)
        if self.reason is not None:
            raise ExecutionInterrupted(self.reason)
        self.in_call = True
        try:
            yield
        finally:
            self.in_call = False
            if self._main:
                signal.signal(INTERRUPT_SIGNAL, previous_handler or signal.SIG_DFL)


class _Heartbeat:
    """The process's heartbeat thread: every tick (half a second, or the shortest guard interval)
    it ticks every running guard (:meth:`Guard._tick`). Idle, it closes its database connection
    and waits. A forked child starts its own (threads do not survive ``fork``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guards: set[Guard] = set()
        self._thread: threading.Thread | None = None

    def add(self, guard: Guard) -> None:
        with self._lock:
            self._guards.add(guard)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="evalhub-heartbeat", daemon=True)
                self._thread.start()

    def remove(self, guard: Guard) -> None:
        with self._lock:
            self._guards.discard(guard)

    def _loop(self) -> None:
        used_db = False
        while True:
            with self._lock:
                guards = list(self._guards)
            tick = min([0.5, *(guard._interval for guard in guards)])
            for guard in guards:
                used_db = guard._tick() or used_db
            if not guards and used_db:
                used_db = False
                with contextlib.suppress(Exception):
                    connection.close()
            time.sleep(tick)


_HEART = _Heartbeat()


def _after_fork_in_child() -> None:
    global _HEART
    _HEART = _Heartbeat()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _on_stop_signal(signum: int, frame: object) -> None:
    """A worker's SIGTERM/SIGINT: interrupt the current executor call and hand it back, or exit
    at once when idle."""
    _shutdown.set()
    guard = _current
    if guard is None:
        raise SystemExit(0)
    if guard.in_call:
        guard.in_call = False
        guard.reason = guard.reason or SHUTDOWN
        raise ExecutionInterrupted(SHUTDOWN)
    guard.reason = guard.reason or SHUTDOWN


def install_worker_signal_handlers() -> None:
    """Make SIGTERM and SIGINT stop this worker process within a bounded time (see the module)."""
    signal.signal(signal.SIGTERM, _on_stop_signal)
    signal.signal(signal.SIGINT, _on_stop_signal)
