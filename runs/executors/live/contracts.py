"""The live harness's shared shapes: what the parts of one live execution hand each other.

One live execution is made of runtime-neutral parts and one
runtime-specific part:

* :class:`EventLog` — the ordered canonical (PRP) events of the execution, from every source:
  the runtime's normalised frames, the control plane and the case driver.
* the **control plane** (``runs.executors.live.controlplane``) — the per-execution task board the agent
  works on through typed operations, exposed as an MCP server (``runs.executors.live.mcp_server``).
* the **trace recorder** (``runs.executors.trace``, the stored format every executor writes) — every raw protocol frame in order, with its
  sequence number, byte length and SHA-256 digest, and how each frame was interpreted.
* a **driver** (:class:`Driver`; ``runs.executors.live.drivers.codex`` is the first) — starts the
  runtime, speaks its protocol, normalises its frames. The only runtime-specific part.
* the **case driver** (``runs.executors.live.case_driver``) — plays the human side of the case's
  steps against the driver and the control plane, then collects :class:`Evidence`.
* the **observer** (``runs.executors.live.observe``) — turns :class:`Evidence` into the reference
  observation document.

Times are milliseconds since the execution started (``at_ms``), tokens are integer counts, money
is USD as ``float`` with ``None`` meaning *unknown* (never 0).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Decisions the case driver can give to a runtime's approval request (case step
#: ``permission_decision``); ``allow_once`` is the default when no step says otherwise.
PERMISSION_DECISIONS = ("allow_once", "accept_for_session", "deny")

#: Terminal statuses of one turn as a driver reports them.
TURN_STATUSES = ("completed", "failed", "interrupted", "timed_out")


@dataclass(frozen=True)
class CanonicalEvent:
    """One canonical (PRP) event: ``type`` such as ``item.started`` or ``run.terminal``.

    ``source`` is ``runtime`` (a normalised frame), ``control_plane`` or ``harness``.
    ``frame_ids`` are the trace frames it came from (empty for non-runtime sources), ``turn_id``
    the runtime turn it belongs to when known, ``data`` a small JSON-able dict (never raw text
    longer than a few hundred characters — it may reach pages).
    """

    id: str
    type: str
    source: str
    at_ms: int
    frame_ids: tuple[int, ...] = ()
    turn_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


class EventLog:
    """The execution's ordered, thread-safe list of canonical events.

    Every part appends through :meth:`emit`; ids are ``evt-<n>`` in emission order.
    ``listeners`` are called (outside the lock) with each new event — the case driver uses this
    to react to ``interaction.requested`` and to spot the first visible progress.
    """

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        start = time.monotonic()
        self._clock_ms = clock_ms or (lambda: int((time.monotonic() - start) * 1000))
        self._lock = threading.Lock()
        self._events: list[CanonicalEvent] = []
        self.listeners: list[Callable[[CanonicalEvent], None]] = []

    def now_ms(self) -> int:
        """Milliseconds since the execution started."""
        return self._clock_ms()

    def emit(
        self,
        type: str,
        *,
        source: str,
        frame_ids: Sequence[int] = (),
        turn_id: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> CanonicalEvent:
        """Append one event and return it."""
        with self._lock:
            event = CanonicalEvent(
                id=f"evt-{len(self._events) + 1}",
                type=type,
                source=source,
                at_ms=self._clock_ms(),
                frame_ids=tuple(frame_ids),
                turn_id=turn_id,
                data=dict(data or {}),
            )
            self._events.append(event)
        for listener in list(self.listeners):
            listener(event)
        return event

    def events(self) -> list[CanonicalEvent]:
        """A copy of the events so far, in order."""
        with self._lock:
            return list(self._events)

    def types(self) -> list[str]:
        """The event types so far, in order (repeats kept)."""
        return [event.type for event in self.events()]


@dataclass(frozen=True)
class Usage:
    """Token counts. ``input`` includes ``cached_input``; ``output`` excludes ``reasoning``
    (drivers subtract reasoning tokens when the provider counts them inside output, as OpenAI
    does), so every token is counted once and priced once."""

    input: int = 0
    cached_input: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        """Tokens that count against the budget, as the reference counts them:
        input + output + reasoning, cached input excluded."""
        return max(0, self.input - self.cached_input) + self.output + self.reasoning

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.cached_input + other.cached_input,
            self.output + other.output,
            self.reasoning + other.reasoning,
        )


@dataclass(frozen=True)
class TurnOutcome:
    """How one runtime turn ended.

    ``status`` is one of :data:`TURN_STATUSES`; ``usage`` is the turn's own tokens;
    ``error`` a short redacted message for ``failed``; ``error_code`` a classification code
    when the driver recognised a provider failure (``provider_http_503``, ``provider_rate_limited``,
    ``provider_auth_refused``, ``provider_quota_exhausted``, ``provider_unknown_model``,
    ``provider_stream_dropped``...), else ``None``.
    """

    turn_id: str
    status: str
    started_ms: int
    ended_ms: int
    usage: Usage = Usage()
    error: str | None = None
    error_code: str | None = None


@dataclass(frozen=True)
class RuntimeRequest:
    """An approval the runtime asks its client for (codex ``mcpServer/elicitation/request``,
    ``item/commandExecution/requestApproval``, ACP ``session/request_permission``...).

    ``kind`` is ``tool`` (an MCP tool call), ``command``, ``file_change`` or ``other``;
    ``subject`` names what is asked (tool or command), ``turn_id`` the turn.
    """

    kind: str
    subject: str
    turn_id: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


class TraceSink(Protocol):
    """What drivers need from the trace recorder (``runs.executors.trace.TraceRecorder``)."""

    def frame(self, direction: str, raw: bytes) -> int:
        """Record one raw frame (``direction`` ``in`` = runtime→evalhub, ``out`` =
        evalhub→runtime, ``stderr``) and return its frame id (1, 2, 3... in order)."""

    def interpret(self, frame_ids: Sequence[int], disposition: str, events: Sequence[CanonicalEvent]) -> None:
        """Record how frames were interpreted: ``disposition`` from ``runs.executors.trace.DISPOSITIONS`` and
        the canonical events they produced (empty for ``ignored``)."""


class DriverCallbacks(Protocol):
    """What a driver calls back into while a turn runs (the case driver implements these)."""

    def on_runtime_request(self, request: RuntimeRequest) -> str:
        """Decide an approval: returns one of :data:`PERMISSION_DECISIONS`."""

    def on_usage(self, turn_id: str | None, usage: Usage) -> None:
        """The runtime reported usage: ``usage`` is the cumulative total for the execution."""


class Driver:
    """A runtime driver: the only runtime-specific part of a live execution.

    Constructed with keyword arguments: ``workdir`` (a fresh private directory), ``provider``
    (``runs.executors.providers.ProviderConfig``), ``model`` (str), ``reasoning_effort`` (str or None),
    ``mcp_url`` (the control plane's MCP endpoint on loopback), ``environment`` (the allow-listed
    process environment for the runtime, including the candidate's required variables),
    ``events`` (:class:`EventLog`), ``trace`` (:class:`TraceSink`), ``callbacks``
    (:class:`DriverCallbacks`), ``instructions`` (the developer instructions: evalhub's preamble),
    ``binary`` (the configured executable or ``None``: see ``runs.executors.live.runtimes``).

    Errors: every method raises ``runs.executors.base.InfrastructureError`` for runtime trouble,
    with codes ``runtime_missing`` (not retryable), ``runtime_start_failed`` and
    ``runtime_crashed`` (retryable), ``mcp_unavailable`` (retryable).
    """

    #: Shown in messages and pages, e.g. "codex app-server".
    runtime_name = "runtime"
    #: The executable this driver starts: a key of ``runs.executors.live.runtimes.RUNTIMES``.
    runtime_key = ""
    #: Capabilities the case driver may use: ``steer``, ``interrupt``, ``resume``.
    capabilities: frozenset[str] = frozenset()
    #: The model provider wire APIs (``runs.executors.providers.ProviderConfig.wire_api``) the runtime speaks, preferred first.
    wire_apis: tuple[str, ...] = ("responses",)

    def start(self) -> None:
        """Start the runtime process, handshake, open a thread/session, wait until the MCP server
        is ready (``mcp_unavailable`` when it failed)."""
        raise NotImplementedError

    def start_turn(self, text: str) -> str:
        """Send user input as a new turn without waiting for it; returns the turn id."""
        raise NotImplementedError

    def wait_turn(self, timeout_ms: int) -> TurnOutcome:
        """Wait for the active turn to end. On timeout the driver interrupts the turn and returns
        status ``timed_out``."""
        raise NotImplementedError

    def steer(self, text: str) -> bool:
        """Deliver text into the active turn; returns whether the runtime acknowledged it."""
        raise NotImplementedError

    def interrupt(self) -> None:
        """Interrupt the active turn (no-op when idle)."""
        raise NotImplementedError

    def restart(self) -> None:
        """Kill the runtime's whole process group and start it again on the same persisted state,
        resuming the same thread (``resume`` capability)."""
        raise NotImplementedError

    def close(self) -> None:
        """Kill the runtime's whole process group. Idempotent; never raises."""
        raise NotImplementedError

    def probe_rejection(self) -> bool:
        """Send the runtime one request it must refuse (an unknown method), so the trace shows the
        ``rejected`` path from raw frame to interpretation. A clean run never produces a rejected
        frame, yet the trace-lineage case asks for all five dispositions; the case driver calls
        this only when a case's ``trace.dispositions`` assertion lists ``rejected``. Returns
        whether the runtime refused it; the default does nothing and returns ``False``."""
        return False


@dataclass
class Evidence:
    """Everything one live execution recorded, as the observer needs it.

    ``board`` is the control plane's final :meth:`ControlPlane.snapshot` (tasks, comments,
    documents, interactions, runs, run result, tool calls with receipt ids, state revisions);
    ``events`` the canonical events in order; ``markers`` the ordered presentation markers the
    case driver and control plane noted; ``turns`` every runtime turn; ``usage`` the cumulative
    tokens; ``cost_usd`` ``None`` when a price is unknown; ``budget_stop`` the recorded
    "candidate reported usage budget stop: ..." message, if any; ``trace`` the recorder's
    summary dict (``capture``, ``frameCount``, ``byteCount``, ``digestVerified``, ``ordered``,
    ``dispositions``, ``lineage``, ``traceRef``); ``first_visible_progress_ms`` and
    ``settlement_ms`` as the reference defines them; ``attempt`` the attempt number;
    ``candidate_failure`` a code when the case driver itself saw the candidate fail (never
    finished, turn timed out...); ``start_ms`` how long ``Driver.start`` took (the runtime's
    start-up, handshake and MCP connection).
    """

    execution_id: str
    case: Mapping[str, Any]
    candidate: Mapping[str, Any]
    board: Mapping[str, Any]
    events: list[CanonicalEvent]
    markers: list[str]
    turns: list[TurnOutcome]
    usage: Usage
    cost_usd: float | None
    budget_stop: str | None
    trace: Mapping[str, Any]
    first_visible_progress_ms: int | None
    settlement_ms: int | None
    wall_ms: int
    attempt: int = 1
    candidate_failure: str | None = None
    notes: list[str] = field(default_factory=list)
    start_ms: int | None = None
