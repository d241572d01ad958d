"""The codex app-server driver against the real codex binary, the scripted model and the
control plane's MCP server, all on loopback.

Tests that need the binary are skipped when it is not installed (``make install``); the schema
drift test fails instead, since a missing or different binary is exactly what it guards.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from runs.executors.base import InfrastructureError
from runs.executors.live.contracts import EventLog, RuntimeRequest, Usage
from runs.executors.live.drivers import codex as codex_module
from runs.executors.live.drivers import driver_class
from runs.executors.live.drivers.codex import (
    CODEX_VERSION,
    CodexAppServerDriver,
    _answer_request,
    build_config_toml,
    classify_provider_error,
)
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderConfig

pytestmark = pytest.mark.database_free

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "codex-app-server-schema"
BINARY = RUNTIMES["codex"].resolve()
needs_codex = pytest.mark.skipif(BINARY is None, reason="codex is not installed (make install)")
KEY_NAME = "EVALHUB_TEST_PROVIDER_KEY"
CASE = {"id": "trace-lineage", "title": "Trace lineage", "steps": [], "assertions": {}}


# -- doubles --------------------------------------------------------------------------------------


class RecordingTrace:
    """A TraceSink that keeps every frame and interpretation in memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.frames: list[tuple[int, str, bytes]] = []
        self.interpretations: list[tuple[int, str, list[str], list[str]]] = []

    def frame(self, direction: str, raw: bytes) -> int:
        with self._lock:
            frame_id = len(self.frames) + 1
            self.frames.append((frame_id, direction, bytes(raw)))
            return frame_id

    def interpret(self, frame_ids, disposition, events) -> None:
        with self._lock:
            for frame_id in frame_ids:
                self.interpretations.append((frame_id, disposition, [e.id for e in events], [e.type for e in events]))

    def messages(self, direction: str) -> list[dict[str, Any]]:
        return [json.loads(raw) for _, d, raw in self.frames if d == direction]

    def dispositions(self) -> set[str]:
        return {d for _, d, _, _ in self.interpretations}

    def lineage(self) -> set[str]:
        kinds = {"one_to_one"} if self.interpretations else set()
        emitters: dict[str, int] = {}
        for _, _, ids, _ in self.interpretations:
            if len(ids) > 1:
                kinds.add("one_to_many")
            for event_id in ids:
                emitters[event_id] = emitters.get(event_id, 0) + 1
        if any(count > 1 for count in emitters.values()):
            kinds.add("many_to_one")
        return kinds


class Callbacks:
    """Gives the queued decisions in order (``allow_once`` once they run out)."""

    def __init__(self, decisions: list[str] | None = None) -> None:
        self.decisions = list(decisions or [])
        self.requests: list[RuntimeRequest] = []
        self.usage: list[tuple[str | None, Usage]] = []

    def on_runtime_request(self, request: RuntimeRequest) -> str:
        self.requests.append(request)
        return self.decisions.pop(0) if self.decisions else "allow_once"

    def on_usage(self, turn_id: str | None, usage: Usage) -> None:
        self.usage.append((turn_id, usage))


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def model() -> Iterator[Any]:
    from runs.executors.live.scripted_model import ScriptedModelServer

    server = ScriptedModelServer({})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def events() -> EventLog:
    return EventLog()


@pytest.fixture
def control_plane(events):
    from runs.executors.live.controlplane import ControlPlane

    return ControlPlane(execution_id="exec-1", case=CASE, prompt="Finish the task.", events=events)


@pytest.fixture
def mcp_url(control_plane) -> Iterator[str]:
    from runs.executors.live.mcp_server import serve

    endpoint = serve(control_plane)
    yield endpoint.url
    endpoint.close()


