"""Drive the real ``opencode serve`` (opencode-ai 1.18.33) over its HTTP API and server-sent events.

One server per execution, on a free loopback port, in private ``HOME``/``XDG_*`` folders with
opencode's offline switches and a pre-seeded plugin lock (without it opencode runs a detached
``npm install @opencode-ai/plugin`` at boot: one registry lookup). Its configuration is one
generated ``opencode.json`` (:func:`build_config`): the candidate's model provider from its profile
(base URL, wire API, the key's variable *name*), evalhub's control plane as the remote MCP server
``evalhub``, evalhub's instructions as an instruction file, and the permissions the case asks for.

The flow (v1 routes only: the v2 ``/api/*`` engine of 1.18.33 offers no MCP tools):

``GET /global/health`` (readiness; a request that arrives while the server boots may never be
answered, so each poll has a 1 s timeout) → ``GET /event`` (the SSE stream, followed on a thread
until the end) → ``GET /mcp`` until ``evalhub`` is ``connected`` → ``POST /session {title}`` →
per turn ``POST /session/{id}/prompt_async`` and events until the session is idle again.
Steering is a second ``prompt_async`` while the session is busy (opencode folds the new user
message into the running loop); an interrupt is ``POST /session/{id}/abort``; a permission request
(``permission.asked``) is answered with ``POST /permission/{id}/reply {once|always|reject}``. A
restart kills the server's process group and starts it again on the same folders: the session
lives on in opencode's SQLite database and the next prompt continues it.

Every raw frame goes to the trace: each HTTP request evalhub sends (``out``, as HTTP/1.1 text,
the server password replaced) and each response (``in``, body decoded), each SSE event's data
(``in``), and each line the server prints (``stderr``). Every frame gets exactly one
interpretation per the table in ``docs/runtime-mapping-opencode.md``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource

from runs.executors.base import InfrastructureError
from runs.executors.live.contracts import CanonicalEvent, RuntimeRequest, TurnOutcome, Usage
from runs.executors.live.drivers.common import (
    QUOTA_WORDS,
    ProcessDriver,
    TurnState,
    classify_http_status,
    classify_words,
    configuration_refused,
    decide,
    kill_process_group,
    require_runtime,
    short_text,
    start_process_group,
)
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderConfig

logger = logging.getLogger(__name__)

OPENCODE = RUNTIMES["opencode"]
OPENCODE_VERSION = OPENCODE.version
#: The MCP server name evalhub registers: opencode offers its tools as ``evalhub_<operation>``.
MCP_SERVER_NAME = "evalhub"
#: The npm package opencode installs into each config folder unless its lock already lists it.
PLUGIN_PACKAGE = "@opencode-ai/plugin"
#: The AI SDK provider package (bundled in the opencode binary) for each wire API.
PROVIDER_PACKAGES = {"chat": "@ai-sdk/openai-compatible", "responses": "@ai-sdk/openai"}
#: What evalhub tells opencode about a model it has no catalog entry for (the models.dev fetch
#: is off): tool calls, and limits every reference model exceeds (kimi-k2.5 262k, glm-4.6 200k,
#: gpt-oss-20b and glm-4.5-air 131k context), so opencode neither compacts early nor cuts answers.
MODEL_LIMITS = {"context": 128_000, "output": 16_384}
#: opencode's switches for running offline and alone: no update check, no models.dev catalog,
#: no sharing, no LSP downloads, no default plugins, no Claude Code files, no project config
#: found by walking up from the workspace.
OFFLINE_ENVIRONMENT = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
}
#: opencode's permission rules per approval mode: ``auto`` lets tools run, ``prompt`` asks for
#: evalhub's tools, shell commands and file edits (the case's ``permission_decision`` steps answer).
PERMISSIONS = {
    "auto": {"edit": "allow", "bash": "allow"},
    "prompt": {f"{MCP_SERVER_NAME}_*": "ask", "bash": "ask", "edit": "ask"},
}
#: A case's permission decision → opencode's reply.
PERMISSION_REPLIES = {"allow_once": "once", "accept_for_session": "always", "deny": "reject"}
#: opencode's built-in tools that change files, and those that read the web.
FILE_TOOLS = frozenset({"write", "edit", "patch", "apply_patch", "multiedit"})
RESEARCH_TOOLS = frozenset({"webfetch", "websearch", "codesearch"})
#: Events that concern the operator, not the evaluation (no canonical event).
OPERATOR_ONLY_EVENTS = frozenset({"server.connected", "mcp.tools.changed", "installation.update-available"})
#: Retries (``session.status`` ``retry``) evalhub tolerates in one turn before it stops the turn
#: as the provider's failure: opencode 1.18.33 gives up by itself after 5 (its ``session.error``
#: then carries the HTTP status), so this guards against a runtime that would retry for ever.
RETRY_LIMIT = 5
#: A retry scheduled further away than this (a provider's ``Retry-After``, which opencode honours
#: without a cap) stops the turn at once: it would only run into the turn's time budget.
RETRY_WAIT_LIMIT_S = 60.0
#: Steps in a row that ended cut off with nothing (a dropped stream): opencode asks the model
#: again by itself, without end.
DROP_LIMIT = 3
#: A session id opencode does not have (:meth:`OpencodeServerDriver.probe_rejection`).
PROBE_SESSION = "ses_evalhubTraceProbe"
#: Seconds a steer that raced the end of the loop gets to start a new loop (see :meth:`OpencodeServerDriver.steer`).
STEER_SETTLE_S = 2.0

#: What opencode says when it cannot reach the model endpoint at all; evalhub stops the turn at
#: once instead of waiting out opencode's retries (the endpoint will not appear).
_UNREACHABLE_WORDS = re.compile(
    r"unable to connect|connection ?refused|econnrefused|enotfound|getaddrinfo|could not resolve", re.IGNORECASE
)
_RATE_WORDS = re.compile(r"rate.?limit|too many requests|\b429\b", re.IGNORECASE)
_UNAVAILABLE_WORDS = re.compile(r"unavailable|overloaded|\b503\b", re.IGNORECASE)
_INTERNAL_WORDS = re.compile(r"internal|\b500\b", re.IGNORECASE)
_RETRY_RULES = (
    (_UNREACHABLE_WORDS, "provider_unreachable"),
    (QUOTA_WORDS, "provider_quota_exhausted"),
    (_RATE_WORDS, "provider_rate_limited"),
    (_UNAVAILABLE_WORDS, "provider_http_503"),
    (_INTERNAL_WORDS, "provider_http_500"),
)


# -- configuration -------------------------------------------------------------------------------


def split_model(model: str, fallback_provider: str) -> tuple[str, str]:
    """``(provider id, model id)`` of a candidate's model: ``openrouter/moonshotai/kimi-k2.5`` →
    ``("openrouter", "moonshotai/kimi-k2.5")``; a model without a ``/`` uses ``fallback_provider``
    (the profile's name). Raises ``ValueError`` for an empty model or provider part."""
    provider_id, _, model_id = model.partition("/")
    if "/" not in model:
        provider_id, model_id = fallback_provider, model
    if not provider_id.strip() or not model_id.strip():
        raise ValueError(f"model {model!r} must name a model, as provider/model such as openrouter/moonshotai/kimi-k2.5")
    return provider_id, model_id


def build_config(
    *,
    provider: ProviderConfig,
    base_url: str,
    model: str,
    reasoning_effort: str | None,
    mcp_url: str,
    instructions_path: str,
    approvals: str = "auto",
) -> dict[str, Any]:
    """The ``opencode.json`` of one execution (a JSON object; see docs/runtime-mapping-opencode.md).

    The provider id is the model's first segment (``openrouter``), its package the AI SDK
    provider of the profile's wire API (``chat`` → ``@ai-sdk/openai-compatible``, ``responses``
    → ``@ai-sdk/openai``: both bundled), its base URL ``base_url``, its key ``{env:<env_key>}``
    (the variable's *name*: opencode reads the value from its environment). No ``cost`` block:
    evalhub prices tokens itself, so opencode's own cost stays 0. ``approvals`` picks
    :data:`PERMISSIONS`. Raises ``ValueError`` for an unknown wire API or approvals mode, or a
    malformed model.
    """
    if provider.wire_api not in PROVIDER_PACKAGES:
        raise ValueError(
            f"opencode speaks {' or '.join(PROVIDER_PACKAGES)}; provider profile {provider.profile!r} uses {provider.wire_api!r}"
        )
    if approvals not in PERMISSIONS:
        raise ValueError(f"approvals must be 'auto' or 'prompt', not {approvals!r}")
    provider_id, model_id = split_model(model, provider.profile)
    entry: dict[str, Any] = {"name": model_id, "tool_call": True, "limit": dict(MODEL_LIMITS)}
    if reasoning_effort:
        entry["options"] = {"reasoningEffort": reasoning_effort}
    options: dict[str, Any] = {"baseURL": base_url}
    if provider.env_key:
        options["apiKey"] = "{env:" + provider.env_key + "}"
    return {
        "model": f"{provider_id}/{model_id}",
        "small_model": f"{provider_id}/{model_id}",
        "autoupdate": False,
        "share": "disabled",
        "instructions": [instructions_path],
        "provider": {
            provider_id: {
                "npm": PROVIDER_PACKAGES[provider.wire_api],
                "name": f"evalhub {provider.profile}",
                "options": options,
                "models": {model_id: entry},
            }
        },
        "mcp": {MCP_SERVER_NAME: {"type": "remote", "url": mcp_url, "oauth": False, "enabled": True}},
        "permission": dict(PERMISSIONS[approvals]),
    }


def seed_plugin_lock(config_dir: Path) -> None:
    """Pre-seed ``<XDG_CONFIG_HOME>/opencode`` so opencode finds its plugin package already locked
    and skips the ``npm install`` it would otherwise start (a registry lookup) at every boot."""
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "node_modules").mkdir(exist_ok=True)
    dependencies = {PLUGIN_PACKAGE: OPENCODE_VERSION}
    (config_dir / "package.json").write_text(json.dumps({"dependencies": dependencies}), encoding="utf-8")
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": dependencies}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock), encoding="utf-8")


