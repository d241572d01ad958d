"""The control plane as an MCP server: streamable HTTP on loopback, one per execution.

:func:`serve` builds an MCP low-level server whose tools are exactly
:meth:`ControlPlane.operations` with their own JSON Schemas (not schemas derived from Python
signatures), mounts the SDK's streamable-HTTP app at ``/mcp`` and runs it with uvicorn in a
background thread on an ephemeral port. Several endpoints can run in one process at once.

Every ``tools/call`` goes to :meth:`ControlPlane.call` (in a worker thread, so a slow event
listener never stalls the server's loop). The agent gets the call's whole outcome back as JSON
text and as ``structuredContent``; a refused call comes back as a tool result with ``isError:
true`` whose text says what was wrong and how to fix it — never as a protocol error, so the model
sees it and can correct its call in the same turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server

from runs.executors.live.controlplane import ControlPlane

SERVER_NAME = "evalhub"
#: How long :func:`serve` waits for uvicorn to listen, and :meth:`McpEndpoint.close` for it to stop.
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0

logger = logging.getLogger(__name__)


class McpServerError(RuntimeError):
    """The MCP server could not start (the message says why)."""


def tool_result_text(outcome: dict[str, Any]) -> str:
    """The text the agent reads for one :meth:`ControlPlane.call` outcome.

    Success: the outcome as JSON (``{"ok": true, "receiptId", "result", "duplicate"}``).
    Refusal: ``"<code>: <message>"``, one ``"- <detail>"`` line per problem, and the receipt id.
    """
    if outcome.get("ok"):
        return json.dumps(outcome, sort_keys=True)
    error = outcome["error"]
    lines = [f"{error['code']}: {error['message']}"]
    lines += [f"- {detail}" for detail in error.get("details", [])]
    lines.append(f"(receipt {outcome['receiptId']})")
    return "\n".join(lines)


def build_server(control_plane: ControlPlane) -> Server:
    """A low-level MCP server exposing ``control_plane``'s operations as tools."""
    tools = [
        types.Tool(
            name=operation["name"],
            description=operation["description"],
            input_schema=operation["inputSchema"],
            annotations=types.ToolAnnotations(read_only_hint=operation["readOnly"]),
        )
        for operation in control_plane.operations()
    ]
    schemas = {tool.name: tool.input_schema for tool in tools}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        outcome = await anyio.to_thread.run_sync(control_plane.call, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=tool_result_text(outcome))],
            structured_content=outcome,
            is_error=not outcome["ok"],
        )

    return Server(
        SERVER_NAME,
        version="1",
        instructions="evalhub's task board: use these typed tools (not REST) to report, ask and finish.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )


class _PromptServer(uvicorn.Server):
    """uvicorn's server, stopped as soon as it is told to when nothing is in flight.

    Stock uvicorn notices ``should_exit`` on a 0.1 s tick and then sleeps another 0.1 s before
    waiting on open connections, which made stopping the endpoint the largest cost of evalhub's
    own in a live execution (~0.16 s each, docs/benchmarks.md). Here :meth:`stop` wakes the loop
    at once, and the shutdown asks every connection to close and waits only while one is still
    open or answering — an idle keep-alive connection closes at once, a response in flight (an
    open stream) still gets ``timeout_graceful_shutdown`` seconds, then is cancelled, as uvicorn
    does. The steps are uvicorn's ``Server.shutdown`` (0.30 – 0.5x) with a 5 ms poll.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        """Ask the server to stop (from any thread)."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed: it has stopped
                loop.call_soon_threadsafe(wake.set)

    async def main_loop(self) -> None:
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()  # after the event: stop() needs both
        counter = 0
        # on_tick refreshes the Date header when the counter is a multiple of 10: once a second.
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._drained(), timeout=self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drained(self) -> None:
        while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:
            await asyncio.sleep(0.005)


@dataclass
class McpEndpoint:
    """A running MCP endpoint: ``url`` (``http://127.0.0.1:PORT/mcp``), :meth:`close` to stop it."""

    url: str
    port: int
    _server: _PromptServer = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    def close(self) -> None:
        """Stop uvicorn and join its thread: at once when no request is in flight, open streams
        cut after a short grace (:class:`_PromptServer`). Idempotent; never raises."""
        self._server.stop()
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():  # pragma: no cover - uvicorn ignored both requests
            logger.warning("MCP server thread on port %s did not stop", self.port)

    def __enter__(self) -> McpEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(control_plane: ControlPlane, *, host: str = "127.0.0.1") -> McpEndpoint:
    """Serve ``control_plane`` over MCP streamable HTTP on ``host`` and an ephemeral port.

    Returns once the port is listening. Raises :class:`McpServerError` when uvicorn did not start
    within :data:`START_TIMEOUT_S`.
    """
    app = build_server(control_plane).streamable_http_app(streamable_http_path="/mcp", host=host, json_response=True, stateless_http=True)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_config=None,  # leave the process's logging configuration alone
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    server = _PromptServer(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as error:
            failure.append(error)
        finally:
            sock.close()

    thread = threading.Thread(target=run, name=f"evalhub-mcp-{port}", daemon=True)
    thread.start()
    deadline = START_TIMEOUT_S
    step = 0.01
    while not server.started and thread.is_alive() and deadline > 0:
        threading.Event().wait(step)
        deadline -= step
    if not server.started:
        server.stop()
        thread.join(STOP_TIMEOUT_S)
        reason = repr(failure[0]) if failure else "it did not start in time"
        raise McpServerError(f"the evalhub MCP server on {host}:{port} failed to start: {reason}")
    url_host = f"[{host}]" if ":" in host else host
    return McpEndpoint(url=f"http://{url_host}:{port}/mcp", port=port, _server=server, _thread=thread)
