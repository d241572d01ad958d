"""A runtime-neutral JSON-RPC 2.0 peer over newline-delimited JSON on a child's stdio.

Runtimes such as ``codex app-server`` and ACP agents speak JSON-RPC with one JSON object per
line on stdin/stdout and write logs to stderr. :class:`StdioJsonRpcPeer` owns the three pipes of
one already-started process:

* a reader thread reads stdout line by line; every line is first recorded as a raw frame
  (``record(direction, raw) -> frame_id``, direction ``in``) and then dispatched: responses
  resolve the pending request (after ``on_response`` saw them), requests from the runtime go to
  ``on_request``, notifications to ``on_notification``; lines that are not JSON objects go to
  ``on_invalid``;
* a second thread records each stderr line (direction ``stderr``) and hands it to ``on_stderr``;
* :meth:`send` records each line written (direction ``out``) under the write lock, so frame
  ids follow the order of the bytes on the pipes per direction.

Every callback runs on the reader threads and must not block for long (answer runtime requests
from another thread). When stdout reaches end of file every pending request fails with
:class:`PeerClosed` and ``on_close`` is called once.

Nothing here knows a runtime's method names; the ``jsonrpc`` member is added to what is sent
and never required on what is received (codex omits it).

:class:`JsonRpcDriver` is the driver base of the runtimes that speak it on their stdio (``codex
app-server``, ACP agents): one peer per process, and the runtime's failures in the shape of the
``Driver`` contract's ``InfrastructureError``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any, ClassVar

from runs.executors.base import InfrastructureError
from runs.executors.live.drivers.common import ProcessDriver, kill_process_group, short_text, start_process_group

logger = logging.getLogger(__name__)


class JsonRpcError(Exception):
    """The runtime answered a request with a JSON-RPC error: ``code`` (int), ``message``, ``data``."""

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        self.method = method
        self.code = error.get("code")
        self.message = str(error.get("message", ""))
        self.data = error.get("data")
        super().__init__(f"{method} failed: {self.message} (code {self.code})")


class PeerClosed(Exception):
    """The runtime's stdout closed (the process ended) before the answer arrived."""


class RequestTimeout(Exception):
    """No answer arrived within the timeout."""


class _Pending:
    def __init__(self, method: str) -> None:
        self.method = method
        self.event = threading.Event()
        self.message: Mapping[str, Any] | None = None
        self.frame_id: int | None = None
        self.closed = False


Record = Callable[[str, bytes], int]