# -- provider errors and usage -------------------------------------------------------------------


def classify_session_error(error: Mapping[str, Any] | None) -> str | None:
    """The ``TurnOutcome.error_code`` of a ``session.error``'s ``error`` (``{name, data}``).

    ``APIError`` with ``data.statusCode`` → :func:`classify_http_status` (the message decides
    quota against rate limit for a 429); ``APIError`` without a status → the message's words
    (:func:`classify_retry_message`); ``ProviderAuthError`` → ``provider_auth_refused``; anything
    else (``UnknownError``, ``MessageOutputLengthError``...) → ``None``. ``MessageAbortedError``
    is not a provider failure: ``None``.
    """
    if not isinstance(error, Mapping):
        return None
    name = str(error.get("name") or "")
    data = error.get("data") if isinstance(error.get("data"), Mapping) else {}
    message = str(data.get("message") or "")
    if name == "APIError":
        status = data.get("statusCode")
        if isinstance(status, int) and status > 0:
            return classify_http_status(status, f"{message} {data.get('responseBody') or ''}")
        return classify_retry_message(message)
    if name == "ProviderAuthError":
        return "provider_auth_refused"
    return None


def classify_retry_message(message: str) -> str | None:
    """A provider failure code from the message alone (opencode's ``retry`` status carries no
    HTTP status): unreachable endpoint → ``provider_unreachable``; quota, billing or credit →
    ``provider_quota_exhausted``; a rate limit → ``provider_rate_limited``; unavailable or
    overloaded → ``provider_http_503``; an internal error → ``provider_http_500``; else ``None``."""
    return classify_words(message, _RETRY_RULES)


def usage_from_tokens(tokens: Mapping[str, Any] | None) -> Usage:
    """evalhub's :class:`Usage` of an opencode ``tokens`` object (``{input, output, reasoning,
    cache: {read, write}}``). opencode's ``input`` excludes cached tokens (read and written) and
    its ``output`` excludes reasoning, so ``Usage.input = input + cache.read + cache.write``,
    ``cached_input = cache.read``, ``output = output``, ``reasoning = reasoning``."""
    tokens = tokens if isinstance(tokens, Mapping) else {}
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), Mapping) else {}
    read = int(cache.get("read") or 0)
    return Usage(
        input=int(tokens.get("input") or 0) + read + int(cache.get("write") or 0),
        cached_input=read,
        output=int(tokens.get("output") or 0),
        reasoning=int(tokens.get("reasoning") or 0),
    )


def tool_identity(name: str) -> tuple[str, str | None]:
    """``(tool, server)`` of an opencode tool name: ``evalhub_finish_task`` → ``("finish_task",
    "evalhub")``; a built-in such as ``bash`` → ``("bash", None)``."""
    prefix = f"{MCP_SERVER_NAME}_"
    if name.startswith(prefix):
        return name[len(prefix) :], MCP_SERVER_NAME
    return name, None


