"""Pieces every runtime driver needs, whatever its protocol (codex JSON-RPC, opencode HTTP + SSE).

* :func:`format_base_url`, :func:`short_text` — a provider URL with its placeholders filled in; a
  message cut to a size that may reach pages.
* :func:`classify_http_status` — a provider's HTTP status (and message) as a ``TurnOutcome.error_code``.
* :func:`require_runtime`, :func:`configuration_refused` — the ``InfrastructureError`` of a runtime
  that is not installed, and of a configuration it cannot use.
* :func:`start_process_group` / :func:`kill_process_group` — a runtime in its own process group,
  killed as a whole (a runtime's helpers die with it).
* :class:`TurnBook` — the driver's turns and the ``wait_turn`` contract: wait, and on timeout
  interrupt once and report ``timed_out``.
* :class:`DeltaBuffer` — streamed text deltas held until their message completes, so the delta
  frames and the completion frame all name the message's ``item.completed`` (``many_to_one``).
* :class:`CallbackWorker` — one thread that runs callbacks off the protocol reader threads
  (approval decisions and usage reports may block; a reader thread must not).
* :func:`decide` — the case driver's answer to a runtime approval request, never an exception.
* :class:`ProcessDriver` — a driver's base: the contract's keyword arguments, the above under one
  lock, the runtime's output tail, ``wait_turn``, ``close``, and the canonical events every
  driver emits alike (usage, tool calls, runtime requests).

Pure plumbing: no runtime's names, no settings.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from runs.executors.base import InfrastructureError
from runs.executors.live.contracts import (
    PERMISSION_DECISIONS,
    CanonicalEvent,
    Driver,
    DriverCallbacks,
    EventLog,
    RuntimeRequest,
    TraceSink,
    TurnOutcome,
    Usage,
)
from runs.executors.live.runtimes import Runtime
from runs.executors.providers import ProviderConfig

logger = logging.getLogger(__name__)

#: Longest error text kept from a runtime (messages may reach pages and the database).
MAX_ERROR_CHARS = 500
#: Seconds :meth:`TurnBook.wait` waits for the runtime to confirm an interrupt after a timeout.
INTERRUPT_GRACE_S = 5.0

#: What a provider says of quota, billing or credit (a 429 that will not pass).
QUOTA_WORDS = re.compile(r"quota|billing|insufficient|credit", re.IGNORECASE)


def format_base_url(base_url: str, *, case_id: str | None, execution_id: str | None) -> str:
    """``base_url`` with ``{case_id}``/``{execution_id}`` filled in (placeholders without a value stay)."""
    url = base_url
    if case_id is not None:
        url = url.replace("{case_id}", case_id)
    if execution_id is not None:
        url = url.replace("{execution_id}", execution_id)
    return url


def short_text(text: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` stripped and cut to ``limit`` characters (an ellipsis marks the cut)."""
    value = str(text or "").strip()
    return value if len(value) <= limit else value[: limit - 1] + "…"


def is_quota_message(message: str) -> bool:
    """Whether a provider's message speaks of quota, billing or credit (a 429 that will not pass)."""
    return bool(QUOTA_WORDS.search(message or ""))


def classify_words(text: str, rules: Sequence[tuple[re.Pattern[str], str]]) -> str | None:
    """The ``TurnOutcome.error_code`` of the first ``(words, code)`` rule whose words ``text``
    holds, or ``None`` (for the runtimes that report a provider failure as a message only)."""
    return next((code for words, code in rules if words.search(text)), None)


def classify_http_status(status: int, message: str = "") -> str:
    """The ``TurnOutcome.error_code`` of a provider's HTTP error status.

    429 → ``provider_rate_limited`` (``provider_quota_exhausted`` when the message speaks of
    quota, billing or credit, as OpenAI's ``insufficient_quota`` does), 401/403 →
    ``provider_auth_refused``, 402 → ``provider_quota_exhausted`` (OpenRouter: out of credits),
    404 → ``provider_unknown_model``, anything else → ``provider_http_<status>``.
    """
    if status == 429:
        return "provider_quota_exhausted" if is_quota_message(message) else "provider_rate_limited"
    if status in (401, 403):
        return "provider_auth_refused"
    if status == 402:
        return "provider_quota_exhausted"
    if status == 404:
        return "provider_unknown_model"
    return f"provider_http_{status}"


# -- processes ------------------------------------------------------------------------------------


