"""Drive the real ``codex app-server`` (codex-cli 0.171.0) over JSON-RPC on stdio.

The protocol is the one ``codex app-server generate-json-schema`` writes (vendored in
``tests/fixtures/codex-app-server-schema/``; a test regenerates it from the installed binary).
One line of JSON per message; codex omits ``"jsonrpc"``. The flow this driver uses:

``initialize`` → ``initialized`` → ``thread/start`` (persisted: ``ephemeral: false``, so a new
process can ``thread/resume`` it) → wait for ``mcpServer/startupStatus/updated`` of ``evalhub``
(``ready``; ``failed``/``cancelled`` → ``mcp_unavailable``) → ``turn/start`` per turn →
notifications until ``turn/completed``. ``turn/steer`` (with ``expectedTurnId``) adds input to
the active turn, ``turn/interrupt`` stops it. A restart kills the process group, starts a new
process on the same ``CODEX_HOME`` and sends ``thread/resume`` with the same thread id.

Configuration lives in a per-execution ``CODEX_HOME`` (``<workdir>/codex-home/config.toml``,
built by :func:`build_config_toml`); the runtime's working directory is
``<workdir>/workspace``. The process environment is exactly the ``environment`` given plus
``CODEX_HOME`` (and ``PATH=os.defpath`` only when the environment names no ``PATH``: the npm
launcher is a ``#!/usr/bin/env node`` script).

Every raw line goes to the trace (``in``/``out``/``stderr``) and every frame gets exactly one
interpretation per the table in ``docs/runtime-mapping-codex.md`` (:data:`MAPPING` mirrors it).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runs.executors.base import InfrastructureError
from runs.harness.contracts import (
    CanonicalEvent,
    DriverCallbacks,
    Driver,
    EventLog,
    ProviderConfig,
    RuntimeRequest,
    TraceSink,
    TurnOutcome,
    Usage,
)
from runs.harness.drivers.jsonrpc import JsonRpcError, PeerClosed, RequestTimeout, StdioJsonRpcPeer

logger = logging.getLogger(__name__)

#: The codex-cli version the protocol schema and this driver were written against.
CODEX_VERSION = "0.171.0"
#: The MCP server name evalhub registers (codex offers its tools in namespace ``mcp__evalhub``).
MCP_SERVER_NAME = "evalhub"
#: The provider id written into config.toml.
PROVIDER_ID = "evalhub"
INSTALL_HINT = "run `make install` (or `npm ci` in the project directory) to install codex-cli " + CODEX_VERSION
CONFIGURED_HINT = "fix EVALHUB_CODEX_BIN (RUNTIME_BINARIES[\"codex\"]) to point at an executable codex-cli " + CODEX_VERSION + ", or unset it"


def _missing_hint() -> str:
    """How to fix a missing runtime: install it, or fix a setting that points elsewhere."""
    configured = _configured_binary()
    default = Path(__file__).resolve().parents[3] / "node_modules" / ".bin" / "codex"
    return CONFIGURED_HINT if configured and Path(configured) != default else INSTALL_HINT

#: How each incoming notification is interpreted when no handler gives a more specific answer:
#: method → disposition. Methods not listed are ``ignored``. Kept in step with
#: docs/runtime-mapping-codex.md.
OPERATOR_ONLY_METHODS = frozenset(
    {
        "mcpServer/startupStatus/updated",
        "configWarning",
        "deprecationNotice",
        "guardianWarning",
        "windows/worldWritableWarning",
    }
)
#: Server→client requests evalhub refuses with JSON-RPC error -32601 (disposition ``rejected``).
REFUSED_REQUESTS = frozenset(
    {"item/tool/requestUserInput", "item/tool/call", "account/chatgptAuthTokens/refresh", "attestation/generate"}
)

_TURN_STATUS = {"completed": "completed", "failed": "failed", "interrupted": "interrupted"}
_MAX_ERROR_CHARS = 500


# -- binary and status --------------------------------------------------------------------------


def _configured_binary() -> str | None:
    try:
        from django.conf import settings

        configured = (getattr(settings, "EVALHUB", {}) or {}).get("RUNTIME_BINARIES", {}) or {}
        value = configured.get("codex")
    except Exception:  # noqa: BLE001 - settings not configured (a plain script): fall back
        value = None
    return str(value) if value else None


def resolve_codex_binary() -> str | None:
    """The codex executable to run, or ``None`` when there is none.

    Order: ``settings.EVALHUB["RUNTIME_BINARIES"]["codex"]`` when configured (then only that
    path counts), else ``<repo>/node_modules/.bin/codex``, else ``codex`` on ``PATH``.
    """
    configured = _configured_binary()
    if configured:
        path = Path(configured)
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    repo_bin = Path(__file__).resolve().parents[3] / "node_modules" / ".bin" / "codex"
    if repo_bin.is_file() and os.access(repo_bin, os.X_OK):
        return str(repo_bin)
    return shutil.which("codex")


def codex_runtime_status() -> tuple[bool, str]:
    """Whether the codex runtime is installed at the pinned version, for ``manage.py check``.

    Returns ``(ok, message)``: ``ok`` is true when the binary exists and ``codex --version``
    prints :data:`CODEX_VERSION`; the message says what was found or how to install it.
    """
    binary = resolve_codex_binary()
    if binary is None:
        where = _configured_binary() or "node_modules/.bin/codex or PATH"
        return False, f"codex app-server not found or not executable ({where}); {_missing_hint()}"
    try:
        completed = subprocess.run(
            [binary, "--version"],
            capture_output=True,
            timeout=5,  # runs on every manage.py command (system check): a hung binary must not stall them
            env={"PATH": os.environ.get("PATH", os.defpath)},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{binary} --version failed: {exc}; {_missing_hint()}"
    output = completed.stdout.decode("utf-8", "replace").strip()
    if completed.returncode != 0 or CODEX_VERSION not in output.split():
        return False, f"{binary} reports {_short(output)[:120] or 'nothing'!r}, evalhub needs codex-cli {CODEX_VERSION}; {_missing_hint()}"
    return True, f"codex-cli {CODEX_VERSION} at {binary}"


# -- configuration -------------------------------------------------------------------------------


def _toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
    return json.dumps(value, ensure_ascii=True)


def format_base_url(base_url: str, *, case_id: str | None, execution_id: str | None) -> str:
    """``base_url`` with ``{case_id}``/``{execution_id}`` filled in (placeholders without a value stay)."""
    url = base_url
    if case_id is not None:
        url = url.replace("{case_id}", case_id)
    if execution_id is not None:
        url = url.replace("{execution_id}", execution_id)
    return url


def build_config_toml(
    *,
    provider: ProviderConfig,
    base_url: str,
    model: str,
    reasoning_effort: str | None,
    mcp_url: str,
    approvals: str = "auto",
) -> str:
    """The ``config.toml`` text for one execution's ``CODEX_HOME``.

    ``approvals="auto"``: ``approval_policy = "never"`` and the evalhub MCP server's
    ``default_tools_approval_mode = "approve"`` — MCP calls run without any prompt.
    ``approvals="prompt"``: ``approval_policy = "on-request"`` and mode ``"auto"`` — codex sends
    ``mcpServer/elicitation/request`` for each tool call (offering ``persist: ["session",
    "always"]``), answered through ``callbacks.on_runtime_request``. (Mode ``"prompt"`` also
    prompts but offers no session persistence, so "accept for session" could not be expressed.)
    Retries are off (``request_max_retries``/``stream_max_retries`` 0) so a provider failure
    surfaces at once; plugins, remote plugins, apps and analytics are off so nothing but the
    provider and the MCP server is contacted. Raises ``ValueError`` for ``wire_api`` ``chat``
    (codex 0.171 rejects it) or an unknown ``approvals``.
    """
    if provider.wire_api != "responses":
        raise ValueError(
            f"codex app-server {CODEX_VERSION} speaks only the Responses API; provider profile "
            f"{provider.profile!r} uses wire_api {provider.wire_api!r}"
        )
    if approvals not in ("auto", "prompt"):
        raise ValueError(f"approvals must be 'auto' or 'prompt', not {approvals!r}")
    policy, tool_mode = ("never", "approve") if approvals == "auto" else ("on-request", "auto")
    lines = [
        "# Written by evalhub for one live execution; do not edit.",
        f"model = {_toml_str(model)}",
        f"model_provider = {_toml_str(PROVIDER_ID)}",
    ]
    if reasoning_effort:
        lines.append(f"model_reasoning_effort = {_toml_str(reasoning_effort)}")
    lines += [
        f"approval_policy = {_toml_str(policy)}",
        'sandbox_mode = "workspace-write"',
        "check_for_update_on_startup = false",
        "",
        f"[model_providers.{PROVIDER_ID}]",
        f"name = {_toml_str('evalhub ' + provider.profile)}",
        f"base_url = {_toml_str(base_url)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    if provider.env_key:
        lines.append(f"env_key = {_toml_str(provider.env_key)}")
    lines += [
        "",
        f"[mcp_servers.{MCP_SERVER_NAME}]",
        f"url = {_toml_str(mcp_url)}",
        "startup_timeout_sec = 20",
        "tool_timeout_sec = 60",
        f"default_tools_approval_mode = {_toml_str(tool_mode)}",
        "",
        "[features]",
        "plugins = false",
        "remote_plugin = false",
        "apps = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
    ]
    return "\n".join(lines)


# -- provider errors -----------------------------------------------------------------------------

_QUOTA_WORDS = re.compile(r"quota|billing|insufficient|credit", re.IGNORECASE)
#: What codex says while it keeps reconnecting to an endpoint it cannot reach at all. It ignores
#: ``request_max_retries = 0`` there and would wait out the whole turn budget.
_UNREACHABLE_WORDS = re.compile(r"connection failed|waiting for network|error sending request|connection refused|dns", re.IGNORECASE)
_DROP_WORDS = re.compile(r"stream disconnected|stream closed|timed? ?out|timeout|connection (reset|closed|refused)|idle", re.IGNORECASE)
_STRING_CODES = {
    "usageLimitExceeded": "provider_quota_exhausted",
    "sessionBudgetExceeded": "provider_quota_exhausted",
    "rateLimitExceeded": "provider_rate_limited",
    "modelNotFound": "provider_unknown_model",
    "unauthorized": "provider_auth_refused",
    "internalServerError": "provider_http_500",
    "serverOverloaded": "provider_http_503",
    "badRequest": "provider_http_400",
    "contextWindowExceeded": "provider_context_window_exceeded",
}
_STATUS_VARIANTS = (
    "httpConnectionFailed",
    "responseStreamConnectionFailed",
    "responseStreamDisconnected",
    "responseTooManyFailedAttempts",
)


def classify_provider_error(error: Mapping[str, Any] | None) -> str | None:
    """The ``TurnOutcome.error_code`` for a codex ``TurnError`` (``{message, codexErrorInfo}``).

    Rules (codex 0.171 against a Responses endpoint, see docs/runtime-mapping-codex.md):
    ``responseStreamDisconnected`` → ``provider_stream_dropped``; an HTTP status in
    ``codexErrorInfo.<variant>.httpStatusCode``: 429 → ``provider_rate_limited`` (or
    ``provider_quota_exhausted`` when the message speaks of quota/billing), 401/403 →
    ``provider_auth_refused``, 402 → ``provider_quota_exhausted``, 404 →
    ``provider_unknown_model``, anything else → ``provider_http_<status>``; the string variants
    ``usageLimitExceeded`` (what codex reports for OpenAI's ``insufficient_quota``) →
    ``provider_quota_exhausted``, ``rateLimitExceeded`` → ``provider_rate_limited``,
    ``modelNotFound`` (404/400 ``model_not_found``) → ``provider_unknown_model``,
    ``unauthorized`` → ``provider_auth_refused``, ``internalServerError`` (HTTP 500) →
    ``provider_http_500``, ``serverOverloaded`` → ``provider_http_503``; ``other`` or a
    connection variant without status whose message says the stream disconnected or timed out
    → ``provider_stream_dropped``. ``None`` when nothing matches.
    """
    if not isinstance(error, Mapping):
        return None
    info = error.get("codexErrorInfo")
    message = str(error.get("message") or "")
    if isinstance(info, Mapping):
        for variant in _STATUS_VARIANTS:
            if variant not in info:
                continue
            detail = info.get(variant)
            status = detail.get("httpStatusCode") if isinstance(detail, Mapping) else None
            if variant == "responseStreamDisconnected":
                return "provider_stream_dropped"
            if isinstance(status, int) and status > 0:
                if status == 429:
                    return "provider_quota_exhausted" if _QUOTA_WORDS.search(message) else "provider_rate_limited"
                if status in (401, 403):
                    return "provider_auth_refused"
                if status == 402:
                    return "provider_quota_exhausted"
                if status == 404:
                    return "provider_unknown_model"
                return f"provider_http_{status}"
            return "provider_stream_dropped"
    if isinstance(info, str) and info in _STRING_CODES:
        return _STRING_CODES[info]
    if _DROP_WORDS.search(message):
        return "provider_stream_dropped"
    return None


def _usage_from(breakdown: Mapping[str, Any]) -> Usage:
    # OpenAI counts reasoning tokens inside output tokens; Usage counts each token once.
    reasoning = int(breakdown.get("reasoningOutputTokens") or 0)
    return Usage(
        input=int(breakdown.get("inputTokens") or 0),
        cached_input=int(breakdown.get("cachedInputTokens") or 0),
        output=max(0, int(breakdown.get("outputTokens") or 0) - reasoning),
        reasoning=reasoning,
    )


def _short(text: Any) -> str:
    value = str(text or "").strip()
    return value if len(value) <= _MAX_ERROR_CHARS else value[: _MAX_ERROR_CHARS - 1] + "…"


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class _Turn:
    turn_id: str
    started_ms: int
    usage: Usage = Usage()
    error: str | None = None
    error_code: str | None = None
    timed_out: bool = False
    unreachable: bool = False
    outcome: TurnOutcome | None = None


@dataclass
class _PendingDeltas:
    turn_id: str | None
    deltas: list[tuple[int, CanonicalEvent]] = field(default_factory=list)


class CodexAppServerDriver(Driver):
    """:class:`runs.harness.contracts.Driver` for ``codex app-server`` (codex-cli 0.171.0).

    Keyword arguments as :class:`~runs.harness.contracts.Driver` says, plus ``case_id`` and
    ``execution_id`` (fill ``{case_id}``/``{execution_id}`` in ``provider.base_url``),
    ``approvals`` (``"auto"``: MCP calls run unprompted; ``"prompt"``: every MCP call is an
    ``mcpServer/elicitation/request`` answered through ``callbacks.on_runtime_request``),
    ``binary`` (overrides :func:`resolve_codex_binary`), ``mcp_startup_timeout_s`` and
    ``request_timeout_s`` (seconds).

    Errors (``InfrastructureError``): ``runtime_missing`` (no binary, not retryable),
    ``runtime_start_failed`` (spawn or handshake failed, retryable; not retryable for a provider
    profile codex cannot use), ``runtime_crashed`` (the process ended while in use, retryable),
    ``mcp_unavailable`` (the evalhub MCP server failed to start in codex, retryable).
    """

    runtime_name = "codex app-server"
    capabilities = frozenset({"steer", "interrupt", "resume"})

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
        mcp_startup_timeout_s: float = 30.0,
        request_timeout_s: float = 30.0,
    ) -> None:
        if approvals not in ("auto", "prompt"):
            raise ValueError(f"approvals must be 'auto' or 'prompt', not {approvals!r}")
        self.workdir = Path(workdir)
        self.codex_home = self.workdir / "codex-home"
        self.workspace = self.workdir / "workspace"
        self.provider = provider
        self.base_url = format_base_url(provider.base_url, case_id=case_id, execution_id=execution_id)
        self.model = model
        self.reasoning_effort = reasoning_effort
        self.mcp_url = mcp_url
        self.approvals = approvals
        self._environment = dict(environment)
        self._events = events
        self._trace = trace
        self._callbacks = callbacks
        self._instructions = instructions
        self._binary = binary
        self._mcp_timeout_s = mcp_startup_timeout_s
        self._request_timeout_s = request_timeout_s

        self._cond = threading.Condition(threading.RLock())
        self._proc: subprocess.Popen[bytes] | None = None
        self._peer: StdioJsonRpcPeer | None = None
        self._generation = 0
        self._thread_id: str | None = None
        self._session_started = False
        self._mcp_status: dict[str, tuple[str, str | None]] = {}
        self._turns: dict[str, _Turn] = {}
        self._current_turn: str | None = None
        self._active_turn: str | None = None
        self._usage_total = Usage()
        self._last_seen_total: dict[str, Any] | None = None
        self._pending_deltas: dict[str, _PendingDeltas] = {}
        self._crashed: str | None = None
        self._closed = False
        self._stderr_tail: deque[str] = deque(maxlen=20)
        self._work: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._work_loop, name="codex-callbacks", daemon=True)
        self._worker.start()

    # -- public API ------------------------------------------------------------------------

    @property
    def thread_id(self) -> str | None:
        """The codex thread id (the persisted conversation), once started."""
        return self._thread_id

    @property
    def pgid(self) -> int | None:
        """The process group id of the running codex process (its pid), or ``None``."""
        return self._proc.pid if self._proc is not None else None

    @property
    def usage(self) -> Usage:
        """Cumulative usage for the execution so far."""
        with self._cond:
            return self._usage_total

    def start(self) -> None:
        """Write ``CODEX_HOME/config.toml``, spawn codex, handshake, start a persisted thread and
        wait for the evalhub MCP server to be ready. Raises ``InfrastructureError`` (see class)."""
        binary = self._binary or resolve_codex_binary()
        if binary is None or not Path(binary).exists():
            looked = binary or _configured_binary() or "node_modules/.bin/codex, PATH"
            raise InfrastructureError(
                "runtime_missing", False, f"codex app-server is not installed or not executable (looked for {looked}); {_missing_hint()}"
            )
        self._binary = binary
        try:
            config = build_config_toml(
                provider=self.provider,
                base_url=self.base_url,
                model=self.model,
                reasoning_effort=self.reasoning_effort,
                mcp_url=self.mcp_url,
                approvals=self.approvals,
            )
        except ValueError as exc:
            raise InfrastructureError("runtime_start_failed", False, str(exc)) from exc
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(config, encoding="utf-8")
        self._launch()
        try:
            result = self._request("thread/start", self._thread_params(), start_phase=True)
            thread = result.get("thread") or {}
            self._thread_id = str(thread.get("id") or "")
            if not self._thread_id:
                raise InfrastructureError("runtime_start_failed", True, "codex thread/start returned no thread id")
            self._wait_mcp_ready()
        except BaseException:
            self._kill()
            raise

    def start_turn(self, text: str) -> str:
        """Start a turn with ``text`` as user input; returns codex's turn id at once.

        Raises ``RuntimeError`` when a turn is still active (use :meth:`steer`),
        ``InfrastructureError("runtime_crashed")`` when codex is gone or refuses.
        """
        with self._cond:
            self._raise_if_crashed()
            if self._active_turn is not None:
                raise RuntimeError(f"turn {self._active_turn} is still active; steer it or wait for it")
        params: dict[str, Any] = {"threadId": self._thread_id, "input": [{"type": "text", "text": text}]}
        result = self._request("turn/start", params)
        turn_id = str((result.get("turn") or {}).get("id") or "")
        if not turn_id:
            raise InfrastructureError("runtime_crashed", True, "codex turn/start returned no turn id")
        with self._cond:
            self._register_turn(turn_id)
            self._current_turn = turn_id
            return turn_id

    def wait_turn(self, timeout_ms: int) -> TurnOutcome:
        """Wait up to ``timeout_ms`` for the current turn to end and return its outcome.

        On timeout the turn is interrupted and the outcome's status is ``timed_out``. Raises
        ``RuntimeError`` when no turn was started, ``InfrastructureError("runtime_crashed")`` when
        codex exits meanwhile.
        """
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        with self._cond:
            turn_id = self._current_turn
            if turn_id is None:
                raise RuntimeError("no turn was started")
            turn = self._turns[turn_id]
            while turn.outcome is None and self._crashed is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            if turn.outcome is not None:
                return turn.outcome
            self._raise_if_crashed()
            turn.timed_out = True
        self.interrupt()
        with self._cond:
            end = time.monotonic() + 5.0
            while turn.outcome is None and self._crashed is None and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
            if turn.outcome is None:
                self._finish_turn(turn, "timed_out")
            return turn.outcome  # type: ignore[return-value]

    def steer(self, text: str) -> bool:
        """Add ``text`` to the active turn (``turn/steer`` with ``expectedTurnId``).

        Returns ``True`` when codex acknowledged it (``turn.steering.acknowledged`` is emitted),
        ``False`` when no turn is active or codex refused (the turn had just ended...).
        """
        with self._cond:
            self._raise_if_crashed()
            turn_id = self._active_turn
        if turn_id is None:
            return False
        params = {"threadId": self._thread_id, "expectedTurnId": turn_id, "input": [{"type": "text", "text": text}]}
        try:
            self._request("turn/steer", params, refusals_raise=True)
        except JsonRpcError:
            return False
        return True

    def interrupt(self) -> None:
        """Interrupt the active turn (``turn/interrupt``); no-op when idle or already ended."""
        with self._cond:
            turn_id = self._active_turn
            if turn_id is None or self._crashed is not None or self._closed:
                return
        try:
            self._request("turn/interrupt", {"threadId": self._thread_id, "turnId": turn_id}, refusals_raise=True)
        except JsonRpcError:
            pass

    def restart(self) -> None:
        """Kill codex's process group, start it again on the same ``CODEX_HOME`` and resume the
        same thread (``thread/resume``; emits ``session.resumed``). A turn that was active is
        recorded as ``interrupted``. Raises like :meth:`start`."""
        if self._thread_id is None:
            raise RuntimeError("restart() before start()")
        self._kill()
        with self._cond:
            if self._active_turn is not None:
                turn = self._turns[self._active_turn]
                turn.error = turn.error or "runtime restarted"
                self._finish_turn(turn, "interrupted")
            self._crashed = None
        self._launch()
        try:
            params = dict(self._thread_params(), threadId=self._thread_id, excludeTurns=True)
            params.pop("ephemeral", None)
            params.pop("sessionStartSource", None)
            self._request("thread/resume", params, start_phase=True)
            self._wait_mcp_ready()
        except BaseException:
            self._kill()
            raise

    def close(self) -> None:
        """SIGKILL codex's whole process group and release everything. Idempotent; never raises."""
        try:
            with self._cond:
                already = self._closed
                self._closed = True
            if already:
                return
            self._kill()
            with self._cond:
                for item_id in list(self._pending_deltas):
                    self._flush_deltas(item_id, None)
                if self._active_turn is not None:
                    # a wait_turn() in another thread returns instead of waiting out its timeout
                    turn = self._turns[self._active_turn]
                    turn.error = turn.error or "driver closed"
                    self._finish_turn(turn, "interrupted")
            self._work.put(None)
            self._worker.join(2.0)
        except Exception:  # noqa: BLE001 - close never raises
            pass

    # -- process lifecycle -----------------------------------------------------------------

    def _process_env(self) -> dict[str, str]:
        env = dict(self._environment)
        env["CODEX_HOME"] = str(self.codex_home)
        env.setdefault("PATH", os.defpath)
        return env

    def _launch(self) -> None:
        with self._cond:
            self._generation += 1
            generation = self._generation
            self._mcp_status = {}
        try:
            proc = subprocess.Popen(
                [str(self._binary), "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._process_env(),
                cwd=str(self.workspace),
                start_new_session=True,
            )
        except OSError as exc:
            raise InfrastructureError("runtime_start_failed", True, f"cannot start {self._binary}: {exc}") from exc
        assert proc.stdin and proc.stdout and proc.stderr
        peer = StdioJsonRpcPeer(
            proc.stdin,
            proc.stdout,
            proc.stderr,
            record=self._trace.frame,
            on_notification=lambda message, fid: self._on_notification(generation, message, fid),
            on_request=lambda message, fid: self._on_server_request(generation, message, fid),
            on_response=self._on_response,
            on_invalid=lambda raw, fid: self._trace.interpret([fid], "rejected", []),
            on_stderr=self._on_stderr,
            on_close=lambda: self._on_peer_closed(generation),
            on_sent=self._on_sent,
            name=f"codex-{generation}",
        )
        with self._cond:
            self._proc = proc
            self._peer = peer
        peer.start()
        try:
            self._request(
                "initialize",
                {
                    "clientInfo": {"name": "evalhub", "title": "evalhub live harness", "version": CODEX_VERSION},
                    "capabilities": {"experimentalApi": True},
                },
                start_phase=True,
            )
            peer.notify("initialized")
        except PeerClosed as exc:
            self._kill()
            raise InfrastructureError("runtime_start_failed", True, f"codex app-server exited during the handshake{self._stderr_hint()}") from exc
        except InfrastructureError:
            self._kill()
            raise

    def _thread_params(self) -> dict[str, Any]:
        return {
            "cwd": str(self.workspace),
            "approvalPolicy": "never" if self.approvals == "auto" else "on-request",
            "sandbox": "workspace-write",
            "ephemeral": False,
            "model": self.model,
            "modelProvider": PROVIDER_ID,
            "developerInstructions": self._instructions,
        }

    def _wait_mcp_ready(self) -> None:
        deadline = time.monotonic() + self._mcp_timeout_s
        with self._cond:
            while True:
                status, error = self._mcp_status.get(MCP_SERVER_NAME, ("", None))
                if status == "ready":
                    return
                if status in ("failed", "cancelled"):
                    raise InfrastructureError(
                        "mcp_unavailable", True, f"codex could not start the evalhub MCP server at {self.mcp_url}: {status} {_short(error)}".strip()
                    )
                if self._crashed is not None:
                    raise InfrastructureError("runtime_start_failed", True, self._crashed)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InfrastructureError(
                        "mcp_unavailable", True, f"the evalhub MCP server was not ready within {self._mcp_timeout_s:g} s"
                    )
                self._cond.wait(remaining)

    def _kill(self) -> None:
        with self._cond:
            proc, peer = self._proc, self._peer
            self._generation += 1  # the old peer's close is now expected, not a crash
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if pipe:
                    pipe.close()
            except OSError:
                pass
        if peer is not None:
            peer.join(2.0)

    def _on_peer_closed(self, generation: int) -> None:
        with self._cond:
            if generation != self._generation or self._closed:
                return
            code = self._proc.poll() if self._proc else None
            self._crashed = f"codex app-server exited unexpectedly (exit status {code}){self._stderr_hint()}"
            self._cond.notify_all()

    def _raise_if_crashed(self) -> None:
        if self._crashed is not None:
            raise InfrastructureError("runtime_crashed", True, self._crashed)

    def probe_rejection(self) -> bool:
        """See :meth:`Driver.probe_rejection`: ``evalhub/traceProbe`` is not a codex method, so
        codex answers with a JSON-RPC error, interpreted as ``rejected``."""
        try:
            self._request("evalhub/traceProbe", {}, refusals_raise=True)
        except JsonRpcError:
            return True
        return False

    def _stderr_hint(self) -> str:
        tail = [line for line in self._stderr_tail if line.strip()][-3:]
        return ("; stderr: " + _short(" | ".join(tail))) if tail else ""

    def _request(
        self, method: str, params: Mapping[str, Any], *, start_phase: bool = False, refusals_raise: bool = False
    ) -> dict[str, Any]:
        with self._cond:
            peer = self._peer
        code = "runtime_start_failed" if start_phase else "runtime_crashed"
        if peer is None:
            raise InfrastructureError(code, True, f"codex is not running ({method})")
        try:
            return peer.request(method, params, timeout_s=self._request_timeout_s)
        except JsonRpcError as exc:
            if refusals_raise:
                raise
            raise InfrastructureError(code, True, f"codex refused {method}: {_short(exc.message)}") from exc
        except PeerClosed as exc:
            with self._cond:
                reason = self._crashed or f"codex app-server exited during {method}{self._stderr_hint()}"
            raise InfrastructureError(code, True, reason) from exc
        except RequestTimeout as exc:
            raise InfrastructureError(code, True, str(exc)) from exc

    # -- callbacks off the reader thread ---------------------------------------------------

    def _work_loop(self) -> None:
        while True:
            job = self._work.get()
            if job is None:
                return
            try:
                job()
            except Exception:  # noqa: BLE001 - a callback's failure must not stop later ones
                logger.exception("codex driver callback failed")

    # -- frame interpretation --------------------------------------------------------------

    def _emit(self, type_: str, frame_ids: list[int], turn_id: str | None = None, **data: Any) -> CanonicalEvent:
        return self._events.emit(type_, source="runtime", frame_ids=frame_ids, turn_id=turn_id, data=data)

    def _on_sent(self, message: Mapping[str, Any], frame_id: int) -> None:
        if "method" in message:
            self._trace.interpret([frame_id], "operator_only", [])
        # answers to runtime requests are interpreted by the code that sends them

    def _on_stderr(self, raw: bytes, frame_id: int) -> None:
        self._stderr_tail.append(raw.decode("utf-8", "replace")[:300])
        self._trace.interpret([frame_id], "operator_only", [])

    def _on_response(self, method: str | None, message: Mapping[str, Any], frame_id: int) -> None:
        if method is None or message.get("error") is not None:
            self._trace.interpret([frame_id], "rejected", [])
            return
        result = message.get("result") if isinstance(message.get("result"), Mapping) else {}
        if method == "thread/resume":
            thread_id = str((result.get("thread") or {}).get("id") or self._thread_id)
            event = self._emit("session.resumed", [frame_id], threadId=thread_id)
            self._trace.interpret([frame_id], "mapped", [event])
        elif method == "turn/steer":
            event = self._emit("turn.steering.acknowledged", [frame_id], str(result.get("turnId") or "") or None, turnId=result.get("turnId"))
            self._trace.interpret([frame_id], "mapped", [event])
        else:
            if method == "turn/start":
                turn_id = str((result.get("turn") or {}).get("id") or "")
                if turn_id:
                    with self._cond:
                        self._register_turn(turn_id)
            self._trace.interpret([frame_id], "ignored", [])

    def _register_turn(self, turn_id: str) -> None:
        if turn_id not in self._turns:
            self._turns[turn_id] = _Turn(turn_id=turn_id, started_ms=self._events.now_ms())
            self._active_turn = turn_id
            self._cond.notify_all()

    def _on_notification(self, generation: int, message: Mapping[str, Any], frame_id: int) -> None:
        method = str(message.get("method"))
        params = message.get("params") if isinstance(message.get("params"), Mapping) else {}
        handler = self._NOTIFICATION_HANDLERS.get(method)
        if handler is not None:
            handler(self, params, frame_id)
        elif method in OPERATOR_ONLY_METHODS:
            self._trace.interpret([frame_id], "operator_only", [])
        else:
            self._trace.interpret([frame_id], "ignored", [])

    def _n_mcp_status(self, params: Mapping[str, Any], frame_id: int) -> None:
        with self._cond:
            self._mcp_status[str(params.get("name"))] = (str(params.get("status")), params.get("error"))
            self._cond.notify_all()
        self._trace.interpret([frame_id], "operator_only", [])

    def _n_thread_started(self, params: Mapping[str, Any], frame_id: int) -> None:
        thread_id = str((params.get("thread") or {}).get("id") or "")
        with self._cond:
            first = not self._session_started
            self._session_started = True
        if first:
            event = self._emit("session.started", [frame_id], threadId=thread_id)
            self._trace.interpret([frame_id], "mapped", [event])
        else:
            self._trace.interpret([frame_id], "ignored", [])

    def _n_turn_started(self, params: Mapping[str, Any], frame_id: int) -> None:
        turn_id = str((params.get("turn") or {}).get("id") or "")
        with self._cond:
            if turn_id:
                self._register_turn(turn_id)
        event = self._emit("turn.started", [frame_id], turn_id or None, turnId=turn_id)
        self._trace.interpret([frame_id], "mapped", [event])

    def _n_turn_completed(self, params: Mapping[str, Any], frame_id: int) -> None:
        turn_data = params.get("turn") or {}
        turn_id = str(turn_data.get("id") or "")
        raw_status = str(turn_data.get("status") or "")
        status = _TURN_STATUS.get(raw_status, "failed")
        error = turn_data.get("error") if isinstance(turn_data.get("error"), Mapping) else None
        with self._cond:
            for item_id, pending in list(self._pending_deltas.items()):
                if pending.turn_id in (turn_id, None):
                    self._flush_deltas(item_id, None)
        emitted: list[CanonicalEvent] = []
        if status == "interrupted":
            emitted.append(self._emit("turn.interrupted", [frame_id], turn_id, turnId=turn_id))
        emitted.append(self._emit("turn.completed", [frame_id], turn_id, turnId=turn_id, status=raw_status))
        self._trace.interpret([frame_id], "mapped", emitted)
        with self._cond:
            turn = self._turns.get(turn_id)
            if turn is None:
                self._register_turn(turn_id)
                turn = self._turns[turn_id]
            if error is not None:
                turn.error = _short(error.get("message")) or turn.error
                turn.error_code = classify_provider_error(error) or turn.error_code
            self._finish_turn(turn, "timed_out" if turn.timed_out else "failed" if turn.unreachable else status)

    def _finish_turn(self, turn: _Turn, status: str) -> None:
        if turn.outcome is None:
            turn.outcome = TurnOutcome(
                turn_id=turn.turn_id,
                status=status,
                started_ms=turn.started_ms,
                ended_ms=self._events.now_ms(),
                usage=turn.usage,
                error=turn.error if status == "failed" or turn.error else None,
                error_code=turn.error_code,
            )
        if self._active_turn == turn.turn_id:
            self._active_turn = None
        self._cond.notify_all()

    def _n_item_started(self, params: Mapping[str, Any], frame_id: int) -> None:
        item = params.get("item") or {}
        item_type = str(item.get("type") or "unknown")
        turn_id = params.get("turnId")
        item_id = item.get("id")
        emitted = [self._emit("item.started", [frame_id], turn_id, itemType=item_type, itemId=item_id)]
        disposition = "mapped"
        if item_type == "mcpToolCall":
            emitted.append(
                self._emit("tool.execution.started", [frame_id], turn_id, tool=item.get("tool"), server=item.get("server"), itemId=item_id)
            )
        elif item_type == "commandExecution":
            emitted.append(self._emit("tool.execution.started", [frame_id], turn_id, tool="shell", server=None, itemId=item_id))
        elif item_type not in ("agentMessage", "fileChange", "webSearch"):
            disposition = "generic"
        if item_type == "agentMessage" and item_id:
            with self._cond:
                self._pending_deltas.setdefault(str(item_id), _PendingDeltas(turn_id))
        self._trace.interpret([frame_id], disposition, emitted)

    def _n_agent_delta(self, params: Mapping[str, Any], frame_id: int) -> None:
        item_id = str(params.get("itemId") or "")
        turn_id = params.get("turnId")
        delta = str(params.get("delta") or "")
        event = self._emit("assistant.message.delta", [frame_id], turn_id, itemId=item_id, chars=len(delta))
        with self._cond:
            self._pending_deltas.setdefault(item_id, _PendingDeltas(turn_id)).deltas.append((frame_id, event))
        # interpreted when the item completes: the delta frames also produce its item.completed

    def _flush_deltas(self, item_id: str, completed: CanonicalEvent | None) -> list[int]:
        pending = self._pending_deltas.pop(item_id, None)
        if pending is None:
            return []
        for delta_frame, delta_event in pending.deltas:
            produced = [delta_event, completed] if completed is not None else [delta_event]
            self._trace.interpret([delta_frame], "mapped", produced)
        return [delta_frame for delta_frame, _ in pending.deltas]

    def _n_item_completed(self, params: Mapping[str, Any], frame_id: int) -> None:
        item = params.get("item") or {}
        item_type = str(item.get("type") or "unknown")
        turn_id = params.get("turnId")
        item_id = item.get("id")
        if item_type == "agentMessage":
            with self._cond:
                pending = self._pending_deltas.get(str(item_id))
                delta_frames = [fid for fid, _ in pending.deltas] if pending else []
            event = self._emit(
                "item.completed", [*delta_frames, frame_id], turn_id, itemType=item_type, itemId=item_id, text=str(item.get("text") or "")
            )
            with self._cond:
                self._flush_deltas(str(item_id), event)
            self._trace.interpret([frame_id], "mapped", [event])
            return
        emitted = [self._emit("item.completed", [frame_id], turn_id, itemType=item_type, itemId=item_id, status=item.get("status"))]
        disposition = "mapped"
        if item_type == "mcpToolCall":
            emitted.append(
                self._emit(
                    "tool.execution.completed",
                    [frame_id],
                    turn_id,
                    tool=item.get("tool"),
                    server=item.get("server"),
                    itemId=item_id,
                    status=item.get("status"),
                    isError=bool((item.get("result") or {}).get("isError")) or item.get("error") is not None,
                )
            )
        elif item_type == "commandExecution":
            emitted.append(
                self._emit(
                    "tool.execution.completed", [frame_id], turn_id, tool="shell", server=None, itemId=item_id, status=item.get("status"), exitCode=item.get("exitCode")
                )
            )
        elif item_type == "fileChange":
            emitted.append(self._emit("file.change.completed", [frame_id], turn_id, itemId=item_id, status=item.get("status"), files=len(item.get("changes") or [])))
        elif item_type == "webSearch":
            emitted.append(self._emit("research.completed", [frame_id], turn_id, via="web_search", itemId=item_id))
        else:
            disposition = "generic"
        self._trace.interpret([frame_id], disposition, emitted)

    def _n_token_usage(self, params: Mapping[str, Any], frame_id: int) -> None:
        token_usage = params.get("tokenUsage") or {}
        total = token_usage.get("total") or {}
        last = token_usage.get("last") or {}
        turn_id = params.get("turnId")
        with self._cond:
            # codex reports the thread total and the last request; adding ``last`` keeps the
            # execution total right across restarts, skipping repeats of an unchanged total.
            if total == self._last_seen_total:
                repeat = True
            else:
                repeat = False
                self._last_seen_total = dict(total)
                delta = _usage_from(last)
                self._usage_total = self._usage_total + delta
                turn = self._turns.get(str(turn_id)) if turn_id else None
                if turn is not None:
                    turn.usage = turn.usage + delta
            cumulative = self._usage_total
        if repeat:
            self._trace.interpret([frame_id], "ignored", [])
            return
        event = self._emit(
            "usage.updated",
            [frame_id],
            turn_id,
            input=cumulative.input,
            cachedInput=cumulative.cached_input,
            output=cumulative.output,
            reasoning=cumulative.reasoning,
        )
        self._trace.interpret([frame_id], "mapped", [event])
        self._work.put(lambda: self._callbacks.on_usage(turn_id, cumulative))

    def _n_error(self, params: Mapping[str, Any], frame_id: int) -> None:
        error = params.get("error") if isinstance(params.get("error"), Mapping) else {}
        code = classify_provider_error(error)
        turn_id = params.get("turnId")
        if params.get("willRetry"):
            event = self._emit("provider.notice", [frame_id], turn_id, level="warning", code=code, willRetry=True)
            details = str(error.get("additionalDetails") or "")
            if _UNREACHABLE_WORDS.search(f"{error.get('message') or ''} {details}"):
                # The endpoint cannot be reached: stop the turn now instead of waiting out maxLatencyMs.
                with self._cond:
                    turn = self._turns.get(str(turn_id)) if turn_id else None
                    if turn is not None and not turn.unreachable:
                        turn.unreachable = True
                        turn.error = "the model endpoint could not be reached: " + _short(details or error.get("message"))
                        turn.error_code = "provider_unreachable"
                        self._work.put(self.interrupt)
        else:
            event = self._emit("provider.error", [frame_id], turn_id, code=code, message=_short(error.get("message"))[:200])
            with self._cond:
                turn = self._turns.get(str(turn_id)) if turn_id else None
                if turn is not None:
                    turn.error = _short(error.get("message"))
                    turn.error_code = code
        self._trace.interpret([frame_id], "mapped", [event])

    def _n_warning(self, params: Mapping[str, Any], frame_id: int) -> None:
        event = self._emit("provider.notice", [frame_id], params.get("turnId"), level="warning", message=_short(params.get("message"))[:200])
        self._trace.interpret([frame_id], "mapped", [event])

    def _n_rerouted(self, params: Mapping[str, Any], frame_id: int) -> None:
        event = self._emit("provider.notice", [frame_id], params.get("turnId"), level="info", message="model rerouted")
        self._trace.interpret([frame_id], "mapped", [event])

    _NOTIFICATION_HANDLERS: dict[str, Callable[[CodexAppServerDriver, Mapping[str, Any], int], None]] = {
        "mcpServer/startupStatus/updated": _n_mcp_status,
        "thread/started": _n_thread_started,
        "turn/started": _n_turn_started,
        "turn/completed": _n_turn_completed,
        "item/started": _n_item_started,
        "item/completed": _n_item_completed,
        "item/agentMessage/delta": _n_agent_delta,
        "thread/tokenUsage/updated": _n_token_usage,
        "error": _n_error,
        "warning": _n_warning,
        "model/rerouted": _n_rerouted,
    }

    # -- runtime requests (approvals) ------------------------------------------------------

    def _on_server_request(self, generation: int, message: Mapping[str, Any], frame_id: int) -> None:
        method = str(message.get("method"))
        params = message.get("params") if isinstance(message.get("params"), Mapping) else {}
        request_id = message.get("id")
        with self._cond:
            peer = self._peer
        described = _describe_request(method, params)
        if described is None or peer is None:
            self._trace.interpret([frame_id], "rejected", [])
            if peer is not None:
                fid = peer.respond_error(request_id, -32601, f"evalhub does not support {method}")
                self._trace.interpret([fid], "operator_only", [])
            return
        request = RuntimeRequest(kind=described[0], subject=described[1], turn_id=params.get("turnId"), details=described[2])
        opened = self._emit(
            "runtime_request.opened", [frame_id], request.turn_id, kind=request.kind, subject=request.subject, method=method
        )
        self._trace.interpret([frame_id], "mapped", [opened])

        def decide() -> None:
            try:
                decision = self._callbacks.on_runtime_request(request)
            except Exception:  # noqa: BLE001 - a failing decider denies, it never hangs codex
                decision = "deny"
            if decision not in ("allow_once", "accept_for_session", "deny"):
                decision = "deny"
            answer = _answer_request(method, params, decision)
            try:
                fid = peer.respond(request_id, answer)
            except PeerClosed:
                return
            resolved = self._emit(
                "runtime_request.resolved", [fid], request.turn_id, decision=decision, kind=request.kind, subject=request.subject
            )
            self._trace.interpret([fid], "mapped", [resolved])

        self._work.put(decide)


def _describe_request(method: str, params: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """``(kind, subject, details)`` of an approval request codex sends, or ``None`` to refuse it."""
    if method in REFUSED_REQUESTS:
        return None
    if method == "mcpServer/elicitation/request":
        meta = params.get("_meta") if isinstance(params.get("_meta"), Mapping) else {}
        if meta.get("codex_approval_kind") == "mcp_tool_call":
            return (
                "tool",
                str(meta.get("tool_name") or ""),
                {"server": params.get("serverName"), "persist": list(meta.get("persist") or []), "arguments": meta.get("tool_params")},
            )
        return "other", f"elicitation from {params.get('serverName')}", {"server": params.get("serverName"), "mode": params.get("mode")}
    if method == "item/commandExecution/requestApproval":
        return "command", _short(params.get("command") or "")[:200], {"itemId": params.get("itemId"), "reason": params.get("reason")}
    if method == "execCommandApproval":
        command = params.get("command") or []
        return "command", _short(" ".join(map(str, command)))[:200], {"callId": params.get("callId")}
    if method == "item/fileChange/requestApproval":
        return "file_change", str(params.get("grantRoot") or params.get("itemId") or ""), {"itemId": params.get("itemId")}
    if method == "applyPatchApproval":
        return "file_change", ", ".join(sorted((params.get("fileChanges") or {}).keys()))[:200], {"callId": params.get("callId")}
    if method == "item/permissions/requestApproval":
        return "other", "permissions", {"itemId": params.get("itemId"), "permissions": params.get("permissions")}
    return None


def _answer_request(method: str, params: Mapping[str, Any], decision: str) -> dict[str, Any]:
    """The JSON-RPC result for ``decision`` (allow_once / accept_for_session / deny), per the
    0.171 schema of each request's response."""
    allow = decision != "deny"
    session = decision == "accept_for_session"
    if method == "mcpServer/elicitation/request":
        if not allow:
            return {"action": "decline"}
        answer: dict[str, Any] = {"action": "accept", "content": {}}
        meta = params.get("_meta") if isinstance(params.get("_meta"), Mapping) else {}
        if session and "session" in (meta.get("persist") or []):
            answer["_meta"] = {"persist": "session"}
        return answer
    if method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval"):
        return {"decision": "acceptForSession" if session else ("accept" if allow else "decline")}
    if method in ("execCommandApproval", "applyPatchApproval"):
        if not allow:
            return {"decision": {"denied": {"rejection": "denied by evalhub"}}}
        return {"decision": "approved_for_session" if session else "approved"}
    if method == "item/permissions/requestApproval":
        granted = params.get("permissions") if allow and isinstance(params.get("permissions"), Mapping) else {}
        return {"permissions": dict(granted), "scope": "session" if session else "turn"}
    return {}
