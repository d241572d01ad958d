"""A scripted model server on loopback (OpenAI and Anthropic wire formats), for tests and ``make demo-live``.

The real runtimes (``codex app-server``, opencode, the ACP agents) talk to it exactly as they talk to a model
provider; what it answers comes from scripts (format and loader: :mod:`runs.executors.live.script_schema`).
Behaviour follows the OpenAI and Anthropic wire formats as the runtimes consume them (docs/live-harness.md):

* ``POST /scripts/<name>/v1/responses`` — Responses API; ``stream: true`` answers with SSE events
  ``response.created`` → per output ``response.output_item.added`` →
  (``response.function_call_arguments.delta``/``.done`` | ``response.content_part.added``,
  ``response.output_text.delta``×n, ``response.output_text.done``, ``response.content_part.done``)
  → ``response.output_item.done`` → ``response.completed`` (with ``usage``); otherwise one JSON
  response object.
* ``POST /scripts/<name>/v1/chat/completions`` — Chat Completions; streaming answers with
  ``data: <chunk>`` lines (content deltas, ``tool_calls``, ``finish_reason``, then a usage chunk
  with ``choices: []`` and ``data: [DONE]``); otherwise one ``chat.completion`` object.
* ``POST /scripts/<name>/v1/messages`` (``?beta=true`` too) — Anthropic Messages, as Claude Code
  sends it; streaming answers with SSE events ``message_start`` → ``ping`` → per block
  ``content_block_start`` (``text`` | ``tool_use``) → ``content_block_delta`` (``text_delta`` |
  ``input_json_delta``)×n → ``content_block_stop`` → ``message_delta`` (``stop_reason``
  ``end_turn`` | ``tool_use``, ``usage.output_tokens``) → ``message_stop``; otherwise one
  ``message`` object. Failures are Anthropic error bodies (``{"type": "error", "error": {"type":
  "overloaded_error" | "rate_limit_error" | "authentication_error" | "not_found_error" | ...}}``),
  and a ``fail`` step with ``midStream`` starts the stream and then sends an ``error`` event.
  ``POST /scripts/<name>/v1/messages/count_tokens`` answers ``{"input_tokens": N}`` (no step).
* ``GET /scripts/<name>/v1/models`` — a one-model list.

**Conversations and steps.** Each model request of a conversation takes the script's next step.
The conversation is the script name plus the request's ``thread-id`` (or ``session-id``) header
that codex sends, the ``x-session-id`` header that opencode sends or the
``x-claude-code-session-id`` header Claude Code sends (the ACP session id), else a digest of the first
user message. A request that offers no tools at all (no ``tools``, no code-mode ``exec``), or asks
for structured output (codex-acp's title request), is a runtime's **side request** (opencode's and
Claude Code's session-title requests, a summary): it gets a short text (:data:`SIDE_TEXT`; as
``{"title": ...}`` for structured output) and takes no step. A ``fail``/``drop`` step does not
move the conversation on while it still misbehaves; once its ``times`` are used up (counted per
script name and step across the whole server, so a retry in a new conversation can succeed) the
step is passed over. Past the last step the answer is a short final text.

**Tools.** A script's ``{"call": "finish_task"}`` is resolved against the tools the request
offers: codex's ``{"type": "namespace", "name": "mcp__evalhub", "tools": [...]}`` gives a
``function_call`` with ``"namespace": "mcp__evalhub"`` and the bare name; opencode's flat
``evalhub_finish_task`` is called by that name, Claude Code's ``mcp__evalhub__finish_task`` likewise. When the runtime does not offer the tool, the script's
``alternatives`` are tried in order (opencode's ``bash`` for codex's ``exec_command``), and a name
differing only in case counts (Claude Code's ``Bash``). A tool that
was not offered becomes a text output saying so (so a test sees it instead of a hang).

Every request is logged in :attr:`ScriptedModelServer.requests` with ``Authorization`` (and other
key-bearing headers) replaced by ``"[present]"``. Only the ``echoKey`` output ever says a key, on
purpose: it is how tests prove the harness scrubs the key everywhere.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import ipaddress
import itertools
import json
import math
import re
import signal
import socket
import sys
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from runs.executors.live.script_schema import load_script, load_scripts_dir

#: Model id reported by ``GET .../v1/models`` and used when a request names none.
DEFAULT_MODEL = "scripted-model"
#: Answer once a conversation has run past its script's last step (unless ``finalText`` says otherwise).
DEFAULT_FINAL_TEXT = "Scripted run finished."
#: Text streamed before the cut by a ``drop`` step that has no outputs of its own.
DROP_FILLER_TEXT = "This response is cut off before it completes."
#: Headers whose value is a credential; logged as ``"[present]"``.
SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "openai-api-key", "proxy-authorization"})
#: Headers naming the runtime's conversation, in order of preference (codex: ``thread-id``/``session-id``;
#: opencode: ``x-session-id``, the id of its session; Claude Code: ``x-claude-code-session-id``).
CONVERSATION_HEADERS = ("thread-id", "thread_id", "session-id", "session_id", "x-session-id", "x-claude-code-session-id")
#: The answer to a side request (one offering no tools: a title, a summary), which takes no script step.
SIDE_TEXT = "Scripted task"

_ROUTE = re.compile(r"^/scripts/(?P<script>[^/]+)/v1/(?P<endpoint>responses|chat/completions|messages/count_tokens|messages|models)/?$")
_MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Call:
    name: str
    namespace: str | None
    arguments: str  # JSON text


@dataclass(frozen=True)
class _CodeCall:
    """A call made through codex's code mode: models whose catalog entry says
    ``tool_mode: code_mode_only`` (gpt-5.6 and later) are offered one freeform ``exec`` tool that
    runs JavaScript, with the MCP tools on its global ``tools`` object."""

    source: str  # JavaScript


class ScriptedModelServer:
    """The scripted model server: a stdlib ``ThreadingHTTPServer`` on loopback in a background thread.

    ``scripts`` maps route names to scripts (``{"name", "steps"}``, validated with
    :func:`runs.executors.live.script_schema.load_script`; the mapping key is the route name).
    ``mcp_server`` is the MCP server name whose tools scripts call (``mcp__<it>`` namespace for
    codex, ``<it>_<tool>`` for opencode). ``port`` 0 picks a free port. A non-loopback ``host``
    raises :class:`ValueError`; an invalid script raises :class:`ValueError` naming the problem.

    Usable as a context manager (``with ScriptedModelServer(...) as server:`` starts and stops it).
    """

    def __init__(
        self,
        scripts: Mapping[str, Mapping[str, Any]],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        mcp_server: str = "evalhub",
        model: str = DEFAULT_MODEL,
    ) -> None:
        self.host = _loopback_host(host)
        self.port = port
        self.mcp_server = mcp_server
        self.model = model
        self._lock = threading.Lock()
        self._scripts: dict[str, dict[str, Any]] = {}
        self._requests: list[dict[str, Any]] = []
        self._next_step: dict[tuple[str, str], int] = {}
        self._misbehaved: dict[tuple[str, int], int] = {}
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._open_sockets: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        for name, script in scripts.items():
            self.add_script(script, name=name)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> str:
        """Bind, serve in a daemon thread and return the root URL (``http://127.0.0.1:PORT``)."""
        if self._httpd is not None:
            return self.url
        handler = type("ScriptedModelHandler", (_Handler,), {"owner": self})
        self._httpd = _Server((self.host, self.port), handler)
        self.port = self._httpd.server_address[1]
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-model", daemon=True
        )
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving: interrupt ``delayMs`` waits, close open connections, free the port.
        Safe to call twice."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            sockets = list(self._open_sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModelServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Root URL, ``http://127.0.0.1:PORT`` (the port is known once started)."""
        return f"http://{self.host}:{self.port}"

    def base_url(self, script: str) -> str:
        """The provider base URL for one script: ``<root>/scripts/<script>/v1`` (runtimes append
        ``/responses`` or ``/chat/completions``)."""
        return f"{self.url}/scripts/{script}/v1"

    # ---- scripts and state -----------------------------------------------------------------
    def add_script(self, script: Mapping[str, Any], *, name: str | None = None) -> str:
        """Validate and register (or replace) a script under ``name`` (default: its own name);
        returns the route name. Raises :class:`ValueError` for an invalid script."""
        loaded = load_script(script)
        route = name or loaded["name"]
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", route):
            raise ValueError(f"script route name {route!r}: use letters, digits, '_', '.', '-' (max 100)")
        with self._lock:
            self._scripts[route] = loaded
        return route

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the request log, oldest first. Each entry::

        {"method": "POST", "path": "/scripts/demo/v1/responses", "script": "demo" | None,
         "endpoint": "responses" | "chat/completions" | "messages" | "messages/count_tokens" | "models" | None,
         "conversation": str | None, "step": int | None,
         "answer": "outputs" | "final" | "fail" | "drop" | "side" | "models" | "error",
         "headers": {lower-case name: value, credential headers -> "[present]"},
         "body": parsed JSON | None, "atMs": ms since the epoch}
        """
        with self._lock:
            return copy.deepcopy(self._requests)

    def step_index(self, script: str, conversation: str) -> int:
        """Index of the step the conversation's next request will take (0 before any request;
        ``len(steps)`` or more once it has run past the end)."""
        with self._lock:
            return self._next_step.get((script, conversation), 0)

    def conversations(self, script: str) -> dict[str, int]:
        """``{conversation key: next step index}`` for every conversation seen on ``script``."""
        with self._lock:
            return {conv: index for (name, conv), index in self._next_step.items() if name == script}

    def misbehaviour_count(self, script: str, step: int) -> int:
        """How many times the ``fail``/``drop`` step ``step`` of ``script`` has misbehaved so far
        (server-wide)."""
        with self._lock:
            return self._misbehaved.get((script, step), 0)

    # ---- used by the handler ---------------------------------------------------------------
    def _script(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._scripts.get(name)

    def _known_scripts(self) -> list[str]:
        with self._lock:
            return sorted(self._scripts)

    def _log(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._requests.append(entry)
        return entry

    def _update(self, entry: dict[str, Any], **fields: Any) -> None:
        with self._lock:
            entry.update(fields)

    def _take_step(self, script_name: str, conversation: str) -> tuple[int | None, dict[str, Any] | None]:
        """The step answering this request, as ``(index, step)``, or ``(None, None)`` past the end."""
        with self._lock:
            steps = self._scripts[script_name]["steps"]
            key = (script_name, conversation)
            index = self._next_step.get(key, 0)
            while index < len(steps):
                step = steps[index]
                if "fail" in step or "drop" in step:
                    limit = step["fail"].get("times") if "fail" in step else step.get("times")
                    used = self._misbehaved.get((script_name, index), 0)
                    if limit is None or used < limit:
                        self._misbehaved[(script_name, index)] = used + 1
                        self._next_step[key] = index
                        return index, step
                    index += 1
                    continue
                self._next_step[key] = index + 1
                return index, step
            self._next_step[key] = index + 1  # past the end: keeps counting the requests
            return None, None

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._ids):06d}"

    def _track(self, sock: socket.socket, alive: bool) -> None:
        with self._lock:
            (self._open_sockets.add if alive else self._open_sockets.discard)(sock)


class _Server(ThreadingHTTPServer):
    """One thread per connection; a deep listen backlog so bursts of parallel runtimes are
    queued, not reset (socketserver's default is 5)."""

    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A runtime that hung up mid-answer (cancelled, aborted, killed) is normal here: no
        traceback on stderr for a connection the client reset or closed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One connection. Never name a method ``responses``: it would shadow the class's
    ``responses`` table that ``send_response`` reads."""

    protocol_version = "HTTP/1.1"
    server_version = "evalhub-scripted-model/1"
    owner: ScriptedModelServer

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the request log is :attr:`ScriptedModelServer.requests`."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    # ---- request side ----------------------------------------------------------------------
    def _dispatch(self) -> None:
        path = urlsplit(self.path).path
        entry = self.owner._log(
            {
                "method": self.command,
                "path": path,
                "script": None,
                "endpoint": None,
                "conversation": None,
                "step": None,
                "answer": None,
                "headers": _loggable_headers(self.headers.items()),
                "body": None,
                "atMs": int(time.time() * 1000),
            }
        )
        raw = b""
        if self.command == "POST":
            try:
                raw = self._read_body()
            except ValueError as exc:
                return self._error(entry, 400, str(exc), "invalid_request_error", "unreadable_body")
        route = _ROUTE.match(path)
        if route is None:
            return self._error(
                entry,
                404,
                f"no route {self.command} {path}; the scripted model serves "
                "/scripts/<name>/v1/responses, /scripts/<name>/v1/chat/completions, /scripts/<name>/v1/messages "
                "and /scripts/<name>/v1/models",
                "invalid_request_error",
                "unknown_route",
            )
        script_name, endpoint = route["script"], route["endpoint"]
        self.owner._update(entry, script=script_name, endpoint=endpoint)
        script = self.owner._script(script_name)
        if script is None:
            known = ", ".join(self.owner._known_scripts()) or "(none)"
            return self._error(
                entry,
                404,
                f"no scripted model script named {script_name!r}; known scripts: {known}",
                "invalid_request_error",
                "unknown_script",
            )
        if endpoint == "models":
            if self.command != "GET":
                return self._error(entry, 405, "use GET for /v1/models", "invalid_request_error", "method_not_allowed")
            self.owner._update(entry, answer="models")
            model = {"id": self.owner.model, "object": "model", "created": 0, "owned_by": "evalhub-scripted"}
            return self._send_json(200, {"object": "list", "data": [model]})
        if self.command != "POST":
            return self._error(entry, 405, f"use POST for /v1/{endpoint}", "invalid_request_error", "method_not_allowed")
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            return self._error(entry, 400, f"request body is not JSON: {exc}", "invalid_request_error", "invalid_json")
        if not isinstance(body, dict):
            return self._error(entry, 400, "request body must be a JSON object", "invalid_request_error", "invalid_json")
        conversation = _conversation_key(self.headers, body, endpoint)
        self.owner._update(entry, body=body, conversation=conversation)
        if endpoint == "messages/count_tokens":
            self.owner._update(entry, answer="count_tokens")
            return self._send_json(200, {"input_tokens": math.ceil(len(raw) / 4)})
        if (not body.get("tools") and _code_mode_tools(body) is None) or _structured_output(body):
            # A side request (opencode's title request shares the session's x-session-id): a short
            # text that leaves the conversation's next step for the real request. Codex's code mode
            # offers its tools inside the input instead, so it is never a side request. A request
            # for structured output (codex-acp's session title: a JSON schema for the answer) is one
            # too, answered with a JSON object holding the short text.
            self.owner._update(entry, answer="side")
            text = json.dumps({"title": SIDE_TEXT}) if _structured_output(body) else SIDE_TEXT
            return self._answer(body, endpoint, raw, [_Text(text)], None)

        index, step = self.owner._take_step(script_name, conversation)
        answer = "final" if step is None else ("fail" if "fail" in step else "drop" if "drop" in step else "outputs")
        self.owner._update(entry, step=index, answer=answer)
        delay_ms = (step or {}).get("delayMs", 0)
        if delay_ms and self.owner._stopping.wait(delay_ms / 1000):
            self.close_connection = True
            return
        if step is not None and "fail" in step:
            if endpoint == "messages":
                model = body.get("model") if isinstance(body.get("model"), str) else self.owner.model
                return self._fail_anthropic(step["fail"], model, stream=bool(body.get("stream")))
            return self._fail(step["fail"])

        if step is None:
            outputs: list[_Text | _Call | _CodeCall] = [_Text(script.get("finalText", DEFAULT_FINAL_TEXT))]
        elif "drop" in step and "outputs" not in step:
            outputs = [_Text(DROP_FILLER_TEXT)]
        else:
            outputs = self._resolve(step["outputs"], body, endpoint)
        return self._answer(body, endpoint, raw, outputs, step)

    def _answer(
        self, body: dict[str, Any], endpoint: str, raw: bytes, outputs: list[_Text | _Call | _CodeCall], step: Mapping[str, Any] | None
    ) -> None:
        """Send ``outputs`` in the endpoint's wire format (streamed when the request asks), with
        the step's usage, cut short when the step is a ``drop``."""
        usage = _usage((step or {}).get("usage"), raw, outputs)
        model = body.get("model") if isinstance(body.get("model"), str) else self.owner.model
        drop = step is not None and "drop" in step
        if endpoint == "responses":
            events = _response_events(self.owner, model, outputs, usage)
            if body.get("stream"):
                return self._stream([_sse(kind, data) for kind, data in events], drop=drop)
            return self._send_json(200, events[-1][1]["response"])
        if endpoint == "messages":
            message, events = _message_events(self.owner, model, outputs, usage)
            if body.get("stream"):
                return self._stream([_sse(kind, data) for kind, data in events], drop=drop)
            if drop:
                return self._send_cut_json(message)
            return self._send_json(200, message)
        chunks, completion = _chat_chunks(self.owner, model, outputs, usage)
        if body.get("stream"):
            return self._stream([_sse(None, c) for c in chunks] + [b"data: [DONE]\n\n"], drop=drop)
        return self._send_json(200, completion)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
                if len(raw) > _MAX_BODY:
                    raise ValueError("request body too large")
        else:
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                raise ValueError("request body too large")
            raw = self.rfile.read(length) if length else b""
        encoding = (self.headers.get("Content-Encoding") or "identity").lower()
        try:
            if encoding == "gzip":
                return gzip.decompress(raw)
            if encoding == "deflate":
                return zlib.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"request body is not valid {encoding}: {exc}") from None
        if encoding != "identity":
            raise ValueError(f"unsupported Content-Encoding {encoding!r} (send identity, gzip or deflate)")
        return raw

    def _resolve(self, outputs: list[dict[str, Any]], body: dict[str, Any], endpoint: str) -> list[_Text | _Call | _CodeCall]:
        offered = _offered_tools(body, endpoint)
        resolved: list[_Text | _Call | _CodeCall] = []
        for output in outputs:
            if "say" in output:
                resolved.append(_Text(output["say"]))
            elif "repeat" in output:
                resolved.append(_Text(output["repeat"] * output["times"]))
            elif "echoKey" in output:
                if self.headers.get("Authorization") or not self.headers.get("x-api-key"):
                    resolved.append(_Text("Authorization: " + (self.headers.get("Authorization") or "(none)")))
                else:  # Anthropic's header
                    resolved.append(_Text("x-api-key: " + self.headers["x-api-key"]))
            else:
                found = _find_tool(output["call"], offered, self.owner.mcp_server)
                code_mode = _code_mode_tools(body)
                arguments = output.get("arguments", {})
                if found is None and code_mode is None:
                    # Another runtime's name for the same action (codex's exec_command is opencode's
                    # bash, Claude Code's Bash): exact names first, then names differing only in case.
                    for fold in (False, True):
                        for alternative in output.get("alternatives", ()):
                            found = _find_tool(alternative["call"], offered, self.owner.mcp_server, fold_case=fold)
                            if found is not None:
                                arguments = alternative.get("arguments", {})
                                break
                        if found is not None:
                            break
                if found is None and code_mode is not None:
                    resolved.append(_CodeCall(_code_call_source(output["call"], arguments, code_mode, self.owner.mcp_server)))
                elif found is None:
                    names = sorted(f"{ns}/{name}" if ns else name for ns, name in offered) or ["(none)"]
                    resolved.append(_Text(f"[scripted model] tool {output['call']!r} was not offered; offered: {', '.join(names)}"))
                else:
                    text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
                    resolved.append(_Call(name=found[1], namespace=found[0], arguments=text))
        return resolved

    # ---- response side ---------------------------------------------------------------------
    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_cut_json(self, payload: Any) -> None:
        """A ``drop`` step's answer to a non-streaming request: the headers and half of the body,
        then the connection is cut (Claude Code asks again without streaming after a cut stream)."""
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _error(self, entry: dict[str, Any], status: int, message: str, kind: str, code: str) -> None:
        self.owner._update(entry, answer="error")
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def _fail(self, fail: Mapping[str, Any]) -> None:
        status = fail["status"]
        code = fail.get("code", _DEFAULT_CODES.get(status))
        kind = fail.get("type") or _error_type(status, code)
        message = fail.get("message") or f"scripted failure: HTTP {status}" + (f" ({code})" if code else "")
        headers = {}
        if "retryAfter" in fail:
            retry_after = fail["retryAfter"]
            headers["Retry-After"] = str(int(retry_after) if float(retry_after).is_integer() else retry_after)
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)

    def _fail_anthropic(self, fail: Mapping[str, Any], model: str, *, stream: bool) -> None:
        """An Anthropic error: ``{"type": "error", "error": {"type", "message"}}`` with the step's
        status, or with ``midStream`` a 200 stream that starts a message and then sends an
        ``error`` event (what Anthropic does when it overloads after the headers went out)."""
        status = fail["status"]
        kind = fail.get("type") or _ANTHROPIC_ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
        message = fail.get("message") or f"scripted failure: HTTP {status} ({kind})"
        payload = {"type": "error", "error": {"type": kind, "message": message}}
        if fail.get("midStream") and stream:
            start = _message_events(self.owner, model, [], {"input": 1, "cachedInput": 0, "output": 1, "reasoning": 0})[1][0]
            return self._stream([_sse(*start), _sse("ping", {"type": "ping"}), _sse("error", payload)], drop=False)
        headers = {"request-id": self.owner._new_id("req")}
        if "retryAfter" in fail:
            retry_after = fail["retryAfter"]
            headers["Retry-After"] = str(int(retry_after) if float(retry_after).is_integer() else retry_after)
        headers["x-should-retry"] = "false" if status < 500 and status not in (408, 409, 429) else "true"
        self._send_json(status, payload, headers)

    def _stream(self, frames: list[bytes], *, drop: bool) -> None:
        """Write SSE ``frames``; with ``drop``, write about half of them plus part of the next,
        then cut the connection (no terminating event ever arrives)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if drop:
            keep = max(2, len(frames) // 2)
            frames = frames[:keep] + [frames[keep][: max(1, len(frames[keep]) // 2)]]
        try:
            for frame in frames:
                self.wfile.write(frame)
                self.wfile.flush()
            if drop:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the client went away; nothing left to tell it


# ---- pure helpers ------------------------------------------------------------------------------
_DEFAULT_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}
#: Anthropic's error ``type`` by HTTP status (its API reference's error table).
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _error_type(status: int, code: str | None) -> str:
    if code == "insufficient_quota":
        return "insufficient_quota"
    if status == 429:
        return "requests"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def _loopback_host(host: str) -> str:
    address = "127.0.0.1" if host == "localhost" else host
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"host {host!r} is not an IP address; the scripted model serves loopback only") from None
    if not ip.is_loopback or ip.version != 4:
        raise ValueError(f"host {host!r} is not an IPv4 loopback address; the scripted model serves loopback only")
    return address


def _loggable_headers(items: Any) -> dict[str, str]:
    """Header names lower-cased (repeats joined with ", "); credential values -> ``"[present]"``."""
    headers: dict[str, str] = {}
    for name, value in items:
        name = name.lower()
        value = "[present]" if name in SECRET_HEADERS else value
        headers[name] = f"{headers[name]}, {value}" if name in headers and value != "[present]" else value
    return headers


def _conversation_key(headers: Any, body: Mapping[str, Any], endpoint: str) -> str:
    """``thread:<id>`` from the runtime's conversation header, else ``user:<sha256[:16]>`` of
    the first user message's text, else ``anonymous``."""
    for name in CONVERSATION_HEADERS:
        value = headers.get(name)
        if value:
            return f"thread:{value}"
    messages = body.get("messages") if endpoint in ("chat/completions", "messages", "messages/count_tokens") else body.get("input")
    if isinstance(messages, str):
        return "user:" + hashlib.sha256(messages.encode()).hexdigest()[:16]
    for message in messages or []:
        if isinstance(message, Mapping) and message.get("role") == "user":
            text = _message_text(message.get("content"))
            return "user:" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return "anonymous"


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return json.dumps(content, sort_keys=True)