class StdioJsonRpcPeer:
    """One JSON-RPC conversation with a child process over its stdio pipes.

    ``record(direction, raw_bytes) -> frame_id`` stores raw frames (the trace recorder);
    ``on_notification(message, frame_id)``, ``on_request(message, frame_id)``,
    ``on_response(method, message, frame_id)`` (before the waiting caller is woken; ``method`` is
    the method of the request it answers, ``None`` for an unknown id), ``on_invalid(raw,
    frame_id)``, ``on_stderr(raw, frame_id)``, ``on_sent(message, frame_id)`` (after a line was
    written) and ``on_close()`` are optional hooks.
    Request ids are integers from 1.
    """

    def __init__(
        self,
        stdin: IO[bytes],
        stdout: IO[bytes],
        stderr: IO[bytes] | None,
        *,
        record: Record,
        on_notification: Callable[[Mapping[str, Any], int], None] | None = None,
        on_request: Callable[[Mapping[str, Any], int], None] | None = None,
        on_response: Callable[[str | None, Mapping[str, Any], int], None] | None = None,
        on_invalid: Callable[[bytes, int], None] | None = None,
        on_stderr: Callable[[bytes, int], None] | None = None,
        on_close: Callable[[], None] | None = None,
        on_sent: Callable[[Mapping[str, Any], int], None] | None = None,
        name: str = "jsonrpc",
    ) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._stderr = stderr
        self._record = record
        self._on_notification = on_notification
        self._on_request = on_request
        self._on_response = on_response
        self._on_invalid = on_invalid
        self._on_stderr = on_stderr
        self._on_close = on_close
        self._on_sent = on_sent
        self._write_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: dict[Any, _Pending] = {}
        self._next_id = 0
        self._closed = threading.Event()
        self._reader = threading.Thread(target=self._read_stdout, name=f"{name}-stdout", daemon=True)
        self._stderr_reader = threading.Thread(target=self._read_stderr, name=f"{name}-stderr", daemon=True) if stderr else None

    def start(self) -> None:
        """Start the reader threads."""
        self._reader.start()
        if self._stderr_reader:
            self._stderr_reader.start()

    @property
    def closed(self) -> bool:
        """Whether stdout has reached end of file."""
        return self._closed.is_set()

    def join(self, timeout_s: float = 2.0) -> None:
        """Wait for the reader threads to finish (after the process ended)."""
        for thread in (self._reader, self._stderr_reader):
            if thread is not None and thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout_s)

    # -- writing ---------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any]) -> int:
        """Write one message as a line and return its frame id.

        Raises :class:`PeerClosed` when the pipe is gone.
        """
        payload = {"jsonrpc": "2.0", **message}
        raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        with self._write_lock:
            frame_id = self._record("out", raw)
            try:
                self._stdin.write(raw + b"\n")
                self._stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise PeerClosed(f"cannot write to the runtime: {exc}") from exc
        if self._on_sent:
            self._safe(self._on_sent, payload, frame_id)
        return frame_id

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> int:
        """Send a notification; returns its frame id."""
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = dict(params)
        return self.send(message)

    def request(self, method: str, params: Mapping[str, Any] | None, *, timeout_s: float) -> dict[str, Any]:
        """Send a request and wait for its result (a dict; ``{}`` when the result is null).

        Raises :class:`JsonRpcError` for an error answer, :class:`PeerClosed` when the process
        ended first, :class:`RequestTimeout` after ``timeout_s`` seconds.
        """
        with self._pending_lock:
            if self._closed.is_set():
                raise PeerClosed(f"{method}: the runtime has exited")
            self._next_id += 1
            request_id = self._next_id
            pending = _Pending(method)
            self._pending[request_id] = pending
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        try:
            self.send(message)
        except PeerClosed:
            with self._pending_lock:
                self._pending.pop(request_id, None)
            raise
        if not pending.event.wait(timeout_s):
            with self._pending_lock:
                self._pending.pop(request_id, None)
            raise RequestTimeout(f"{method}: no answer within {timeout_s:g} s")
        if pending.closed or pending.message is None:
            raise PeerClosed(f"{method}: the runtime exited before answering")
        if "error" in pending.message and pending.message.get("error") is not None:
            error = pending.message["error"]
            raise JsonRpcError(method, error if isinstance(error, Mapping) else {"message": str(error)})
        result = pending.message.get("result")
        return dict(result) if isinstance(result, Mapping) else {}

    def respond(self, request_id: Any, result: Mapping[str, Any]) -> int:
        """Answer a request from the runtime; returns the frame id."""
        return self.send({"id": request_id, "result": dict(result)})

    def respond_error(self, request_id: Any, code: int, message: str) -> int:
        """Refuse a request from the runtime with a JSON-RPC error; returns the frame id."""
        return self.send({"id": request_id, "error": {"code": code, "message": message}})

    # -- reading ---------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        try:
            for line in iter(self._stdout.readline, b""):
                raw = line.rstrip(b"\r\n")
                if not raw.strip():
                    continue
                frame_id = self._record("in", raw)
                try:
                    message = json.loads(raw)
                except ValueError:
                    message = None
                if not isinstance(message, dict):
                    if self._on_invalid:
                        self._safe(self._on_invalid, raw, frame_id)
                    continue
                self._dispatch(message, frame_id)
        except (OSError, ValueError):
            pass
        finally:
            with self._pending_lock:
                self._closed.set()
                pending = list(self._pending.values())
                self._pending.clear()
            for item in pending:
                item.closed = True
                item.event.set()
            if self._on_close:
                self._safe(self._on_close)

    def _dispatch(self, message: dict[str, Any], frame_id: int) -> None:
        has_id = "id" in message and message["id"] is not None
        if "method" in message and has_id:
            if self._on_request:
                self._safe(self._on_request, message, frame_id)
            return
        if "method" in message:
            if self._on_notification:
                self._safe(self._on_notification, message, frame_id)
            return
        with self._pending_lock:
            pending = self._pending.pop(message.get("id"), None)
        if self._on_response:
            self._safe(self._on_response, pending.method if pending else None, message, frame_id)
        if pending is not None:
            pending.message = message
            pending.frame_id = frame_id
            pending.event.set()

    def _read_stderr(self) -> None:
        assert self._stderr is not None
        try:
            for line in iter(self._stderr.readline, b""):
                raw = line.rstrip(b"\r\n")
                if not raw.strip():
                    continue
                frame_id = self._record("stderr", raw)
                if self._on_stderr:
                    self._safe(self._on_stderr, raw, frame_id)
        except (OSError, ValueError):
            pass

    @staticmethod
    def _safe(callback: Callable[..., Any], *args: Any) -> None:
        # A hook's bug must not kill the reader: that would look like a runtime crash.
        try:
            callback(*args)
        except Exception:
            logger.exception("jsonrpc hook failed")


# -- the driver base --------------------------------------------------------------------------


