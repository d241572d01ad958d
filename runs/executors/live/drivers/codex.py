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
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runs.executors.base import InfrastructureError
from runs.executors.live.contracts import CanonicalEvent, RuntimeRequest, Usage
from runs.executors.live.drivers.common import TurnState, classify_http_status, configuration_refused, decide, require_runtime, short_text
from runs.executors.live.drivers.jsonrpc import JsonRpcDriver, JsonRpcError, PeerClosed, message_parts
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderConfig

logger = logging.getLogger(__name__)

#: The codex-cli the protocol schema and this driver were written against (pinned in package.json).
CODEX = RUNTIMES["codex"]
CODEX_VERSION = CODEX.version
#: The MCP server name evalhub registers (codex offers its tools in namespace ``mcp__evalhub``).
MCP_SERVER_NAME = "evalhub"
#: The provider id written into config.toml.
PROVIDER_ID = "evalhub"

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
REFUSED_REQUESTS = frozenset({"item/tool/requestUserInput", "item/tool/call", "account/chatgptAuthTokens/refresh", "attestation/generate"})

_TURN_STATUS = {"completed": "completed", "failed": "failed", "interrupted": "interrupted"}


# -- configuration -------------------------------------------------------------------------------


def _toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
    return json.dumps(value, ensure_ascii=True)