def _offered_tools(body: Mapping[str, Any], endpoint: str) -> list[tuple[str | None, str]]:
    """Callable function tools the request offers, as ``(namespace or None, name)``."""
    offered: list[tuple[str | None, str]] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, Mapping) and inner.get("type", "function") == "function" and inner.get("name"):
                    offered.append((tool.get("name"), inner["name"]))
        elif endpoint == "messages" and tool.get("type", "custom") == "custom" and tool.get("name"):
            offered.append((None, str(tool["name"])))  # Anthropic: {name, description, input_schema}
        elif tool.get("type") == "function":
            name = tool.get("name") if endpoint == "responses" else None
            name = name or (tool.get("function") or {}).get("name")
            if name:
                offered.append((None, name))
    return offered


def _structured_output(body: Mapping[str, Any]) -> bool:
    """Whether a Responses request asks for structured output (``text.format`` ``json_schema``)."""
    text = body.get("text") if isinstance(body.get("text"), Mapping) else {}
    form = text.get("format") if isinstance(text.get("format"), Mapping) else {}
    return form.get("type") == "json_schema"


def _code_mode_tools(body: Mapping[str, Any]) -> dict[str, bool] | None:
    """The nested tools codex's code-mode ``exec`` tool declares (name → takes a plain string),
    or ``None`` when the request offers no ``exec`` tool (in an ``additional_tools`` input item).

    MCP tools are deferred: they are not declared, yet callable as ``tools.mcp__<server>__<tool>``."""
    for item in body.get("input") or []:
        if isinstance(item, Mapping) and item.get("type") == "additional_tools":
            for group in item.get("tools") or []:
                for tool in (group.get("tools") or [group]) if isinstance(group, Mapping) else []:
                    if isinstance(tool, Mapping) and tool.get("type") == "custom" and tool.get("name") == "exec":
                        description = str(tool.get("description") or "")
                        declared = re.findall(r"declare const tools: \{ (\w+)\((\w+)\??: (\w+|\{)", description)
                        return {name: kind == "string" for name, _argument, kind in declared}
    return None


