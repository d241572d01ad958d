"""The ACP driver: its profile table, the rules it maps frames and failures by, and its flow
against a small stand-in agent that speaks ACP over stdio (tests/fixtures/fake_acp_agent.py), so
each protocol path — permissions, cancel, steering with and without the extension, a queued
prompt, ``session/load``, frames the schema refuses, a crash — is checked without starting
Claude Code or codex. The real agents run in tests/harness/test_live_acp_e2e.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from runs.executors.base import InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.executors.live.contracts import EventLog, Usage
from runs.executors.live.drivers import acp_schema
from runs.executors.live.drivers.acp import (
    CLAUDE_OFFLINE_ENVIRONMENT,
    PROFILES,
    AcpDriver,
    anthropic_base_url,
    choose_option,
    classify_prompt_error,
    describe_permission,
    thread_status,
    tool_identity,
    usage_from_prompt,
)
from runs.executors.live.drivers.jsonrpc import JsonRpcError
from runs.executors.live.runtimes import RUNTIMES
from runs.executors.providers import ProviderConfig, provider_for, provider_profiles
from tests.harness.test_codex_driver import Callbacks, RecordingTrace, group_alive

pytestmark = pytest.mark.database_free

FAKE_AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_acp_agent.py"


# -- the profile table -----------------------------------------------------------------------------


def test_profiles_name_the_agents_acpx_launches_pinned_in_package_json():
    package = json.loads((Path(__file__).resolve().parents[2] / "package.json").read_text())["dependencies"]
    assert {name: p.runtime_key for name, p in PROFILES.items()} == {"claude": "claude-acp", "codex": "codex-acp"}
    for profile in PROFILES.values():
        runtime = RUNTIMES[profile.runtime_key]
        assert package[runtime.package] == runtime.version
    assert RUNTIMES["claude-acp"].package == "@agentclientprotocol/claude-agent-acp"
    assert RUNTIMES["codex-acp"].package == "@agentclientprotocol/codex-acp"
    assert (PROFILES["claude"].mode, PROFILES["codex"].mode) == ("default", "workspace-write")
    assert (PROFILES["claude"].wire_api, PROFILES["codex"].wire_api) == ("messages", "responses")
    assert PROFILES["codex"].extra_runtimes == ("codex",)


def test_for_profile_binds_one_class_per_profile_and_refuses_unknown_ones():
    claude, codex = AcpDriver.for_profile("claude"), AcpDriver.for_profile("codex")
    assert claude is AcpDriver.for_profile("claude") and issubclass(codex, AcpDriver)
    assert (claude.runtime_key, claude.wire_apis, claude.runtime_name) == ("claude-acp", ("messages",), "claude-agent-acp (ACP)")
    assert (codex.runtime_key, codex.wire_apis, codex.extra_runtimes) == ("codex-acp", ("responses",), ("codex",))
    with pytest.raises(ValueError, match="unknown ACP agent profile 'gemini'; known: claude, codex"):
        AcpDriver.for_profile("gemini")
    with pytest.raises(TypeError, match="for_profile"):
        AcpDriver(**driver_options(Path("/tmp/x")))


def test_acpx_candidates_get_their_agents_model_provider(settings):
    from evalhub.defaults import DEFAULTS

    profiles = provider_profiles(DEFAULTS["MODEL_PROVIDERS"])
    defaults = DEFAULTS["DEFAULT_PROVIDER_PROFILES"]
    claude = CandidateSpec.from_snapshot({"id": "acpx-claude-sonnet", "provider": "acpx", "qualification": {"profile": "claude"}})
    codex = CandidateSpec.from_snapshot({"id": "acpx-codex-sol", "provider": "acpx", "qualification": {"profile": "codex"}})
    assert provider_for(claude, profiles=profiles, default_profiles=defaults).profile == "anthropic"
    assert provider_for(claude, profiles=profiles, default_profiles=defaults).wire_api == "messages"
    assert provider_for(codex, profiles=profiles, default_profiles=defaults).profile == "openai"
    other = CandidateSpec.from_snapshot({"id": "acpx-x", "provider": "acpx", "qualification": {"profile": "gemini"}})
    assert provider_for(other, profiles=profiles, default_profiles=defaults).profile == "openai"  # the acpx fallback


def test_the_acpx_executor_binds_the_candidates_profile():
    from runs.executors.live.executor import AcpxRuntimeExecutor, driver_options

    executor = AcpxRuntimeExecutor()
    codex = executor.driver_factory(CandidateSpec.from_snapshot({"id": "acpx-codex-sol", "qualification": {"profile": "codex"}}))
    assert codex.runtime_key == "codex-acp" and set(driver_options(codex)["binaries"]) == {"codex"}
    assert (
        driver_options(executor.driver_factory(CandidateSpec.from_snapshot({"id": "acpx-claude", "qualification": {"profile": "claude"}})))
        == {}
    )
    with pytest.raises(InfrastructureError) as raised:
        executor.driver_factory(CandidateSpec.from_snapshot({"id": "acpx-odd", "qualification": {}}))
    assert (raised.value.code, raised.value.retryable) == ("runtime_start_failed", False)
    assert "candidate acpx-odd: unknown ACP agent profile None" in raised.value.message


# -- mapping rules ---------------------------------------------------------------------------------


def test_prompt_usage_counts_each_token_once():
    # codex-acp: 430 uncached + 170 cached in, 63 out of which 3 thought.
    usage = usage_from_prompt(
        {"totalTokens": 663, "inputTokens": 430, "cachedReadTokens": 170, "cachedWriteTokens": 0, "outputTokens": 63, "thoughtTokens": 3}
    )
    assert usage == Usage(input=600, cached_input=170, output=60, reasoning=3)
    assert usage.total == 430 + 60 + 3
    assert usage_from_prompt({"inputTokens": 600, "outputTokens": 60, "cachedWriteTokens": 40}) == Usage(input=640, output=60)
    assert usage_from_prompt(None) == Usage() == usage_from_prompt({"inputTokens": "many", "outputTokens": -1})


@pytest.mark.parametrize(
    ("message", "data", "code"),
    [
        ("Internal error: API Error: 529 Overloaded. This is a server-side issue", None, "provider_http_529"),
        ("API Error: Request rejected (429) · Rate limit reached", None, "provider_rate_limited"),
        ("Authentication required", {"errorKind": "authentication_failed"}, "provider_auth_refused"),
        ("There's an issue with the selected model (claude-sonnet-5). It may not exist", None, "provider_unknown_model"),
        ("API Error: Connection to the API was lost (ECONNRESET).", None, "provider_stream_dropped"),
        ("API Error: Unable to connect (ECONNREFUSED)", None, "provider_unreachable"),
        ("You exceeded your current quota, please check your plan and billing", None, "provider_quota_exhausted"),
        ("Internal error", {"codexErrorInfo": "usageLimitExceeded"}, "provider_quota_exhausted"),
        ("Internal error", {"codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 503}}}, "provider_http_503"),
        ("unexpected status 404 Not Found: The model does not exist", None, "provider_unknown_model"),
        ("stream disconnected before completion: stream closed before response.completed", None, "provider_stream_dropped"),
        ("Internal error", {"errorKind": "server_error"}, "provider_http_500"),
        ("something odd", None, None),
    ],
)
def test_prompt_errors_are_classified(message: str, data: Any, code: str | None):
    error = {"code": -32603, "message": message}
    if data is not None:
        error["data"] = data
    assert classify_prompt_error(JsonRpcError("session/prompt", error)) == code


def test_tool_identity_reads_each_agents_description():
    claude_mcp = {"title": "x", "_meta": {"claudeCode": {"toolName": "mcp__evalhub__report_progress"}}}
    assert tool_identity(claude_mcp) == ("report_progress", "evalhub")
    assert tool_identity({"_meta": {"claudeCode": {"toolName": "Bash"}}, "kind": "execute"}) == ("Bash", None)
    assert tool_identity({"title": "mcp.evalhub.finish_task", "rawInput": {"server": "evalhub", "tool": "finish_task"}}) == (
        "finish_task",
        "evalhub",
    )
    assert tool_identity({"title": "mcp.evalhub.search_tasks"}) == ("search_tasks", "evalhub")
    assert tool_identity({"kind": "execute"}) == ("execute", None)


def test_permissions_are_described_and_answered_by_option_kind():
    claude = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "toolu_1", "_meta": {"claudeCode": {"toolName": "mcp__evalhub__report_progress"}}},
        "options": [
            {"optionId": "allow-once", "name": "Yes", "kind": "allow_once"},
            {"optionId": "allow-with-updates", "name": "Always", "kind": "allow_always"},
            {"optionId": "reject", "name": "No", "kind": "reject_once"},
        ],
    }
    request = describe_permission(claude, "turn-1")
    assert (request.kind, request.subject, request.turn_id, request.details["server"]) == ("tool", "report_progress", "turn-1", "evalhub")
    assert [choose_option(claude["options"], d) for d in ("allow_once", "accept_for_session", "deny")] == [
        "allow-once",
        "allow-with-updates",
        "reject",
    ]
    codex_exec = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "exec-1", "kind": "execute", "title": "ls -la", "rawInput": {"command": ["ls", "-la"]}},
        "options": [
            {"optionId": "allow_once", "name": "Once", "kind": "allow_once"},
            {"optionId": "cancel", "name": "No", "kind": "reject_once"},
        ],
    }
    request = describe_permission(codex_exec, None)
    assert (request.kind, request.subject) == ("command", "ls -la")
    assert choose_option(codex_exec["options"], "accept_for_session") == "allow_once"  # no session option: once
    assert choose_option([], "deny") is None
    codex_mcp = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t", "kind": "execute"},
        "_meta": {"is_mcp_tool_approval": True},
        "options": [],
    }
    assert describe_permission(codex_mcp, None).kind == "tool"


def test_base_url_thread_status_and_schema_helpers():
    assert anthropic_base_url("http://127.0.0.1:9/scripts/x/v1") == "http://127.0.0.1:9/scripts/x"
    assert anthropic_base_url("https://api.anthropic.com/") == "https://api.anthropic.com"
    assert (
        thread_status({"sessionUpdate": "session_info_update", "_meta": {"codex": {"threadStatus": {"type": "systemError"}}}})
        == "systemError"
    )
    assert thread_status({"sessionUpdate": "session_info_update", "title": "t"}) is None
    assert (
        acp_schema.notification_problem(
            {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}}
        )
        is None
    )
    assert acp_schema.notification_problem({"sessionId": "s", "update": {"sessionUpdate": "tool_call"}}) is not None
    assert acp_schema.response_problem("session/prompt", {"stopReason": "end_turn"}) is None
    assert acp_schema.response_problem("session/prompt", {"stopReason": "bored"}) is not None
    assert acp_schema.permission_problem({"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []}) is None
    assert acp_schema.permission_problem({"options": "all"}) is not None


# -- the flow against a stand-in agent -------------------------------------------------------------


def driver_options(workdir: Path, **overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "workdir": workdir,
        "provider": ProviderConfig(
            profile="scripted",
            base_url="http://127.0.0.1:9/scripts/{case_id}/v1",
            wire_api="messages",
            env_key="ANTHROPIC_API_KEY",
            scripted=True,
        ),
        "model": "claude-sonnet-5",
        "reasoning_effort": None,
        "mcp_url": "http://127.0.0.1:9/mcp",
        "environment": {"PATH": os.environ["PATH"], "ANTHROPIC_API_KEY": "fake-key-for-local-test"},
        "events": EventLog(),
        "trace": RecordingTrace(),
        "callbacks": Callbacks(),
        "instructions": "Use the evalhub tools only.",
        "case_id": "demo",
        "execution_id": "exec-1",
        "binary": str(agent_launcher(workdir.parent)),
    }
    options.update(overrides)
    return options


def agent_launcher(folder: Path) -> Path:
    """An executable that runs the stand-in agent with this interpreter (the driver starts one argv)."""
    launcher = folder / "fake-acp-agent"
    if not launcher.exists():
        folder.mkdir(parents=True, exist_ok=True)
        launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
        launcher.chmod(0o755)
    return launcher


@pytest.fixture
def make_driver(tmp_path):
    drivers: list[AcpDriver] = []

    def make(*, behaviour: dict | None = None, **overrides: Any) -> AcpDriver:
        environment = {"PATH": os.environ["PATH"], "ANTHROPIC_API_KEY": "fake-key-for-local-test", "FAKE_ACP": json.dumps(behaviour or {})}
        options = driver_options(tmp_path / f"exec-{len(drivers) + 1}", environment=environment, **overrides)
        driver = AcpDriver.for_profile("claude")(**options)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.close()


def of_type(driver: AcpDriver, type_: str) -> list:
    return [event for event in driver._events.events() if event.type == type_]


def sent(driver: AcpDriver, method: str) -> list[dict[str, Any]]:
    return [m for m in driver._trace.messages("out") if m.get("method") == method]


def test_the_handshake_session_mode_and_files(make_driver):
    driver = make_driver()
    driver.start()
    (initialize,) = sent(driver, "initialize")
    assert initialize["params"]["protocolVersion"] == 1 and initialize["params"]["clientCapabilities"]["fs"] == {
        "readTextFile": False,
        "writeTextFile": False,
    }
    (new,) = sent(driver, "session/new")
    assert new["params"]["mcpServers"] == [{"type": "http", "name": "evalhub", "url": "http://127.0.0.1:9/mcp", "headers": []}]
    assert new["params"]["systemPrompt"] == {"mode": "append", "content": [{"type": "text", "text": "Use the evalhub tools only."}]}
    assert sent(driver, "session/set_mode")[0]["params"] == {"sessionId": driver.session_id, "modeId": "default"}
    assert [e.type for e in driver._events.events()] == ["session.started"]
    settings = json.loads((driver.root / "claude-config" / "settings.json").read_text())
    assert settings["permissions"]["defaultMode"] == "default" and "mcp__evalhub" in settings["permissions"]["allow"]
    # Exactly the given environment plus the profile's: the offline switches, the model, the API root.
    environment = json.loads((driver.workspace / "environment.json").read_text())
    expected = {
        "PATH",
        "ANTHROPIC_API_KEY",
        "FAKE_ACP",
        "CLAUDE_CONFIG_DIR",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        *CLAUDE_OFFLINE_ENVIRONMENT,
    }
    # (the stand-in's launcher shell and Python add PWD, SHLVL and a coerced LC_CTYPE themselves)
    assert set(environment) - {"PWD", "SHLVL", "_", "LC_CTYPE"} == expected
    assert environment["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/scripts/demo" and environment["ANTHROPIC_MODEL"] == "claude-sonnet-5"
    assert environment["CLAUDE_CODE_MAX_RETRIES"] == "0" and environment["ENABLE_TOOL_SEARCH"] == "false"


def test_a_turn_streams_a_message_calls_a_tool_and_reports_usage(make_driver):
    driver = make_driver()
    driver.start()
    driver.start_turn("do it")
    outcome = driver.wait_turn(10_000)
    assert outcome.status == "completed" and outcome.usage == Usage(input=150, cached_input=50, output=20, reasoning=0)
    types = [e.type for e in driver._events.events()]
    assert types[1:] == [
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
    (message,) = [e for e in of_type(driver, "item.completed") if e.data.get("itemType") == "agentMessage"]
    assert message.data["text"] == "Hello there." and len(message.frame_ids) == 3  # two chunks and the tool call that ended it
    (tool,) = of_type(driver, "tool.execution.completed")
    assert (tool.data["tool"], tool.data["server"], tool.data["isError"]) == ("finish_task", "evalhub", False)
    assert driver._callbacks.usage[-1][1] == outcome.usage
    # Every frame is interpreted exactly once.
    counts: dict[int, int] = {}
    for frame_id, _, _, _ in driver._trace.interpretations:
        counts[frame_id] = counts.get(frame_id, 0) + 1
    assert set(counts) == {frame_id for frame_id, _, _ in driver._trace.frames} and set(counts.values()) == {1}


@pytest.mark.parametrize(("decision", "option"), [("allow_once", "allow-once"), ("accept_for_session", "allow-always"), ("deny", "reject")])
def test_permissions_are_asked_of_the_case_when_it_decides(make_driver, decision, option):
    driver = make_driver(behaviour={"permission": True}, approvals="prompt", callbacks=Callbacks([decision]))
    driver.start()
    driver.start_turn("do it")
    assert driver.wait_turn(10_000).status == "completed"
    (request,) = driver._callbacks.requests
    assert (request.kind, request.subject) == ("tool", "finish_task")
    answer = [m for m in driver._trace.messages("out") if "result" in m and "outcome" in m["result"]]
    assert answer[0]["result"]["outcome"] == {"outcome": "selected", "optionId": option}
    assert [e.data["decision"] for e in of_type(driver, "runtime_request.resolved")] == [decision]


def test_without_a_deciding_step_evalhub_approves_for_the_session_silently(make_driver):
    driver = make_driver(behaviour={"permission": True})
    driver.start()
    driver.start_turn("do it")
    assert driver.wait_turn(10_000).status == "completed"
    assert driver._callbacks.requests == [] and of_type(driver, "runtime_request.opened") == []
    answer = [m for m in driver._trace.messages("out") if "result" in m and "outcome" in m["result"]]
    assert answer[0]["result"]["outcome"] == {"outcome": "selected", "optionId": "allow-always"}


def test_interrupt_is_session_cancel_and_answers_a_pending_permission_cancelled(make_driver):
    class Slow(Callbacks):
        def on_runtime_request(self, request):
            time.sleep(1.0)
            return "allow_once"

    driver = make_driver(behaviour={"permission": True, "hold": True}, approvals="prompt", callbacks=Slow())
    driver.start()
    driver.start_turn("do it")
    deadline = time.monotonic() + 5
    while not of_type(driver, "runtime_request.opened") and time.monotonic() < deadline:
        time.sleep(0.05)
    driver.interrupt()
    outcome = driver.wait_turn(10_000)
    assert outcome.status == "interrupted"
    assert len(sent(driver, "session/cancel")) == 1
    answers = [m["result"]["outcome"] for m in driver._trace.messages("out") if "result" in m and "outcome" in m["result"]]
    assert answers == [{"outcome": "cancelled"}]
    assert {"turn.interrupted", "turn.completed"} <= {e.type for e in driver._events.events()}


def test_steering_uses_the_extension_when_advertised(make_driver):
    driver = make_driver(behaviour={"hold": True, "steering": True})
    driver.start()
    assert driver.steering_supported is True
    driver.start_turn("do it")
    time.sleep(0.3)
    assert driver.steer("also this") is True
    assert sent(driver, "_session/steering")[0]["params"]["prompt"] == [{"type": "text", "text": "also this"}]
    assert len(of_type(driver, "turn.steering.acknowledged")) == 1
    assert driver.wait_turn(10_000).status == "completed"


def test_without_the_extension_a_steer_is_a_queued_prompt_and_the_turn_ends_with_the_last(make_driver):
    driver = make_driver(behaviour={"hold": True, "steering": False})
    driver.start()
    assert driver.steering_supported is False
    driver.start_turn("do it")
    time.sleep(0.3)
    assert driver.steer("also this") is True
    outcome = driver.wait_turn(10_000)
    assert outcome.status == "completed"
    assert [p["params"]["prompt"][0]["text"] for p in sent(driver, "session/prompt")] == ["do it", "also this"]
    assert sent(driver, "_session/steering") == []
    assert len(of_type(driver, "turn.completed")) == 1 and len(of_type(driver, "turn.started")) == 1
    assert outcome.usage == Usage(input=300, cached_input=100, output=40)  # both prompts' usage


def test_restart_is_a_new_process_and_session_load_whose_replay_is_ignored(make_driver):
    driver = make_driver()
    driver.start()
    session, first_pgid = driver.session_id, driver.pgid
    driver.start_turn("do it")
    driver.wait_turn(10_000)
    before = len(driver._events.events())
    driver.restart()
    assert driver.pgid != first_pgid and not group_alive(first_pgid)
    (load,) = sent(driver, "session/load")
    assert load["params"]["sessionId"] == session and load["params"]["mcpServers"][0]["name"] == "evalhub"
    assert [e.type for e in driver._events.events()[before:]] == ["session.resumed"]  # the replayed updates emit nothing
    replayed = [d for fid, d, _, _ in driver._trace.interpretations if fid > load_frame(driver)]
    assert "ignored" in replayed


def load_frame(driver: AcpDriver) -> int:
    return next(fid for fid, d, raw in driver._trace.frames if d == "out" and b'"session/load"' in raw)


def test_a_prompt_error_fails_the_turn_with_the_providers_code(make_driver):
    driver = make_driver(behaviour={"error": "API Error: 529 Overloaded"})
    driver.start()
    driver.start_turn("do it")
    outcome = driver.wait_turn(10_000)
    assert (outcome.status, outcome.error_code) == ("failed", "provider_http_529")
    assert of_type(driver, "provider.error")[0].data["code"] == "provider_http_529"


def test_a_failed_codex_thread_fails_the_turn_with_the_error_it_says(make_driver):
    driver = make_driver(behaviour={"systemError": "unexpected status 503 Service Unavailable: down"})
    driver.start()
    driver.start_turn("do it")
    outcome = driver.wait_turn(10_000)
    assert (outcome.status, outcome.error_code) == ("failed", "provider_http_503")
    assert outcome.error.startswith("unexpected status 503")


def test_frames_the_schema_refuses_are_rejected_and_unknown_requests_refused(make_driver):
    driver = make_driver(behaviour={"invalid": True})
    driver.start()
    driver.start_turn("do it")
    assert driver.wait_turn(10_000).status == "completed"
    rejected = [
        json.loads(raw)
        for fid, d, raw in driver._trace.frames
        if any(i[0] == fid and i[1] == "rejected" for i in driver._trace.interpretations)
    ]
    kinds = [m.get("method") or "?" for m in rejected]
    assert "session/update" in kinds and "fs/read_text_file" in kinds
    refusal = next(m for m in driver._trace.messages("out") if m.get("error"))
    assert refusal["error"]["code"] == -32601
    assert driver.probe_rejection() is True


def test_a_crash_is_runtime_crashed_and_close_kills_the_group(make_driver):
    driver = make_driver(behaviour={"crash": True})
    driver.start()
    pgid = driver.pgid
    driver.start_turn("crash now")
    with pytest.raises(InfrastructureError) as raised:
        driver.wait_turn(10_000)
    assert raised.value.code == "runtime_crashed" and "exited unexpectedly" in raised.value.message
    driver.close()
    driver.close()  # idempotent
    assert not group_alive(pgid)


def test_a_missing_agent_or_the_wrong_wire_api_is_refused_before_starting(tmp_path):
    claude = AcpDriver.for_profile("claude")
    with pytest.raises(InfrastructureError) as raised:
        claude(**driver_options(tmp_path / "a", binary=str(tmp_path / "nowhere"))).start()
    assert (raised.value.code, raised.value.retryable) == ("runtime_missing", False)
    assert "fix EVALHUB_CLAUDE_ACP_BIN" in raised.value.message
    chat = ProviderConfig(profile="openrouter", base_url="http://127.0.0.1:9/v1", wire_api="chat", env_key="ANTHROPIC_API_KEY")
    with pytest.raises(InfrastructureError) as raised:
        claude(**driver_options(tmp_path / "b", provider=chat)).start()
    assert (raised.value.code, raised.value.retryable) == ("runtime_start_failed", False)
    assert "speaks messages to its model" in raised.value.message


@pytest.mark.skipif(RUNTIMES["codex"].resolve() is None, reason="codex is not installed (make install)")
def test_the_codex_profile_writes_codex_home_without_an_mcp_section(tmp_path):
    codex = AcpDriver.for_profile("codex")
    provider = ProviderConfig(profile="openai", base_url="http://127.0.0.1:9/v1", wire_api="responses", env_key="OPENAI_API_KEY")
    driver = codex(
        **driver_options(
            tmp_path / "c", provider=provider, model="gpt-5.6-sol", reasoning_effort="medium", binary=str(agent_launcher(tmp_path))
        )
    )
    try:
        driver.start()
        config = tomllib.loads((driver.root / "codex-home" / "config.toml").read_text())
        assert (config["model"], config["model_reasoning_effort"], config["model_provider"]) == ("gpt-5.6-sol", "medium", "evalhub")
        assert "mcp_servers" not in config and config["model_providers"]["evalhub"]["env_key"] == "OPENAI_API_KEY"
        environment = json.loads((driver.workspace / "environment.json").read_text())
        assert environment["CODEX_PATH"] == RUNTIMES["codex"].resolve() and environment["CODEX_HOME"].endswith("codex-home")
        assert sent(driver, "session/set_mode")[0]["params"]["modeId"] == "workspace-write"
    finally:
        driver.close()
