"""Drive an ACP agent (Agent Client Protocol: JSON-RPC 2.0 over stdio) by profile.

One driver class for every ACP agent; what differs per agent is a row of :data:`PROFILES`
(:class:`AcpProfile`): the npm package that is the agent (the adapters acpx's own ``claude`` and
``codex`` profiles launch), the model wire API it needs, the session mode that must be switched on
against a script, and its private folders, files and environment. ``AcpDriver.for_profile(name)``
gives the driver class of one profile (``runtime_key``, ``runtime_name`` and ``wire_apis`` are the
profile's), so the executor and the command line treat it like any other driver.

* ``claude`` → ``@agentclientprotocol/claude-agent-acp`` (Claude Agent SDK + the Claude Code
  binary it ships): the model by ``ANTHROPIC_MODEL``, Anthropic Messages at ``ANTHROPIC_BASE_URL``,
  private ``CLAUDE_CONFIG_DIR``, the offline switches of :data:`CLAUDE_OFFLINE_ENVIRONMENT`, session
  mode ``default`` (mode ``auto`` sends every tool call to a classifier model a script cannot answer).
* ``codex`` → ``@agentclientprotocol/codex-acp`` running evalhub's pinned codex (``CODEX_PATH``)
  on a private ``CODEX_HOME`` whose ``config.toml`` names the model, reasoning effort and provider
  (:func:`runs.executors.live.drivers.codex.build_config_toml` without an MCP section), session mode
  ``workspace-write`` (the default mode ``agent`` has every tool call reviewed by a side model call).

The flow (docs/runtime-mapping-acp.md): ``initialize`` → ``session/new`` {cwd, mcpServers: the
control plane as the HTTP MCP server ``evalhub``, systemPrompt: evalhub's instructions} →
``session/set_mode`` → per turn ``session/prompt`` (answered when the turn ends: its
``stopReason`` and ``usage``) with ``session/update`` notifications meanwhile.
``session/request_permission`` is answered as the case says; an interrupt is ``session/cancel``;
steering is ``_session/steering`` when the agent advertises it (``_meta.steering.supported``),
else a queued ``session/prompt``; a restart is a new process and ``session/load``.

Every raw line goes to the trace (``in``/``out``/``stderr``) through
:class:`runs.executors.live.drivers.jsonrpc.StdioJsonRpcPeer`, and every frame gets exactly one
interpretation; frames the agent sends are checked against the ACP schema of the
``agent-client-protocol`` package (a frame that does not parse is ``rejected``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from runs.executors.base import InfrastructureError
from runs.executors.live.contracts import CanonicalEvent, RuntimeRequest, Usage
from runs.executors.live.drivers import acp_schema
from runs.executors.live.drivers.codex import build_config_toml, classify_provider_error
from runs.executors.live.drivers.common import (
    QUOTA_WORDS,
    TurnState,
    classify_http_status,
    classify_words,
    configuration_refused,
    decide,
    require_runtime,
    short_text,
)
from runs.executors.live.drivers.jsonrpc import JsonRpcDriver, JsonRpcError, PeerClosed, RequestTimeout, StdioJsonRpcPeer, message_parts
from runs.executors.live.runtimes import RUNTIMES

logger = logging.getLogger(__name__)

#: The ACP protocol version evalhub speaks (both agents answer 1).
PROTOCOL_VERSION = 1
#: The MCP server name evalhub registers in ``session/new``.
MCP_SERVER_NAME = "evalhub"
#: The agents' steering extension (a request while a turn runs; ``_meta.steering.supported``).
STEERING_METHOD = "_session/steering"
#: Seconds a ``session/prompt`` may stay unanswered: as long as a turn may run (``wait_turn``
#: times the turn out first); the peer fails it at once when the agent exits.
PROMPT_TIMEOUT_S = 24 * 3600.0
#: The case's permission decision → the ACP option ``kind`` chosen, in order of preference.
OPTION_KINDS = {
    "allow_once": ("allow_once", "allow_always"),
    "accept_for_session": ("allow_always", "allow_once"),
    "deny": ("reject_once", "reject_always"),
}
#: ``session/update`` kinds that concern the operator only (no canonical event).
OPERATOR_ONLY_UPDATES = frozenset({"current_mode_update", "usage_update"})
#: ``session/update`` kinds that are items of the session without meaning for the evaluation
#: (``generic``): its title and status, its slash commands, its configuration options.
GENERIC_UPDATES = {
    "session_info_update": "sessionInfo",
    "available_commands_update": "availableCommands",
    "config_option_update": "configOptions",
}
#: Agent→client requests evalhub refuses (it advertises no file system and no terminal).
REFUSED_PREFIXES = ("fs/", "terminal/")

#: Claude Code's switches for running alone against a scripted or measured endpoint: no telemetry,
#: error reports, update checks or other side traffic (without them it looks up api.anthropic.com
#: even with ANTHROPIC_BASE_URL set), MCP tools offered directly (tool search off: otherwise they
#: hide behind a ToolSearch placeholder), no prompt-suggestion request after each turn (it offers
#: tools, so it would take a script step), and no retries of its own (a provider failure surfaces
#: at once, as the other drivers' runtimes are configured).
CLAUDE_OFFLINE_ENVIRONMENT = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "ENABLE_TOOL_SEARCH": "false",
    "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION": "false",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}
#: The Claude Code tools evalhub pre-approves when the case decides no permission (``approvals="auto"``).
CLAUDE_AUTO_ALLOW = ("mcp__evalhub", "Bash", "Edit", "Write", "Read", "Glob", "Grep", "WebFetch", "WebSearch")
#: The Claude Code tools that ask the case (``approvals="prompt"``): evalhub's, shell commands, edits.
CLAUDE_ASK = ("mcp__evalhub", "Bash", "Edit", "Write")
#: Claude Code tool names that change files, and those that read the web.
FILE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"})
RESEARCH_TOOLS = frozenset({"WebFetch", "WebSearch", "web_search"})

_API_ERROR = re.compile(r"API Error: (?P<status>[0-9]{3})")
_STATUS_WORDS = re.compile(r"\b(?:status(?: code)?|HTTP)[: ]+(?P<status>[0-9]{3})\b", re.IGNORECASE)
_OVERLOADED_WORDS = re.compile(r"overloaded", re.IGNORECASE)
_RATE_WORDS = re.compile(r"rate.?limit|too many requests", re.IGNORECASE)
_AUTH_WORDS = re.compile(r"invalid api key|authentication|unauthori[sz]ed|x-api-key", re.IGNORECASE)
_MODEL_WORDS = re.compile(
    r"model.*(not found|does not exist|may not exist|not_found)|not_found_error|issue with the selected model", re.IGNORECASE
)
_DROP_WORDS = re.compile(
    r"connection error|terminated|socket hang up|stream (closed|ended|disconnected)|ECONNRESET|premature", re.IGNORECASE
)
_UNREACHABLE_WORDS = re.compile(r"ECONNREFUSED|ENOTFOUND|getaddrinfo|unable to connect|connection refused", re.IGNORECASE)
#: The Claude Agent SDK's assistant error kinds (``data.errorKind`` of a failed prompt).
_ERROR_KINDS = {
    "rate_limit": "provider_rate_limited",
    "authentication_failed": "provider_auth_refused",
    "billing_error": "provider_quota_exhausted",
    "invalid_request": "provider_bad_request",
    "server_error": "provider_http_500",
}
#: The words of a failed prompt's text → its code, the first that matches.
_WORD_RULES = (
    (_OVERLOADED_WORDS, "provider_http_529"),
    (_UNREACHABLE_WORDS, "provider_unreachable"),
    (QUOTA_WORDS, "provider_quota_exhausted"),
    (_RATE_WORDS, "provider_rate_limited"),
    (_MODEL_WORDS, "provider_unknown_model"),
    (_AUTH_WORDS, "provider_auth_refused"),
    (_DROP_WORDS, "provider_stream_dropped"),
)


def classify_prompt_error(error: JsonRpcError) -> str | None:
    """The ``TurnOutcome.error_code`` of a failed ``session/prompt`` (a JSON-RPC error).

    codex-acp passes codex's ``codexErrorInfo`` in ``data`` (:func:`classify_provider_error`);
    claude-agent-acp says ``API Error: <status> …`` in the message and the SDK's ``errorKind`` in
    ``data``. Rules, in order: codex's error info; an HTTP status in the text →
    :func:`classify_http_status` (529, Anthropic's overloaded, → ``provider_http_529``); the words
    of the text (overloaded → ``provider_http_529``, unreachable, rate limit, quota, key, unknown
    model, a cut stream); the SDK's ``errorKind``. ``None`` when nothing matches.
    """
    data = error.data if isinstance(error.data, Mapping) else {}
    text = " ".join(str(part) for part in (error.message, data.get("message"), data.get("details"), data.get("additionalDetails")) if part)
    if "codexErrorInfo" in data:
        code = classify_provider_error({"message": text, "codexErrorInfo": data.get("codexErrorInfo")})
        if code is not None:
            return code
    match = _API_ERROR.search(text) or _STATUS_WORDS.search(text)
    if match is not None:
        return classify_http_status(int(match["status"]), text)
    return classify_words(text, _WORD_RULES) or _ERROR_KINDS.get(str(data.get("errorKind") or ""))


def usage_from_prompt(usage: Mapping[str, Any] | None) -> Usage:
    """evalhub's :class:`Usage` of a ``PromptResponse.usage`` (``{inputTokens, cachedReadTokens,
    cachedWriteTokens, outputTokens, thoughtTokens, totalTokens}``). Both agents report
    ``inputTokens`` without the cached tokens and ``outputTokens`` with the thought tokens, so
    ``Usage.input = inputTokens + cachedReadTokens + cachedWriteTokens``, ``cached_input =
    cachedReadTokens``, ``output = outputTokens - thoughtTokens``, ``reasoning = thoughtTokens``."""
    usage = usage if isinstance(usage, Mapping) else {}

    def count(name: str) -> int:
        value = usage.get(name)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0

    thought = count("thoughtTokens")
    read = count("cachedReadTokens")
    return Usage(
        input=count("inputTokens") + read + count("cachedWriteTokens"),
        cached_input=read,
        output=max(0, count("outputTokens") - thought),
        reasoning=thought,
    )


def anthropic_base_url(base_url: str) -> str:
    """The API root Claude Code wants in ``ANTHROPIC_BASE_URL`` (it appends ``/v1/messages``): a
    profile's base URL with a trailing ``/v1`` dropped (``…/scripts/x/v1`` → ``…/scripts/x``)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