def require_runtime(runtime: Runtime, configured: str | None) -> str:
    """The executable of ``runtime`` (``configured``: the configured path or ``None``). Raises
    ``InfrastructureError("runtime_missing", not retryable)`` when it is not installed."""
    binary = runtime.resolve(configured)
    if binary is None:
        raise InfrastructureError("runtime_missing", False, runtime.missing_message(configured))
    return binary


@contextmanager
def configuration_refused() -> Iterator[None]:
    """A ``ValueError`` raised inside (a configuration the runtime cannot use: a wire API it does
    not speak, a malformed model) becomes ``InfrastructureError("runtime_start_failed")``, not
    retryable: trying again would fail the same way."""
    try:
        yield
    except ValueError as exc:
        raise InfrastructureError("runtime_start_failed", False, str(exc)) from exc


#: The program each runtime is started behind, so that it never outlives evalhub (its docstring).
LIFELINE = Path(__file__).with_name("lifeline.py")


def start_process_group(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str, label: str, stdin: bool = True
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session (its own process group) with exactly ``env``, stdout and
    stderr piped (and stdin when ``stdin``). Raises ``InfrastructureError("runtime_start_failed",
    retryable)`` when it cannot be started; ``label`` names the runtime in the message.

    The runtime is started by :mod:`~runs.executors.live.drivers.lifeline`, which kills its group
    when this process ends without :func:`kill_process_group` (SIGKILL, the OOM killer) and exits
    as the runtime exits, so ``returncode`` means what it would without it. ``proc.pid`` is the
    lifeline's; the runtime's (its group's id) is :func:`group_of`. The lifeline's pipe's write end
    is held in ``proc.lifeline`` until the group is killed."""
    command = shutil.which(argv[0], path=env.get("PATH", os.defpath)) if os.sep not in argv[0] else argv[0]
    if command is None or not os.access(command, os.X_OK) or os.path.isdir(command):
        raise InfrastructureError("runtime_start_failed", True, f"cannot start {label} ({argv[0]}): not an executable file")
    read_end, write_end = os.pipe()
    pid_read, pid_write = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(LIFELINE), str(read_end), str(pid_write), command, *argv[1:]],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            pass_fds=(read_end, pid_write),
        )
    except OSError as exc:
        os.close(write_end)
        raise InfrastructureError("runtime_start_failed", True, f"cannot start {label} ({argv[0]}): {exc}") from exc
    finally:
        os.close(read_end)
        os.close(pid_write)
    with os.fdopen(pid_read, "rb") as reply:
        line = reply.readline()
    proc.lifeline = write_end  # type: ignore[attr-defined]
    proc.group = int(line) if line.strip().isdigit() else None  # type: ignore[attr-defined]
    if proc.group is None:  # the lifeline itself could not start
        kill_process_group(proc)
        raise InfrastructureError("runtime_start_failed", True, f"cannot start {label} ({argv[0]}): its lifeline exited")
    return proc


def group_of(proc: subprocess.Popen[bytes]) -> int:
    """The process group id of a runtime started by :func:`start_process_group` (the runtime's pid)."""
    return getattr(proc, "group", None) or proc.pid


def kill_process_group(proc: subprocess.Popen[bytes] | None, *, wait_s: float = 5.0) -> None:
    """SIGKILL ``proc``'s whole process group, reap it and close its pipes (and its lifeline's,
    :func:`start_process_group`). Never raises."""
    if proc is None:
        return
    try:
        os.killpg(group_of(proc), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if pipe:
                pipe.close()
        except OSError:
            pass
    lifeline = getattr(proc, "lifeline", None)
    if lifeline is not None:
        proc.lifeline = None  # type: ignore[attr-defined]
        try:
            os.close(lifeline)
        except OSError:
            pass


# -- turns ----------------------------------------------------------------------------------------


@dataclass
class TurnState:
    """One turn while it runs: its usage so far, the error that failed it, whether the harness
    timed it out, and its :class:`TurnOutcome` once it ended. Drivers subclass it for their own
    per-turn facts."""

    turn_id: str
    started_ms: int
    usage: Usage = Usage()
    error: str | None = None
    error_code: str | None = None
    timed_out: bool = False
    outcome: TurnOutcome | None = None


class TurnBook:
    """The turns of one driver, guarded by the driver's condition variable ``cond``.

    ``current`` is the turn :meth:`wait` waits for (the last one started), ``active`` the one
    still running (``None`` once it ended), ``crashed`` the reason the runtime died while in use.
    Every method expects ``cond`` to be held, except :meth:`wait`.
    """

    def __init__(self, events: EventLog, cond: threading.Condition, *, state: Callable[..., TurnState] = TurnState) -> None:
        self.events = events
        self.cond = cond
        self._state = state
        self.turns: dict[str, TurnState] = {}
        self.current: str | None = None
        self.active: str | None = None
        self.crashed: str | None = None
        self._numbered = 0

    def register(self, turn_id: str, *, current: bool = False) -> TurnState:
        """The turn ``turn_id``, registered (and made active) the first time it is named."""
        turn = self.turns.get(turn_id)
        if turn is None:
            turn = self.turns[turn_id] = self._state(turn_id=turn_id, started_ms=self.events.now_ms())
            self.active = turn_id
            self.cond.notify_all()
        if current:
            self.current = turn_id
        return turn

    def register_next(self) -> TurnState:
        """A new current turn named by evalhub (``turn-1``, ``turn-2``...: for runtimes whose
        turns have no id of their own), after :meth:`raise_unless_idle`."""
        self.raise_unless_idle()
        self._numbered += 1
        return self.register(f"turn-{self._numbered}", current=True)

    def active_turn(self) -> TurnState | None:
        """The running turn, or ``None``."""
        return self.turns.get(self.active) if self.active else None

    def finish(self, turn: TurnState, status: str) -> TurnOutcome:
        """Record the turn's outcome (once: a later call keeps the first) and wake waiters."""
        if turn.outcome is None:
            turn.outcome = TurnOutcome(
                turn_id=turn.turn_id,
                status=status,
                started_ms=turn.started_ms,
                ended_ms=self.events.now_ms(),
                usage=turn.usage,
                error=turn.error if status == "failed" or turn.error else None,
                error_code=turn.error_code,
            )
        if self.active == turn.turn_id:
            self.active = None
        self.cond.notify_all()
        return turn.outcome

    def end_active(self, status: str, reason: str) -> None:
        """End the running turn (if any) with ``status``, keeping an earlier error, else ``reason``."""
        turn = self.active_turn()
        if turn is not None:
            turn.error = turn.error or reason
            self.finish(turn, status)

    def raise_if_crashed(self) -> None:
        """Raise ``InfrastructureError("runtime_crashed", retryable)`` when the runtime died."""
        if self.crashed is not None:
            raise InfrastructureError("runtime_crashed", True, self.crashed)

    def raise_unless_idle(self) -> None:
        """Before a new turn: :meth:`raise_if_crashed`, then ``RuntimeError`` when a turn is still active."""
        self.raise_if_crashed()
        if self.active is not None:
            raise RuntimeError(f"turn {self.active} is still active; steer it or wait for it")

    def wait(self, timeout_ms: int, interrupt: Callable[[], None]) -> TurnOutcome:
        """Wait up to ``timeout_ms`` for the current turn's outcome (``Driver.wait_turn``).

        On timeout the turn is marked ``timed_out``, ``interrupt()`` is called once (without
        the lock) and the runtime gets :data:`INTERRUPT_GRACE_S` to confirm; the outcome's
        status is then ``timed_out`` (the driver finishes a timed-out turn with that status).
        Raises ``RuntimeError`` when no turn was started, ``InfrastructureError("runtime_crashed")``
        when the runtime died meanwhile.
        """
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        with self.cond:
            if self.current is None:
                raise RuntimeError("no turn was started")
            turn = self.turns[self.current]
            while turn.outcome is None and self.crashed is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(remaining)
            if turn.outcome is not None:
                return turn.outcome
            self.raise_if_crashed()
            turn.timed_out = True
        interrupt()
        with self.cond:
            end = time.monotonic() + INTERRUPT_GRACE_S
            while turn.outcome is None and self.crashed is None and time.monotonic() < end:
                self.cond.wait(end - time.monotonic())
            return self.finish(turn, "timed_out")


# -- streamed text --------------------------------------------------------------------------------


@dataclass
class _Pending:
    turn_id: str | None
    deltas: list[tuple[int, CanonicalEvent]] = field(default_factory=list)


class DeltaBuffer:
    """Streamed text deltas by message (item) id, until the message completes.

    Each delta frame is interpreted when its message completes, naming both its own
    ``assistant.message.delta`` and the message's ``item.completed`` (or only the delta when the
    message never completes). Not thread-safe: use it under the driver's lock.
    """

    def __init__(self, trace: TraceSink) -> None:
        self._trace = trace
        self._pending: dict[str, _Pending] = {}

    def open(self, item_id: str, turn_id: str | None) -> None:
        """A message started streaming (deltas may follow)."""
        self._pending.setdefault(item_id, _Pending(turn_id))

    def add(self, item_id: str, turn_id: str | None, frame_id: int, event: CanonicalEvent) -> None:
        """One delta frame and the ``assistant.message.delta`` it emitted."""
        self._pending.setdefault(item_id, _Pending(turn_id)).deltas.append((frame_id, event))

    def frames(self, item_id: str) -> list[int]:
        """The delta frame ids of ``item_id`` so far."""
        pending = self._pending.get(item_id)
        return [frame_id for frame_id, _ in pending.deltas] if pending else []

    def flush(self, item_id: str, completed: CanonicalEvent | None) -> list[int]:
        """Interpret ``item_id``'s delta frames (with ``completed`` when it completed) and forget them."""
        pending = self._pending.pop(item_id, None)
        if pending is None:
            return []
        for frame_id, delta in pending.deltas:
            self._trace.interpret([frame_id], "mapped", [delta, completed] if completed is not None else [delta])
        return [frame_id for frame_id, _ in pending.deltas]

    def flush_turn(self, turn_id: str | None) -> None:
        """Flush the messages of ``turn_id`` (and those of no known turn) that never completed."""
        for item_id, pending in list(self._pending.items()):
            if pending.turn_id in (turn_id, None):
                self.flush(item_id, None)

    def flush_all(self) -> None:
        """Flush everything still pending (the driver is closing)."""
        for item_id in list(self._pending):
            self.flush(item_id, None)


# -- callbacks ------------------------------------------------------------------------------------


class CallbackWorker:
    """Runs jobs one after another on a daemon thread named ``name``; a failing job is logged."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], None]) -> None:
        """Run ``job()`` after the jobs already queued."""
        self._jobs.put(job)

    def drain(self, timeout_s: float = 2.0) -> bool:
        """Wait up to ``timeout_s`` until the jobs queued so far have run; returns whether they have.
        Called from this worker's own thread it returns False at once (it would wait on itself)."""
        if threading.current_thread() is self._thread:
            return False
        done = threading.Event()
        self._jobs.put(done.set)
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop after the queued jobs (waits up to ``timeout_s``)."""
        self._jobs.put(None)
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                logger.exception("runtime driver callback failed (%s)", self._thread.name)


def decide(callbacks: DriverCallbacks, request: RuntimeRequest) -> str:
    """``callbacks.on_runtime_request(request)``, one of :data:`PERMISSION_DECISIONS`: an
    exception or an unknown answer counts as ``deny``."""
    try:
        decision = callbacks.on_runtime_request(request)
    except Exception:
        return "deny"
    return decision if decision in PERMISSION_DECISIONS else "deny"


class ProcessDriver(Driver):
    """The plumbing every driver builds on, under one lock (``_cond``): a :class:`TurnBook`, a
    :class:`DeltaBuffer`, a :class:`CallbackWorker`, the runtime process (``_proc``), the tail of
    what it printed, and the execution's cumulative usage.

    ``__init__`` takes the keyword arguments :class:`~runs.executors.live.contracts.Driver` names,
    plus ``case_id`` and ``execution_id`` (fill ``{case_id}``/``{execution_id}`` in
    ``provider.base_url``), ``approvals`` (``"auto"`` or ``"prompt"``; anything else is a
    ``ValueError``) and ``request_timeout_s`` (seconds); a subclass takes its own options and
    passes the rest on. It implements :meth:`_kill` (stop the process group and what talks to it).
    """

    #: The per-turn facts the driver keeps (:class:`TurnState` or a subclass of it).
    _turn_state: ClassVar[Callable[..., TurnState]] = TurnState
    #: The name of the callback thread (:class:`CallbackWorker`).
    _worker_name: ClassVar[str] = "runtime-callbacks"
    #: How :meth:`_stderr_hint` introduces the runtime's last lines, and the lines it leaves out.
    _hint_label: ClassVar[str] = "stderr"
    _hint_skips: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        workdir: str | os.PathLike[str],
        provider: ProviderConfig,
        model: str,
        reasoning_effort: str | None,
        mcp_url: str,
        environment: Mapping[str, str],
        events: EventLog,
        trace: TraceSink,
        callbacks: DriverCallbacks,
        instructions: str,
        case_id: str | None = None,
        execution_id: str | None = None,
        approvals: str = "auto",
        binary: str | None = None,
        request_timeout_s: float = 30.0,
    ) -> None:
        if approvals not in ("auto", "prompt"):
            raise ValueError(f"approvals must be 'auto' or 'prompt', not {approvals!r}")
        self.workdir = Path(workdir)
        self.workspace = self.workdir / "workspace"
        self.provider = provider
        self.base_url = format_base_url(provider.base_url, case_id=case_id, execution_id=execution_id)
        self.model = model
        self.reasoning_effort = reasoning_effort
        self.mcp_url = mcp_url
        self.approvals = approvals
        self._environment = dict(environment)
        self._instructions = instructions
        self._configured_binary = binary
        self._binary: str | None = None
        self._request_timeout_s = request_timeout_s

        self._events = events
        self._trace = trace
        self._callbacks = callbacks
        self._cond = threading.Condition(threading.RLock())
        self._book = TurnBook(events, self._cond, state=self._turn_state)
        self._deltas = DeltaBuffer(trace)
        self._worker = CallbackWorker(self._worker_name)
        self._proc: subprocess.Popen[bytes] | None = None
        self._usage_total = Usage()
        self._closed = False
        self._stderr_tail: deque[str] = deque(maxlen=20)

    @property
    def pgid(self) -> int | None:
        """The process group id of the running runtime (its pid), or ``None``."""
        return group_of(self._proc) if self._proc is not None else None

    @property
    def usage(self) -> Usage:
        """Cumulative usage of the execution so far."""
        with self._cond:
            return self._usage_total

    def wait_turn(self, timeout_ms: int) -> TurnOutcome:
        """Wait up to ``timeout_ms`` for the current turn to end and return its outcome; on
        timeout the turn is interrupted and its status is ``timed_out`` (:meth:`TurnBook.wait`).
        Raises ``RuntimeError`` when no turn was started, ``InfrastructureError("runtime_crashed")``
        when the runtime dies meanwhile.

        The callbacks for what the runtime sent before the turn ended (its last usage report,
        above all) have run when this returns: they are delivered on the driver's callback thread,
        and a usage report read after the turn would otherwise be missed by whoever counts cost."""
        outcome = self._book.wait(timeout_ms, self.interrupt)
        self._worker.drain()
        return outcome

    def close(self) -> None:
        """Kill the runtime's whole process group and release everything. Idempotent; never raises.
        A turn still running ends ``interrupted`` (a ``wait_turn`` in another thread returns)."""
        try:
            with self._cond:
                already = self._closed
                self._closed = True
            if already:
                return
            self._kill()
            with self._cond:
                self._deltas.flush_all()
                self._book.end_active("interrupted", "driver closed")
            self._worker.close()
        except Exception:
            pass

    # -- the process -----------------------------------------------------------------------

    def _kill(self) -> None:
        raise NotImplementedError

    @contextmanager
    def _killed_on_failure(self) -> Iterator[None]:
        """Kill the runtime when the block raises anything (a half-started runtime never stays)."""
        try:
            yield
        except BaseException:
            self._kill()
            raise

    def _kill_for_restart(self) -> None:
        """A restart's first half: kill the process group, end the active turn ``interrupted``
        and forget the crash the kill caused (:meth:`_reset_for_restart` runs first, under the lock)."""
        self._kill()
        with self._cond:
            self._reset_for_restart()
            self._book.end_active("interrupted", "runtime restarted")
            self._book.crashed = None

    def _reset_for_restart(self) -> None:
        """What a subclass forgets of the killed process (the lock is held)."""

    def _process_env(self) -> dict[str, str]:
        """The runtime's environment: exactly the ``environment`` given, plus ``PATH=os.defpath``
        when it names no ``PATH`` (the npm launchers are ``#!/usr/bin/env node`` scripts)."""
        env = dict(self._environment)
        env.setdefault("PATH", os.defpath)
        return env

    def _on_stderr(self, raw: bytes, frame_id: int) -> None:
        """A line the runtime printed (frame ``frame_id``): kept in the tail, ``operator_only``."""
        self._stderr_tail.append(raw.decode("utf-8", "replace")[:300])
        self._trace.interpret([frame_id], "operator_only", [])

    def _await_start(self, ready: Callable[[], bool], timeout_s: float, *, code: str, what: str) -> None:
        """Wait, under the lock, until ``ready()`` (it may raise to give up). Raises
        ``InfrastructureError("runtime_start_failed")`` with the crash when the runtime dies
        meanwhile, and ``InfrastructureError(code)`` saying "<what> within <timeout_s> s" after
        ``timeout_s`` seconds (both retryable)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not ready():
                if self._book.crashed is not None:
                    raise InfrastructureError("runtime_start_failed", True, self._book.crashed)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InfrastructureError(code, True, f"{what} within {timeout_s:g} s")
                self._cond.wait(remaining)

    def _stderr_hint(self) -> str:
        """The runtime's last three lines (bar :attr:`_hint_skips`) for an error message, or ``""``."""
        tail = [line for line in self._stderr_tail if line.strip() and not any(skip in line for skip in self._hint_skips)][-3:]
        return (f"; {self._hint_label}: " + short_text(" | ".join(tail))) if tail else ""

    # -- canonical events every driver emits alike -----------------------------------------

    def _emit(self, type_: str, frame_ids: list[int], turn_id: str | None = None, **data: Any) -> CanonicalEvent:
        return self._events.emit(type_, source="runtime", frame_ids=frame_ids, turn_id=turn_id, data=data)

    def _dispatch(
        self,
        handlers: Mapping[str, Callable[[Any, Mapping[str, Any], int], None]],
        operator_only: frozenset[str],
        kind: str,
        payload: Mapping[str, Any],
        frame_id: int,
    ) -> None:
        """Hand a runtime message of ``kind`` to its handler (``handler(self, payload, frame_id)``);
        a kind without one is ``operator_only`` when listed so, else ``ignored``."""
        handler = handlers.get(kind)
        if handler is not None:
            handler(self, payload, frame_id)
        elif kind in operator_only:
            self._trace.interpret([frame_id], "operator_only", [])
        else:
            self._trace.interpret([frame_id], "ignored", [])

    def _emit_usage(self, frame_id: int, turn_id: str | None, cumulative: Usage) -> CanonicalEvent:
        """``usage.updated`` with the execution's cumulative usage."""
        return self._emit(
            "usage.updated",
            [frame_id],
            turn_id,
            input=cumulative.input,
            cachedInput=cumulative.cached_input,
            output=cumulative.output,
            reasoning=cumulative.reasoning,
        )

    def _emit_tool_started(self, frame_id: int, turn_id: str | None, item_id: str, tool: str, server: str | None) -> list[CanonicalEvent]:
        """A tool call's ``item.started`` (``toolCall``) and ``tool.execution.started``."""
        return [
            self._emit("item.started", [frame_id], turn_id, itemType="toolCall", itemId=item_id),
            self._emit("tool.execution.started", [frame_id], turn_id, tool=tool, server=server, itemId=item_id),
        ]

    def _emit_tool_ended(
        self,
        frame_id: int,
        turn_id: str | None,
        item_id: str,
        tool: str,
        server: str | None,
        *,
        failed: bool,
        changed_files: bool,
        researched: bool,
    ) -> list[CanonicalEvent]:
        """A tool call's ``item.completed`` and ``tool.execution.completed`` (status ``completed``
        or ``failed``), then ``file.change.completed`` (one file) when it ``changed_files`` and
        ``research.completed`` (via the tool) when it ``researched``."""
        outcome = "failed" if failed else "completed"
        emitted = [
            self._emit("item.completed", [frame_id], turn_id, itemType="toolCall", itemId=item_id, status=outcome),
            self._emit(
                "tool.execution.completed",
                [frame_id],
                turn_id,
                tool=tool,
                server=server,
                itemId=item_id,
                status=outcome,
                isError=failed,
            ),
        ]
        if changed_files:
            emitted.append(self._emit("file.change.completed", [frame_id], turn_id, itemId=item_id, status=outcome, files=1))
        if researched:
            emitted.append(self._emit("research.completed", [frame_id], turn_id, via=tool, itemId=item_id))
        return emitted

    def _emit_request_opened(self, frame_id: int, request: RuntimeRequest, method: str) -> CanonicalEvent:
        """``runtime_request.opened`` for ``request`` (the runtime's ``method`` asked it)."""
        return self._emit("runtime_request.opened", [frame_id], request.turn_id, kind=request.kind, subject=request.subject, method=method)

    def _request_resolved(self, frame_id: int, request: RuntimeRequest, decision: str) -> None:
        """``runtime_request.resolved`` with ``decision``, from the answer's frame (``mapped``)."""
        resolved = self._emit(
            "runtime_request.resolved", [frame_id], request.turn_id, decision=decision, kind=request.kind, subject=request.subject
        )
        self._trace.interpret([frame_id], "mapped", [resolved])
