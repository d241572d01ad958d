"""The scripted model server: scripts, the OpenAI and Anthropic wire formats, steps, failures, and the real codex."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from runs.executors.live.script_schema import load_script, load_scripts_dir
from runs.executors.live.scripted_model import ScriptedModelServer

pytestmark = pytest.mark.database_free

KEY = "sk-test-echo-9f3a2c71"
CODEX_TOOLS = [
    {"type": "function", "name": "shell", "parameters": {"type": "object"}},
    {
        "type": "namespace",
        "name": "mcp__evalhub",
        "description": "evalhub tools",
        "tools": [
            {"type": "function", "name": "finish_task", "parameters": {"type": "object"}},
            {"type": "function", "name": "report_progress", "parameters": {"type": "object"}},
        ],
    },
]
OPENCODE_TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "evalhub_finish_task", "parameters": {"type": "object"}}},
]


def say_then_call() -> dict:
    return {
        "name": "demo",
        "steps": [
            {
                "outputs": [{"say": "Starting now."}, {"call": "finish_task", "arguments": {"summary": "all done"}}],
                "usage": {"input": 120, "cachedInput": 20, "output": 30, "reasoning": 5},
            },
            {"outputs": [{"say": "Finished."}]},
        ],
    }


def responses_body(text: str = "Do the task.", *, tools=CODEX_TOOLS, stream: bool = True) -> dict:
    return {
        "model": "gpt-5.2-codex",
        "stream": stream,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
        "tools": tools,
    }


def chat_body(text: str = "Do the task.", *, tools=OPENCODE_TOOLS, stream: bool = True) -> dict:
    return {
        "model": "scripted-model",
        "stream": stream,
        "messages": [{"role": "system", "content": "be good"}, {"role": "user", "content": text}],
        "tools": tools,
    }


def read_sse(response: httpx.Response) -> list[tuple[str | None, str]]:
    """(event, data) pairs of an SSE body, parsed independently of the server's own helper."""
    events, event, data = [], None, []
    for line in response.iter_lines():
        if line == "":
            if data:
                events.append((event, "\n".join(data)))
            event, data = None, []
        elif line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
    if data:
        events.append((event, "\n".join(data)))
    return events


def stream_responses(server: ScriptedModelServer, body: dict, *, script: str = "demo", headers=None):
    with httpx.stream("POST", server.base_url(script) + "/responses", json=body, headers=headers, timeout=10) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"] == "text/event-stream"
        return [(event, json.loads(data)) for event, data in read_sse(r)]


def stream_chat(server: ScriptedModelServer, body: dict, *, script: str = "demo", headers=None):
    with httpx.stream("POST", server.base_url(script) + "/chat/completions", json=body, headers=headers, timeout=10) as r:
        assert r.status_code == 200, r.read()
        return [data for _, data in read_sse(r)]


def completed_response(events) -> dict:
    assert events[-1][0] == "response.completed"
    return events[-1][1]["response"]