# -- profiles ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AcpProfile:
    """One ACP agent: ``name`` (the candidate's ``qualification.profile``), ``runtime_key`` (its
    row in ``runtimes.RUNTIMES``), ``title`` (shown in messages), ``wire_api`` (the model API it
    speaks), ``mode`` (the session mode evalhub switches to), ``extra_runtimes`` (other
    executables it runs: codex-acp runs evalhub's codex)."""

    name: str
    runtime_key: str
    title: str
    wire_api: str
    mode: str
    extra_runtimes: tuple[str, ...] = ()


PROFILES: dict[str, AcpProfile] = {
    "claude": AcpProfile(name="claude", runtime_key="claude-acp", title="claude-agent-acp", wire_api="messages", mode="default"),
    "codex": AcpProfile(
        name="codex", runtime_key="codex-acp", title="codex-acp", wire_api="responses", mode="workspace-write", extra_runtimes=("codex",)
    ),
}


def profile_named(name: str | None) -> AcpProfile:
    """The profile ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in PROFILES:
        raise ValueError(
            f"unknown ACP agent profile {name!r}; known: {', '.join(sorted(PROFILES))} (the candidate's qualification.profile)"
        )
    return PROFILES[str(name)]


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class _Turn(TurnState):
    #: evalhub sent ``session/cancel`` for this turn (interrupt, budget stop, timeout).
    cancelled: bool = False
    #: ``session/prompt`` requests of this turn still unanswered (a queued steer adds one).
    prompts: int = 0
    stop_reason: str | None = None
    interrupted_emitted: bool = False
    #: codex-acp said the thread failed (``threadStatus`` ``systemError``): the provider's error
    #: follows as agent text, and the prompt still ends ``end_turn``.
    system_error: bool = False
    error_text: list[str] = field(default_factory=list)
    #: the cumulative usage an answer reported, for ``callbacks.on_usage`` before the turn ends
    usage_report: Usage | None = None


@dataclass
class _Message:
    """The agent message streaming now (``agent_message_chunk`` until something else arrives):
    its text so far and each chunk frame with the events it emitted (interpreted, with the
    message's ``item.completed``, once the message ends: ``many_to_one``)."""

    item_id: str
    turn_id: str | None
    chunks: list[str] = field(default_factory=list)
    frames: list[tuple[int, list[CanonicalEvent]]] = field(default_factory=list)


class AcpDriver(JsonRpcDriver):
    """:class:`runs.executors.live.contracts.Driver` for an ACP agent; use :meth:`for_profile`.

    Keyword arguments as :class:`~runs.executors.live.contracts.Driver` says, plus ``case_id`` and
    ``execution_id`` (fill ``{case_id}``/``{execution_id}`` in ``provider.base_url``),
    ``approvals`` (``"auto"``: tools run without asking the case — Claude's are pre-allowed in its
    settings, codex's MCP calls are approved by evalhub for the session; ``"prompt"``: every
    ``session/request_permission`` goes to ``callbacks.on_runtime_request``), ``binary`` (the
    agent's executable), ``binaries`` (``{runtime key: configured path}`` of ``extra_runtimes``),
    ``request_timeout_s`` (seconds, every request but ``session/prompt``).

    Errors (``InfrastructureError``): ``runtime_missing`` (the agent or the codex it runs is not
    installed, not retryable), ``runtime_start_failed`` (spawn, handshake or session failed,
    retryable; not retryable for a provider profile the agent cannot use), ``runtime_crashed``
    (the agent exited while in use, retryable).
    """

    profile: ClassVar[AcpProfile | None] = None
    runtime_name = "ACP agent"
    runtime_key = ""
    capabilities = frozenset({"steer", "interrupt", "resume"})
    wire_apis: tuple[str, ...] = ()
    _turn_state = _Turn
    _peer_name = "acp"
    _bound: ClassVar[dict[str, type[AcpDriver]]] = {}

    @classmethod
    def for_profile(cls, name: str | None) -> type[AcpDriver]:
        """The driver class of profile ``name`` (cached). Raises ``ValueError`` for an unknown profile."""
        profile = profile_named(name)
        if profile.name not in cls._bound:
            cls._bound[profile.name] = type(
                f"AcpDriver_{profile.name}",
                (cls,),
                {
                    "profile": profile,
                    "runtime_key": profile.runtime_key,
                    "runtime_name": f"{profile.title} (ACP)",
                    "wire_apis": (profile.wire_api,),
                    "extra_runtimes": profile.extra_runtimes,
                    "_worker_name": f"acp-{profile.name}-callbacks",
                    "__module__": cls.__module__,
                    "__doc__": f"{cls.__name__} for the ACP profile {profile.name!r} ({RUNTIMES[profile.runtime_key].package}).",
                },
            )
        return cls._bound[profile.name]

    def __init__(self, *, binaries: Mapping[str, str | None] | None = None, request_timeout_s: float = 60.0, **arguments: Any) -> None:
        if self.profile is None:
            raise TypeError("use AcpDriver.for_profile(name): the driver needs an ACP agent profile")
        super().__init__(request_timeout_s=request_timeout_s, **arguments)
        self.root = self.workdir / "acp"
        self._configured = dict(binaries or {})
        self._session_id: str | None = None
        self._agent: dict[str, Any] = {}
        self._loading = False
        self._message: _Message | None = None
        self._message_count = 0
        self._tools: dict[str, dict[str, Any]] = {}
        self._pending_permissions: dict[Any, StdioJsonRpcPeer] = {}
        self.timings: dict[str, float] = {}

    # -- public API ------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The ACP session id, once started."""
        return self._session_id

    @property
    def steering_supported(self) -> bool:
        """Whether the agent advertised the ``_session/steering`` extension."""
        meta = self._agent.get("_meta") if isinstance(self._agent.get("_meta"), Mapping) else {}
        steering = meta.get("steering") if isinstance(meta.get("steering"), Mapping) else {}
        return bool(steering.get("supported"))

    def start(self) -> None:
        """Write the agent's private files, spawn it, handshake, open the session with the evalhub
        MCP server and switch the session mode. Raises ``InfrastructureError`` (see class). Start-up
        times (seconds) are kept in :attr:`timings` (``initialize``, ``session``)."""
        assert self.profile is not None
        self._binary = require_runtime(RUNTIMES[self.profile.runtime_key], self._configured_binary)
        for key in self.profile.extra_runtimes:
            require_runtime(RUNTIMES[key], self._configured.get(key))
        if self.provider.wire_api != self.profile.wire_api:
            raise InfrastructureError(
                "runtime_start_failed",
                False,
                f"{self.runtime_name} speaks {self.profile.wire_api} to its model; provider profile "
                f"{self.provider.profile!r} uses wire_api {self.provider.wire_api!r}",
            )
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        with configuration_refused():
            self._write_files()
        with self._killed_on_failure():
            self._launch()
            started = time.monotonic()
            params: dict[str, Any] = {"cwd": str(self.workspace), "mcpServers": self._mcp_servers()}
            capabilities = self._agent.get("agentCapabilities") if isinstance(self._agent.get("agentCapabilities"), Mapping) else {}
            session_capabilities = capabilities.get("sessionCapabilities") if isinstance(capabilities, Mapping) else None
            if isinstance(session_capabilities, Mapping) and "systemPrompt" in session_capabilities:
                params["systemPrompt"] = {"mode": "append", "content": [{"type": "text", "text": self._instructions}]}
            result = self._request("session/new", params, start_phase=True)
            self._session_id = str(result.get("sessionId") or "")
            if not self._session_id:
                raise InfrastructureError("runtime_start_failed", True, f"{self.runtime_name}: session/new returned no sessionId")
            self._set_mode()
            self.timings["session"] = time.monotonic() - started

    def start_turn(self, text: str) -> str:
        """Send ``text`` as a ``session/prompt`` (answered when the turn ends, on a thread); returns
        evalhub's turn id (``turn-1``, ``turn-2``...) at once. Raises ``RuntimeError`` when a turn
        is still active, ``InfrastructureError("runtime_crashed")`` when the agent is gone."""
        with self._cond:
            turn = self._book.register_next()
            turn.prompts += 1
        self._send_prompt(turn, text, first=True)
        return turn.turn_id

    def steer(self, text: str) -> bool:
        """Add ``text`` to the active turn: ``_session/steering`` when the agent has it (``True``
        when its outcome is ``injected``, emitting ``turn.steering.acknowledged``), else a queued
        ``session/prompt`` (``True`` once sent; the turn ends when every prompt of it is answered).
        ``False`` when no turn is active or the agent refused."""
        with self._cond:
            self._book.raise_if_crashed()
            turn = self._book.active_turn()
            if turn is None or turn.cancelled:
                return False
        prompt = [{"type": "text", "text": text}]
        if not self.steering_supported:
            with self._cond:
                turn.prompts += 1
            self._send_prompt(turn, text, first=False)
            return True
        try:
            result = self._request(STEERING_METHOD, {"sessionId": self._session_id, "prompt": prompt}, refusals_raise=True)
        except JsonRpcError:
            return False
        return result.get("outcome") == "injected"

    def interrupt(self) -> None:
        """Cancel the active turn (``session/cancel``); permission requests still pending are
        answered ``cancelled`` as ACP asks. No-op when idle or already ended."""
        with self._cond:
            turn = self._book.active_turn()
            peer = self._peer
            if turn is None or peer is None or self._book.crashed is not None or self._closed:
                return
            turn.cancelled = True
            pending, self._pending_permissions = self._pending_permissions, {}
        try:
            frame_id = peer.notify("session/cancel", {"sessionId": self._session_id})
            self._trace.interpret([frame_id], "operator_only", [])
            for request_id, request_peer in pending.items():
                answered = request_peer.respond(request_id, {"outcome": {"outcome": "cancelled"}})
                self._trace.interpret([answered], "operator_only", [])
        except PeerClosed:
            pass

    def restart(self) -> None:
        """Kill the agent's process group, start a new process on the same folders and load the
        session (``session/load``, whose replayed updates are ``ignored``; emits
        ``session.resumed``). A turn that was active is recorded ``interrupted``. Raises like
        :meth:`start`."""
        if self._session_id is None:
            raise RuntimeError("restart() before start()")
        self._await_saved_session()
        self._kill_for_restart()
        self._launch()
        with self._killed_on_failure():
            with self._cond:
                self._loading = True
            try:
                self._request(
                    "session/load",
                    {"sessionId": self._session_id, "cwd": str(self.workspace), "mcpServers": self._mcp_servers()},
                    start_phase=True,
                )
            finally:
                with self._cond:
                    self._loading = False
            self._set_mode()

    def _reset_for_restart(self) -> None:
        self._close_message(None)
        self._pending_permissions = {}

    def _await_saved_session(self, timeout_s: float = 10.0) -> None:
        """Wait (at most ``timeout_s`` seconds) until the claude agent has written the session's
        transcript under its private ``CLAUDE_CONFIG_DIR``: it writes it asynchronously, and a
        process killed before that cannot ``session/load`` it ("Resource not found"). Other
        profiles keep their sessions elsewhere and go on at once."""
        config = self.root / "claude-config"
        if not config.is_dir():
            return
        deadline = time.monotonic() + timeout_s
        name = f"{self._session_id}.jsonl"
        while time.monotonic() < deadline:
            if any(path.stat().st_size > 0 for path in config.glob(f"projects/*/{name}")):
                return
            time.sleep(0.05)

    # -- files, environment, process -------------------------------------------------------

    def _write_files(self) -> None:
        assert self.profile is not None
        if self.profile.name == "claude":
            config = self.root / "claude-config"
            config.mkdir(parents=True, exist_ok=True)
            permissions: dict[str, Any] = {"defaultMode": self.profile.mode}
            if self.approvals == "auto":
                permissions["allow"] = list(CLAUDE_AUTO_ALLOW)
            else:
                # Every call of these asks, even a command Claude Code deems read-only (ls).
                permissions["ask"] = list(CLAUDE_ASK)
            (config / "settings.json").write_text(json.dumps({"permissions": permissions}, indent=2) + "\n", encoding="utf-8")
        else:
            home = self.root / "codex-home"
            home.mkdir(parents=True, exist_ok=True)
            text = build_config_toml(
                provider=self.provider,
                base_url=self.base_url,
                model=self.model,
                reasoning_effort=self.reasoning_effort,
                mcp_url=None,
                approvals="prompt",
            )
            (home / "config.toml").write_text(text, encoding="utf-8")

    def _process_env(self) -> dict[str, str]:
        assert self.profile is not None
        env = super()._process_env()
        if self.profile.name == "claude":
            env.update(CLAUDE_OFFLINE_ENVIRONMENT)
            env["CLAUDE_CONFIG_DIR"] = str(self.root / "claude-config")
            env["ANTHROPIC_BASE_URL"] = anthropic_base_url(self.base_url)
            env["ANTHROPIC_MODEL"] = self.model
            if self.reasoning_effort:
                env["CLAUDE_CODE_EFFORT_LEVEL"] = self.reasoning_effort
            key_name = self.provider.env_key
            if key_name and key_name != "ANTHROPIC_API_KEY":
                # Claude Code reads only ANTHROPIC_API_KEY; the profile may name another variable.
                env.pop("ANTHROPIC_API_KEY", None)
                if self._environment.get(key_name):
                    env["ANTHROPIC_API_KEY"] = self._environment[key_name]
        else:
            env["CODEX_HOME"] = str(self.root / "codex-home")
            env["CODEX_PATH"] = str(RUNTIMES["codex"].resolve(self._configured.get("codex")))
            env.setdefault("RUST_LOG", "warn")
        return env

    def _mcp_servers(self) -> list[dict[str, Any]]:
        return [{"type": "http", "name": MCP_SERVER_NAME, "url": self.mcp_url, "headers": []}]

    def _launch(self) -> None:
        self._open_peer([str(self._binary)], record=self._record, on_request=self._on_agent_request)
        started = time.monotonic()
        try:
            self._agent = self._request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
                    "clientInfo": {"name": "evalhub", "title": "evalhub live harness", "version": RUNTIMES[self.runtime_key].version},
                },
                start_phase=True,
            )
        except InfrastructureError:
            self._kill()
            raise
        self.timings.setdefault("initialize", time.monotonic() - started)

    def _set_mode(self) -> None:
        assert self.profile is not None
        self._request("session/set_mode", {"sessionId": self._session_id, "modeId": self.profile.mode}, start_phase=True)

    # -- turns -----------------------------------------------------------------------------

    def _send_prompt(self, turn: _Turn, text: str, *, first: bool) -> None:
        with self._cond:
            peer = self._peer
        if peer is None:
            raise InfrastructureError("runtime_crashed", True, f"{self.runtime_name} is not running (session/prompt)")
        params = {"sessionId": self._session_id, "prompt": [{"type": "text", "text": text}]}
        sent = threading.Event()

        def call() -> None:
            try:
                result = peer.request("session/prompt", params, timeout_s=PROMPT_TIMEOUT_S)
                error = None
            except JsonRpcError as exc:
                result, error = None, exc
            except (PeerClosed, RequestTimeout) as exc:
                result, error = None, exc
            self._prompt_answered(turn, result, error)

        thread = threading.Thread(target=call, name=f"acp-prompt-{turn.turn_id}", daemon=True)
        with self._cond:
            self._sending = (turn.turn_id, first, sent)
        thread.start()
        sent.wait(self._request_timeout_s)

    def _prompt_answered(self, turn: _Turn, result: Mapping[str, Any] | None, error: Exception | None) -> None:
        """A ``session/prompt`` of ``turn`` was answered (``result``), refused (a
        :class:`JsonRpcError`) or lost with the process. The turn ends with its last prompt
        (:meth:`_prompt_frame` counts each answer as it arrives)."""
        with self._cond:
            report, turn.usage_report = turn.usage_report, None
        if report is not None:
            # Before the turn ends: the case driver reads the budget once the turn is over.
            try:
                self._callbacks.on_usage(turn.turn_id, report)
            except Exception:
                logger.exception("%s: on_usage failed", self.runtime_name)
        with self._cond:
            if result is None and not isinstance(error, JsonRpcError):
                turn.prompts -= 1  # no answer frame counted it (the process went away)
            if isinstance(error, JsonRpcError):
                turn.error = short_text(error.message) or "the agent failed the prompt"
                turn.error_code = turn.error_code or classify_prompt_error(error)
            elif error is not None and turn.outcome is None and self._book.crashed is None and not self._closed:
                turn.error = turn.error or short_text(error)
            if result is not None:
                turn.stop_reason = str(result.get("stopReason") or "") or turn.stop_reason
            if turn.prompts > 0 or turn.outcome is not None:
                return
            if turn.system_error and turn.error_code is None:
                text = short_text("".join(turn.error_text)) or "the agent's thread failed (systemError)"
                turn.error = text
                turn.error_code = (
                    classify_prompt_error(JsonRpcError("session/prompt", {"message": text})) or "live_provider_execution_failed"
                )
            self._close_message(None)
            if turn.timed_out:
                status = "timed_out"
            elif turn.error_code is not None or (turn.error is not None and not turn.cancelled):
                status = "failed"
            elif turn.cancelled or turn.stop_reason == "cancelled":
                status = "interrupted"
            elif error is not None:
                return  # the process went away: the crash (or close) decides
            else:
                status = "completed"
            self._book.finish(turn, status)

    # -- frame interpretation --------------------------------------------------------------

    def _record(self, direction: str, raw: bytes) -> int:
        """Record a raw frame; a turn's first ``session/prompt`` emits ``turn.started`` here, before
        its bytes reach the agent, so no update of the turn can precede it."""
        frame_id = self._trace.frame(direction, raw)
        if direction == "out" and b'"session/prompt"' in raw and _method(raw) == "session/prompt":
            with self._cond:
                turn_id, first, _ = getattr(self, "_sending", (None, False, None))
            if first and turn_id:
                event = self._emit("turn.started", [frame_id], turn_id, turnId=turn_id)
                self._trace.interpret([frame_id], "mapped", [event])
            else:
                self._trace.interpret([frame_id], "operator_only", [])
        return frame_id

    def _on_sent(self, message: Mapping[str, Any], frame_id: int) -> None:
        method = message.get("method")
        if method == "session/prompt":
            with self._cond:
                sent = getattr(self, "_sending", (None, False, None))[2]
            if sent is not None:
                sent.set()  # interpreted when recorded (_record)
        elif method is not None:
            self._trace.interpret([frame_id], "operator_only", [])
        # answers to agent requests are interpreted by the code that sends them

    def _on_response(self, method: str | None, message: Mapping[str, Any], frame_id: int) -> None:
        if method is None or message.get("error") is not None:
            if method == "session/prompt":
                self._prompt_frame(message, frame_id)
                return
            self._trace.interpret([frame_id], "rejected", [])
            return
        result = message.get("result") if isinstance(message.get("result"), Mapping) else {}
        problem = acp_schema.response_problem(method, result)
        if problem is not None:
            logger.warning("%s: %s answer does not match the ACP schema: %s", self.runtime_name, method, problem)
            self._trace.interpret([frame_id], "rejected", [])
            return
        if method == "session/new":
            event = self._emit("session.started", [frame_id], sessionId=result.get("sessionId"))
            self._trace.interpret([frame_id], "mapped", [event])
        elif method == "session/load":
            event = self._emit("session.resumed", [frame_id], sessionId=self._session_id)
            self._trace.interpret([frame_id], "mapped", [event])
        elif method == STEERING_METHOD:
            with self._cond:
                turn_id = self._book.active
            if result.get("outcome") == "injected":
                event = self._emit("turn.steering.acknowledged", [frame_id], turn_id, turnId=turn_id)
                self._trace.interpret([frame_id], "mapped", [event])
            else:
                self._trace.interpret([frame_id], "ignored", [])
        elif method == "session/prompt":
            self._prompt_frame(message, frame_id)
        else:
            self._trace.interpret([frame_id], "ignored", [])

    def _prompt_frame(self, message: Mapping[str, Any], frame_id: int) -> None:
        """The answer to a ``session/prompt``: ``usage.updated`` from its usage, then
        ``turn.interrupted`` (cancelled) and ``turn.completed``, or ``provider.error``."""
        result = message.get("result") if isinstance(message.get("result"), Mapping) else None
        with self._cond:
            turn = self._book.active_turn()
            turn_id = turn.turn_id if turn is not None else self._book.current
            if turn is not None:
                # counted here, on the reader thread, so answers arriving back to back are in order
                turn.prompts -= 1
            last = turn is not None and turn.prompts <= 0
        emitted: list[CanonicalEvent] = []
        if last:
            with self._cond:
                emitted += self._close_message(frame_id)
        if result is not None:
            delta = usage_from_prompt(result.get("usage"))
            if delta != Usage():
                with self._cond:
                    self._usage_total = self._usage_total + delta
                    if turn is not None:
                        turn.usage = turn.usage + delta
                    cumulative = self._usage_total
                emitted.append(self._emit_usage(frame_id, turn_id, cumulative))
                if turn is not None:
                    turn.usage_report = cumulative  # reported by the prompt's thread (_prompt_answered)
            stop_reason = str(result.get("stopReason") or "")
            if last:
                if stop_reason == "cancelled" and turn is not None and not turn.interrupted_emitted:
                    turn.interrupted_emitted = True
                    emitted.append(self._emit("turn.interrupted", [frame_id], turn_id, turnId=turn_id))
                emitted.append(self._emit("turn.completed", [frame_id], turn_id, turnId=turn_id, status=stop_reason))
        else:
            error = message.get("error") if isinstance(message.get("error"), Mapping) else {}
            code = classify_prompt_error(JsonRpcError("session/prompt", error))
            emitted.append(self._emit("provider.error", [frame_id], turn_id, code=code, message=short_text(error.get("message"))[:200]))
            if last:
                emitted.append(self._emit("turn.completed", [frame_id], turn_id, turnId=turn_id, status="failed"))
        self._trace.interpret([frame_id], "mapped", emitted)

    def _on_notification(self, generation: int, message: Mapping[str, Any], frame_id: int) -> None:
        method, params = message_parts(message)
        if method != "session/update":
            # claude-agent-acp's _auth/status_update, _claude/... extensions: the operator's business.
            self._trace.interpret([frame_id], "operator_only" if method.startswith("_") else "ignored", [])
            return
        problem = acp_schema.notification_problem(params)
        update = params.get("update") if isinstance(params.get("update"), Mapping) else {}
        kind = str(update.get("sessionUpdate") or "")
        if problem is not None and kind in _UPDATE_HANDLERS:
            logger.warning("%s: session/update %s does not match the ACP schema: %s", self.runtime_name, kind, problem)
            self._trace.interpret([frame_id], "rejected", [])
            return
        with self._cond:
            replay = self._loading or params.get("sessionId") != self._session_id
        if replay:
            self._trace.interpret([frame_id], "ignored", [])
            return
        if kind == "session_info_update" and thread_status(update) == "systemError":
            with self._cond:
                turn = self._book.active_turn()
                if turn is not None:
                    turn.system_error = True
                turn_id = turn.turn_id if turn is not None else None
            event = self._emit("provider.notice", [frame_id], turn_id, level="error", message="the agent's thread failed (systemError)")
            self._trace.interpret([frame_id], "mapped", [event])
            return
        self._dispatch(_UPDATE_HANDLERS, OPERATOR_ONLY_UPDATES, kind, update, frame_id)

    # -- session/update kinds --------------------------------------------------------------

    def _u_message_chunk(self, update: Mapping[str, Any], frame_id: int) -> None:
        content = update.get("content") if isinstance(update.get("content"), Mapping) else {}
        if content.get("type") != "text":
            self._trace.interpret([frame_id], "ignored", [])
            return
        text = str(content.get("text") or "")
        message_id = update.get("messageId")
        with self._cond:
            turn_id = self._book.active
            current = self._message
            emitted: list[CanonicalEvent] = []
            if current is not None and message_id and current.item_id != f"msg-{message_id}":
                emitted += self._close_message(frame_id)  # a new message id ends the previous one
                current = None
            if current is None:
                self._message_count += 1
                item_id = f"msg-{message_id}" if message_id else f"msg-{self._message_count}"
                current = self._message = _Message(item_id=item_id, turn_id=turn_id)
                emitted.append(self._emit("item.started", [frame_id], turn_id, itemType="agentMessage", itemId=item_id))
            current.chunks.append(text)
            turn = self._book.active_turn()
            if turn is not None and turn.system_error:
                turn.error_text.append(text)
            emitted.append(self._emit("assistant.message.delta", [frame_id], turn_id, itemId=current.item_id, chars=len(text)))
            current.frames.append((frame_id, emitted))
        # interpreted when the message ends: each chunk frame also produces its item.completed

    def _close_message(self, frame_id: int | None) -> list[CanonicalEvent]:
        """Complete the streaming agent message (ACP has no end-of-message update: the next update
        of another kind, or the turn's end, ends it) and interpret its chunk frames. Returns the
        ``item.completed`` for the caller's ``frame_id`` (the frame that ended it; ``None``: no
        frame). Expects the lock held."""
        current, self._message = self._message, None
        if current is None:
            return []
        frames = [fid for fid, _ in current.frames] + ([frame_id] if frame_id is not None else [])
        completed = self._emit(
            "item.completed", frames, current.turn_id, itemType="agentMessage", itemId=current.item_id, text="".join(current.chunks)
        )
        for fid, events in current.frames:
            self._trace.interpret([fid], "mapped", [*events, completed])
        return [completed] if frame_id is not None else []

    def _u_thought_chunk(self, update: Mapping[str, Any], frame_id: int) -> None:
        with self._cond:
            closed = self._close_message(frame_id)
        self._trace.interpret([frame_id], "mapped" if closed else "ignored", closed)

    def _u_tool_call(self, update: Mapping[str, Any], frame_id: int) -> None:
        tool_call_id = str(update.get("toolCallId") or "")
        with self._cond:
            closed = self._close_message(frame_id)
            turn_id = self._book.active
            known = self._tools.get(tool_call_id)
            if known is None:
                known = self._tools[tool_call_id] = {"done": False}
            known.update({k: update[k] for k in ("title", "kind", "rawInput", "_meta") if k in update})
            tool, server = tool_identity(known)
            first = not known.get("started")
            known["started"] = True
        emitted = list(closed)
        if first:
            emitted += self._emit_tool_started(frame_id, turn_id, tool_call_id, tool, server)
        emitted += self._tool_done(update, tool_call_id, turn_id, frame_id)
        self._trace.interpret([frame_id], "mapped" if emitted else "ignored", emitted)

    def _u_tool_call_update(self, update: Mapping[str, Any], frame_id: int) -> None:
        tool_call_id = str(update.get("toolCallId") or "")
        with self._cond:
            known = self._tools.get(tool_call_id)
            turn_id = self._book.active
            if known is None:
                self._trace.interpret([frame_id], "ignored", [])
                return
            known.update({k: update[k] for k in ("title", "kind", "rawInput", "_meta") if update.get(k) is not None})
        emitted = self._tool_done(update, tool_call_id, turn_id, frame_id)
        self._trace.interpret([frame_id], "mapped" if emitted else "ignored", emitted)

    def _tool_done(self, update: Mapping[str, Any], tool_call_id: str, turn_id: str | None, frame_id: int) -> list[CanonicalEvent]:
        status = str(update.get("status") or "")
        with self._cond:
            known = self._tools[tool_call_id]
            if status not in ("completed", "failed") or known.get("done"):
                return []
            known["done"] = True
            tool, server = tool_identity(known)
            kind = str(known.get("kind") or "")
        builtin = status == "completed" and server is None
        return self._emit_tool_ended(
            frame_id,
            turn_id,
            tool_call_id,
            tool,
            server,
            failed=status == "failed",
            changed_files=builtin and (tool in FILE_TOOLS or kind in ("edit", "delete", "move")),
            researched=builtin and (tool in RESEARCH_TOOLS or kind in ("fetch", "search") and tool in RESEARCH_TOOLS),
        )

    def _u_plan(self, update: Mapping[str, Any], frame_id: int) -> None:
        with self._cond:
            closed = self._close_message(frame_id)
            turn_id = self._book.active
        event = self._emit(
            "item.completed", [frame_id], turn_id, itemType="plan", itemId=f"plan-{frame_id}", entries=len(update.get("entries") or [])
        )
        self._trace.interpret([frame_id], "mapped" if closed else "generic", [*closed, event])

    def _u_generic(self, update: Mapping[str, Any], frame_id: int) -> None:
        # Session metadata (title, thread status, commands, options): an item with no meaning for the evaluation.
        item_type = GENERIC_UPDATES[str(update.get("sessionUpdate"))]
        event = self._emit("item.completed", [frame_id], self._book.active, itemType=item_type, itemId=f"{item_type}-{frame_id}")
        self._trace.interpret([frame_id], "generic", [event])

    def _u_user_chunk(self, update: Mapping[str, Any], frame_id: int) -> None:
        # Outside a load only a steered or queued prompt is echoed: evalhub sent it.
        self._trace.interpret([frame_id], "ignored", [])

    # -- agent requests (permissions) ------------------------------------------------------

    def _on_agent_request(self, generation: int, message: Mapping[str, Any], frame_id: int) -> None:
        method, params = message_parts(message)
        request_id = message.get("id")
        with self._cond:
            peer = self._peer if generation == self._generation else None
        if peer is None:
            self._trace.interpret([frame_id], "ignored", [])
            return
        if method != "session/request_permission" or acp_schema.permission_problem(params) is not None:
            try:
                self._refuse(peer, request_id, method, frame_id)
            except PeerClosed:
                pass
            return
        options = [o for o in params.get("options") or [] if isinstance(o, Mapping)]
        with self._cond:
            closed = self._close_message(frame_id)
            turn = self._book.active_turn()
            turn_id = turn.turn_id if turn is not None else None
            stale = turn is None or turn.cancelled
            if not stale:
                self._pending_permissions[request_id] = peer
        if stale:
            self._trace.interpret([frame_id], "mapped" if closed else "ignored", closed)
            self._answer_permission(peer, request_id, None, options, turn_id, None)
            return
        request = describe_permission(params, turn_id)
        if self.approvals == "auto":
            # No step of the case decides permissions: evalhub approves, as the other drivers'
            # runtimes are configured to (codex-acp gates MCP servers given in session/new always).
            self._trace.interpret([frame_id], "mapped" if closed else "operator_only", closed)
            self._worker.put(lambda: self._answer_permission(peer, request_id, "accept_for_session", options, turn_id, None))
            return
        self._trace.interpret([frame_id], "mapped", [*closed, self._emit_request_opened(frame_id, request, method)])
        self._worker.put(lambda: self._answer_permission(peer, request_id, decide(self._callbacks, request), options, turn_id, request))

    def _answer_permission(
        self,
        peer: StdioJsonRpcPeer,
        request_id: Any,
        decision: str | None,
        options: list[Mapping[str, Any]],
        turn_id: str | None,
        request: RuntimeRequest | None,
    ) -> None:
        """Answer one ``session/request_permission``: the option whose kind fits ``decision``
        (:data:`OPTION_KINDS`), or ``cancelled`` when the turn was cancelled meanwhile (or
        ``decision`` is ``None``)."""
        with self._cond:
            if decision is not None and request_id not in self._pending_permissions:
                return  # cancelled meanwhile: interrupt() answered it
            self._pending_permissions.pop(request_id, None)
        option = choose_option(options, decision) if decision is not None else None
        outcome = {"outcome": "selected", "optionId": option} if option is not None else {"outcome": "cancelled"}
        try:
            fid = peer.respond(request_id, {"outcome": outcome})
        except PeerClosed:
            return
        if request is None:
            self._trace.interpret([fid], "operator_only", [])
            return
        self._request_resolved(fid, request, decision or "cancelled")