def describe_permission(properties: Mapping[str, Any]) -> RuntimeRequest:
    """The :class:`RuntimeRequest` of a ``permission.asked`` event's properties: evalhub's tools →
    ``tool`` (the operation), ``bash`` → ``command`` (the command), ``edit`` → ``file_change``
    (the file), anything else → ``other`` (opencode's permission name)."""
    permission = str(properties.get("permission") or "")
    metadata = properties.get("metadata") if isinstance(properties.get("metadata"), Mapping) else {}
    patterns = [str(p) for p in properties.get("patterns") or []]
    details = {"permission": permission, "patterns": patterns, "always": list(properties.get("always") or [])}
    tool, server = tool_identity(permission)
    if server is not None:
        return RuntimeRequest(kind="tool", subject=tool, details={**details, "server": server})
    if permission == "bash":
        return RuntimeRequest(kind="command", subject=short_text(metadata.get("command") or " ".join(patterns), 200), details=details)
    if permission == "edit":
        subject = metadata.get("filepath") or metadata.get("filePath") or ", ".join(patterns)
        return RuntimeRequest(kind="file_change", subject=short_text(subject, 200), details=details)
    return RuntimeRequest(kind="other", subject=permission, details=details)


# -- HTTP frames ---------------------------------------------------------------------------------

_DROPPED_RESPONSE_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}