def _code_call_source(call: str, arguments: Mapping[str, Any], declared: Mapping[str, bool], server: str) -> str:
    """JavaScript for ``exec`` that makes one call and returns its result as text: a declared
    built-in (``apply_patch`` takes its ``input`` string, ``exec_command`` an object) or an MCP tool."""
    if call in declared:
        argument: Any = arguments.get("input", "") if declared[call] else dict(arguments)
        function = call
    else:
        argument, function = dict(arguments), f"mcp__{server}__{call}"
    literal = json.dumps(argument, separators=(",", ":"), ensure_ascii=False)
    return f"text(JSON.stringify(await tools.{function}({literal})));"


def _find_tool(call: str, offered: list[tuple[str | None, str]], server: str, *, fold_case: bool = True) -> tuple[str | None, str] | None:
    """Resolve a script's bare tool name: codex's ``mcp__<server>`` namespace first, then an
    exact flat name, opencode's ``<server>_<call>``, a flat ``mcp__<server>__<call>`` (Claude
    Code), the same name in any other namespace, and with ``fold_case`` a flat name differing
    only in case."""
    preferences = [
        (f"mcp__{server}", call),
        (None, call),
        (None, f"{server}_{call}"),
        (None, f"mcp__{server}__{call}"),
    ]
    for wanted in preferences:
        if wanted in offered:
            return wanted
    for namespace, name in offered:
        if namespace and name == call:
            return namespace, name
    for namespace, name in offered:
        if fold_case and namespace is None and name.lower() == call.lower():
            return namespace, name  # Claude Code's ``Bash`` for a script's ``bash``
    return None