_UPDATE_HANDLERS: dict[str, Callable[[AcpDriver, Mapping[str, Any], int], None]] = {
    "agent_message_chunk": AcpDriver._u_message_chunk,
    "agent_thought_chunk": AcpDriver._u_thought_chunk,
    "tool_call": AcpDriver._u_tool_call,
    "tool_call_update": AcpDriver._u_tool_call_update,
    "plan": AcpDriver._u_plan,
    "user_message_chunk": AcpDriver._u_user_chunk,
    **dict.fromkeys(GENERIC_UPDATES, AcpDriver._u_generic),
}


def _method(raw: bytes) -> str | None:
    """The ``method`` of one JSON-RPC line evalhub sends, or ``None``."""
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) else None


def thread_status(update: Mapping[str, Any]) -> str | None:
    """codex-acp's thread status in a ``session_info_update`` (``_meta.codex.threadStatus.type``:
    ``active``, ``idle``, ``systemError``...), or ``None``."""
    meta = update.get("_meta") if isinstance(update.get("_meta"), Mapping) else {}
    codex = meta.get("codex") if isinstance(meta.get("codex"), Mapping) else {}
    status = codex.get("threadStatus") if isinstance(codex.get("threadStatus"), Mapping) else {}
    return str(status["type"]) if status.get("type") else None