def request_frame(request: httpx.Request) -> bytes:
    """An HTTP request as HTTP/1.1 text (start line, headers, body); the ``Authorization``
    value (the server's password) is replaced by ``[REDACTED]``."""
    lines = [f"{request.method} {request.url.raw_path.decode('ascii', 'replace')} HTTP/1.1"]
    for name, value in request.headers.items():
        lines.append(f"{name}: {'[REDACTED]' if name.lower() == 'authorization' else value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (request.content or b"")


def response_frame(response: httpx.Response, body: bytes | None = None) -> bytes:
    """An HTTP response as HTTP/1.1 text with its body decoded (so no ``Content-Encoding`` or
    ``Content-Length`` header); ``body`` ``None`` records the head only (a stream)."""
    lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
    lines += [f"{name}: {value}" for name, value in response.headers.items() if name.lower() not in _DROPPED_RESPONSE_HEADERS]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class _Turn(TurnState):
    #: opencode reported the session busy for this turn (its idle ends the turn only after that).
    busy: bool = False
    #: evalhub asked opencode to abort the turn (interrupt, budget stop, provider storm).
    aborted: bool = False
    interrupted_emitted: bool = False
    retries: int = 0
    drops: int = 0
    #: steer prompts sent but not yet answered; an idle meanwhile is deferred (the steer may start a new loop).
    steers_in_flight: int = 0
    deferred_idle: int | None = None
    busy_after_idle: bool = False


@dataclass
class _Text:
    """One assistant text part while it streams."""

    message_id: str
    turn_id: str | None
    chunks: list[str] = field(default_factory=list)
    completed: CanonicalEvent | None = None
    #: its own end (``time.end``) arrived
    confirmed: bool = False


class OpencodeServerDriver(ProcessDriver):
    """:class:`runs.executors.live.contracts.Driver` for ``opencode serve`` (opencode-ai 1.18.33).

    Keyword arguments as :class:`~runs.executors.live.contracts.Driver` says, plus ``case_id`` and
    ``execution_id`` (fill ``{case_id}``/``{execution_id}`` in ``provider.base_url``; the
    execution id also titles the session), ``approvals`` (``"auto"``: tools run unprompted;
    ``"prompt"``: evalhub's tools, shell commands and edits raise ``permission.asked``, answered
    through ``callbacks.on_runtime_request``), ``binary``, and timeouts in seconds:
    ``startup_timeout_s`` (server up and answering), ``mcp_startup_timeout_s`` (``evalhub``
    connected), ``request_timeout_s`` (one HTTP request).

    Errors (``InfrastructureError``): ``runtime_missing`` (no binary, not retryable),
    ``runtime_start_failed`` (the server did not come up in time, or exited; retryable; not
    retryable for a provider profile opencode cannot use), ``runtime_crashed`` (the server died
    while in use, retryable), ``mcp_unavailable`` (opencode could not connect to the evalhub MCP
    server, retryable).
    """

    runtime_name = "opencode serve"
    runtime_key = "opencode"
    capabilities = frozenset({"steer", "interrupt", "resume"})
    #: The wire APIs opencode speaks to a model provider (its provider packages).
    wire_apis = ("chat", "responses")

    _turn_state = _Turn
    _worker_name = "opencode-callbacks"
    # opencode logs every request at INFO: the lines worth showing are the others.
    _hint_label = "output"
    _hint_skips = ("level=INFO",)

    def __init__(
        self,
        *,
        case_id: str | None = None,
        execution_id: str | None = None,
        startup_timeout_s: float = 90.0,
        mcp_startup_timeout_s: float = 30.0,
        **arguments: Any,
    ) -> None:
        super().__init__(case_id=case_id, execution_id=execution_id, **arguments)
        self.root = self.workdir / "opencode"
        self.title = f"evalhub {execution_id or case_id or 'execution'}"
        self._startup_timeout_s = startup_timeout_s
        self._mcp_timeout_s = mcp_startup_timeout_s
        # opencode asks HTTP Basic auth (user "opencode") on every route when a password is set:
        # no other local process can drive this execution's agent.
        self._password = password = secrets.token_urlsafe(24)
        self._auth = "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()

        self._http: httpx.Client | None = None
        self._stream: httpx.Client | None = None
        self._port: int | None = None
        self._generation = 0
        self._connected = False
        self._session_id: str | None = None
        self._session_started = False
        self._seen_steps: set[str] = set()
        self._roles: dict[str, str] = {}
        self._parts: dict[str, str] = {}
        self._texts: dict[str, _Text] = {}
        self._tools_seen: dict[str, str] = {}
        self.timings: dict[str, float] = {}

    # -- public API ------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """opencode's session id (``ses_…``), once started."""
        return self._session_id

    @property
    def port(self) -> int | None:
        """The loopback port the server listens on."""
        return self._port

    def start(self) -> None:
        """Write the configuration, start the server, follow its events, wait for the evalhub MCP
        server and create the session. Raises ``InfrastructureError`` (see class). Start-up
        times (seconds) are kept in :attr:`timings` (``ready``, ``mcp``, ``session``)."""
        self._binary = require_runtime(OPENCODE, self._configured_binary)
        instructions = self.root / "instructions.md"
        with configuration_refused():
            config = build_config(
                provider=self.provider,
                base_url=self.base_url,
                model=self.model,
                reasoning_effort=self.reasoning_effort,
                mcp_url=self.mcp_url,
                instructions_path=str(instructions),
                approvals=self.approvals,
            )
        self._provider_id, self._model_id = split_model(self.model, self.provider.profile)
        for folder in ("config", "data", "cache", "state"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        seed_plugin_lock(self.root / "config" / "opencode")
        instructions.write_text(self._instructions + "\n", encoding="utf-8")
        (self.root / "opencode.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        with self._killed_on_failure():
            self._launch()
            started = time.monotonic()
            response = self._call("POST", "/session", {"title": self.title}, start_phase=True)
            session = self._json(response)
            self._session_id = str(session.get("id") or "") if isinstance(session, Mapping) else ""
            if not self._session_id:
                raise InfrastructureError("runtime_start_failed", True, "opencode POST /session returned no session id")
            self.timings["session"] = time.monotonic() - started

    def start_turn(self, text: str) -> str:
        """Send ``text`` as a new prompt (``prompt_async``); returns evalhub's turn id
        (``turn-1``, ``turn-2``...) at once. Raises ``RuntimeError`` when a turn is still active,
        ``InfrastructureError("runtime_crashed")`` when the server is gone or refuses."""
        with self._cond:
            turn_id = self._book.register_next().turn_id
        try:
            response = self._call("POST", f"/session/{self._session_id}/prompt_async", self._prompt(text))
        except InfrastructureError:
            with self._cond:
                self._book.end_active("failed", "the prompt was not accepted")
            raise
        if response.status_code >= 300:
            with self._cond:
                self._book.end_active("failed", "the prompt was not accepted")
            raise InfrastructureError(
                "runtime_crashed", True, f"opencode refused the prompt: HTTP {response.status_code} {short_text(response.text, 200)}"
            )
        return turn_id

    def wait_turn(self, timeout_ms: int) -> TurnOutcome:
        """Wait for the current turn like every driver (:meth:`ProcessDriver.wait_turn`), then read
        the session's messages and parts (``GET /session/{id}/message``): the transcript goes to
        the trace, and a text part the event stream ended without evalhub seeing its end still
        becomes its ``item.completed``."""
        outcome = super().wait_turn(timeout_ms)
        with self._cond:
            readable = self._book.crashed is None and not self._closed and self._session_id is not None
        if readable:
            try:
                self._call("GET", f"/session/{self._session_id}/message", None, on_received=self._reconcile)
            except InfrastructureError:
                pass  # the outcome stands; a dead server shows at the next call
        return outcome

    def _reconcile(self, response: httpx.Response, frame_id: int) -> tuple[str, list[CanonicalEvent]]:
        """The messages' text parts that ended, but whose end the event stream did not deliver."""
        messages = self._json(response) if response.status_code == 200 else None
        emitted: list[CanonicalEvent] = []
        with self._cond:
            for message in messages if isinstance(messages, list) else []:
                info = message.get("info") if isinstance(message, Mapping) else None
                if not isinstance(info, Mapping) or info.get("role") != "assistant":
                    continue
                for part in message.get("parts") or []:
                    if not isinstance(part, Mapping) or part.get("type") != "text" or part.get("synthetic"):
                        continue
                    part_id = str(part.get("id") or "")
                    text = self._texts.get(part_id)
                    if part_id and (part.get("time") or {}).get("end") and (text is None or text.completed is None):
                        if text is None:
                            text = self._texts[part_id] = _Text(message_id=str(info.get("id") or ""), turn_id=self._book.current)
                        text.confirmed = True
                        emitted.append(self._complete_text(part_id, text, str(part.get("text") or ""), frame_id))
        return ("mapped" if emitted else "ignored"), emitted

    def steer(self, text: str) -> bool:
        """Add ``text`` to the active turn: a second ``prompt_async`` while the session is busy,
        which opencode folds into the running loop. Returns ``True`` when opencode accepted it
        (``turn.steering.acknowledged`` is emitted), ``False`` when no turn is active or it refused."""
        with self._cond:
            self._book.raise_if_crashed()
            turn = self._book.active_turn()
            if turn is None or turn.aborted:
                return False
            turn.steers_in_flight += 1
        try:
            response = self._call("POST", f"/session/{self._session_id}/prompt_async", self._prompt(text), steer=True)
        except InfrastructureError:
            response = None
        with self._cond:
            turn.steers_in_flight -= 1
            idle = turn.deferred_idle
            if idle is not None and not turn.steers_in_flight:
                # The loop ended while the steer was on its way: a steer opencode took after the
                # loop's end starts a new loop (busy again) within moments; otherwise the turn ended.
                deadline = time.monotonic() + STEER_SETTLE_S
                while not turn.busy_after_idle and self._book.crashed is None and time.monotonic() < deadline:
                    self._cond.wait(deadline - time.monotonic())
                turn.deferred_idle = None
                if turn.busy_after_idle:
                    self._trace.interpret([idle], "ignored", [])
                else:
                    self._end_turn(turn, [idle])
        return response is not None and response.status_code < 300

    def interrupt(self) -> None:
        """Abort the active turn (``POST /session/{id}/abort``); no-op when idle or already ended.
        A permission request still pending for it is left unanswered (stale)."""
        with self._cond:
            turn = self._book.active_turn()
            if turn is None or self._book.crashed is not None or self._closed:
                return
            turn.aborted = True
        try:
            self._call("POST", f"/session/{self._session_id}/abort", None)
        except InfrastructureError:
            pass

    def restart(self) -> None:
        """Kill the server's process group and start it again on the same folders; the session
        continues (``GET /session/{id}`` → ``session.resumed``). A turn that was active is
        recorded as ``interrupted``. Raises like :meth:`start`."""
        if self._session_id is None:
            raise RuntimeError("restart() before start()")
        self._kill_for_restart()
        with self._killed_on_failure():
            self._launch()
            response = self._call("GET", f"/session/{self._session_id}", None, start_phase=True, resume=True)
            if response.status_code != 200:
                raise InfrastructureError(
                    "runtime_start_failed",
                    True,
                    f"opencode lost session {self._session_id} across the restart (HTTP {response.status_code})",
                )

    def probe_rejection(self) -> bool:
        """See :meth:`Driver.probe_rejection`: ``GET /session/ses_evalhubTraceProbe`` names a
        session opencode does not have, so it answers 404, interpreted as ``rejected``. (An unknown
        route would not do: opencode answers any other GET with its web app's page.)"""
        try:
            response = self._call("GET", f"/session/{PROBE_SESSION}", None)
        except InfrastructureError:
            return False
        return response.status_code >= 400

    # -- process lifecycle -----------------------------------------------------------------

    def _process_env(self) -> dict[str, str]:
        env = super()._process_env()
        env.setdefault("HOME", str(self.root / "home"))
        env.update(
            {
                "XDG_CONFIG_HOME": str(self.root / "config"),
                "XDG_DATA_HOME": str(self.root / "data"),
                "XDG_CACHE_HOME": str(self.root / "cache"),
                "XDG_STATE_HOME": str(self.root / "state"),
                "OPENCODE_CONFIG": str(self.root / "opencode.json"),
                "OPENCODE_SERVER_PASSWORD": self._password,
                **OFFLINE_ENVIRONMENT,
            }
        )
        Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
        return env

    def _launch(self) -> None:
        """Start the server on a free port (a second try on another port when the first was taken
        meanwhile), wait until it answers, follow its events and wait for the MCP server."""
        started = time.monotonic()
        for attempt in range(3):
            with self._cond:
                self._generation += 1
                generation = self._generation
                self._connected = False
                self._book.crashed = None
            port = _free_port()
            argv = [str(self._binary), "serve", "--hostname", "127.0.0.1", "--port", str(port), "--print-logs", "--log-level", "INFO"]
            proc = start_process_group(argv, env=self._process_env(), cwd=str(self.workspace), label=self.runtime_name, stdin=False)
            with self._cond:
                self._proc, self._port = proc, port
            assert proc.stdout is not None and proc.stderr is not None
            for pipe in (proc.stdout, proc.stderr):
                threading.Thread(target=self._read_output, args=(pipe,), name=f"opencode-output-{generation}", daemon=True).start()
            threading.Thread(target=self._watch, args=(proc, generation), name=f"opencode-watch-{generation}", daemon=True).start()
            root, headers = f"http://127.0.0.1:{port}", {"Authorization": self._auth}
            self._http = httpx.Client(base_url=root, headers=headers, timeout=self._request_timeout_s, trust_env=False)
            self._stream = httpx.Client(base_url=root, headers=headers, timeout=httpx.Timeout(10.0, read=None), trust_env=False)
            if self._wait_healthy(proc, started):
                break
            if attempt == 2 or "EADDRINUSE" not in " ".join(self._stderr_tail) and "in use" not in " ".join(self._stderr_tail):
                raise InfrastructureError("runtime_start_failed", True, f"opencode serve exited while starting{self._stderr_hint()}")
            self._kill()
        # The first start's phases (a restart's are in the trace's frame times).
        self.timings.setdefault("ready", time.monotonic() - started)
        self._call("GET", "/global/health", None, start_phase=True, operator=True)
        threading.Thread(target=self._follow_events, args=(generation,), name=f"opencode-events-{generation}", daemon=True).start()
        self._wait_connected()
        mcp_started = time.monotonic()
        self._wait_mcp_ready()
        self.timings.setdefault("mcp", time.monotonic() - mcp_started)

    def _wait_healthy(self, proc: subprocess.Popen[bytes], started: float) -> bool:
        """Poll ``GET /global/health`` (1 s each, not traced) until it answers healthy; ``False``
        when the process exits first. ``runtime_start_failed`` when it takes too long."""
        deadline = started + self._startup_timeout_s
        probe = httpx.Client(base_url=f"http://127.0.0.1:{self._port}", headers={"Authorization": self._auth}, timeout=1.0, trust_env=False)
        try:
            while True:
                if proc.poll() is not None:
                    return False
                try:
                    answer = probe.get("/global/health")
                    if answer.status_code == 200 and answer.json().get("healthy") is True:
                        return True
                except (httpx.HTTPError, ValueError, AttributeError):
                    pass
                if time.monotonic() >= deadline:
                    raise InfrastructureError(
                        "runtime_start_failed",
                        True,
                        f"opencode serve did not answer on 127.0.0.1:{self._port} within {self._startup_timeout_s:g} s{self._stderr_hint()}",
                    )
                time.sleep(0.2)
        finally:
            probe.close()

    def _wait_connected(self) -> None:
        self._await_start(
            lambda: self._connected, self._request_timeout_s, code="runtime_start_failed", what="opencode's /event stream did not open"
        )

    def _wait_mcp_ready(self) -> None:
        deadline = time.monotonic() + self._mcp_timeout_s
        while True:
            response = self._call("GET", "/mcp", None, start_phase=True, operator=True)
            status = self._json(response)
            entry = status.get(MCP_SERVER_NAME) if isinstance(status, Mapping) else None
            state = str(entry.get("status") or "") if isinstance(entry, Mapping) else ""
            if state == "connected":
                return
            if state in ("failed", "needs_auth", "needs_client_registration", "disabled"):
                raise InfrastructureError(
                    "mcp_unavailable",
                    True,
                    f"opencode could not connect to the evalhub MCP server at {self.mcp_url}: {state} {short_text(entry.get('error'), 200)}".strip(),
                )
            if time.monotonic() >= deadline:
                raise InfrastructureError(
                    "mcp_unavailable", True, f"the evalhub MCP server was not connected within {self._mcp_timeout_s:g} s"
                )
            time.sleep(0.25)

    def _kill(self) -> None:
        with self._cond:
            proc, clients = self._proc, (self._http, self._stream)
            self._generation += 1  # the old server's exit is now expected, not a crash
        kill_process_group(proc)
        for client in clients:
            if client is not None:
                try:
                    client.close()
                except Exception:
                    pass

    def _watch(self, proc: subprocess.Popen[bytes], generation: int) -> None:
        code = proc.wait()
        time.sleep(0.2)  # the last output lines first
        self._crash(generation, f"opencode serve exited unexpectedly (exit status {code}){self._stderr_hint()}")

    def _crash(self, generation: int, reason: str) -> None:
        with self._cond:
            if generation != self._generation or self._closed or self._book.crashed is not None:
                return
            self._book.crashed = reason
            self._cond.notify_all()

    def _read_output(self, pipe: Any) -> None:
        try:
            for raw in iter(pipe.readline, b""):
                line = raw.rstrip(b"\r\n")
                if not line:
                    continue
                self._on_stderr(line, self._trace.frame("stderr", line))
        except (OSError, ValueError):
            pass

    # -- HTTP ------------------------------------------------------------------------------

    def _prompt(self, text: str) -> dict[str, Any]:
        return {"model": {"providerID": self._provider_id, "modelID": self._model_id}, "parts": [{"type": "text", "text": text}]}

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            return None

    def _call(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        start_phase: bool = False,
        operator: bool = False,
        steer: bool = False,
        resume: bool = False,
        on_sent: Callable[[int], None] | None = None,
        on_received: Callable[[httpx.Response, int], tuple[str, list[CanonicalEvent]]] | None = None,
    ) -> httpx.Response:
        """One HTTP request, both frames traced. The request frame is ``operator_only`` unless
        ``on_sent`` interprets it; the response frame is ``rejected`` for a 4xx/5xx, as
        ``on_received`` says when given, ``mapped`` for an accepted steer (``turn.steering.acknowledged``) or a resumed session
        (``session.resumed``), ``operator_only`` with ``operator``, else ``ignored``.
        Raises ``InfrastructureError`` (``runtime_start_failed`` with ``start_phase``, else
        ``runtime_crashed``) when the server cannot be reached or does not answer in time."""
        client = self._http
        code = "runtime_start_failed" if start_phase else "runtime_crashed"
        if client is None:
            raise InfrastructureError(code, True, f"opencode is not running ({method} {path})")
        request = client.build_request(method, path, json=body) if body is not None else client.build_request(method, path)
        sent = self._trace.frame("out", request_frame(request))
        if on_sent is not None:
            on_sent(sent)
        else:
            self._trace.interpret([sent], "operator_only", [])
        try:
            response = client.send(request)
        except (httpx.HTTPError, RuntimeError) as exc:
            with self._cond:
                reason = self._book.crashed
            raise InfrastructureError(code, True, reason or f"opencode did not answer {method} {path}: {short_text(exc, 200)}") from exc
        received = self._trace.frame("in", response_frame(response, response.content))
        if on_received is not None and response.status_code < 400:
            self._trace.interpret([received], *on_received(response, received))
        elif response.status_code >= 400:
            self._trace.interpret([received], "rejected", [])
        elif steer:
            event = self._emit("turn.steering.acknowledged", [received], self._book.active, turnId=self._book.active)
            self._trace.interpret([received], "mapped", [event])
        elif resume:
            event = self._emit("session.resumed", [received], sessionId=self._session_id)
            self._trace.interpret([received], "mapped", [event])
        else:
            self._trace.interpret([received], "operator_only" if operator else "ignored", [])
        return response

    # -- the event stream ------------------------------------------------------------------

    def _follow_events(self, generation: int) -> None:
        client = self._stream
        if client is None:
            return
        reason = "opencode's /event stream closed"
        try:
            request = client.build_request("GET", "/event", headers={"Accept": "text/event-stream", "Cache-Control": "no-store"})
            self._trace.interpret([self._trace.frame("out", request_frame(request))], "operator_only", [])
            response = client.send(request, stream=True)
            try:
                self._trace.interpret(
                    [self._trace.frame("in", response_frame(response))], "operator_only" if response.status_code < 400 else "rejected", []
                )
                if response.status_code >= 400:
                    reason = f"opencode refused GET /event: HTTP {response.status_code}"
                    return
                for sse in EventSource(response).iter_sse():
                    with self._cond:
                        if generation != self._generation:
                            return
                    self._on_sse(sse.data)
            finally:
                response.close()
        except Exception as exc:  # the stream broke: the server died or was killed
            reason = f"opencode's /event stream broke: {short_text(exc, 200)}"
        finally:
            self._crash(generation, reason + self._stderr_hint())

    def _on_sse(self, data: str) -> None:
        frame_id = self._trace.frame("in", data.encode("utf-8", "replace"))
        try:
            event = json.loads(data)
        except ValueError:
            event = None
        if not isinstance(event, Mapping) or not isinstance(event.get("type"), str):
            self._trace.interpret([frame_id], "rejected", [])
            return
        kind = event["type"]
        props = event.get("properties") if isinstance(event.get("properties"), Mapping) else {}
        self._dispatch(self._EVENT_HANDLERS, OPERATOR_ONLY_EVENTS, kind, props, frame_id)

    def _e_server_connected(self, props: Mapping[str, Any], frame_id: int) -> None:
        # The event stream is open (``_wait_connected``); the frame concerns the operator only.
        with self._cond:
            self._connected = True
            self._cond.notify_all()
        self._trace.interpret([frame_id], "operator_only", [])

    def _ours(self, props: Mapping[str, Any]) -> bool:
        session = props.get("sessionID")
        if session is None and isinstance(props.get("part"), Mapping):
            session = props["part"].get("sessionID")
        if session is None and isinstance(props.get("info"), Mapping):
            session = props["info"].get("sessionID")
        return session is not None and session == self._session_id

    def _e_session_created(self, props: Mapping[str, Any], frame_id: int) -> None:
        info = props.get("info") if isinstance(props.get("info"), Mapping) else {}
        with self._cond:
            # Our session is the one with our title (the event may arrive before POST /session answers).
            first = not self._session_started and info.get("title") == self.title
            self._session_started = self._session_started or first
        if first:
            event = self._emit("session.started", [frame_id], sessionId=info.get("id"))
            self._trace.interpret([frame_id], "mapped", [event])
        else:
            self._trace.interpret([frame_id], "ignored", [])

    def _e_session_status(self, props: Mapping[str, Any], frame_id: int) -> None:
        status = props.get("status") if isinstance(props.get("status"), Mapping) else {}
        state = status.get("type")
        if not self._ours(props):
            self._trace.interpret([frame_id], "ignored", [])
            return
        with self._cond:
            turn = self._book.active_turn()
            if state == "busy" and turn is not None:
                if turn.deferred_idle is not None and not turn.busy_after_idle:
                    turn.busy_after_idle = True
                    self._cond.notify_all()
                if not turn.busy:
                    turn.busy = True
                    event = self._emit("turn.started", [frame_id], turn.turn_id, turnId=turn.turn_id)
                    self._trace.interpret([frame_id], "mapped", [event])
                    return
            elif state == "retry" and turn is not None:
                self._on_retry(turn, status, frame_id)
                return
            elif state == "idle" and turn is not None and turn.busy:
                if turn.steers_in_flight:
                    # Decided when the steer is answered: it ends the turn, or a new loop starts.
                    turn.deferred_idle, turn.busy_after_idle = frame_id, False
                    return
                self._end_turn(turn, [frame_id])
                return
        self._trace.interpret([frame_id], "ignored", [])

    def _on_retry(self, turn: _Turn, status: Mapping[str, Any], frame_id: int) -> None:
        """opencode retries a failed model request by itself; each retry is counted against the
        turn. An unreachable endpoint, or more retries than :data:`RETRY_LIMIT`, stops the turn."""
        message = short_text(status.get("message"))
        code = classify_retry_message(message)
        turn.retries += 1
        event = self._emit(
            "provider.notice",
            [frame_id],
            turn.turn_id,
            level="warning",
            code=code,
            willRetry=True,
            attempt=status.get("attempt"),
            message=message[:200],
        )
        self._trace.interpret([frame_id], "mapped", [event])
        next_at = status.get("next")
        wait_s = (next_at / 1000 - time.time()) if isinstance(next_at, (int, float)) else 0.0
        if code == "provider_unreachable" or turn.retries > RETRY_LIMIT or wait_s > RETRY_WAIT_LIMIT_S:
            why = f"the next retry was {wait_s:.0f} s away" if wait_s > RETRY_WAIT_LIMIT_S else f"after {turn.retries} retries"
            self._stop_turn(turn, code or "live_provider_execution_failed", f"{message} ({why})")

    def _stop_turn(self, turn: _Turn, code: str, error: str) -> None:
        """The provider failed for good: record it and abort the turn (it then ends ``failed``)."""
        if turn.error_code is None:
            turn.error_code, turn.error = code, error
        if not turn.aborted:
            turn.aborted = True
            self._worker.put(lambda: self._abort_for_provider())

    def _abort_for_provider(self) -> None:
        try:
            self._call("POST", f"/session/{self._session_id}/abort", None)
        except InfrastructureError:
            pass

    def _end_turn(self, turn: _Turn, frame_ids: list[int]) -> None:
        """The session went idle: the turn's outcome, and ``turn.completed`` (with
        ``turn.interrupted`` first when it was aborted and that was not said yet)."""
        self._deltas.flush_turn(turn.turn_id)
        if turn.timed_out:
            status = "timed_out"
        elif turn.error_code is not None or (turn.error is not None and not turn.aborted):
            status = "failed"
        elif turn.aborted:
            status = "interrupted"
        else:
            status = "completed"
        emitted = []
        if status in ("interrupted", "timed_out") and not turn.interrupted_emitted:
            turn.interrupted_emitted = True
            emitted.append(self._emit("turn.interrupted", frame_ids, turn.turn_id, turnId=turn.turn_id))
        emitted.append(self._emit("turn.completed", frame_ids, turn.turn_id, turnId=turn.turn_id, status=status))
        if frame_ids:
            self._trace.interpret(frame_ids, "mapped", emitted)
        self._book.finish(turn, status)

    def _e_session_error(self, props: Mapping[str, Any], frame_id: int) -> None:
        error = props.get("error") if isinstance(props.get("error"), Mapping) else {}
        if props.get("sessionID") is not None and not self._ours(props):
            self._trace.interpret([frame_id], "ignored", [])
            return
        name = str(error.get("name") or "")
        data = error.get("data") if isinstance(error.get("data"), Mapping) else {}
        with self._cond:
            turn = self._book.active_turn()
            if name == "MessageAbortedError":
                if turn is not None and not turn.interrupted_emitted:
                    turn.aborted = turn.interrupted_emitted = True
                    event = self._emit("turn.interrupted", [frame_id], turn.turn_id, turnId=turn.turn_id)
                    self._trace.interpret([frame_id], "mapped", [event])
                else:
                    self._trace.interpret([frame_id], "ignored", [])
                return
            code = classify_session_error(error)
            message = short_text(data.get("message") or name)
            event = self._emit("provider.error", [frame_id], turn.turn_id if turn else None, code=code, name=name, message=message[:200])
            if turn is not None:
                turn.error = message
                turn.error_code = turn.error_code or code or "live_provider_execution_failed"
        self._trace.interpret([frame_id], "mapped", [event])

    def _e_message_updated(self, props: Mapping[str, Any], frame_id: int) -> None:
        info = props.get("info") if isinstance(props.get("info"), Mapping) else {}
        message_id, role = str(info.get("id") or ""), str(info.get("role") or "")
        with self._cond:
            first = self._ours(props) and message_id and message_id not in self._roles
            if first:
                self._roles[message_id] = role
            turn_id = self._book.active
        if first and role == "user":
            event = self._emit("item.completed", [frame_id], turn_id, itemType="userMessage", itemId=message_id)
            self._trace.interpret([frame_id], "generic", [event])
        else:
            self._trace.interpret([frame_id], "ignored", [])

    def _e_part_updated(self, props: Mapping[str, Any], frame_id: int) -> None:
        part = props.get("part") if isinstance(props.get("part"), Mapping) else {}
        part_id, kind = str(part.get("id") or ""), str(part.get("type") or "")
        message_id = str(part.get("messageID") or "")
        with self._cond:
            ours = self._ours(props) and self._roles.get(message_id) != "user"
            turn_id = self._book.active
        if not ours or not part_id:
            self._trace.interpret([frame_id], "ignored", [])
            return
        if kind == "text":
            disposition, emitted = self._text_part(part, part_id, turn_id, frame_id)
            self._trace.interpret([frame_id], disposition, emitted)
            return
        # The model moved on to another part of the message: the text before it is complete (its
        # own end arrives only when the step ends), so it counts as said before the tool ran.
        closed = self._close_texts(message_id, frame_id)
        if kind == "tool":
            disposition, emitted = self._tool_part(part, part_id, turn_id, frame_id)
        elif kind == "step-finish":
            disposition, emitted = self._step_finish(part, part_id, turn_id, frame_id)
        elif kind in ("step-start", "snapshot"):
            disposition, emitted = "ignored", []
        else:
            # reasoning, patch, file, agent, subtask, compaction...: no meaning for evalhub.
            ended = kind != "reasoning" or bool((part.get("time") or {}).get("end"))
            with self._cond:
                seen = self._parts.get(part_id)
                self._parts[part_id] = kind if not ended else f"{kind}:done"
            if seen is None or (ended and not seen.endswith(":done")):
                event_type = "item.completed" if ended else "item.started"
                disposition, emitted = "generic", [self._emit(event_type, [frame_id], turn_id, itemType=kind, itemId=part_id)]
            else:
                disposition, emitted = "ignored", []
        if closed:
            disposition, emitted = "mapped", [*closed, *emitted]
        self._trace.interpret([frame_id], disposition, emitted)

    def _text_part(self, part: Mapping[str, Any], part_id: str, turn_id: str | None, frame_id: int) -> tuple[str, list[CanonicalEvent]]:
        """An assistant text part: ``item.started`` the first time, ``item.completed`` {text} when
        it ends (unless :meth:`_close_texts` completed it already: then this frame confirms it)."""
        if part.get("synthetic"):
            return "ignored", []
        ended = bool((part.get("time") or {}).get("end"))
        with self._cond:
            text = self._texts.get(part_id)
            new = text is None
            if text is None:
                text = self._texts[part_id] = _Text(message_id=str(part.get("messageID") or ""), turn_id=turn_id)
                self._deltas.open(part_id, turn_id)
            if text.completed is not None:
                return ("mapped", [text.completed]) if ended and not text.confirmed else ("ignored", [])
            emitted = [self._emit("item.started", [frame_id], turn_id, itemType="agentMessage", itemId=part_id)] if new else []
            if ended:
                text.confirmed = True
                emitted.append(self._complete_text(part_id, text, str(part.get("text") or ""), frame_id))
        return ("mapped" if emitted else "ignored"), emitted

    def _complete_text(self, part_id: str, text: _Text, content: str, frame_id: int) -> CanonicalEvent:
        frames = [*self._deltas.frames(part_id), frame_id]
        text.completed = self._emit("item.completed", frames, text.turn_id, itemType="agentMessage", itemId=part_id, text=content)
        self._deltas.flush(part_id, text.completed)
        return text.completed

    def _close_texts(self, message_id: str, frame_id: int) -> list[CanonicalEvent]:
        """Complete the streamed text parts of ``message_id`` still open, with the text their
        deltas carried; the triggering frame is the completion's last frame."""
        with self._cond:
            return [
                self._complete_text(part_id, text, "".join(text.chunks), frame_id)
                for part_id, text in self._texts.items()
                if text.message_id == message_id and text.completed is None and text.chunks
            ]

    def _e_part_delta(self, props: Mapping[str, Any], frame_id: int) -> None:
        part_id = str(props.get("partID") or "")
        delta = str(props.get("delta") or "")
        with self._cond:
            text = self._texts.get(part_id)
            streaming = self._ours(props) and text is not None and text.completed is None and props.get("field") == "text"
            turn_id = self._book.active
        if not streaming:
            self._trace.interpret([frame_id], "ignored", [])
            return
        event = self._emit("assistant.message.delta", [frame_id], turn_id, itemId=part_id, chars=len(delta))
        with self._cond:
            text.chunks.append(delta)
            self._deltas.add(part_id, turn_id, frame_id, event)
        # interpreted when the text part completes: the delta frames also produce its item.completed

    def _tool_part(self, part: Mapping[str, Any], part_id: str, turn_id: str | None, frame_id: int) -> tuple[str, list[CanonicalEvent]]:
        state = part.get("state") if isinstance(part.get("state"), Mapping) else {}
        status = str(state.get("status") or "")
        name = str(part.get("tool") or "")
        tool, server = tool_identity(name)
        item_id = str(part.get("callID") or part_id)
        done = status in ("completed", "error")
        with self._cond:
            seen = self._tools_seen.get(part_id)
            self._tools_seen[part_id] = "done" if done else "started"
        emitted: list[CanonicalEvent] = []
        if seen is None:
            emitted += self._emit_tool_started(frame_id, turn_id, item_id, tool, server)
        if done and seen != "done":
            builtin = status == "completed" and server is None
            emitted += self._emit_tool_ended(
                frame_id,
                turn_id,
                item_id,
                tool,
                server,
                failed=status == "error",
                changed_files=builtin and tool in FILE_TOOLS,
                researched=builtin and tool in RESEARCH_TOOLS,
            )
        return ("mapped" if emitted else "ignored"), emitted

    def _step_finish(self, part: Mapping[str, Any], part_id: str, turn_id: str | None, frame_id: int) -> tuple[str, list[CanonicalEvent]]:
        delta = usage_from_tokens(part.get("tokens"))
        with self._cond:
            if part_id in self._seen_steps:
                return "ignored", []
            self._seen_steps.add(part_id)
            turn = self._book.active_turn()
            if turn is not None:
                # A stream cut before it finished: opencode asks the model again by itself, forever.
                if part.get("reason") == "unknown" and delta == Usage():
                    turn.drops += 1
                    if turn.drops >= DROP_LIMIT:
                        self._stop_turn(turn, "provider_stream_dropped", f"the model's stream was cut {turn.drops} times in a row")
                else:
                    turn.drops = 0
                turn.usage = turn.usage + delta
            if delta == Usage():
                return "ignored", []
            self._usage_total = self._usage_total + delta
            cumulative = self._usage_total
        event = self._emit_usage(frame_id, turn_id, cumulative)
        self._worker.put(lambda: self._callbacks.on_usage(turn_id, cumulative))
        return "mapped", [event]

    def _e_permission_asked(self, props: Mapping[str, Any], frame_id: int) -> None:
        request_id = str(props.get("id") or "")
        with self._cond:
            turn = self._book.active_turn()
            live = self._ours(props) and request_id and turn is not None and not turn.aborted and not self._closed
        if not live:
            # Stale (its turn was aborted or ended) or another session's: left unanswered.
            self._trace.interpret([frame_id], "ignored", [])
            return
        described = describe_permission(props)
        request = RuntimeRequest(kind=described.kind, subject=described.subject, turn_id=turn.turn_id, details=described.details)
        self._trace.interpret([frame_id], "mapped", [self._emit_request_opened(frame_id, request, "permission.asked")])

        def answer() -> None:
            decision = decide(self._callbacks, request)
            with self._cond:
                if turn.aborted or turn.outcome is not None or self._closed:
                    return  # the turn ended while the human decided: the request is stale

            def resolved(sent: int) -> None:
                self._request_resolved(sent, request, decision)

            try:
                self._call("POST", f"/permission/{request_id}/reply", {"reply": PERMISSION_REPLIES[decision]}, on_sent=resolved)
            except InfrastructureError:
                pass

        self._worker.put(answer)

    def _e_question_asked(self, props: Mapping[str, Any], frame_id: int) -> None:
        """opencode's ``question`` tool asks the user directly; evalhub's human answers only
        through the control plane (``request_human_input``), so the question is declined."""
        request_id = str(props.get("id") or "")
        if not self._ours(props) or not request_id:
            self._trace.interpret([frame_id], "ignored", [])
            return
        event = self._emit(
            "provider.notice",
            [frame_id],
            self._book.active,
            level="warning",
            message="opencode's question tool was declined: evalhub answers through request_human_input",
        )
        self._trace.interpret([frame_id], "mapped", [event])

        def reject() -> None:
            try:
                self._call("POST", f"/question/{request_id}/reject", None)
            except InfrastructureError:
                pass

        self._worker.put(reject)

    def _e_todo_updated(self, props: Mapping[str, Any], frame_id: int) -> None:
        if not self._ours(props):
            self._trace.interpret([frame_id], "ignored", [])
            return
        event = self._emit("item.completed", [frame_id], self._book.active, itemType="todo", itemId=f"todo-{frame_id}")
        self._trace.interpret([frame_id], "generic", [event])

    _EVENT_HANDLERS: dict[str, Callable[[OpencodeServerDriver, Mapping[str, Any], int], None]] = {
        "server.connected": _e_server_connected,
        "session.created": _e_session_created,
        "session.status": _e_session_status,
        "session.error": _e_session_error,
        "message.updated": _e_message_updated,
        "message.part.updated": _e_part_updated,
        "message.part.delta": _e_part_delta,
        "permission.asked": _e_permission_asked,
        "question.asked": _e_question_asked,
        "todo.updated": _e_todo_updated,
    }


def _free_port() -> int:
    """A loopback port nothing listens on right now (opencode's ``--port 0`` means its default 4096)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