def build_config_toml(
    *,
    provider: ProviderConfig,
    base_url: str,
    model: str,
    reasoning_effort: str | None,
    mcp_url: str | None,
    approvals: str = "auto",
) -> str:
    """The ``config.toml`` text for one execution's ``CODEX_HOME``.

    ``approvals="auto"``: ``approval_policy = "never"`` and the evalhub MCP server's
    ``default_tools_approval_mode = "approve"`` — MCP calls run without any prompt.
    ``approvals="prompt"``: ``approval_policy = "on-request"`` and mode ``"auto"`` — codex sends
    ``mcpServer/elicitation/request`` for each tool call (offering ``persist: ["session",
    "always"]``), answered through ``callbacks.on_runtime_request``. (Mode ``"prompt"`` also
    prompts but offers no session persistence, so "accept for session" could not be expressed.)
    ``mcp_url`` ``None`` writes no ``[mcp_servers]`` section (codex-acp gets the MCP server in its
    ``session/new``). Retries are off (``request_max_retries``/``stream_max_retries`` 0) so a provider failure
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
    if mcp_url is not None:
        lines += [
            "",
            f"[mcp_servers.{MCP_SERVER_NAME}]",
            f"url = {_toml_str(mcp_url)}",
            "startup_timeout_sec = 20",
            "tool_timeout_sec = 60",
            f"default_tools_approval_mode = {_toml_str(tool_mode)}",
        ]
    lines += [
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
                return classify_http_status(status, message)
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


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class _Turn(TurnState):
    #: codex kept reconnecting to an endpoint it cannot reach; evalhub interrupted the turn.
    unreachable: bool = False


class CodexAppServerDriver(JsonRpcDriver):
    """:class:`runs.executors.live.contracts.Driver` for ``codex app-server`` (codex-cli 0.171.0).

    Keyword arguments as :class:`~runs.executors.live.contracts.Driver` says, plus ``case_id`` and
    ``execution_id`` (fill ``{case_id}``/``{execution_id}`` in ``provider.base_url``),
    ``approvals`` (``"auto"``: MCP calls run unprompted; ``"prompt"``: every MCP call is an
    ``mcpServer/elicitation/request`` answered through ``callbacks.on_runtime_request``),
    ``binary`` (the configured executable, :meth:`Runtime.resolve` of ``RUNTIMES["codex"]``), ``mcp_startup_timeout_s`` and
    ``request_timeout_s`` (seconds).

    Errors (``InfrastructureError``): ``runtime_missing`` (no binary, not retryable),
    ``runtime_start_failed`` (spawn or handshake failed, retryable; not retryable for a provider
    profile codex cannot use), ``runtime_crashed`` (the process ended while in use, retryable),
    ``mcp_unavailable`` (the evalhub MCP server failed to start in codex, retryable).
    """

    runtime_name = "codex app-server"
    runtime_key = "codex"
    capabilities = frozenset({"steer", "interrupt", "resume"})
    #: codex 0.171 rejects Chat Completions.
    wire_apis = ("responses",)

    _turn_state = _Turn
    _worker_name = "codex-callbacks"
    _peer_name = "codex"
    _request_label = "codex"
    _name_timeouts = False

    def __init__(self, *, mcp_startup_timeout_s: float = 30.0, **arguments: Any) -> None:
        super().__init__(**arguments)
        self.codex_home = self.workdir / "codex-home"
        self._mcp_timeout_s = mcp_startup_timeout_s
        self._thread_id: str | None = None
        self._session_started = False
        self._mcp_status: dict[str, tuple[str, str | None]] = {}
        self._last_seen_total: dict[str, Any] | None = None

    # -- public API ------------------------------------------------------------------------

    @property
    def thread_id(self) -> str | None:
        """The codex thread id (the persisted conversation), once started."""
        return self._thread_id

    def start(self) -> None:
        """Write ``CODEX_HOME/config.toml``, spawn codex, handshake, start a persisted thread and
        wait for the evalhub MCP server to be ready. Raises ``InfrastructureError`` (see class)."""
        self._binary = require_runtime(CODEX, self._configured_binary)
        with configuration_refused():
            config = build_config_toml(
                provider=self.provider,
                base_url=self.base_url,
                model=self.model,
                reasoning_effort=self.reasoning_effort,
                mcp_url=self.mcp_url,
                approvals=self.approvals,
            )
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(config, encoding="utf-8")
        self._launch()
        with self._killed_on_failure():
            result = self._request("thread/start", self._thread_params(), start_phase=True)
            thread = result.get("thread") or {}
            self._thread_id = str(thread.get("id") or "")
            if not self._thread_id:
                raise InfrastructureError("runtime_start_failed", True, "codex thread/start returned no thread id")
            self._wait_mcp_ready()

    def start_turn(self, text: str) -> str:
        """Start a turn with ``text`` as user input; returns codex's turn id at once.

        Raises ``RuntimeError`` when a turn is still active (use :meth:`steer`),
        ``InfrastructureError("runtime_crashed")`` when codex is gone or refuses.
        """
        with self._cond:
            self._book.raise_unless_idle()
        params: dict[str, Any] = {"threadId": self._thread_id, "input": [{"type": "text", "text": text}]}
        result = self._request("turn/start", params)
        turn_id = str((result.get("turn") or {}).get("id") or "")
        if not turn_id:
            raise InfrastructureError("runtime_crashed", True, "codex turn/start returned no turn id")
        with self._cond:
            self._book.register(turn_id, current=True)
            return turn_id

    def steer(self, text: str) -> bool:
        """Add ``text`` to the active turn (``turn/steer`` with ``expectedTurnId``).

        Returns ``True`` when codex acknowledged it (``turn.steering.acknowledged`` is emitted),
        ``False`` when no turn is active or codex refused (the turn had just ended...).
        """
        with self._cond:
            self._book.raise_if_crashed()
            turn_id = self._book.active
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
            turn_id = self._book.active
            if turn_id is None or self._book.crashed is not None or self._closed:
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
        self._kill_for_restart()
        self._launch()
        with self._killed_on_failure():
            params = dict(self._thread_params(), threadId=self._thread_id, excludeTurns=True)
            params.pop("ephemeral", None)
            params.pop("sessionStartSource", None)
            self._request("thread/resume", params, start_phase=True)
            self._wait_mcp_ready()

    # -- process lifecycle -----------------------------------------------------------------

    def _process_env(self) -> dict[str, str]:
        return {**super()._process_env(), "CODEX_HOME": str(self.codex_home)}

    def _launch(self) -> None:
        with self._cond:
            self._mcp_status = {}
        peer = self._open_peer([str(self._binary), "app-server"], record=self._trace.frame, on_request=self._on_server_request)
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
            raise InfrastructureError(
                "runtime_start_failed", True, f"codex app-server exited during the handshake{self._stderr_hint()}"
            ) from exc
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
        def ready() -> bool:
            status, error = self._mcp_status.get(MCP_SERVER_NAME, ("", None))
            if status in ("failed", "cancelled"):
                raise InfrastructureError(
                    "mcp_unavailable",
                    True,
                    f"codex could not start the evalhub MCP server at {self.mcp_url}: {status} {short_text(error)}".strip(),
                )
            return status == "ready"

        self._await_start(ready, self._mcp_timeout_s, code="mcp_unavailable", what="the evalhub MCP server was not ready")

    # -- frame interpretation --------------------------------------------------------------

    def _on_sent(self, message: Mapping[str, Any], frame_id: int) -> None:
        if "method" in message:
            self._trace.interpret([frame_id], "operator_only", [])
        # answers to runtime requests are interpreted by the code that sends them

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
            event = self._emit(
                "turn.steering.acknowledged", [frame_id], str(result.get("turnId") or "") or None, turnId=result.get("turnId")
            )
            self._trace.interpret([frame_id], "mapped", [event])
        else:
            if method == "turn/start":
                turn_id = str((result.get("turn") or {}).get("id") or "")
                if turn_id:
                    with self._cond:
                        self._book.register(turn_id)
            self._trace.interpret([frame_id], "ignored", [])

    def _on_notification(self, generation: int, message: Mapping[str, Any], frame_id: int) -> None:
        method, params = message_parts(message)
        self._dispatch(self._NOTIFICATION_HANDLERS, OPERATOR_ONLY_METHODS, method, params, frame_id)

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
                self._book.register(turn_id)
        event = self._emit("turn.started", [frame_id], turn_id or None, turnId=turn_id)
        self._trace.interpret([frame_id], "mapped", [event])

    def _n_turn_completed(self, params: Mapping[str, Any], frame_id: int) -> None:
        turn_data = params.get("turn") or {}
        turn_id = str(turn_data.get("id") or "")
        raw_status = str(turn_data.get("status") or "")
        status = _TURN_STATUS.get(raw_status, "failed")
        error = turn_data.get("error") if isinstance(turn_data.get("error"), Mapping) else None
        with self._cond:
            self._deltas.flush_turn(turn_id)
        emitted: list[CanonicalEvent] = []
        if status == "interrupted":
            emitted.append(self._emit("turn.interrupted", [frame_id], turn_id, turnId=turn_id))
        emitted.append(self._emit("turn.completed", [frame_id], turn_id, turnId=turn_id, status=raw_status))
        self._trace.interpret([frame_id], "mapped", emitted)
        with self._cond:
            turn = self._book.register(turn_id)
            if error is not None:
                turn.error = short_text(error.get("message")) or turn.error
                turn.error_code = classify_provider_error(error) or turn.error_code
            self._book.finish(turn, "timed_out" if turn.timed_out else "failed" if turn.unreachable else status)

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
                self._deltas.open(str(item_id), turn_id)
        self._trace.interpret([frame_id], disposition, emitted)

    def _n_agent_delta(self, params: Mapping[str, Any], frame_id: int) -> None:
        item_id = str(params.get("itemId") or "")
        turn_id = params.get("turnId")
        delta = str(params.get("delta") or "")
        event = self._emit("assistant.message.delta", [frame_id], turn_id, itemId=item_id, chars=len(delta))
        with self._cond:
            self._deltas.add(item_id, turn_id, frame_id, event)
        # interpreted when the item completes: the delta frames also produce its item.completed

    def _n_item_completed(self, params: Mapping[str, Any], frame_id: int) -> None:
        item = params.get("item") or {}
        item_type = str(item.get("type") or "unknown")
        turn_id = params.get("turnId")
        item_id = item.get("id")
        if item_type == "agentMessage":
            with self._cond:
                delta_frames = self._deltas.frames(str(item_id))
            event = self._emit(
                "item.completed", [*delta_frames, frame_id], turn_id, itemType=item_type, itemId=item_id, text=str(item.get("text") or "")
            )
            with self._cond:
                self._deltas.flush(str(item_id), event)
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
                    "tool.execution.completed",
                    [frame_id],
                    turn_id,
                    tool="shell",
                    server=None,
                    itemId=item_id,
                    status=item.get("status"),
                    exitCode=item.get("exitCode"),
                )
            )
        elif item_type == "fileChange":
            emitted.append(
                self._emit(
                    "file.change.completed",
                    [frame_id],
                    turn_id,
                    itemId=item_id,
                    status=item.get("status"),
                    files=len(item.get("changes") or []),
                )
            )
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
                turn = self._book.turns.get(str(turn_id)) if turn_id else None
                if turn is not None:
                    turn.usage = turn.usage + delta
            cumulative = self._usage_total
        if repeat:
            self._trace.interpret([frame_id], "ignored", [])
            return
        self._trace.interpret([frame_id], "mapped", [self._emit_usage(frame_id, turn_id, cumulative)])
        self._worker.put(lambda: self._callbacks.on_usage(turn_id, cumulative))

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
                    turn = self._book.turns.get(str(turn_id)) if turn_id else None
                    if turn is not None and not turn.unreachable:
                        turn.unreachable = True
                        turn.error = "the model endpoint could not be reached: " + short_text(details or error.get("message"))
                        turn.error_code = "provider_unreachable"
                        self._worker.put(self.interrupt)
        else:
            event = self._emit("provider.error", [frame_id], turn_id, code=code, message=short_text(error.get("message"))[:200])
            with self._cond:
                turn = self._book.turns.get(str(turn_id)) if turn_id else None
                if turn is not None:
                    turn.error = short_text(error.get("message"))
                    turn.error_code = code
        self._trace.interpret([frame_id], "mapped", [event])

    def _n_warning(self, params: Mapping[str, Any], frame_id: int) -> None:
        event = self._emit(
            "provider.notice", [frame_id], params.get("turnId"), level="warning", message=short_text(params.get("message"))[:200]
        )
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
        method, params = message_parts(message)
        request_id = message.get("id")
        with self._cond:
            peer = self._peer
        described = _describe_request(method, params)
        if described is None or peer is None:
            self._refuse(peer, request_id, method, frame_id)
            return
        request = RuntimeRequest(kind=described[0], subject=described[1], turn_id=params.get("turnId"), details=described[2])
        self._trace.interpret([frame_id], "mapped", [self._emit_request_opened(frame_id, request, method)])

        def answer() -> None:
            decision = decide(self._callbacks, request)
            try:
                fid = peer.respond(request_id, _answer_request(method, params, decision))
            except PeerClosed:
                return
            self._request_resolved(fid, request, decision)

        self._worker.put(answer)


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
        return "command", short_text(params.get("command") or "")[:200], {"itemId": params.get("itemId"), "reason": params.get("reason")}
    if method == "execCommandApproval":
        command = params.get("command") or []
        return "command", short_text(" ".join(map(str, command)))[:200], {"callId": params.get("callId")}
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
