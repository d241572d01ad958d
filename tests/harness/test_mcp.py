"""The control plane served over MCP streamable HTTP (runs.executors.live.mcp_server).

The first tests use the MCP SDK's own streamable-HTTP client; the last one proves the real
``codex app-server`` reaches the server by URL and its tool call lands on the board.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from mcp import Client

from runs.executors.live.contracts import EventLog
from runs.executors.live.controlplane import ControlPlane
from runs.executors.live.mcp_server import serve, tool_result_text

pytestmark = pytest.mark.database_free

CODEX = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "codex"
CASE = {"id": "rich-activity", "title": "Render structured provider activity", "steps": [], "assertions": {}}


def make_board(execution_id: str = "exec-1") -> ControlPlane:
    return ControlPlane(execution_id=execution_id, case=CASE, prompt="Report progress, then finish.", events=EventLog())


@pytest.fixture
def board_and_endpoint():
    board = make_board()
    endpoint = serve(board)
    yield board, endpoint
    endpoint.close()


def run(coroutine):
    return asyncio.run(coroutine)


def test_tools_are_the_operations_with_their_exact_schemas(board_and_endpoint):
    board, endpoint = board_and_endpoint

    async def list_tools():
        async with Client(endpoint.url) as client:
            return (await client.list_tools()).tools

    tools = run(list_tools())
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (op["name"], op["description"], op["inputSchema"]) for op in board.operations()
    ]
    read_only = {t.name for t in tools if t.annotations and t.annotations.read_only_hint}
    assert read_only == {op["name"] for op in board.operations() if op["readOnly"]}


def test_good_call_bad_call_and_idempotent_repeat(board_and_endpoint):
    board, endpoint = board_and_endpoint

    async def calls():
        async with Client(endpoint.url) as client:
            good = await client.call_tool("report_progress", {"message": "reading the code", "idempotencyKey": "p1"})
            again = await client.call_tool("report_progress", {"message": "reading the code", "idempotencyKey": "p1"})
            bad = await client.call_tool("finish_task", {"summary": "", "disposition": "maybe", "extra": True})
            unknown = await client.call_tool("delete_everything", {})
            return good, again, bad, unknown

    good, again, bad, unknown = run(calls())
    assert good.is_error is False
    assert good.structured_content == {
        "ok": True,
        "receiptId": "rcpt-1",
        "result": {"taskId": "task-1", "progressCount": 1, "revision": 2},
        "duplicate": False,
    }
    assert json.loads(good.content[0].text) == good.structured_content

    assert again.is_error is False
    assert again.structured_content["duplicate"] is True
    assert again.structured_content["receiptId"] == "rcpt-2"

    assert bad.is_error is True
    text = bad.content[0].text
    assert text.startswith("schema_error: Invalid arguments for finish_task: 3 problem(s).")
    assert "- arguments: Additional properties are not allowed ('extra' was unexpected)" in text
    assert "- disposition: 'maybe' is not one of ['done', 'needs_review', 'blocked']" in text
    assert "- summary: '' should be non-empty" in text
    assert text.endswith("(receipt rcpt-3)")

    assert unknown.is_error is True
    assert unknown.content[0].text.startswith("unknown_operation: There is no operation 'delete_everything'.")

    snapshot = board.snapshot()
    assert len(snapshot["progress"]) == 1
    assert [(c["receiptId"], c["operation"], c["outcome"], c["errorCode"]) for c in snapshot["toolCalls"]] == [
        ("rcpt-1", "report_progress", "ok", None),
        ("rcpt-2", "report_progress", "duplicate", None),
        ("rcpt-3", "finish_task", "error", "schema_error"),
        ("rcpt-4", "delete_everything", "error", "unknown_operation"),
    ]


def test_a_handshake_era_client_is_served_too(board_and_endpoint):
    """codex speaks the initialize handshake (not the 2026 per-request envelope)."""
    board, endpoint = board_and_endpoint

    async def legacy():
        async with Client(endpoint.url, mode="legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("get_task_context", {})
            return names, result

    names, result = run(legacy())
    assert "finish_task" in names
    assert result.structured_content["result"]["task"]["description"] == "Report progress, then finish."


def _refuses_connections(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_several_servers_run_at_once_and_close_cleanly():
    boards = [make_board(f"exec-{n}") for n in range(3)]
    endpoints = [serve(board) for board in boards]
    try:
        assert len({e.port for e in endpoints}) == 3
        assert all(e.url == f"http://127.0.0.1:{e.port}/mcp" for e in endpoints)

        async def progress(endpoint, n):
            async with Client(endpoint.url) as client:
                await client.call_tool("report_progress", {"message": f"board {n}"})

        async def all_of_them():
            await asyncio.gather(*(progress(e, n) for n, e in enumerate(endpoints)))

        run(all_of_them())
        assert [[p["message"] for p in b.snapshot()["progress"]] for b in boards] == [["board 0"], ["board 1"], ["board 2"]]
    finally:
        started = time.monotonic()
        for endpoint in endpoints:
            endpoint.close()
        elapsed = time.monotonic() - started
    assert elapsed < 5
    assert not any(e._thread.is_alive() for e in endpoints)
    assert all(_refuses_connections(e.port) for e in endpoints)
    endpoints[0].close()  # idempotent


def test_connections_left_open_do_not_keep_a_closed_server_running():
    # A client that keeps its connection alive after an answer, and one that sent half a
    # request: close() asks both to go and stops without waiting out uvicorn's grace period.
    endpoint = serve(make_board())
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{endpoint.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    kept_alive = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
    half = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
    try:
        kept_alive.sendall(request)
        answer = kept_alive.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        half.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        endpoint.close()
        assert not endpoint._thread.is_alive()
        assert _refuses_connections(endpoint.port)
        while kept_alive.recv(65536):  # the rest of the answer, then the end: the server closed it
            pass
    finally:
        kept_alive.close()
        half.close()


def test_refusal_text_lists_each_detail():
    outcome = {
        "ok": False,
        "receiptId": "rcpt-9",
        "error": {"code": "conflict", "message": "stale", "details": ["a", "b"]},
    }
    assert tool_result_text(outcome) == "conflict: stale\n- a\n- b\n(receipt rcpt-9)"


# --------------------------------------------------------------------------- the real codex binary


class _JsonRpc:
    """Just enough of codex app-server's NDJSON JSON-RPC for one turn: replies to server
    requests by accepting, collects notifications."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.cond = threading.Condition()
        self.responses: dict[int, dict] = {}
        self.notifications: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict, timeout: float = 10) -> dict:
        self.next_id += 1
        request_id = self.next_id
        self.send({"id": request_id, "method": method, "params": params})
        with self.cond:
            if not self.cond.wait_for(lambda: request_id in self.responses, timeout):
                raise TimeoutError(method)
            response = self.responses.pop(request_id)
        assert "error" not in response, response
        return response["result"]

    def wait_notification(self, predicate, timeout: float) -> dict:
        with self.cond:
            found: list[dict] = []

            def seen() -> bool:
                found[:] = [n for n in self.notifications if predicate(n)]
                return bool(found)

            if not self.cond.wait_for(seen, timeout):
                methods = [n.get("method") for n in self.notifications]
                raise TimeoutError(f"notification not seen; got {methods}")
            return found[0]

    def _read(self) -> None:
        for line in self.proc.stdout:
            if not line.strip():
                continue
            message = json.loads(line)
            if "id" in message and "method" in message:  # a server → client request: accept it
                result = (
                    {"action": "accept", "content": {}} if message["method"] == "mcpServer/elicitation/request" else {"decision": "accept"}
                )
                self.send({"id": message["id"], "result": result})
                continue
            with self.cond:
                if "id" in message:
                    self.responses[message["id"]] = message
                else:
                    self.notifications.append(message)
                self.cond.notify_all()