def _usage(spec: Mapping[str, int] | None, raw: bytes, outputs: list[_Text | _Call | _CodeCall]) -> dict[str, int]:
    """Token counts ``{input, cachedInput, output, reasoning}``: the step's own, else estimates
    (about 4 bytes of request body per input token, 4 characters of output per output token)."""
    produced = sum(
        len(o.text) if isinstance(o, _Text) else len(o.source) if isinstance(o, _CodeCall) else len(o.name) + len(o.arguments)
        for o in outputs
    )
    usage = {"input": math.ceil(len(raw) / 4), "cachedInput": 0, "output": max(1, math.ceil(produced / 4)), "reasoning": 0}
    usage.update(spec or {})
    return usage


def _pieces(text: str) -> list[str]:
    """Split text into streaming deltas: two or more pieces of at most 200 characters."""
    if len(text) < 2:
        return [text]
    size = min(200, math.ceil(len(text) / 2))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n\n").encode()


def _response_events(
    owner: ScriptedModelServer, model: str, outputs: list[_Text | _Call | _CodeCall], usage: Mapping[str, int]
) -> list[tuple[str, dict[str, Any]]]:
    """The Responses API event sequence, ``[(event type, payload), ...]``; the last one is
    ``response.completed`` whose ``response`` is also the non-streaming answer.

    Usage follows OpenAI: ``output_tokens`` includes reasoning tokens, ``total_tokens`` =
    input + output."""
    response_id = owner._new_id("resp")
    response = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "in_progress",
        "output": [],
        "usage": None,
    }
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(kind: str, **payload: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **payload}))

    emit("response.created", response=dict(response))
    emit("response.in_progress", response=dict(response))
    done_items: list[dict[str, Any]] = []
    for index, output in enumerate(outputs):
        if isinstance(output, _CodeCall):
            item = {
                "type": "custom_tool_call",
                "id": owner._new_id("ctc"),
                "call_id": owner._new_id("call"),
                "name": "exec",
                "input": output.source,
                "status": "completed",
            }
            emit("response.output_item.added", output_index=index, item=dict(item, input="", status="in_progress"))
            emit("response.custom_tool_call_input.delta", output_index=index, item_id=item["id"], delta=output.source)
            emit("response.custom_tool_call_input.done", output_index=index, item_id=item["id"], input=output.source)
        elif isinstance(output, _Call):
            item = {
                "type": "function_call",
                "id": owner._new_id("fc"),
                "call_id": owner._new_id("call"),
                "name": output.name,
                "arguments": output.arguments,
                "status": "completed",
            }
            if output.namespace:
                item["namespace"] = output.namespace
            emit("response.output_item.added", output_index=index, item=dict(item, arguments="", status="in_progress"))
            for piece in _pieces(output.arguments):
                emit("response.function_call_arguments.delta", output_index=index, item_id=item["id"], delta=piece)
            emit(
                "response.function_call_arguments.done",
                output_index=index,
                item_id=item["id"],
                arguments=output.arguments,
            )
        else:
            item = {
                "type": "message",
                "id": owner._new_id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [],
            }
            emit("response.output_item.added", output_index=index, item=dict(item, status="in_progress"))
            where = {"output_index": index, "item_id": item["id"], "content_index": 0}
            emit("response.content_part.added", **where, part={"type": "output_text", "text": "", "annotations": []})
            for piece in _pieces(output.text):
                emit("response.output_text.delta", **where, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, text=output.text, logprobs=[])
            part = {"type": "output_text", "text": output.text, "annotations": []}
            emit("response.content_part.done", **where, part=part)
            item["content"] = [part]
        emit("response.output_item.done", output_index=index, item=item)
        done_items.append(item)
    output_tokens = usage["output"] + usage["reasoning"]
    completed = dict(
        response,
        status="completed",
        output=done_items,
        usage={
            "input_tokens": usage["input"],
            "input_tokens_details": {"cached_tokens": usage["cachedInput"]},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage["reasoning"]},
            "total_tokens": usage["input"] + output_tokens,
        },
    )
    emit("response.completed", response=completed)
    return events