def message_parts(message: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """``(method, params)`` of a request or notification (``params`` ``{}`` when not an object)."""
    params = message.get("params")
    return str(message.get("method")), params if isinstance(params, Mapping) else {}


class JsonRpcDriver(ProcessDriver):
    """A :class:`ProcessDriver` whose runtime speaks JSON-RPC on its stdio: the peer of the running
    process (``_peer``; ``_generation`` counts the processes, so that the close of a killed one is
    expected, not a crash), its requests with their failures as ``InfrastructureError``, and the
    trace probe. A subclass implements the peer's hooks ``_on_notification(generation, message,
    frame_id)``, ``_on_response`` and ``_on_sent``, and the one it gives :meth:`_open_peer` for the
    runtime's requests.
    """

    #: Names the peer's reader threads (``<name>-<generation>``).
    _peer_name: ClassVar[str] = "jsonrpc"
    #: How a failed request names the runtime ("<label> refused <method>: ..."); ``None``: ``runtime_name``.
    _request_label: ClassVar[str | None] = None
    #: Whether a request timeout's message starts with ``runtime_name`` (else it is the peer's own,
    #: "<method>: no answer within N s").
    _name_timeouts: ClassVar[bool] = True

    def __init__(self, **arguments: Any) -> None:
        super().__init__(**arguments)
        self._peer: StdioJsonRpcPeer | None = None
        self._generation = 0

    def _open_peer(self, argv: list[str], *, record: Record, on_request: Callable[[int, Mapping[str, Any], int], None]) -> StdioJsonRpcPeer:
        """Start ``argv`` (its own process group, in the workspace, with :meth:`_process_env`) as
        the next generation and start its peer: every frame through ``record``, the runtime's
        requests to ``on_request(generation, message, frame_id)``, lines that are not JSON
        ``rejected``, stderr to :meth:`_on_stderr`. Raises like :func:`start_process_group`."""
        with self._cond:
            self._generation += 1
            generation = self._generation
        proc = start_process_group(argv, env=self._process_env(), cwd=str(self.workspace), label=self.runtime_name)
        assert proc.stdin and proc.stdout and proc.stderr
        peer = StdioJsonRpcPeer(
            proc.stdin,
            proc.stdout,
            proc.stderr,
            record=record,
            on_notification=lambda message, fid: self._on_notification(generation, message, fid),
            on_request=lambda message, fid: on_request(generation, message, fid),
            on_response=self._on_response,
            on_invalid=lambda raw, fid: self._trace.interpret([fid], "rejected", []),
            on_stderr=self._on_stderr,
            on_close=lambda: self._on_peer_closed(generation),
            on_sent=self._on_sent,
            name=f"{self._peer_name}-{generation}",
        )
        with self._cond:
            self._proc = proc
            self._peer = peer
        peer.start()
        return peer

    def _kill(self) -> None:
        with self._cond:
            proc, peer = self._proc, self._peer
            self._generation += 1  # the old peer's close is now expected, not a crash
        kill_process_group(proc)
        if peer is not None:
            peer.join(2.0)

    def _on_peer_closed(self, generation: int) -> None:
        with self._cond:
            if generation != self._generation or self._closed:
                return
            code = self._proc.poll() if self._proc else None
            self._book.crashed = f"{self.runtime_name} exited unexpectedly (exit status {code}){self._stderr_hint()}"
            self._cond.notify_all()

    def _request(
        self, method: str, params: Mapping[str, Any], *, start_phase: bool = False, refusals_raise: bool = False
    ) -> dict[str, Any]:
        """Send ``method`` and wait (``request_timeout_s``) for its result. Raises
        ``InfrastructureError`` (``runtime_start_failed`` with ``start_phase``, else
        ``runtime_crashed``; retryable) when the runtime is not running, refuses (a
        :class:`JsonRpcError` itself with ``refusals_raise``), exits or does not answer in time."""
        with self._cond:
            peer = self._peer
        code = "runtime_start_failed" if start_phase else "runtime_crashed"
        label = self._request_label or self.runtime_name
        if peer is None:
            raise InfrastructureError(code, True, f"{label} is not running ({method})")
        try:
            return peer.request(method, params, timeout_s=self._request_timeout_s)
        except JsonRpcError as exc:
            if refusals_raise:
                raise
            raise InfrastructureError(code, True, f"{label} refused {method}: {short_text(exc.message)}") from exc
        except PeerClosed as exc:
            with self._cond:
                reason = self._book.crashed or f"{self.runtime_name} exited during {method}{self._stderr_hint()}"
            raise InfrastructureError(code, True, reason) from exc
        except RequestTimeout as exc:
            raise InfrastructureError(code, True, f"{self.runtime_name}: {exc}" if self._name_timeouts else str(exc)) from exc

    def _refuse(self, peer: StdioJsonRpcPeer | None, request_id: Any, method: str, frame_id: int) -> None:
        """Refuse a request of the runtime's that evalhub does not support: its frame is
        ``rejected``, and the JSON-RPC error -32601 sent back through ``peer`` (when there is one)
        ``operator_only``. Raises :class:`PeerClosed` when the runtime is gone."""
        self._trace.interpret([frame_id], "rejected", [])
        if peer is not None:
            fid = peer.respond_error(request_id, -32601, f"evalhub does not support {method}")
            self._trace.interpret([fid], "operator_only", [])

    def probe_rejection(self) -> bool:
        """See :meth:`Driver.probe_rejection`: ``evalhub/traceProbe`` is no method of the runtime's,
        so it answers with a JSON-RPC error, interpreted as ``rejected``."""
        try:
            self._request("evalhub/traceProbe", {}, refusals_raise=True)
        except JsonRpcError:
            return True
        return False