@pytest.fixture
def make_driver(tmp_path, model, events, mcp_url):
    drivers: list[CodexAppServerDriver] = []

    def make(steps: list[dict], *, approvals: str = "auto", decisions: list[str] | None = None, **kwargs: Any):
        name = f"s{len(drivers) + 1}"
        model.add_script({"name": name, "steps": steps}, name=name)
        trace = RecordingTrace()
        callbacks = Callbacks(decisions)
        options = {
            "workdir": tmp_path / f"exec-{len(drivers) + 1}",
            "provider": ProviderConfig(profile="scripted", base_url=model.url + "/scripts/{case_id}/v1", env_key=KEY_NAME, scripted=True),
            "model": "gpt-5.2-codex",
            "reasoning_effort": "low",
            "mcp_url": mcp_url,
            "environment": {"PATH": os.environ["PATH"], KEY_NAME: "fake-key-for-local-test"},
            "events": events,
            "trace": trace,
            "callbacks": callbacks,
            "instructions": "Use the evalhub tools only.",
            "case_id": name,
            "execution_id": "exec-1",
            "approvals": approvals,
        }
        options.update(kwargs)
        driver = CodexAppServerDriver(**options)
        drivers.append(driver)
        return driver, trace, callbacks

    yield make
    for driver in drivers:
        driver.close()


def call(tool: str, **arguments: Any) -> dict:
    usage = {"input": 100, "cachedInput": 10, "output": 30, "reasoning": 5}
    return {"outputs": [{"call": tool, "arguments": arguments}], "usage": usage}


def say(text: str, **extra: Any) -> dict:
    return {"outputs": [{"say": text}], "usage": {"input": 120, "cachedInput": 20, "output": 12, "reasoning": 0}, **extra}


def of_type(events: EventLog, type_: str) -> list:
    return [event for event in events.events() if event.type == type_]