def text_of(response: dict) -> str:
    return "".join(part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"])


@pytest.fixture
def serve():
    servers: list[ScriptedModelServer] = []

    def start(*scripts: dict, **kwargs) -> ScriptedModelServer:
        server = ScriptedModelServer({s["name"]: s for s in scripts}, **kwargs)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# ---- scripts -----------------------------------------------------------------------------------
def test_valid_script_loads_as_a_private_copy():
    source = say_then_call()
    loaded = load_script(source)
    loaded["steps"].clear()
    assert len(source["steps"]) == 2


def test_bad_script_names_every_problem_with_its_location():
    bad = {
        "name": "has space",
        "steps": [
            {"ouputs": [{"say": "x"}]},
            {"outputs": [{"say": "x", "call": "finish_task"}]},
            {"fail": {"status": 200}},
            {"outputs": [{"repeat": "x"}]},
            {"fail": {"status": 503}, "outputs": [{"say": "x"}]},
            {"drop": True, "usage": {"input": 1}},
            {"outputs": [{"say": "x"}], "usage": {"input": 1, "cachedInput": 5}},
        ],
    }
    with pytest.raises(ValueError) as caught:
        load_script(bad)
    message = str(caught.value)
    assert message.startswith("script 'has space': ")
    for expected in [
        "name: 'has space' does not match",
        "steps[0]: unknown key(s) ('ouputs' was unexpected)",
        "steps[0]: a step needs 'outputs', 'fail' or 'drop'",
        "steps[1].outputs[0]: an output needs exactly one of 'call', 'say', 'echoKey' or 'repeat'",
        "steps[2].fail.status: 200 is less than the minimum of 400",
        "steps[3].outputs[0]: 'times' is a dependency of 'repeat'",
        "steps[4]: a 'fail' step has no 'outputs'",
        "steps[5]: 'usage' only applies to a step with 'outputs'",
    ]:
        assert expected in message


def test_cached_input_cannot_exceed_input():
    script = {"name": "s", "steps": [{"outputs": [{"say": "x"}], "usage": {"input": 1, "cachedInput": 5}}]}
    with pytest.raises(ValueError, match=r"steps\[0\]\.usage: cachedInput is part of input"):
        load_script(script)


def test_load_script_from_a_file_and_its_errors(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(say_then_call()))
    assert load_script(good)["name"] == "demo"
    assert load_script(str(good))["steps"][1] == {"outputs": [{"say": "Finished."}]}
    with pytest.raises(ValueError, match=r"missing\.json: no such file"):
        load_script(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=r"broken\.json: not valid JSON"):
        load_script(broken)


def test_scripts_dir_rejects_two_files_with_one_name(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(say_then_call()))
    assert list(load_scripts_dir(tmp_path)) == ["demo"]
    (tmp_path / "b.json").write_text(json.dumps(say_then_call()))
    with pytest.raises(ValueError, match=r"b\.json: name 'demo' is already used by .*a\.json"):
        load_scripts_dir(tmp_path)


def test_server_refuses_invalid_scripts_and_non_loopback_hosts():
    with pytest.raises(ValueError, match=r"script 'x': steps: \[\] should be non-empty"):
        ScriptedModelServer({"x": {"name": "x", "steps": []}})
    with pytest.raises(ValueError, match="loopback only"):
        ScriptedModelServer({}, host="0.0.0.0")


# ---- Responses API -----------------------------------------------------------------------------
def test_responses_stream_says_then_calls_the_namespaced_tool_in_one_response(serve):
    server = serve(say_then_call())
    events = stream_responses(server, responses_body())
    assert [event for event, _ in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert all(data["type"] == event for event, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    deltas = "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
    assert deltas == "Starting now."
    arguments = "".join(d["delta"] for e, d in events if e == "response.function_call_arguments.delta")
    assert json.loads(arguments) == {"summary": "all done"}

    response = completed_response(events)
    assert response["status"] == "completed"
    message, call = response["output"]
    assert message["content"] == [{"type": "output_text", "text": "Starting now.", "annotations": []}]
    assert call["type"] == "function_call"
    assert call["namespace"] == "mcp__evalhub"
    assert call["name"] == "finish_task"
    assert json.loads(call["arguments"]) == {"summary": "all done"}
    assert call["call_id"].startswith("call_")
    done_items = [d["item"] for e, d in events if e == "response.output_item.done"]
    assert done_items == response["output"]
    assert [d["output_index"] for e, d in events if e == "response.output_item.added"] == [0, 1]
    # output_tokens counts reasoning inside it, as OpenAI does.
    assert response["usage"] == {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 20},
        "output_tokens": 35,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 155,
    }


def test_responses_without_stream_answers_one_json_object(serve):
    server = serve(say_then_call())
    reply = httpx.post(server.base_url("demo") + "/responses", json=responses_body(stream=False))
    assert reply.status_code == 200
    body = reply.json()
    assert body["object"] == "response"
    assert [item["type"] for item in body["output"]] == ["message", "function_call"]
    assert body["usage"]["total_tokens"] == 155


def test_flat_function_offers_are_called_by_their_own_name(serve):
    server = serve(say_then_call())
    tools = [{"type": "function", "name": "evalhub_finish_task", "parameters": {}}]
    call = completed_response(stream_responses(server, responses_body(tools=tools)))["output"][1]
    assert call["name"] == "evalhub_finish_task"
    assert "namespace" not in call


def test_a_tool_that_was_not_offered_becomes_a_visible_text(serve):
    server = serve(say_then_call())
    response = completed_response(stream_responses(server, responses_body(tools=CODEX_TOOLS[:1])))
    assert [item["type"] for item in response["output"]] == ["message", "message"]
    assert text_of(response).endswith("[scripted model] tool 'finish_task' was not offered; offered: shell")


def test_repeat_streams_a_long_text_in_pieces(serve):
    server = serve({"name": "long", "steps": [{"outputs": [{"repeat": "ab", "times": 1300}]}]})
    events = stream_responses(server, responses_body(), script="long")
    deltas = [d["delta"] for e, d in events if e == "response.output_text.delta"]
    assert len(deltas) == 13 and max(map(len, deltas)) == 200
    assert "".join(deltas) == "ab" * 1300
    usage = completed_response(events)["usage"]
    assert usage["output_tokens"] == 650  # about 4 characters per token when the step gives none
    assert usage["input_tokens"] > 0


# ---- Chat Completions --------------------------------------------------------------------------
def test_chat_stream_gives_content_tool_calls_finish_reason_usage_and_done(serve):
    server = serve(say_then_call())
    chunks = stream_chat(server, chat_body())
    assert chunks[-1] == "[DONE]"
    parsed = [json.loads(c) for c in chunks[:-1]]
    assert parsed[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in parsed if c["choices"])
    assert content == "Starting now."
    calls = [tc for c in parsed if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["function"] == {"name": "evalhub_finish_task", "arguments": ""}
    assert calls[0]["id"].startswith("call_") and calls[0]["index"] == 0
    assert json.loads("".join(tc["function"]["arguments"] for tc in calls)) == {"summary": "all done"}
    assert parsed[-2]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    assert parsed[-1]["choices"] == []
    assert parsed[-1]["usage"]["prompt_tokens"] == 120
    assert parsed[-1]["usage"]["completion_tokens"] == 35
    assert parsed[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 20}
    # next request of the same conversation: plain text, finish_reason stop
    final = [json.loads(c) for c in stream_chat(server, chat_body())[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in final if c["choices"]) == "Finished."
    assert final[-2]["choices"][0]["finish_reason"] == "stop"


def test_chat_without_stream_answers_a_completion(serve):
    server = serve(say_then_call())
    body = httpx.post(server.base_url("demo") + "/chat/completions", json=chat_body(stream=False)).json()
    choice = body["choices"][0]
    assert body["object"] == "chat.completion"
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Starting now."
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "evalhub_finish_task"
    assert body["usage"]["total_tokens"] == 155


def test_models_lists_the_scripted_model(serve):
    server = serve(say_then_call())
    reply = httpx.get(server.base_url("demo") + "/models")
    assert reply.status_code == 200
    assert [m["id"] for m in reply.json()["data"]] == ["scripted-model"]


# ---- steps and conversations -------------------------------------------------------------------
def test_steps_advance_per_conversation_then_a_final_text(serve):
    server = serve(say_then_call())
    first = {"thread-id": "thread-A"}
    assert server.step_index("demo", "thread:thread-A") == 0
    assert completed_response(stream_responses(server, responses_body(), headers=first))["output"][1]["type"] == "function_call"
    assert server.step_index("demo", "thread:thread-A") == 1
    assert text_of(completed_response(stream_responses(server, responses_body(), headers=first))) == "Finished."
    # another thread starts at step 0
    other = completed_response(stream_responses(server, responses_body(), headers={"session-id": "s-B"}))
    assert other["output"][1]["type"] == "function_call"
    # past the end: the short final text
    assert text_of(completed_response(stream_responses(server, responses_body(), headers=first))) == "Scripted run finished."
    assert server.conversations("demo") == {"thread:thread-A": 3, "thread:s-B": 1}
    assert [r["step"] for r in server.requests] == [0, 1, 0, None]
    assert [r["answer"] for r in server.requests] == ["outputs", "outputs", "outputs", "final"]


def test_opencode_x_session_id_names_the_conversation(serve):
    server = serve(say_then_call())
    # Two opencode sessions sending the same first prompt are still two conversations.
    for session in ("ses_A", "ses_B"):
        chunks = stream_chat(server, chat_body("Same prompt."), headers={"x-session-id": session, "x-session-affinity": session})
        assert any("tool_calls" in c for c in chunks)
    assert server.conversations("demo") == {"thread:ses_A": 1, "thread:ses_B": 1}


def test_a_side_request_without_tools_takes_no_step(serve):
    server = serve(say_then_call())
    headers = {"x-session-id": "ses_T"}
    title = [json.loads(c) for c in stream_chat(server, chat_body("Generate a title.", tools=[]), headers=headers)[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in title if c["choices"]) == "Scripted task"
    untitled = {k: v for k, v in responses_body().items() if k != "tools"}
    assert text_of(completed_response(stream_responses(server, untitled, headers=headers))) == "Scripted task"
    assert server.step_index("demo", "thread:ses_T") == 0  # the real request still gets step 0
    chunks = stream_chat(server, chat_body(), headers=headers)
    assert any("tool_calls" in c for c in chunks)
    assert [r["answer"] for r in server.requests] == ["side", "side", "outputs"]
    assert [r["step"] for r in server.requests] == [None, None, 0]


def test_a_code_mode_request_without_tools_is_not_a_side_request(serve):
    # codex's code mode offers no function tools: one freeform exec tool inside the input.
    server = serve(say_then_call())
    exec_tool = {"type": "custom", "name": "exec", "description": "declare const tools: { finish_task(args: {"}
    body = {k: v for k, v in responses_body().items() if k != "tools"}
    body["input"] = [*body["input"], {"type": "additional_tools", "tools": [exec_tool]}]
    response = completed_response(stream_responses(server, body, headers={"thread-id": "t-code"}))
    assert [item["type"] for item in response["output"]] == ["message", "custom_tool_call"]
    assert [r["answer"] for r in server.requests] == ["outputs"]


def test_alternatives_name_the_same_action_in_another_runtime(serve):
    exec_step = {
        "call": "exec_command",
        "arguments": {"cmd": "ls"},
        "alternatives": [
            {"call": "shell_run", "arguments": {"x": 1}},
            {"call": "bash", "arguments": {"command": "ls", "description": "List"}},
        ],
    }
    server = serve({"name": "alt", "steps": [{"outputs": [exec_step]}, {"outputs": [exec_step]}]})
    # opencode offers bash, not exec_command: the first offered alternative is called with its own arguments
    chunks = [json.loads(c) for c in stream_chat(server, chat_body(), script="alt")[:-1]]
    calls = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "bash"
    assert json.loads("".join(tc["function"]["arguments"] for tc in calls)) == {"command": "ls", "description": "List"}
    # a runtime that offers the script's own tool gets it
    tools = [{"type": "function", "name": "exec_command", "parameters": {}}, {"type": "function", "name": "bash", "parameters": {}}]
    call = completed_response(stream_responses(server, responses_body(tools=tools), script="alt"))["output"][0]
    assert (call["name"], json.loads(call["arguments"])) == ("exec_command", {"cmd": "ls"})


def test_alternatives_need_a_call():
    with pytest.raises(ValueError, match="alternatives"):
        load_script({"name": "bad", "steps": [{"outputs": [{"say": "x", "alternatives": [{"call": "bash"}]}]}]})
    with pytest.raises(ValueError, match="steps\\[0\\].outputs\\[0\\].alternatives\\[0\\]"):
        load_script({"name": "bad", "steps": [{"outputs": [{"call": "x", "alternatives": [{"say": "y"}]}]}]})


def test_without_a_thread_header_the_first_user_message_names_the_conversation(serve):
    server = serve(say_then_call())
    stream_chat(server, chat_body("task one"))
    stream_chat(server, chat_body("task one"))
    stream_chat(server, chat_body("task two"))
    conversations = server.conversations("demo")
    assert sorted(conversations.values()) == [1, 2]
    assert all(key.startswith("user:") for key in conversations)


# ---- failures ----------------------------------------------------------------------------------
def test_a_fail_step_answers_an_openai_error_with_retry_after_then_lets_a_new_conversation_through(serve):
    script = {
        "name": "flaky",
        "steps": [
            {"fail": {"status": 429, "code": "rate_limit_exceeded", "retryAfter": 2, "times": 1}},
            {"outputs": [{"say": "recovered"}]},
        ],
    }
    server = serve(script)
    url = server.base_url("flaky") + "/responses"
    failed = httpx.post(url, json=responses_body(), headers={"thread-id": "t1"})
    assert failed.status_code == 429
    assert failed.headers["retry-after"] == "2"
    error = failed.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert error["type"] == "requests"
    assert error["message"] == "scripted failure: HTTP 429 (rate_limit_exceeded)"
    assert server.step_index("flaky", "thread:t1") == 0  # a failure does not move the conversation on
    assert server.misbehaviour_count("flaky", 0) == 1
    retried = stream_responses(server, responses_body(), script="flaky", headers={"thread-id": "t2"})
    assert text_of(completed_response(retried)) == "recovered"
    # the first conversation, retried, also gets past the used-up failure
    again = stream_responses(server, responses_body(), script="flaky", headers={"thread-id": "t1"})
    assert text_of(completed_response(again)) == "recovered"


def test_a_fail_step_without_times_fails_every_time(serve):
    script = {"name": "quota", "steps": [{"fail": {"status": 429, "code": "insufficient_quota", "message": "no quota"}}]}
    server = serve(script)
    for thread in ("a", "b", "c"):
        reply = httpx.post(server.base_url("quota") + "/chat/completions", json=chat_body(), headers={"thread-id": thread})
        assert reply.status_code == 429
        assert reply.json() == {"error": {"message": "no quota", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
        assert "retry-after" not in reply.headers
    assert server.misbehaviour_count("quota", 0) == 3


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [(401, "invalid_api_key", "invalid_request_error"), (404, "model_not_found", "invalid_request_error"), (503, None, "server_error")],
)
def test_fail_defaults_follow_openai(serve, status, code, kind):
    server = serve({"name": "f", "steps": [{"fail": {"status": status}}]})
    reply = httpx.post(server.base_url("f") + "/responses", json=responses_body())
    assert reply.status_code == status
    assert reply.json()["error"]["code"] == code
    assert reply.json()["error"]["type"] == kind


def test_drop_cuts_the_stream_before_it_completes(serve):
    script = {
        "name": "cut",
        "steps": [{"drop": True, "times": 1, "outputs": [{"say": "partial answer here"}]}, {"outputs": [{"say": "whole"}]}],
    }
    server = serve(script)
    with httpx.stream("POST", server.base_url("cut") + "/responses", json=responses_body(), timeout=5) as r:
        assert r.status_code == 200
        raw = r.read().decode()
    assert "response.created" in raw
    assert "response.completed" not in raw
    assert not raw.endswith("\n\n")  # cut mid-event
    # used up: the next request (any conversation) passes over the drop
    assert text_of(completed_response(stream_responses(server, responses_body(), script="cut"))) == "whole"


def test_drop_on_chat_never_sends_done(serve):
    server = serve({"name": "cut", "steps": [{"drop": True}]})
    with httpx.stream("POST", server.base_url("cut") + "/chat/completions", json=chat_body(), timeout=5) as r:
        raw = r.read().decode()
    assert raw.startswith("data: ")
    assert "[DONE]" not in raw and '"finish_reason":"stop"' not in raw


def test_delay_waits_before_answering_and_stop_interrupts_it(serve):
    steps = [{"outputs": [{"say": "late"}], "delayMs": 300}, {"outputs": [{"say": "x"}], "delayMs": 60000}]
    server = serve({"name": "slow", "steps": steps})
    started = time.monotonic()
    stream_responses(server, responses_body(), script="slow")
    assert time.monotonic() - started >= 0.3

    outcome = {}

    def blocked():
        try:
            httpx.post(server.base_url("slow") + "/responses", json=responses_body(), timeout=30)
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=blocked)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    server.stop()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert time.monotonic() - started < 3
    assert isinstance(outcome.get("error"), httpx.HTTPError)


# ---- the key, the log, errors ------------------------------------------------------------------
def test_echo_key_says_the_received_authorization_back_but_the_log_never_holds_it(serve):
    server = serve({"name": "echo", "steps": [{"outputs": [{"echoKey": True}]}]})
    headers = {"Authorization": f"Bearer {KEY}", "thread-id": "t"}
    response = completed_response(stream_responses(server, responses_body(), script="echo", headers=headers))
    assert text_of(response) == f"Authorization: Bearer {KEY}"
    logged = server.requests
    assert logged[0]["headers"]["authorization"] == "[present]"
    assert KEY not in json.dumps(logged)
    chat = [json.loads(c) for c in stream_chat(server, chat_body(), script="echo", headers={"Authorization": f"Bearer {KEY}"})[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chat if c["choices"]) == f"Authorization: Bearer {KEY}"


def test_every_request_is_logged_with_path_headers_and_body(serve):
    server = serve(say_then_call())
    body = responses_body()
    stream_responses(server, body, headers={"thread-id": "t", "x-codex-turn-metadata": "{}"})
    (entry,) = server.requests
    assert entry["method"] == "POST"
    assert entry["path"] == "/scripts/demo/v1/responses"
    assert entry["script"] == "demo" and entry["endpoint"] == "responses"
    assert entry["conversation"] == "thread:t"
    assert entry["headers"]["x-codex-turn-metadata"] == "{}"
    assert entry["body"] == body


def test_concurrent_requests_are_all_logged(serve):
    server = serve({"name": "many", "steps": [{"outputs": [{"say": "hi"}]}]})
    threads = [
        threading.Thread(target=stream_responses, args=(server, responses_body(f"task {n}")), kwargs={"script": "many"}) for n in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.requests) == 20
    assert sorted(server.conversations("many").values()) == [1] * 20


def test_unknown_script_and_route_are_404_with_a_clear_message(serve):
    server = serve(say_then_call())
    reply = httpx.post(server.base_url("nope") + "/responses", json=responses_body())
    assert reply.status_code == 404
    assert reply.json()["error"] == {
        "message": "no scripted model script named 'nope'; known scripts: demo",
        "type": "invalid_request_error",
        "param": None,
        "code": "unknown_script",
    }
    reply = httpx.post(server.url + "/v1/responses", json=responses_body())
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "unknown_route"
    assert "/scripts/<name>/v1/responses" in reply.json()["error"]["message"]


def test_a_body_that_is_not_json_is_400(serve):
    server = serve(say_then_call())
    reply = httpx.post(server.base_url("demo") + "/responses", content=b"{oops", headers={"Content-Type": "application/json"})
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_json"


def test_chunked_and_gzipped_bodies_are_read(serve):
    server = serve(say_then_call())
    raw = gzip.compress(json.dumps(responses_body(stream=False)).encode())
    reply = httpx.post(
        server.base_url("demo") + "/responses",
        content=iter([raw[:10], raw[10:]]),  # an iterator body goes out chunked
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert reply.status_code == 200, reply.text
    assert server.requests[0]["headers"]["transfer-encoding"] == "chunked"
    assert server.requests[0]["body"] == responses_body(stream=False)


def test_scripts_can_be_added_while_serving(serve):
    server = serve(say_then_call())
    server.add_script({"name": "later", "steps": [{"outputs": [{"say": "added"}]}]})
    assert text_of(completed_response(stream_responses(server, responses_body(), script="later"))) == "added"
    with pytest.raises(ValueError, match="script 'bad'"):
        server.add_script({"name": "bad", "steps": [{}]})


# ---- command line ------------------------------------------------------------------------------
def test_command_line_prints_the_url_and_stops_on_sigterm(tmp_path):
    (tmp_path / "demo.json").write_text(json.dumps(say_then_call()))
    process = subprocess.Popen(
        [sys.executable, "-m", "runs.executors.live.scripted_model", "--scripts", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        reply = httpx.get(url + "/scripts/demo/v1/models", timeout=5)
        assert reply.status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_command_line_refuses_bad_scripts(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"name": "bad", "steps": [{"say": "x"}]}))
    result = subprocess.run(
        [sys.executable, "-m", "runs.executors.live.scripted_model", "--scripts", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 2
    assert "bad.json: steps[0]: unknown key(s)" in result.stderr


# ---- the real codex ----------------------------------------------------------------------------
CODEX = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "codex"

# A minimal stdio MCP server standing in for the control plane (the shape codex expects of an MCP server).
PROBE_MCP_SERVER = textwrap.dedent(
    """
    import json, os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("evalhub-probe")

    @server.tool()
    def finish_task(summary: str) -> str:
        \"\"\"Declare the task finished with a summary.\"\"\"
        with open(os.environ["MCP_LOG"], "a") as log:
            log.write(json.dumps({"tool": "finish_task", "arguments": {"summary": summary}}) + "\\n")
        return "task finished: " + summary

    server.run()
    """
)


class _AppServer:
    """Just enough JSON-RPC over stdio to drive one codex turn (the real driver is teammate C's)."""

    def __init__(self, command: list[str], env: dict, cwd: Path) -> None:
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.messages: list[dict] = []
        self.cond = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "method" in message and "id" in message:  # a server request: accept whatever it asks
                self.send({"id": message["id"], "result": {"action": "accept", "content": {}}})
            with self.cond:
                self.messages.append(message)
                self.cond.notify_all()

    def send(self, message: dict) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def wait_for(self, predicate, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"timed out; last messages: {self.messages[-5:]}"
                self.cond.wait(remaining)

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        request_id = self.next_id
        self.send({"id": request_id, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)
        assert "error" not in reply, reply
        return reply["result"]

    def close(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


def _codex_turn(
    server: ScriptedModelServer, script: str, tmp_path: Path, *, with_mcp: bool, mcp_url: str | None = None
) -> tuple[list[dict], dict]:
    """Run one real codex turn against ``script``; returns (every app-server message, the thread).
    The ``evalhub`` MCP server is the stdio probe, or the streamable-HTTP endpoint at ``mcp_url``."""
    home, work, mcp_log = tmp_path / "codex-home", tmp_path / "work", tmp_path / "mcp_calls.jsonl"
    home.mkdir()
    work.mkdir()
    probe = tmp_path / "probe_mcp.py"
    probe.write_text(PROBE_MCP_SERVER)
    if mcp_url:
        transport = [f'url = "{mcp_url}"']
    else:
        transport = [f'command = "{sys.executable}"', f'args = ["{probe}"]', f'env = {{ MCP_LOG = "{mcp_log}" }}']
    mcp = "\n".join(
        [
            "[mcp_servers.evalhub]",
            *transport,
            "startup_timeout_sec = 20",
            "tool_timeout_sec = 30",
            'default_tools_approval_mode = "approve"',
            "",
        ]
    )
    (home / "config.toml").write_text(
        textwrap.dedent(
            f"""
            model = "gpt-5.2-codex"
            model_provider = "scripted"
            approval_policy = "never"
            sandbox_mode = "read-only"

            [model_providers.scripted]
            name = "Scripted"
            base_url = "{server.base_url(script)}"
            env_key = "SCRIPTED_MODEL_KEY"
            wire_api = "responses"
            request_max_retries = 0
            stream_max_retries = 0

            [features]
            plugins = false
            remote_plugin = false
            apps = false

            [analytics]
            enabled = false
            """
        )
        + (mcp if with_mcp else "")
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
    env.update(CODEX_HOME=str(home), SCRIPTED_MODEL_KEY=KEY, RUST_LOG="warn")
    app = _AppServer([str(CODEX), "app-server"], env, work)
    try:
        client = {"name": "evalhub_test", "title": "evalhub test", "version": "0"}
        app.request("initialize", {"clientInfo": client, "capabilities": {"experimentalApi": True}})
        app.send({"method": "initialized"})
        start = {"cwd": str(work), "approvalPolicy": "never", "sandbox": "read-only", "ephemeral": True}
        thread = app.request("thread/start", start)["thread"]
        if with_mcp:
            ready = app.wait_for(
                lambda m: m.get("method") == "mcpServer/startupStatus/updated" and m["params"]["status"] in ("ready", "failed")
            )
            assert ready["params"]["status"] == "ready", ready
        app.request("turn/start", {"threadId": thread["id"], "input": [{"type": "text", "text": "Finish the task."}]})
        app.wait_for(lambda m: m.get("method") == "turn/completed")
        with app.cond:
            return list(app.messages), thread
    finally:
        app.close()


needs_codex = pytest.mark.skipif(not CODEX.exists(), reason=f"codex binary not installed at {CODEX} (run npm ci)")


def _control_plane_endpoint():
    """The control plane (runs/executors/live/controlplane.py) behind its streamable-HTTP MCP endpoint, with run-1 open."""
    from runs.executors.live.contracts import EventLog
    from runs.executors.live.controlplane import ControlPlane
    from runs.executors.live.mcp_server import serve as serve_mcp

    case = {"id": "scripted-model-smoke", "title": "Smoke", "steps": [], "assertions": {}}
    plane = ControlPlane(execution_id="exec-1", case=case, prompt="Finish the task.", events=EventLog())
    plane.begin_run("start")
    return plane, serve_mcp(plane)


@needs_codex
@pytest.mark.parametrize("mcp_transport", ["stdio-probe", "control-plane"])
def test_real_codex_accepts_the_stream_and_the_namespaced_mcp_call(serve, tmp_path, mcp_transport):
    script = {
        "name": "demo",
        "steps": [
            {
                "outputs": [{"say": "Calling the tool."}, {"call": "finish_task", "arguments": {"summary": "scripted summary"}}],
                "usage": {"input": 200, "cachedInput": 50, "output": 20, "reasoning": 4},
            },
            {"outputs": [{"say": "All done."}, {"echoKey": True}]},
        ],
    }
    server = serve(script)
    plane = endpoint = None
    if mcp_transport == "control-plane":
        plane, endpoint = _control_plane_endpoint()
    try:
        messages, thread = _codex_turn(server, "demo", tmp_path, with_mcp=True, mcp_url=endpoint and endpoint.url)
    finally:
        if endpoint is not None:
            endpoint.close()
    done = next(m for m in messages if m.get("method") == "turn/completed")
    assert done["params"]["turn"]["status"] == "completed", done

    items = [m["params"]["item"] for m in messages if m.get("method") == "item/completed"]
    tool_items = [i for i in items if i["type"] == "mcpToolCall"]
    assert [(i["server"], i["tool"], i["status"]) for i in tool_items] == [("evalhub", "finish_task", "completed")]
    if plane is None:
        logged = [json.loads(line) for line in (tmp_path / "mcp_calls.jsonl").read_text().splitlines()]
        assert logged == [{"tool": "finish_task", "arguments": {"summary": "scripted summary"}}]
        tool_reply = "task finished: scripted summary"
    else:
        board = plane.snapshot()
        assert board["runResult"]["summary"] == "scripted summary"
        assert [(c["operation"], c["outcome"]) for c in board["toolCalls"]] == [("finish_task", "ok")]
        tool_reply = board["toolCalls"][0]["receiptId"]
    texts = [i["text"] for i in items if i["type"] == "agentMessage"]
    assert "Calling the tool." in texts
    assert any("All done." in t for t in texts) and any(f"Bearer {KEY}" in t for t in texts)

    model_requests = [r for r in server.requests if r["endpoint"] == "responses"]
    assert [r["step"] for r in model_requests] == [0, 1]
    # codex names its thread in a header, so both requests are one conversation
    assert {r["conversation"] for r in model_requests} == {f"thread:{thread['id']}"}
    offered = model_requests[0]["body"]["tools"]
    assert any(t.get("type") == "namespace" and t.get("name") == "mcp__evalhub" for t in offered)
    outputs = [i for i in model_requests[1]["body"]["input"] if i.get("type") == "function_call_output"]
    assert len(outputs) == 1 and "unsupported call" not in json.dumps(outputs[0])
    assert tool_reply in json.dumps(outputs[0])
    assert all(r["headers"].get("authorization") == "[present]" for r in model_requests)
    usage = [m for m in messages if m.get("method") == "thread/tokenUsage/updated"]
    assert usage, "codex reported no token usage from the stream"
    tokens = usage[-1]["params"]["tokenUsage"]
    counts = ("inputTokens", "cachedInputTokens", "outputTokens", "reasoningOutputTokens")
    first = {k: tokens["total"][k] - tokens["last"][k] for k in counts}
    assert first == {"inputTokens": 200, "cachedInputTokens": 50, "outputTokens": 24, "reasoningOutputTokens": 4}


@needs_codex
@pytest.mark.parametrize(
    ("step", "error_info"),
    [
        ({"fail": {"status": 503}}, {"httpConnectionFailed": {"httpStatusCode": 503}}),
        ({"fail": {"status": 429, "retryAfter": 1}}, {"responseTooManyFailedAttempts": {"httpStatusCode": 429}}),
        ({"fail": {"status": 429, "code": "insufficient_quota"}}, "usageLimitExceeded"),
        ({"fail": {"status": 401}}, {"httpConnectionFailed": {"httpStatusCode": 401}}),
        ({"fail": {"status": 404}}, "modelNotFound"),
        ({"drop": True}, "other"),
    ],
    ids=["503", "429", "quota", "401", "model", "drop"],
)
def test_real_codex_reports_each_scripted_failure_as_a_failed_turn(serve, tmp_path, step, error_info):
    server = serve({"name": "broken", "steps": [step]})
    messages, _ = _codex_turn(server, "broken", tmp_path, with_mcp=False)
    turn = next(m for m in messages if m.get("method") == "turn/completed")["params"]["turn"]
    assert turn["status"] == "failed"
    assert turn["error"]["codexErrorInfo"] == error_info
    if "drop" in step:
        assert "stream disconnected before completion" in turn["error"]["message"]


# ---- Anthropic Messages (Claude Code) ----------------------------------------------------------
CLAUDE_TOOLS = [
    {"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
    {"name": "Write", "description": "write a file", "input_schema": {"type": "object"}},
    {"name": "mcp__evalhub__finish_task", "description": "finish", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search"},  # a server tool: never called by a script
]


def messages_body(text: str = "Do the task.", *, tools=CLAUDE_TOOLS, stream: bool = True) -> dict:
    body = {
        "model": "claude-sonnet-5",
        "max_tokens": 4096,
        "stream": stream,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }
    if tools is not None:
        body["tools"] = tools
    return body


def stream_messages(server: ScriptedModelServer, body: dict, *, script: str = "demo", headers=None, path: str = "/messages?beta=true"):
    with httpx.stream("POST", server.base_url(script) + path, json=body, headers=headers, timeout=10) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"] == "text/event-stream"
        return [(event, json.loads(data)) for event, data in read_sse(r)]


def test_messages_stream_follows_anthropic_events_and_calls_the_mcp_tool(serve):
    server = serve(say_then_call())
    events = stream_messages(server, messages_body(), headers={"x-claude-code-session-id": "acp-session-1"})
    kinds = [event for event, _ in events]
    assert kinds[:2] == ["message_start", "ping"] and kinds[-2:] == ["message_delta", "message_stop"]
    assert all(event == data["type"] for event, data in events)
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["stop_reason"] is None
    # Anthropic's input_tokens is the uncached part; the cached part is a separate count.
    assert start["usage"] == {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 20, "output_tokens": 1}
    blocks = [data["content_block"] for event, data in events if event == "content_block_start"]
    assert blocks[0] == {"type": "text", "text": ""}
    assert blocks[1]["type"] == "tool_use" and blocks[1]["name"] == "mcp__evalhub__finish_task" and blocks[1]["input"] == {}
    assert blocks[1]["id"].startswith("toolu_")
    text = "".join(d["delta"]["text"] for e, d in events if e == "content_block_delta" and d["delta"]["type"] == "text_delta")
    arguments = "".join(
        d["delta"]["partial_json"] for e, d in events if e == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert text == "Starting now." and json.loads(arguments) == {"summary": "all done"}
    assert [d["index"] for e, d in events if e == "content_block_stop"] == [0, 1]
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"] == {"output_tokens": 35}  # thinking inside output
    assert server.conversations("demo") == {"thread:acp-session-1": 1}


def test_messages_without_stream_answer_one_message_and_a_text_ends_the_turn(serve):
    server = serve(say_then_call())
    headers = {"x-claude-code-session-id": "s"}
    first = httpx.post(server.base_url("demo") + "/messages", json=messages_body(stream=False), headers=headers, timeout=10).json()
    assert first["type"] == "message" and first["stop_reason"] == "tool_use"
    assert [block["type"] for block in first["content"]] == ["text", "tool_use"]
    assert first["content"][1]["input"] == {"summary": "all done"}
    second = httpx.post(server.base_url("demo") + "/messages", json=messages_body(stream=False), headers=headers, timeout=10).json()
    assert second["stop_reason"] == "end_turn" and second["content"] == [{"type": "text", "text": "Finished."}]


def test_claude_side_requests_take_no_step_and_count_tokens_answers(serve):
    server = serve(say_then_call())
    headers = {"x-claude-code-session-id": "s"}
    title = stream_messages(server, messages_body("Generate a title", tools=None), headers=headers)
    assert "".join(d["delta"].get("text", "") for e, d in title if e == "content_block_delta") == "Scripted task"
    counted = httpx.post(server.base_url("demo") + "/messages/count_tokens", json=messages_body(), headers=headers, timeout=10)
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert server.step_index("demo", "thread:s") == 0
    assert [entry["answer"] for entry in server.requests] == ["side", "count_tokens"]


def test_a_script_bash_is_claudes_Bash_and_exact_alternatives_win_over_case(serve):
    script = {
        "name": "demo",
        "steps": [
            {
                "outputs": [
                    {
                        "call": "exec_command",
                        "arguments": {"cmd": "ls"},
                        "alternatives": [{"call": "bash", "arguments": {"command": "ls"}}],
                    },
                    {
                        "call": "apply_patch",
                        "arguments": {"input": "patch"},
                        "alternatives": [
                            {"call": "write", "arguments": {"filePath": "a.md", "content": "x"}},
                            {"call": "Write", "arguments": {"file_path": "a.md", "content": "x"}},
                        ],
                    },
                ]
            }
        ],
    }
    server = serve(script)
    message = httpx.post(server.base_url("demo") + "/messages", json=messages_body(stream=False), timeout=10).json()
    calls = [(block["name"], block["input"]) for block in message["content"] if block["type"] == "tool_use"]
    assert calls == [("Bash", {"command": "ls"}), ("Write", {"file_path": "a.md", "content": "x"})]
    opencode = httpx.post(
        server.base_url("demo") + "/chat/completions",
        json=chat_body(tools=[*OPENCODE_TOOLS, {"type": "function", "function": {"name": "write", "parameters": {}}}], stream=False),
        headers={"x-session-id": "opencode-session"},
        timeout=10,
    ).json()
    names = [call["function"] for call in opencode["choices"][0]["message"]["tool_calls"]]
    assert [(n["name"], json.loads(n["arguments"])) for n in names] == [
        ("bash", {"command": "ls"}),
        ("write", {"filePath": "a.md", "content": "x"}),
    ]


@pytest.mark.parametrize(
    ("status", "kind"),
    [(529, "overloaded_error"), (429, "rate_limit_error"), (401, "authentication_error"), (404, "not_found_error"), (500, "api_error")],
)
def test_messages_failures_are_anthropic_errors(serve, status, kind):
    server = serve({"name": "demo", "steps": [{"fail": {"status": status, "message": "scripted"}}]})
    response = httpx.post(server.base_url("demo") + "/messages", json=messages_body(), timeout=10)
    assert response.status_code == status
    assert response.json() == {"type": "error", "error": {"type": kind, "message": "scripted"}}
    assert response.headers["request-id"].startswith("req_")
    assert response.headers["x-should-retry"] == ("true" if status in (429, 500, 529) else "false")


def test_a_mid_stream_error_starts_the_message_then_sends_an_error_event(serve):
    server = serve({"name": "demo", "steps": [{"fail": {"status": 529, "midStream": True, "times": 1}}, {"outputs": [{"say": "ok"}]}]})
    events = stream_messages(server, messages_body(), headers={"x-claude-code-session-id": "s"})
    assert [event for event, _ in events] == ["message_start", "ping", "error"]
    assert events[-1][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "scripted failure: HTTP 529 (overloaded_error)"},
    }
    again = stream_messages(server, messages_body(), headers={"x-claude-code-session-id": "s"})
    assert again[-1][0] == "message_stop"  # times: 1 — the next request goes through


def test_a_drop_cuts_a_non_streaming_message_too(serve):
    server = serve({"name": "demo", "steps": [{"drop": True, "outputs": [{"say": "cut " * 50}]}]})
    with pytest.raises(httpx.HTTPError):
        httpx.post(server.base_url("demo") + "/messages", json=messages_body(stream=False), timeout=10).json()
    with httpx.stream("POST", server.base_url("demo") + "/messages", json=messages_body(), timeout=10) as r:
        try:
            body = r.read().decode()
        except httpx.HTTPError:
            body = ""
    assert "message_stop" not in body


def test_echo_key_says_anthropics_x_api_key_back(serve):
    server = serve({"name": "demo", "steps": [{"outputs": [{"echoKey": True}]}]})
    message = httpx.post(server.base_url("demo") + "/messages", json=messages_body(stream=False), headers={"x-api-key": KEY}, timeout=10)
    assert message.json()["content"] == [{"type": "text", "text": f"x-api-key: {KEY}"}]
    assert server.requests[0]["headers"]["x-api-key"] == "[present]"


def test_codex_acp_title_request_asks_for_structured_output_and_takes_no_step(serve):
    server = serve(say_then_call())
    body = responses_body("Generate a title") | {"text": {"format": {"type": "json_schema", "name": "title", "schema": {}}}}
    events = stream_responses(server, body, headers={"thread-id": "title-thread"})
    assert json.loads(text_of(completed_response(events))) == {"title": "Scripted task"}
    assert server.conversations("demo") == {}
    assert server.requests[0]["answer"] == "side"