@pytest.mark.skipif(not CODEX.exists(), reason=f"the codex binary is not installed at {CODEX} (npm ci installs it)")
def test_real_codex_calls_the_control_plane_over_streamable_http(tmp_path):
    from runs.executors.live.scripted_model import ScriptedModelServer

    script = {
        "name": "progress-then-answer",
        "steps": [
            {"outputs": [{"call": "report_progress", "arguments": {"message": "halfway there", "percent": 50}}]},
            {"outputs": [{"say": "All done."}]},
        ],
    }
    model = ScriptedModelServer({"progress-then-answer": script})
    root = model.start()
    board = make_board()
    endpoint = serve(board)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f"""
model = "gpt-5.2-codex"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.scripted]
name = "Scripted"
base_url = "{root}/scripts/progress-then-answer/v1"
env_key = "EVALHUB_TEST_MODEL_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.evalhub]
url = "{endpoint.url}"
startup_timeout_sec = 10
tool_timeout_sec = 10
default_tools_approval_mode = "approve"

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false
"""
    )
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(codex_home),
        "EVALHUB_TEST_MODEL_KEY": "fake-key-for-local-test",
        "RUST_LOG": "warn",
    }
    workdir = tmp_path / "work"
    workdir.mkdir()
    stderr_log = (tmp_path / "codex-stderr.log").open("w")  # closed with the process below
    proc = subprocess.Popen(
        [str(CODEX), "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr_log,
        env=environment,
        cwd=workdir,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    try:
        rpc = _JsonRpc(proc)
        rpc.request(
            "initialize",
            {"clientInfo": {"name": "evalhub_test", "title": "evalhub test", "version": "0"}, "capabilities": {"experimentalApi": True}},
        )
        rpc.send({"method": "initialized"})
        thread = rpc.request("thread/start", {"cwd": str(workdir), "approvalPolicy": "never", "sandbox": "read-only", "ephemeral": True})[
            "thread"
        ]
        status = rpc.wait_notification(
            lambda n: (
                n.get("method") == "mcpServer/startupStatus/updated" and n["params"].get("status") in ("ready", "failed", "cancelled")
            ),
            timeout=10,
        )
        assert status["params"]["status"] == "ready", status
        rpc.request("turn/start", {"threadId": thread["id"], "input": [{"type": "text", "text": "Report progress."}]})
        completed = rpc.wait_notification(lambda n: n.get("method") == "turn/completed", timeout=10)
        assert completed["params"]["turn"]["status"] == "completed", completed
        tool_items = [
            n["params"]["item"]
            for n in rpc.notifications
            if n.get("method") == "item/completed" and n["params"]["item"].get("type") == "mcpToolCall"
        ]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait(5)
        stderr_log.close()
        endpoint.close()
        model.stop()

    snapshot = board.snapshot()
    diagnosis = {
        "modelRequests": json.dumps(model.requests, default=str)[:3000],
        "notifications": [n.get("method") for n in rpc.notifications],
        "stderr": (tmp_path / "codex-stderr.log").read_text()[-2000:],
    }
    assert [(c["operation"], c["outcome"]) for c in snapshot["toolCalls"]] == [("report_progress", "ok")], diagnosis
    assert snapshot["progress"] == [{"message": "halfway there", "percent": 50, "runId": None, "receiptId": "rcpt-1"}]
    assert [(i["server"], i["tool"], i["status"]) for i in tool_items] == [("evalhub", "report_progress", "completed")]
    assert "run.progress.reported" in board.events.types()