def wait_for_event(events: EventLog, type_: str, timeout_s: float = 30) -> None:
    """Until the driver has emitted an event of ``type_`` (the runtime acknowledged it): a fixed
    sleep instead races the runtime's start-up on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while not of_type(events, type_):
        assert time.monotonic() < deadline, f"no {type_} event within {timeout_s} s"
        time.sleep(0.02)


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is still in process group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


# -- schema ---------------------------------------------------------------------------------------


@pytest.mark.skipif(BINARY is None and not os.environ.get("CI"), reason="codex is not installed (make install)")
def test_vendored_schema_matches_the_installed_codex(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("codex_schema_vendor", SCHEMA_DIR / "vendor.py")
    vendor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(vendor)
    out = tmp_path / "schema"
    version = vendor.generate(out, Path(BINARY))
    fresh = vendor.manifest_of(out, version)
    vendored = json.loads((SCHEMA_DIR / "manifest.json").read_text())
    changed = sorted(
        path for path in set(fresh["files"]) | set(vendored["files"]) if fresh["files"].get(path) != vendored["files"].get(path)
    )
    assert fresh["codexVersion"] == vendored["codexVersion"] and not changed, (
        f"codex app-server protocol drifted: installed {fresh['codexVersion']!r}, vendored {vendored['codexVersion']!r}; "
        f"{len(changed)} schema files differ (first: {changed[:5]}). If codex was upgraded on purpose, run "
        f"`.venv/bin/python tests/fixtures/codex-app-server-schema/vendor.py`, review runs/executors/live/drivers/codex.py "
        f"and docs/runtime-mapping-codex.md against the new schema, and bump CODEX_VERSION."
    )
    for rel in vendor.KEPT:
        data = (SCHEMA_DIR / "files" / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == vendored["files"][rel]["sha256"], rel
    assert CODEX_VERSION in vendored["codexVersion"]


def test_every_method_the_driver_speaks_is_in_the_schema():
    methods = json.loads((SCHEMA_DIR / "methods.json").read_text())
    for method in ("initialize", "thread/start", "thread/resume", "turn/start", "turn/steer", "turn/interrupt"):
        assert method in methods["clientRequests"], method
    assert methods["clientNotifications"] == ["initialized"]
    for method in CodexAppServerDriver._NOTIFICATION_HANDLERS:
        assert method in methods["serverNotifications"], method
    for method in codex_module.OPERATOR_ONLY_METHODS:
        assert method in methods["serverNotifications"], method
    answered = {
        "mcpServer/elicitation/request",
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "execCommandApproval",
        "applyPatchApproval",
    }
    assert answered | codex_module.REFUSED_REQUESTS == set(methods["serverRequests"])


RESPONSE_SCHEMAS = {
    "mcpServer/elicitation/request": "McpServerElicitationRequestResponse.json",
    "item/commandExecution/requestApproval": "CommandExecutionRequestApprovalResponse.json",
    "item/fileChange/requestApproval": "FileChangeRequestApprovalResponse.json",
    "item/permissions/requestApproval": "PermissionsRequestApprovalResponse.json",
    "execCommandApproval": "ExecCommandApprovalResponse.json",
    "applyPatchApproval": "ApplyPatchApprovalResponse.json",
}


@pytest.mark.parametrize("decision", ["allow_once", "accept_for_session", "deny"])
@pytest.mark.parametrize("method", sorted(RESPONSE_SCHEMAS))
def test_approval_answers_follow_the_response_schema(method, decision):
    params = {
        "_meta": {"codex_approval_kind": "mcp_tool_call", "persist": ["session", "always"]},
        "permissions": {"network": {"enabled": True}},
    }
    answer = _answer_request(method, params, decision)
    schema = json.loads((SCHEMA_DIR / "files" / RESPONSE_SCHEMAS[method]).read_text())
    jsonschema.validate(answer, schema)
    if decision == "accept_for_session":
        assert "session" in json.dumps(answer).lower() or "Session" in json.dumps(answer)


# -- units ----------------------------------------------------------------------------------------


def test_config_toml_is_valid_and_isolated():
    provider = ProviderConfig(profile="openai", base_url="https://api.example.test/v1", env_key="OPENAI_API_KEY")
    text = build_config_toml(
        provider=provider, base_url=provider.base_url, model="gpt-5.2-codex", reasoning_effort="high", mcp_url="http://127.0.0.1:9/mcp"
    )
    config = tomllib.loads(text)
    assert config["model"] == "gpt-5.2-codex" and config["model_reasoning_effort"] == "high"
    assert config["approval_policy"] == "never"
    assert config["model_providers"]["evalhub"] == {
        "name": "evalhub openai",
        "base_url": "https://api.example.test/v1",
        "wire_api": "responses",
        "request_max_retries": 0,
        "stream_max_retries": 0,
        "env_key": "OPENAI_API_KEY",
    }
    assert config["mcp_servers"]["evalhub"]["url"] == "http://127.0.0.1:9/mcp"
    assert config["mcp_servers"]["evalhub"]["default_tools_approval_mode"] == "approve"
    assert config["features"] == {"plugins": False, "remote_plugin": False, "apps": False}
    assert config["analytics"] == {"enabled": False}
    prompting = tomllib.loads(
        build_config_toml(provider=provider, base_url="u", model="m", reasoning_effort=None, mcp_url="x", approvals="prompt")
    )
    assert prompting["approval_policy"] == "on-request"
    assert prompting["mcp_servers"]["evalhub"]["default_tools_approval_mode"] == "auto"
    chat = ProviderConfig(profile="c", base_url="u", wire_api="chat")
    with pytest.raises(ValueError, match="speaks only the Responses API"):
        build_config_toml(provider=chat, base_url="u", model="m", reasoning_effort=None, mcp_url="x")


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"message": "unexpected status 503", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 503}}}, "provider_http_503"),
        (
            {
                "message": "exceeded retry limit, last status: 429",
                "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
            },
            "provider_rate_limited",
        ),
        (
            {"message": "Quota exceeded. Check your plan and billing details.", "codexErrorInfo": "usageLimitExceeded"},
            "provider_quota_exhausted",
        ),
        (
            {"message": "unexpected status 401 Unauthorized", "codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 401}}},
            "provider_auth_refused",
        ),
        ({"message": "The model x does not exist", "codexErrorInfo": "modelNotFound"}, "provider_unknown_model"),
        ({"message": "We're currently experiencing high demand", "codexErrorInfo": "internalServerError"}, "provider_http_500"),
        (
            {"message": "stream disconnected before completion: stream closed before response.completed", "codexErrorInfo": "other"},
            "provider_stream_dropped",
        ),
        ({"message": "x", "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}}}, "provider_stream_dropped"),
        ({"message": "context too long", "codexErrorInfo": "contextWindowExceeded"}, "provider_context_window_exceeded"),
        ({"message": "something odd", "codexErrorInfo": "other"}, None),
        (None, None),
    ],
)
def test_provider_errors_are_classified(error, code):
    assert classify_provider_error(error) == code


def test_missing_binary_is_runtime_missing(tmp_path, events, settings):
    configured = str(tmp_path / "nowhere" / "codex")
    assert RUNTIMES["codex"].resolve(configured) is None
    ok, message = RUNTIMES["codex"].status(configured)
    assert not ok and "fix EVALHUB_CODEX_BIN" in message  # a configured path: fix the setting
    driver = CodexAppServerDriver(
        workdir=tmp_path,
        provider=ProviderConfig(profile="p", base_url="http://127.0.0.1:1/v1"),
        model="m",
        reasoning_effort=None,
        mcp_url="http://127.0.0.1:1/mcp",
        environment={},
        events=events,
        trace=RecordingTrace(),
        callbacks=Callbacks(),
        instructions="",
        binary=configured,
    )
    with pytest.raises(InfrastructureError, match="fix EVALHUB_CODEX_BIN") as caught:
        driver.start()
    assert (caught.value.code, caught.value.retryable) == ("runtime_missing", False)
    driver.close()
    driver.close()


def test_drivers_registry_resolves_codex():
    assert driver_class("codex") is CodexAppServerDriver


@needs_codex
def test_runtime_status_reports_the_pinned_version():
    ok, message = RUNTIMES["codex"].status()
    assert ok, message
    assert CODEX_VERSION in message


# -- the real runtime -----------------------------------------------------------------------------


@needs_codex
def test_one_turn_calls_a_tool_and_finishes(make_driver, events, control_plane, model):
    driver, trace, callbacks = make_driver([call("report_progress", message="working"), say("All done here.")])
    driver.start()
    config = tomllib.loads((driver.codex_home / "config.toml").read_text())
    assert config["model_providers"]["evalhub"]["base_url"] == model.url + "/scripts/s1/v1"
    turn_id = driver.start_turn("Report progress, then say you are done.")
    outcome = driver.wait_turn(8000)

    assert (outcome.turn_id, outcome.status, outcome.error_code) == (turn_id, "completed", None)
    assert outcome.usage == Usage(input=220, cached_input=30, output=42, reasoning=5)
    # Callbacks run on the driver's callback thread: the last one may land just after the turn.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (not callbacks.usage or callbacks.usage[-1][1] != outcome.usage):
        time.sleep(0.01)
    assert callbacks.usage[-1][1] == Usage(input=220, cached_input=30, output=42, reasoning=5)
    assert [c["operation"] for c in control_plane.snapshot()["toolCalls"]] == ["report_progress"]
    runtime = [e for e in events.events() if e.source == "runtime"]
    types = [e.type for e in runtime]
    order = ["session.started", "turn.started", "tool.execution.started", "tool.execution.completed", "turn.completed"]
    assert "usage.updated" in types
    assert [types.index(t) for t in order] == sorted(types.index(t) for t in order)
    tool_done = of_type(events, "tool.execution.completed")[0]
    assert (tool_done.data["tool"], tool_done.data["server"], tool_done.data["isError"]) == ("report_progress", "evalhub", False)
    message = [e for e in of_type(events, "item.completed") if e.data["itemType"] == "agentMessage"]
    assert [e.data["text"] for e in message] == ["All done here."]
    deltas = of_type(events, "assistant.message.delta")
    assert deltas and {d.frame_ids[0] for d in deltas} < set(message[0].frame_ids)
    assert of_type(events, "turn.completed")[-1].data["status"] == "completed"

    # every frame is recorded and interpreted exactly once, in order
    assert [f[0] for f in trace.frames] == list(range(1, len(trace.frames) + 1))
    interpreted = sorted(fid for fid, *_ in trace.interpretations)
    assert interpreted == [f[0] for f in trace.frames]
    assert {"mapped", "generic", "ignored", "operator_only"} <= trace.dispositions()
    assert trace.lineage() == {"one_to_one", "one_to_many", "many_to_one"}
    sent = trace.messages("out")
    assert [m.get("method") for m in sent[:3]] == ["initialize", "initialized", "thread/start"]
    assert sent[2]["params"]["ephemeral"] is False
    # the key reached the provider through env_key and nothing else from os.environ leaked
    request = [r for r in model.requests if r["script"] == "s1"][0]
    assert request["headers"]["authorization"] == "[present]"


@needs_codex
def test_process_environment_is_exactly_the_given_one(make_driver, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    driver, _, _ = make_driver([say("hi")])
    driver.start()
    environ = Path(f"/proc/{driver.pgid}/environ").read_bytes().split(b"\0")
    names = sorted(item.split(b"=", 1)[0].decode() for item in environ if item)
    assert names == sorted(["PATH", KEY_NAME, "CODEX_HOME"])


@needs_codex
@pytest.mark.parametrize(
    ("decisions", "prompts", "tool_ok"),
    [
        (["allow_once", "allow_once"], 2, [True, True]),
        (["accept_for_session"], 1, [True, True]),
        (["deny", "deny"], 2, [False, False]),
    ],
)
def test_approvals_prompt_path(make_driver, events, control_plane, decisions, prompts, tool_ok):
    steps = [call("report_progress", message="one"), say("first"), call("report_progress", message="two"), say("second")]
    driver, trace, callbacks = make_driver(steps, approvals="prompt", decisions=list(decisions))
    driver.start()
    for text in ("first turn", "second turn"):
        driver.start_turn(text)
        assert driver.wait_turn(8000).status == "completed"
    assert len(callbacks.requests) == prompts
    assert {(r.kind, r.subject) for r in callbacks.requests} == {("tool", "report_progress")}
    opened = of_type(events, "runtime_request.opened")
    resolved = of_type(events, "runtime_request.resolved")
    assert len(opened) == len(resolved) == prompts
    assert [e.data["decision"] for e in resolved] == decisions[:prompts]
    answers = [m for m in trace.messages("out") if "result" in m and "action" in m["result"]]
    if decisions[0] == "accept_for_session":
        assert answers[0]["result"] == {"action": "accept", "content": {}, "_meta": {"persist": "session"}}
    if decisions[0] == "deny":
        assert answers[0]["result"] == {"action": "decline"}
    completed = list(of_type(events, "tool.execution.completed"))
    assert [not e.data["isError"] and e.data["status"] == "completed" for e in completed] == tool_ok
    assert len(control_plane.snapshot()["toolCalls"]) == sum(tool_ok)


@needs_codex
def test_steer_during_an_active_turn_is_acknowledged(make_driver, events, model):
    driver, trace, _ = make_driver([say("slow answer", delayMs=1500), say("steered answer")])
    driver.start()
    assert driver.steer("nothing is running") is False
    turn_id = driver.start_turn("Take your time.")
    wait_for_event(events, "turn.started")
    assert driver.steer("Bullet points only, please.") is True
    outcome = driver.wait_turn(8000)
    assert outcome.status == "completed"
    acknowledged = of_type(events, "turn.steering.acknowledged")
    assert [e.turn_id for e in acknowledged] == [turn_id]
    steer = [m for m in trace.messages("out") if m.get("method") == "turn/steer"]
    assert steer[0]["params"]["expectedTurnId"] == turn_id
    assert steer[0]["params"]["input"] == [{"type": "text", "text": "Bullet points only, please."}]
    # the steered text reached the model within the same turn
    assert "Bullet points only, please." in json.dumps([r["body"] for r in model.requests if r["script"] == "s1"])


@needs_codex
def test_interrupt_stops_the_active_turn(make_driver, events):
    driver, _, _ = make_driver([say("never finishes in time", delayMs=5000)])
    driver.start()
    driver.interrupt()  # idle: no-op
    driver.start_turn("Work slowly.")
    # Interrupt only once the runtime has started the turn (before that there is nothing to stop),
    # and wait longer than the answer takes: "interrupted", not "completed", shows the interrupt ended it.
    wait_for_event(events, "turn.started")
    driver.interrupt()
    outcome = driver.wait_turn(20000)
    assert outcome.status == "interrupted"
    assert of_type(events, "turn.interrupted")
    assert of_type(events, "turn.completed")[-1].data["status"] == "interrupted"


@needs_codex
def test_wait_turn_times_out_and_interrupts(make_driver, events):
    driver, trace, _ = make_driver([say("too slow", delayMs=5000)])
    driver.start()
    driver.start_turn("Work slowly.")
    outcome = driver.wait_turn(400)
    assert outcome.status == "timed_out"
    assert any(m.get("method") == "turn/interrupt" for m in trace.messages("out"))
    assert of_type(events, "turn.interrupted")


@needs_codex
def test_restart_resumes_the_same_thread(make_driver, events, model):
    driver, trace, callbacks = make_driver([call("report_progress", message="before"), say("first"), say("after restart")])
    driver.start()
    driver.start_turn("First turn.")
    assert driver.wait_turn(8000).status == "completed"
    thread_id, old_pgid = driver.thread_id, driver.pgid
    driver.restart()
    assert not group_alive(old_pgid)
    assert driver.thread_id == thread_id and driver.pgid != old_pgid
    assert [e.data["threadId"] for e in of_type(events, "session.resumed")] == [thread_id]
    resume = [m for m in trace.messages("out") if m.get("method") == "thread/resume"]
    assert resume[0]["params"]["threadId"] == thread_id
    driver.start_turn("Continue where you left off.")
    assert driver.wait_turn(8000).status == "completed"
    texts = [e.data["text"] for e in of_type(events, "item.completed") if e.data["itemType"] == "agentMessage"]
    assert texts == ["first", "after restart"]
    # the resumed conversation carries the earlier turns to the model
    last = [r for r in model.requests if r["script"] == "s1"][-1]
    assert "First turn." in json.dumps(last["body"])
    assert callbacks.usage[-1][1].input == 100 + 120 + 120


@needs_codex
@pytest.mark.parametrize(
    ("fail", "code"),
    [
        ({"status": 503, "message": "upstream unavailable"}, "provider_http_503"),
        ({"status": 429, "code": "rate_limit_exceeded", "message": "slow down"}, "provider_rate_limited"),
        ({"status": 401, "code": "invalid_api_key", "message": "Incorrect API key provided"}, "provider_auth_refused"),
        (
            {"status": 429, "code": "insufficient_quota", "type": "insufficient_quota", "message": "You exceeded your current quota"},
            "provider_quota_exhausted",
        ),
        ({"status": 404, "code": "model_not_found", "message": "The model does not exist"}, "provider_unknown_model"),
    ],
)
def test_provider_failures_give_error_codes(make_driver, events, fail, code):
    driver, _, _ = make_driver([{"fail": fail}])
    driver.start()
    driver.start_turn("Hello.")
    outcome = driver.wait_turn(8000)
    assert (outcome.status, outcome.error_code) == ("failed", code)
    assert outcome.error
    assert [e.data["code"] for e in of_type(events, "provider.error")] == [code]


@needs_codex
def test_dropped_stream_is_provider_stream_dropped(make_driver):
    driver, _, _ = make_driver([{"drop": True}])
    driver.start()
    driver.start_turn("Hello.")
    outcome = driver.wait_turn(8000)
    assert (outcome.status, outcome.error_code) == ("failed", "provider_stream_dropped")


@needs_codex
def test_unreachable_mcp_server_is_mcp_unavailable(make_driver, refused_port):
    driver, _, _ = make_driver([say("hi")], mcp_url=f"http://127.0.0.1:{refused_port}/mcp")
    with pytest.raises(InfrastructureError) as caught:
        driver.start()
    assert (caught.value.code, caught.value.retryable) == ("mcp_unavailable", True)


@needs_codex
def test_a_crash_is_runtime_crashed(make_driver):
    driver, _, _ = make_driver([say("slow", delayMs=3000)])
    driver.start()
    driver.start_turn("Hello.")
    os.killpg(driver.pgid, 9)
    with pytest.raises(InfrastructureError) as caught:
        driver.wait_turn(5000)
    assert (caught.value.code, caught.value.retryable) == ("runtime_crashed", True)


@needs_codex
def test_close_kills_the_whole_process_group(make_driver):
    driver, _, _ = make_driver([say("slow", delayMs=3000)])
    driver.start()
    pgid = driver.pgid
    driver.start_turn("Hello.")
    assert group_alive(pgid)
    driver.close()
    assert not group_alive(pgid)
    driver.close()


@needs_codex
def test_close_ends_a_wait_in_another_thread(make_driver, events):
    driver, _, _ = make_driver([say("slow", delayMs=60000)])
    driver.start()
    driver.start_turn("Hello.")
    wait_for_event(events, "turn.started")
    outcomes = []
    waiter = threading.Thread(target=lambda: outcomes.append(driver.wait_turn(120000)))
    waiter.start()
    time.sleep(0.2)  # most likely inside wait_turn by now; either way close() must end it
    driver.close()
    # Far less than the answer's 60 s delay: only close() can have ended the wait.
    waiter.join(30)
    assert [o.status for o in outcomes] == ["interrupted"]


# -- the runtime-neutral JSON-RPC peer ------------------------------------------------------------

FAKE_PEER = r"""
import json, sys
print("not json at all", flush=True)
print("log line", file=sys.stderr, flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "ok":
        print(json.dumps({"id": msg["id"], "result": {"echo": msg["params"]}}), flush=True)
    elif msg.get("method") == "bad":
        print(json.dumps({"id": msg["id"], "error": {"code": -32000, "message": "nope"}}), flush=True)
    elif msg.get("method") == "ask":
        print(json.dumps({"id": 7, "method": "please", "params": {}}), flush=True)
        print(json.dumps({"method": "note", "params": {"n": 1}}), flush=True)
    elif msg.get("method") == "exit":
        sys.exit(3)
"""


def test_jsonrpc_peer_records_and_dispatches_every_line():
    import subprocess
    import sys

    from runs.executors.live.drivers.jsonrpc import JsonRpcError, PeerClosed, StdioJsonRpcPeer

    proc = subprocess.Popen([sys.executable, "-c", FAKE_PEER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    trace = RecordingTrace()
    seen: dict[str, list] = {"invalid": [], "stderr": [], "request": [], "note": [], "response": [], "closed": []}
    done = threading.Event()
    peer = StdioJsonRpcPeer(
        proc.stdin,
        proc.stdout,
        proc.stderr,
        record=trace.frame,
        on_invalid=lambda raw, fid: seen["invalid"].append(raw),
        on_stderr=lambda raw, fid: seen["stderr"].append(raw),
        on_request=lambda msg, fid: (seen["request"].append(msg), peer.respond(msg["id"], {"ok": True})),
        on_notification=lambda msg, fid: (seen["note"].append(msg), done.set()),
        on_response=lambda method, msg, fid: seen["response"].append(method),
        on_close=lambda: seen["closed"].append(True),
    )
    peer.start()
    assert peer.request("ok", {"a": 1}, timeout_s=5) == {"echo": {"a": 1}}
    with pytest.raises(JsonRpcError, match="nope"):
        peer.request("bad", {}, timeout_s=5)
    peer.notify("ask")
    assert done.wait(5)
    with pytest.raises(PeerClosed):
        peer.request("exit", {}, timeout_s=5)
    proc.wait(5)
    peer.join()
    assert seen["invalid"] == [b"not json at all"] and seen["stderr"] == [b"log line"]
    assert [m["method"] for m in seen["request"]] == ["please"] and seen["note"][0]["params"] == {"n": 1}
    assert seen["response"] == ["ok", "bad"] and seen["closed"] == [True]
    answer = [json.loads(raw) for _, d, raw in trace.frames if d == "out" and b'"ok":true' in raw]
    assert answer == [{"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}]
    assert [d for _, d, _ in trace.frames].count("in") == 5


def test_the_callback_worker_drains_what_was_queued_before() -> None:
    # ProcessDriver.wait_turn drains the worker, so a usage report the runtime sent just before
    # its turn ended has reached the callbacks when the turn's outcome is returned.
    from runs.executors.live.drivers.common import CallbackWorker

    worker = CallbackWorker("test-callbacks")
    seen: list[int] = []
    release = threading.Event()
    worker.put(lambda: release.wait(5))
    worker.put(lambda: seen.append(1))
    assert worker.drain(0.05) is False  # the first job still holds the thread
    release.set()
    assert worker.drain(5) is True
    assert seen == [1]
    inside: list[bool] = []
    worker.put(lambda: inside.append(worker.drain(5)))  # never waits on itself
    assert worker.drain(5) and inside == [False]
    worker.close()