def _message_events(
    owner: ScriptedModelServer, model: str, outputs: list[_Text | _Call | _CodeCall], usage: Mapping[str, int]
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """Anthropic Messages: ``(the non-streaming message, [(event type, payload), ...])``.

    Usage follows Anthropic: ``input_tokens`` is the *uncached* input, ``cache_read_input_tokens``
    the cached part, ``output_tokens`` includes thinking (there is no separate count). A code-mode
    call has no Messages form and is sent as text."""
    message_id = owner._new_id("msg")
    content: list[dict[str, Any]] = []
    events: list[tuple[str, dict[str, Any]]] = []
    uncached = max(0, usage["input"] - usage["cachedInput"])
    start_usage = {
        "input_tokens": uncached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage["cachedInput"],
        "output_tokens": 1,
    }
    head = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None}
    events.append(("message_start", {"type": "message_start", "message": {**head, "stop_sequence": None, "usage": start_usage}}))
    events.append(("ping", {"type": "ping"}))
    for index, output in enumerate(outputs):
        if isinstance(output, _Call):
            block = {"type": "tool_use", "id": owner._new_id("toolu"), "name": output.name, "input": json.loads(output.arguments)}
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": dict(block, input={})}))
            for piece in _pieces(output.arguments):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        else:
            text = output.source if isinstance(output, _CodeCall) else output.text
            block = {"type": "text", "text": text}
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            )
            for piece in _pieces(text):
                delta = {"type": "text_delta", "text": piece}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        content.append(block)
    stop_reason = "tool_use" if any(isinstance(o, _Call) for o in outputs) else "end_turn"
    output_tokens = usage["output"] + usage["reasoning"]
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }
    events.append(("message_delta", delta))
    events.append(("message_stop", {"type": "message_stop"}))
    message = {
        **head,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {**start_usage, "output_tokens": output_tokens},
    }
    return message, events


