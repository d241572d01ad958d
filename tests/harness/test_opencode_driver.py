"""The opencode driver: its configuration, its classifications, and the event-by-event mapping of
docs/runtime-mapping-opencode.md, against a stand-in HTTP server (httpx's MockTransport) fed with
the events the real ``opencode serve`` 1.18.33 sends (shapes copied from its traces). A few tests
start the real server (``@pytest.mark.runtime``): its private environment and configuration, a
crash, an MCP server it cannot reach, a start-up that takes too long.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from runs.executors.base import InfrastructureError
from runs.executors.live.contracts import EventLog, RuntimeRequest, Usage
from runs.executors.live.drivers import driver_class
from runs.executors.live.drivers.opencode import (
    MODEL_LIMITS,
    OFFLINE_ENVIRONMENT,
    PERMISSION_REPLIES,
    PROBE_SESSION,
    OpencodeServerDriver,
    build_config,
    classify_retry_message,
    classify_session_error,
    describe_permission,
    request_frame,
    response_frame,
    seed_plugin_lock,
    split_model,
    tool_identity,
    usage_from_tokens,
)
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderConfig
from tests.harness.test_codex_driver import RecordingTrace

ROOT = Path(__file__).resolve().parents[2]
KEY_NAME = "EVALHUB_TEST_OPENROUTER_KEY"
PROVIDER = ProviderConfig(profile="openrouter", base_url="http://127.0.0.1:9/scripts/{case_id}/v1", wire_api="chat", env_key=KEY_NAME)
MODEL = "openrouter/moonshotai/kimi-k2.5"
SESSION = "ses_test0001"
needs_opencode = pytest.mark.skipif(RUNTIMES["opencode"].resolve() is None, reason="opencode is not installed (make install)")


# -- configuration -------------------------------------------------------------------------------


def test_the_model_names_the_provider_and_the_model() -> None:
    assert split_model("openrouter/moonshotai/kimi-k2.5", "x") == ("openrouter", "moonshotai/kimi-k2.5")
    assert split_model("gpt-oss-20b", "openrouter") == ("openrouter", "gpt-oss-20b")
    with pytest.raises(ValueError, match="must name a model"):
        split_model("openrouter/", "x")


def test_config_takes_the_provider_from_the_profile_and_the_key_by_name_only() -> None:
    config = build_config(
        provider=PROVIDER,
        base_url="http://127.0.0.1:9/scripts/final-response/v1",
        model=MODEL,
        reasoning_effort=None,
        mcp_url="http://127.0.0.1:7/mcp",
        instructions_path="/w/instructions.md",
    )
    assert config["model"] == config["small_model"] == MODEL
    provider = config["provider"]["openrouter"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"] == {"baseURL": "http://127.0.0.1:9/scripts/final-response/v1", "apiKey": "{env:EVALHUB_TEST_OPENROUTER_KEY}"}
    assert provider["models"] == {"moonshotai/kimi-k2.5": {"name": "moonshotai/kimi-k2.5", "tool_call": True, "limit": MODEL_LIMITS}}
    assert "cost" not in json.dumps(config)  # evalhub prices tokens itself
    assert config["mcp"] == {"evalhub": {"type": "remote", "url": "http://127.0.0.1:7/mcp", "oauth": False, "enabled": True}}
    assert config["instructions"] == ["/w/instructions.md"]
    assert config["permission"] == {"edit": "allow", "bash": "allow"}
    assert config["autoupdate"] is False and config["share"] == "disabled"


def test_config_per_wire_api_approvals_and_reasoning_effort() -> None:
    responses = ProviderConfig(profile="openai", base_url="http://x/v1", wire_api="responses", env_key="OPENAI_API_KEY")
    config = build_config(
        provider=responses,
        base_url="http://x/v1",
        model="gpt-5.2",
        reasoning_effort="low",
        mcp_url="http://m/mcp",
        instructions_path="/i",
        approvals="prompt",
    )
    assert config["model"] == "openai/gpt-5.2"
    assert config["provider"]["openai"]["npm"] == "@ai-sdk/openai"
    assert config["provider"]["openai"]["models"]["gpt-5.2"]["options"] == {"reasoningEffort": "low"}
    assert config["permission"] == {"evalhub_*": "ask", "bash": "ask", "edit": "ask"}
    keyless = ProviderConfig(profile="local", base_url="http://x/v1", wire_api="chat", env_key=None)
    assert (
        "apiKey"
        not in build_config(
            provider=keyless, base_url="http://x/v1", model="m", reasoning_effort=None, mcp_url="u", instructions_path="/i"
        )["provider"]["local"]["options"]
    )
    with pytest.raises(ValueError, match="approvals must be"):
        build_config(
            provider=PROVIDER, base_url="u", model=MODEL, reasoning_effort=None, mcp_url="u", instructions_path="/i", approvals="x"
        )
    with pytest.raises(ValueError, match="opencode speaks chat or responses"):
        build_config(
            provider=ProviderConfig(profile="p", base_url="u", wire_api="messages"),
            base_url="u",
            model=MODEL,
            reasoning_effort=None,
            mcp_url="u",
            instructions_path="/i",
        )


def test_the_plugin_lock_is_seeded_so_opencode_installs_nothing(tmp_path: Path) -> None:
    seed_plugin_lock(tmp_path / "opencode")
    assert (tmp_path / "opencode" / "node_modules").is_dir()
    assert json.loads((tmp_path / "opencode" / "package.json").read_text()) == {"dependencies": {"@opencode-ai/plugin": "1.18.33"}}
    lock = json.loads((tmp_path / "opencode" / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == {"@opencode-ai/plugin": "1.18.33"}


def test_the_runtime_table_pins_what_package_json_and_its_lock_install() -> None:
    dependencies = json.loads((ROOT / "package.json").read_text())["dependencies"]
    assert dependencies == {runtime.package: runtime.version for runtime in RUNTIMES.values()}
    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    for runtime in RUNTIMES.values():
        entry = lock[f"node_modules/{runtime.package}"]
        assert entry["version"] == runtime.version
        # `npm ci` refuses a lock that names an optional platform package it does not hold; the
        # registry holds only opencode's Linux builds, so the lock names only those.
        assert [name for name in entry.get("optionalDependencies", {}) if f"node_modules/{name}" not in lock] == []
    assert driver_class("opencode") is OpencodeServerDriver


# -- classifications -----------------------------------------------------------------------------


def _api_error(status: int | None, message: str, body: str = "") -> dict[str, Any]:
    data: dict[str, Any] = {"message": message, "isRetryable": False, "responseBody": body}
    if status is not None:
        data["statusCode"] = status
    return {"name": "APIError", "data": data}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (_api_error(401, "Incorrect API key provided."), "provider_auth_refused"),
        (_api_error(403, "Forbidden"), "provider_auth_refused"),
        (_api_error(404, "The model does not exist or you do not have access to it."), "provider_unknown_model"),
        (_api_error(402, "Insufficient credits"), "provider_quota_exhausted"),
        (_api_error(429, "Rate limit reached for requests."), "provider_rate_limited"),
        (_api_error(429, "x", '{"error": {"code": "insufficient_quota"}}'), "provider_quota_exhausted"),
        (_api_error(503, "The service is temporarily unavailable."), "provider_http_503"),
        (_api_error(500, "boom"), "provider_http_500"),
        (_api_error(None, "Rate limit reached"), "provider_rate_limited"),
        ({"name": "ProviderAuthError", "data": {"providerID": "openrouter", "message": "no key"}}, "provider_auth_refused"),
        ({"name": "MessageAbortedError", "data": {"message": "Aborted"}}, None),
        ({"name": "UnknownError", "data": {"message": "what"}}, None),
        (None, None),
    ],
)
def test_session_errors_are_classified(error: Any, code: str | None) -> None:
    assert classify_session_error(error) == code


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("Cannot connect to API: Unable to connect. Is the computer able to access the url?", "provider_unreachable"),
        ("You exceeded your current quota, please check your plan and billing details.", "provider_quota_exhausted"),
        ("Rate limit reached for requests.", "provider_rate_limited"),
        ("Too Many Requests", "provider_rate_limited"),
        ("The service is temporarily unavailable.", "provider_http_503"),
        ("Provider is overloaded", "provider_http_503"),
        ("Internal server error", "provider_http_500"),
        ("something else", None),
    ],
)
def test_retry_messages_are_classified(message: str, code: str | None) -> None:
    assert classify_retry_message(message) == code


def test_usage_counts_cached_input_inside_input_and_reasoning_apart() -> None:
    # The script's usage (input 100 incl. 20 cached, output 10, reasoning 3) as opencode reports it.
    tokens = {"total": 113, "input": 80, "output": 10, "reasoning": 3, "cache": {"write": 0, "read": 20}}
    assert usage_from_tokens(tokens) == Usage(input=100, cached_input=20, output=10, reasoning=3)
    assert usage_from_tokens({"input": 5, "output": 1, "reasoning": 0, "cache": {"write": 7, "read": 0}}) == Usage(12, 0, 1, 0)
    assert usage_from_tokens(None) == Usage()


def test_tools_and_permissions_are_named_as_evalhub_names_them() -> None:
    assert tool_identity("evalhub_finish_task") == ("finish_task", "evalhub")
    assert tool_identity("bash") == ("bash", None)
    bash = describe_permission({"permission": "bash", "patterns": ["ls -la"], "metadata": {"command": "ls -la"}, "always": ["ls *"]})
    assert (bash.kind, bash.subject) == ("command", "ls -la")
    tool = describe_permission({"permission": "evalhub_report_progress", "patterns": ["*"], "metadata": {}, "always": ["*"]})
    assert (tool.kind, tool.subject, tool.details["server"]) == ("tool", "report_progress", "evalhub")
    edit = describe_permission({"permission": "edit", "patterns": ["notes.md"], "metadata": {"filepath": "/w/notes.md"}})
    assert (edit.kind, edit.subject) == ("file_change", "/w/notes.md")
    other = describe_permission({"permission": "external_directory", "patterns": ["/etc"]})
    assert (other.kind, other.subject) == ("other", "external_directory")
    assert PERMISSION_REPLIES == {"allow_once": "once", "accept_for_session": "always", "deny": "reject"}


def test_http_frames_are_http_text_without_the_password() -> None:
    client = httpx.Client(base_url="http://127.0.0.1:1", headers={"Authorization": "Basic c2VjcmV0LXBhc3N3b3Jk"})
    request = client.build_request("POST", "/session", json={"title": "t"})
    frame = request_frame(request).decode()
    assert frame.startswith("POST /session HTTP/1.1\r\n") and frame.endswith('\r\n\r\n{"title":"t"}')
    assert "authorization: [REDACTED]" in frame and "c2VjcmV0" not in frame
    response = httpx.Response(204, headers={"Content-Length": "0", "Vary": "Origin"})
    assert response_frame(response, b"") == b"HTTP/1.1 204 No Content\r\nvary: Origin\r\n\r\n"


# -- the mapping, against a stand-in server ------------------------------------------------------


class StandIn:
    """opencode's HTTP side for unit tests: records each request and answers from ``replies``
    (``(method, path) -> (status, json body or None)``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.replies: dict[tuple[str, str], tuple[int, Any]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        status, payload = self.replies.get((request.method, request.url.path), (200, True))
        if payload is None:
            return httpx.Response(status)
        return httpx.Response(status, json=payload)

    def posts(self, suffix: str) -> list[Any]:
        return [body for method, path, body in self.requests if method == "POST" and path.endswith(suffix)]


class Callbacks:
    def __init__(self, decisions: list[str] | None = None) -> None:
        self.decisions = list(decisions or [])
        self.requests: list[RuntimeRequest] = []
        self.usage: list[Usage] = []
        self.release = threading.Event()
        self.release.set()

    def on_runtime_request(self, request: RuntimeRequest) -> str:
        self.release.wait(10)
        self.requests.append(request)
        return self.decisions.pop(0) if self.decisions else "allow_once"

    def on_usage(self, turn_id: str | None, usage: Usage) -> None:
        self.usage.append(usage)


@pytest.fixture
def rig(tmp_path: Path):
    """A driver wired to a stand-in server, as if ``start()`` had created session ``ses_test0001``."""
    server, events, trace, callbacks = StandIn(), EventLog(), RecordingTrace(), Callbacks()
    server.replies[("POST", f"/session/{SESSION}/prompt_async")] = (204, None)
    driver = OpencodeServerDriver(
        workdir=tmp_path,
        provider=PROVIDER,
        model=MODEL,
        reasoning_effort=None,
        mcp_url="http://127.0.0.1:7/mcp",
        environment={},
        events=events,
        trace=trace,
        callbacks=callbacks,
        instructions="Be good.",
        case_id="final-response",
        execution_id="rwe-test",
        approvals="prompt",
    )
    driver._http = httpx.Client(
        base_url="http://opencode.test", transport=httpx.MockTransport(server), headers={"Authorization": driver._auth}
    )
    driver._session_id = SESSION
    driver._provider_id, driver._model_id = split_model(MODEL, "openrouter")
    yield driver, server, events, trace, callbacks
    driver.close()


def feed(driver: OpencodeServerDriver, kind: str, **properties: Any) -> None:
    driver._on_sse(json.dumps({"id": f"evt_{time.monotonic_ns()}", "type": kind, "properties": properties}))


def status(driver: OpencodeServerDriver, state: str, **more: Any) -> None:
    feed(driver, "session.status", sessionID=SESSION, status={"type": state, **more})


def part(driver: OpencodeServerDriver, **fields: Any) -> None:
    feed(driver, "message.part.updated", sessionID=SESSION, part={"sessionID": SESSION, "messageID": "msg_a1", **fields})


def assistant(driver: OpencodeServerDriver) -> None:
    feed(driver, "message.updated", sessionID=SESSION, info={"id": "msg_a1", "role": "assistant", "sessionID": SESSION})


def interpretations(trace: RecordingTrace) -> dict[int, tuple[str, list[str]]]:
    return {frame_id: (disposition, types) for frame_id, disposition, _, types in trace.interpretations}


def test_one_turn_maps_every_event_and_interprets_every_frame_once(rig) -> None:
    driver, server, events, trace, callbacks = rig
    feed(driver, "server.connected")
    feed(driver, "session.created", sessionID=SESSION, info={"id": SESSION, "title": "evalhub rwe-test"})
    turn = driver.start_turn("Do the task.")
    assert turn == "turn-1"
    assert server.posts("/prompt_async") == [
        {"model": {"providerID": "openrouter", "modelID": "moonshotai/kimi-k2.5"}, "parts": [{"type": "text", "text": "Do the task."}]}
    ]
    feed(driver, "message.updated", sessionID=SESSION, info={"id": "msg_u1", "role": "user", "sessionID": SESSION})
    feed(
        driver,
        "message.part.updated",
        sessionID=SESSION,
        part={"id": "prt_u", "messageID": "msg_u1", "sessionID": SESSION, "type": "text", "text": "Do"},
    )
    status(driver, "busy")
    assistant(driver)
    part(driver, id="prt_s", type="step-start")
    part(driver, id="prt_t", type="text", text="", time={"start": 1})
    feed(driver, "message.part.delta", sessionID=SESSION, messageID="msg_a1", partID="prt_t", field="text", delta="Start")
    feed(driver, "message.part.delta", sessionID=SESSION, messageID="msg_a1", partID="prt_t", field="text", delta="ing.")
    running = {"status": "running", "input": {"message": "x"}, "time": {"start": 2}}
    part(driver, id="prt_c", type="tool", tool="evalhub_report_progress", callID="call_1", state={"status": "pending", "input": {}})
    part(driver, id="prt_c", type="tool", tool="evalhub_report_progress", callID="call_1", state=running)
    part(driver, id="prt_t", type="text", text="Starting.", time={"start": 1, "end": 3})
    part(
        driver,
        id="prt_c",
        type="tool",
        tool="evalhub_report_progress",
        callID="call_1",
        state={**running, "status": "completed", "output": "{}"},
    )
    part(
        driver,
        id="prt_f",
        type="step-finish",
        reason="tool-calls",
        tokens={"input": 80, "output": 10, "reasoning": 3, "cache": {"read": 20, "write": 0}},
    )
    feed(driver, "session.updated", sessionID=SESSION, info={})
    status(driver, "idle")
    feed(driver, "session.idle", sessionID=SESSION)
    outcome = driver.wait_turn(5000)
    assert (outcome.turn_id, outcome.status, outcome.usage) == ("turn-1", "completed", Usage(100, 20, 10, 3))
    assert events.types() == [
        "session.started",
        "item.completed",
        "turn.started",
        "item.started",
        "assistant.message.delta",
        "assistant.message.delta",
        "item.completed",
        "item.started",
        "tool.execution.started",
        "item.completed",
        "tool.execution.completed",
        "usage.updated",
        "turn.completed",
    ]
    texts = [e for e in events.events() if e.type == "item.completed" and "text" in e.data]
    # The text said before the tool is complete when the tool starts (its own end comes later).
    assert [(e.data["text"], len(e.frame_ids)) for e in texts] == [("Starting.", 3)]
    seen = interpretations(trace)
    frames = [frame_id for frame_id, _, _ in trace.frames]
    assert sorted(seen) == frames  # every frame interpreted, exactly once
    assert len(trace.interpretations) == len(frames)
    assert {"mapped", "generic", "ignored", "operator_only"} <= trace.dispositions()
    assert {"one_to_one", "one_to_many", "many_to_one"} <= trace.lineage()
    # delta frames name their delta and the message's completion
    delta_frames = [f for f, (_, types) in seen.items() if types == ["assistant.message.delta", "item.completed"]]
    assert len(delta_frames) == 2
    time.sleep(0.2)
    assert callbacks.usage == [Usage(100, 20, 10, 3)]


def test_permission_requests_are_answered_per_the_case_and_stale_ones_ignored(rig) -> None:
    driver, server, events, trace, callbacks = rig
    callbacks.decisions = ["accept_for_session", "deny"]
    driver.start_turn("Go.")
    status(driver, "busy")
    bash = {"sessionID": SESSION, "permission": "bash", "patterns": ["ls -la"], "metadata": {"command": "ls -la"}, "always": ["ls *"]}
    feed(driver, "permission.asked", id="per_1", **bash)
    feed(driver, "permission.asked", id="per_2", **{**bash, "permission": "evalhub_report_progress", "metadata": {}})
    feed(driver, "permission.asked", id="per_3", **{**bash, "sessionID": "ses_other"})
    deadline = time.monotonic() + 5
    while len(server.posts("/reply")) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    replies = [(path, body) for method, path, body in server.requests if path.startswith("/permission/")]
    assert replies == [("/permission/per_1/reply", {"reply": "always"}), ("/permission/per_2/reply", {"reply": "reject"})]
    assert [(r.kind, r.subject, r.turn_id) for r in callbacks.requests] == [
        ("command", "ls -la", "turn-1"),
        ("tool", "report_progress", "turn-1"),
    ]
    resolved = [e.data["decision"] for e in events.events() if e.type == "runtime_request.resolved"]
    assert resolved == ["accept_for_session", "deny"]
    # An abort leaves a request asked afterwards unanswered: it is stale.
    callbacks.release.clear()
    feed(driver, "permission.asked", id="per_4", **bash)
    driver.interrupt()
    callbacks.release.set()
    feed(driver, "permission.asked", id="per_5", **bash)
    feed(driver, "session.error", sessionID=SESSION, error={"name": "MessageAbortedError", "data": {"message": "Aborted"}})
    status(driver, "idle")
    outcome = driver.wait_turn(5000)
    time.sleep(0.3)
    assert outcome.status == "interrupted"
    assert [path for _, path, _ in server.requests if path.startswith("/permission/")] == [
        "/permission/per_1/reply",
        "/permission/per_2/reply",
    ]
    assert server.posts("/abort") == [None]
    assert events.types().count("turn.interrupted") == 1
    assert events.types()[-1] == "turn.completed"


def test_after_a_turn_the_messages_are_read_and_a_text_whose_end_was_missed_completes(rig) -> None:
    driver, server, events, trace, callbacks = rig
    messages = [
        {"info": {"id": "msg_u1", "role": "user"}, "parts": [{"id": "prt_u", "type": "text", "text": "Go."}]},
        {
            "info": {"id": "msg_a1", "role": "assistant"},
            "parts": [
                {"id": "prt_t", "type": "text", "text": "All done.", "time": {"start": 1, "end": 2}},
                {"id": "prt_f", "type": "step-finish", "reason": "stop"},
            ],
        },
    ]
    server.replies[("GET", f"/session/{SESSION}/message")] = (200, messages)
    driver.start_turn("Go.")
    status(driver, "busy")
    assistant(driver)
    part(driver, id="prt_t", type="text", text="", time={"start": 1})
    feed(driver, "message.part.delta", sessionID=SESSION, messageID="msg_a1", partID="prt_t", field="text", delta="All done.")
    status(driver, "idle")  # the part's end never came on the stream
    assert driver.wait_turn(5000).status == "completed"
    assert ("GET", f"/session/{SESSION}/message", None) in server.requests
    (text,) = [e for e in events.events() if e.type == "item.completed" and "text" in e.data]
    assert text.data["text"] == "All done."
    assert interpretations(trace)[text.frame_ids[-1]] == ("mapped", ["item.completed"])
    # Read again after the next turn: nothing new to complete.
    driver.start_turn("Again.")
    status(driver, "busy")
    status(driver, "idle")
    driver.wait_turn(5000)
    assert len([e for e in events.events() if e.type == "item.completed" and "text" in e.data]) == 1


def test_a_provider_error_fails_the_turn_with_its_code(rig) -> None:
    driver, server, events, trace, callbacks = rig
    driver.start_turn("Go.")
    status(driver, "busy")
    feed(driver, "session.error", sessionID=SESSION, error=_api_error(401, "Incorrect API key provided."))
    status(driver, "idle")
    outcome = driver.wait_turn(5000)
    assert (outcome.status, outcome.error_code, outcome.error) == ("failed", "provider_auth_refused", "Incorrect API key provided.")
    (error,) = [e for e in events.events() if e.type == "provider.error"]
    assert error.data == {"code": "provider_auth_refused", "name": "APIError", "message": "Incorrect API key provided."}


def test_retries_are_counted_and_a_far_retry_or_an_unreachable_endpoint_stops_the_turn(rig) -> None:
    driver, server, events, trace, callbacks = rig
    driver.start_turn("Go.")
    status(driver, "busy")
    soon = int(time.time() * 1000) + 2000
    status(driver, "retry", attempt=1, message="The service is temporarily unavailable.", next=soon)
    assert server.posts("/abort") == []  # opencode retries by itself
    status(driver, "retry", attempt=2, message="Rate limit reached for requests.", next=int(time.time() * 1000) + 600_000)
    time.sleep(0.3)
    assert server.posts("/abort") == [None]  # the next retry is ten minutes away: stopped now
    status(driver, "idle")
    outcome = driver.wait_turn(5000)
    assert (outcome.status, outcome.error_code) == ("failed", "provider_rate_limited")
    assert "the next retry was 600 s away" in outcome.error
    notices = [e.data for e in events.events() if e.type == "provider.notice"]
    assert [(n["attempt"], n["code"], n["willRetry"]) for n in notices] == [
        (1, "provider_http_503", True),
        (2, "provider_rate_limited", True),
    ]
    driver.start_turn("Again.")
    status(driver, "busy")
    status(driver, "retry", attempt=1, message="Cannot connect to API: Unable to connect.", next=soon)
    status(driver, "idle")
    assert driver.wait_turn(5000).error_code == "provider_unreachable"


def test_a_stream_cut_again_and_again_is_a_dropped_stream(rig) -> None:
    driver, server, events, trace, callbacks = rig
    driver.start_turn("Go.")
    status(driver, "busy")
    assistant(driver)
    empty = {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    for index in range(3):
        part(driver, id=f"prt_f{index}", type="step-finish", reason="unknown", tokens=empty)
    time.sleep(0.3)
    assert server.posts("/abort") == [None]
    status(driver, "idle")
    outcome = driver.wait_turn(5000)
    assert (outcome.status, outcome.error_code) == ("failed", "provider_stream_dropped")


def test_file_and_web_tools_also_say_what_they_did(rig) -> None:
    driver, server, events, trace, callbacks = rig
    driver.start_turn("Go.")
    status(driver, "busy")
    assistant(driver)
    done = {"status": "completed", "input": {}, "output": "ok"}
    part(driver, id="prt_w", type="tool", tool="write", callID="call_w", state=done)
    part(driver, id="prt_r", type="tool", tool="webfetch", callID="call_r", state=done)
    part(driver, id="prt_x", type="tool", tool="bash", callID="call_x", state={"status": "error", "input": {}, "error": "no"})
    completed = [e.data for e in events.events() if e.type == "tool.execution.completed"]
    assert [(c["tool"], c["server"], c["status"], c["isError"]) for c in completed] == [
        ("write", None, "completed", False),
        ("webfetch", None, "completed", False),
        ("bash", None, "failed", True),
    ]
    assert "file.change.completed" in events.types() and "research.completed" in events.types()


def test_a_steer_while_busy_is_acknowledged_by_its_accepted_prompt(rig) -> None:
    driver, server, events, trace, callbacks = rig
    assert driver.steer("Too early.") is False  # no active turn
    driver.start_turn("Go.")
    status(driver, "busy")
    assert driver.steer("Bullets only.") is True
    (ack,) = [e for e in events.events() if e.type == "turn.steering.acknowledged"]
    assert ack.turn_id == "turn-1" and len(server.posts("/prompt_async")) == 2
    assert interpretations(trace)[ack.frame_ids[0]] == ("mapped", ["turn.steering.acknowledged"])
    status(driver, "idle")
    assert driver.wait_turn(5000).status == "completed"


def test_a_turn_past_its_time_is_aborted_and_timed_out(rig) -> None:
    driver, server, events, trace, callbacks = rig
    driver.start_turn("Go.")
    status(driver, "busy")
    threading.Timer(0.5, lambda: status(driver, "idle")).start()
    outcome = driver.wait_turn(200)
    assert outcome.status == "timed_out" and server.posts("/abort") == [None]
    assert events.types()[-2:] == ["turn.interrupted", "turn.completed"]


def test_a_refused_request_and_unparsable_frames_are_rejected(rig) -> None:
    driver, server, events, trace, callbacks = rig
    server.replies[("GET", f"/session/{PROBE_SESSION}")] = (404, {"name": "NotFoundError", "data": {"message": "not found"}})
    assert driver.probe_rejection() is True
    driver._on_sse("not json")
    driver._on_sse('{"no": "type"}')
    assert [d for _, d, _, _ in trace.interpretations].count("rejected") == 3


def test_a_missing_binary_is_runtime_missing(tmp_path: Path) -> None:
    driver = OpencodeServerDriver(
        workdir=tmp_path,
        provider=PROVIDER,
        model=MODEL,
        reasoning_effort=None,
        mcp_url="http://127.0.0.1:7/mcp",
        environment={},
        events=EventLog(),
        trace=RecordingTrace(),
        callbacks=Callbacks(),
        instructions="x",
        binary=str(tmp_path / "nope"),
    )
    with pytest.raises(InfrastructureError) as caught:
        driver.start()
    assert (caught.value.code, caught.value.retryable) == ("runtime_missing", False)
    assert "fix EVALHUB_OPENCODE_BIN" in caught.value.message


# -- the real server -----------------------------------------------------------------------------


def _real_driver(tmp_path: Path, **kwargs: Any) -> tuple[OpencodeServerDriver, RecordingTrace]:
    trace = RecordingTrace()
    options = {
        "workdir": tmp_path,
        "provider": ProviderConfig(profile="scripted", base_url="http://127.0.0.1:9/v1", wire_api="chat", env_key=KEY_NAME),
        "model": MODEL,
        "reasoning_effort": None,
        "mcp_url": "http://127.0.0.1:9/mcp",
        "environment": {"PATH": os.environ.get("PATH", os.defpath), KEY_NAME: "fake-key-for-local-test", "HOME": str(tmp_path / "home")},
        "events": EventLog(),
        "trace": trace,
        "callbacks": Callbacks(),
        "instructions": "Use the evalhub tools.",
        "execution_id": "rwe-real",
        **kwargs,
    }
    return OpencodeServerDriver(**options), trace


@pytest.mark.runtime
@needs_opencode
def test_a_start_up_that_takes_too_long_is_runtime_start_failed(tmp_path: Path) -> None:
    driver, _ = _real_driver(tmp_path, startup_timeout_s=0.2)
    try:
        with pytest.raises(InfrastructureError) as caught:
            driver.start()
    finally:
        driver.close()
    assert (caught.value.code, caught.value.retryable) == ("runtime_start_failed", True)
    assert "did not answer on 127.0.0.1:" in caught.value.message and "within 0.2 s" in caught.value.message


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    """One real ``opencode serve``, started against evalhub's MCP server and a scripted model,
    shared by the tests that look at it (a start costs 10-20 s here); the last test kills it."""
    from runs.executors.live.controlplane import ControlPlane
    from runs.executors.live.mcp_server import serve
    from runs.executors.live.scripted_model import ScriptedModelServer

    if RUNTIMES["opencode"].resolve() is None:
        pytest.skip("opencode is not installed (make install)")
    tmp_path = tmp_path_factory.mktemp("opencode-real")
    events = EventLog()
    script = {"name": "real", "steps": [{"outputs": [{"say": "Done."}]}]}
    model = ScriptedModelServer({"real": script})
    model.start()
    control_plane = ControlPlane(
        execution_id="rwe-real", case={"id": "final-response", "steps": [], "assertions": {}}, prompt="x", events=events
    )
    endpoint = serve(control_plane)
    provider = ProviderConfig(profile="scripted", base_url=model.base_url("real"), wire_api="chat", env_key=KEY_NAME)
    driver, trace = _real_driver(tmp_path, provider=provider, mcp_url=endpoint.url, events=events)
    try:
        driver.start()
        yield driver, trace, model
    finally:
        driver.close()
        endpoint.close()
        model.stop()


@pytest.mark.runtime
def test_the_server_is_private_offline_and_answers_a_turn(real_server) -> None:
    driver, trace, model = real_server
    environ = dict(item.split("=", 1) for item in Path(f"/proc/{driver.pgid}/environ").read_bytes().decode().split("\0") if "=" in item)
    root = driver.root
    password = environ.pop("OPENCODE_SERVER_PASSWORD")
    assert len(password) >= 24
    assert environ == {
        "PATH": os.environ.get("PATH", os.defpath),
        KEY_NAME: "fake-key-for-local-test",
        "HOME": str(driver.workdir / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_STATE_HOME": str(root / "state"),
        "OPENCODE_CONFIG": str(root / "opencode.json"),
        **OFFLINE_ENVIRONMENT,
    }
    config = json.loads((root / "opencode.json").read_text())
    assert "fake-key-for-local-test" not in json.dumps(config)
    assert (root / "instructions.md").read_text() == "Use the evalhub tools.\n"
    assert Path(os.readlink(f"/proc/{driver.pgid}/cwd")) == driver.workspace
    assert os.getpgid(driver.pgid) == driver.pgid  # its own process group
    assert set(driver.timings) == {"ready", "mcp", "session"}
    # Every request carries the server's password; no frame holds it.
    assert all(password not in raw.decode("utf-8", "replace") for _, _, raw in trace.frames)
    unauthorised = httpx.get(f"http://127.0.0.1:{driver.port}/session", timeout=10)
    assert unauthorised.status_code == 401
    driver.start_turn("Say it.")
    outcome = driver.wait_turn(120_000)
    assert outcome.status == "completed"
    assert [r["conversation"] for r in model.requests if r["answer"] != "side"] == [f"thread:{driver.session_id}"]
    assert driver.probe_rejection() is True


@pytest.mark.runtime
def test_a_dead_server_is_runtime_crashed_and_close_kills_its_group(real_server) -> None:
    driver, _, _ = real_server
    pgid = driver.pgid
    os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while driver._book.crashed is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(InfrastructureError) as caught:
        driver.start_turn("Anyone?")
    assert (caught.value.code, caught.value.retryable) == ("runtime_crashed", True)
    assert "opencode" in caught.value.message
    driver.close()
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


@pytest.mark.runtime
@needs_opencode
def test_an_mcp_server_it_cannot_reach_is_mcp_unavailable(tmp_path: Path, refused_port: int) -> None:
    port = refused_port
    driver, _ = _real_driver(tmp_path, mcp_url=f"http://127.0.0.1:{port}/mcp", mcp_startup_timeout_s=20)
    try:
        with pytest.raises(InfrastructureError) as caught:
            driver.start()
    finally:
        driver.close()
    assert (caught.value.code, caught.value.retryable) == ("mcp_unavailable", True)
    assert f"127.0.0.1:{port}/mcp" in caught.value.message