def tool_identity(tool_call: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(tool, server)`` of an ACP tool call as each agent describes it.

    claude-agent-acp: ``_meta.claudeCode.toolName`` ``mcp__evalhub__finish_task`` →
    ``("finish_task", "evalhub")``, ``Bash`` → ``("Bash", None)``; codex-acp: ``rawInput``
    ``{server, tool}`` or the title ``mcp.evalhub.finish_task``; otherwise the title (``kind``
    when there is none) and no server.
    """
    meta = tool_call.get("_meta") if isinstance(tool_call.get("_meta"), Mapping) else {}
    claude = meta.get("claudeCode") if isinstance(meta.get("claudeCode"), Mapping) else {}
    name = str(claude.get("toolName") or "")
    if name.startswith("mcp__"):
        _, server, tool = (name.split("__", 2) + ["", ""])[:3]
        return tool, server or None
    if name:
        return name, None
    raw = tool_call.get("rawInput") if isinstance(tool_call.get("rawInput"), Mapping) else {}
    if raw.get("server") and raw.get("tool"):
        return str(raw["tool"]), str(raw["server"])
    title = str(tool_call.get("title") or "")
    match = re.fullmatch(r"mcp\.(?P<server>[^.]+)\.(?P<tool>.+)", title)
    if match:
        return match["tool"], match["server"]
    return (title or str(tool_call.get("kind") or "tool"))[:100], None


def describe_permission(params: Mapping[str, Any], turn_id: str | None) -> RuntimeRequest:
    """The :class:`RuntimeRequest` of a ``session/request_permission``: an MCP tool of evalhub →
    ``tool`` (the operation), ``kind`` ``execute`` → ``command``, ``edit``/``delete``/``move`` →
    ``file_change``, anything else → ``other``. ``details`` keep the option ids and kinds offered."""
    tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), Mapping) else {}
    merged = dict(tool_call)
    meta = params.get("_meta") if isinstance(params.get("_meta"), Mapping) else {}
    tool, server = tool_identity(merged)
    options = [{"optionId": o.get("optionId"), "kind": o.get("kind")} for o in params.get("options") or [] if isinstance(o, Mapping)]
    details = {"toolCallId": tool_call.get("toolCallId"), "options": options, "title": short_text(tool_call.get("title"), 200)}
    raw = tool_call.get("rawInput") if isinstance(tool_call.get("rawInput"), Mapping) else {}
    if server is not None or meta.get("is_mcp_tool_approval"):
        if server is None and raw.get("server_name"):
            server = str(raw["server_name"])
        return RuntimeRequest(kind="tool", subject=tool, turn_id=turn_id, details={**details, "server": server})
    kind = str(tool_call.get("kind") or "")
    if kind == "execute" or tool == "Bash":
        command = raw.get("command") or raw.get("cmd") or tool_call.get("title") or ""
        if isinstance(command, list):
            command = " ".join(map(str, command))
        return RuntimeRequest(kind="command", subject=short_text(command, 200), turn_id=turn_id, details=details)
    if kind in ("edit", "delete", "move") or tool in FILE_TOOLS:
        subject = raw.get("file_path") or raw.get("path") or tool_call.get("title") or ""
        return RuntimeRequest(kind="file_change", subject=short_text(subject, 200), turn_id=turn_id, details=details)
    return RuntimeRequest(kind="other", subject=short_text(tool or kind, 200), turn_id=turn_id, details=details)


def choose_option(options: list[Mapping[str, Any]], decision: str) -> str | None:
    """The ``optionId`` answering ``decision`` (:data:`OPTION_KINDS`: the first option of the first
    kind that fits), ``None`` when the agent offered none that fits."""
    for kind in OPTION_KINDS.get(decision, ()):
        for option in options:
            if option.get("kind") == kind and option.get("optionId") is not None:
                return str(option["optionId"])
    return None