def _chat_chunks(
    owner: ScriptedModelServer, model: str, outputs: list[_Text | _Call | _CodeCall], usage: Mapping[str, int]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Chat Completions: ``(stream chunks, non-streaming completion)``. Texts join into one
    ``content`` (blank line between outputs); calls become ``tool_calls`` with indices 0, 1, ...
    The last chunk carries ``usage`` with ``choices: []``."""
    completion_id = owner._new_id("chatcmpl")
    created = int(time.time())
    text = "\n\n".join(o.text for o in outputs if isinstance(o, _Text))
    calls = [
        {"id": owner._new_id("call"), "type": "function", "function": {"name": o.name, "arguments": o.arguments}}
        for o in outputs
        if isinstance(o, _Call)
    ]
    finish_reason = "tool_calls" if calls else "stop"
    output_tokens = usage["output"] + usage["reasoning"]
    usage_payload = {
        "prompt_tokens": usage["input"],
        "completion_tokens": output_tokens,
        "total_tokens": usage["input"] + output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage["cachedInput"]},
        "completion_tokens_details": {"reasoning_tokens": usage["reasoning"]},
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in (_pieces(text) if text else [])]
    for index, call in enumerate(calls):
        function = {"name": call["function"]["name"], "arguments": ""}
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": function}]}))
        for piece in _pieces(call["function"]["arguments"]):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, finish_reason))
    usage_chunk = chunk({})
    usage_chunk.update(choices=[], usage=usage_payload)
    chunks.append(usage_chunk)
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    completion = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage_payload,
    }
    return chunks, completion


def main(argv: list[str] | None = None) -> int:
    """``python -m runs.executors.live.scripted_model --scripts DIR [--port N] [--host 127.0.0.1]``:
    print the root URL on stdout, serve until SIGTERM or SIGINT, exit 0 (2 for bad scripts)."""
    parser = argparse.ArgumentParser(prog="python -m runs.executors.live.scripted_model", description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", required=True, help="directory of *.json scripts")
    parser.add_argument("--port", type=int, default=0, help="port on loopback (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="IPv4 loopback address")
    args = parser.parse_args(argv)
    try:
        server = ScriptedModelServer(load_scripts_dir(args.scripts), host=args.host, port=args.port)
    except ValueError as exc:
        print(f"scripted model: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    print(server.start(), flush=True)
    print(f"scripted model: serving scripts {', '.join(server._known_scripts())}", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
