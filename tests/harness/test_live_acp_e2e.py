"""End-to-end: the real ACP agents against the scripted model, through the DB-free CLI.

The same scenarios as the codex and opencode end-to-end tests, for **both** ACP profiles of the
``acpx_runtime`` adapter: ``acpx-claude-sonnet`` (claude-agent-acp, Claude Code speaking Anthropic
Messages to the scripted model) and ``acpx-codex-sol`` (codex-acp running evalhub's codex on the
Responses API): the twelve cases completed and passed, each misbehaving script failing exactly its
checks, provider failures with their codes (Anthropic's 529, 429, 401, unknown model and a
mid-stream error; OpenAI's for codex), budgets over and at the cap, restart (a new process and
``session/load``), cancel (``session/cancel`` after the permission), steering
(``_session/steering``), the echoed key leaving nothing anywhere, and no connection leaving
loopback. Each run is ``python -m runs.executors.live run-case`` inside a loopback-only network
namespace (``tests/harness/live_support.py``).

The module starts every run its selected tests read at once (:class:`CliRuns`, three at a time: an
ACP agent starts in 1-3 s) before the first test waits for its own; all of them stay on one xdist
worker (``xdist_group``). Skipped per profile when its agent is not installed (``npm ci``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from runs.executors.live.runtimes import RUNTIMES
from tests.harness import live_support
from tests.harness.live_support import (
    CliRuns,
    assert_budget_exceeded,
    assert_budget_reached,
    assert_candidate_failure,
    assert_completed_and_passed,
    assert_connects_only_to_loopback,
    assert_forbidden_call_fails,
    assert_no_key_fragment,
    assert_provider_failure,
    assert_resumed_same_session,
    assert_secrets_left_nowhere,
    assert_stopped_after_permission,
    case_ids,
    misbehaving_scripts,
    module_runs,
    random_key,
    reference_candidate,
    require_loopback_only_namespace,
    secret_shaped,
    submit_scenario,
)
from tests.harness.test_observe import MISBEHAVING as MISBEHAVING_EXPECTED

#: Candidate id → the agent runtime it needs (``runtimes.RUNTIMES`` keys).
PROFILES = {"acpx-claude-sonnet": ("claude-acp",), "acpx-codex-sol": ("codex-acp", "codex")}


def _installed(candidate: str) -> bool:
    return all(RUNTIMES[key].resolve() is not None for key in PROFILES[candidate])


CANDIDATES = [
    pytest.param(
        candidate,
        id=candidate,
        marks=pytest.mark.skipif(not _installed(candidate), reason=f"{candidate}'s ACP agent is not installed (run `npm ci`)"),
    )
    for candidate in PROFILES
]

pytestmark = [pytest.mark.runtime, pytest.mark.xdist_group("acp-e2e")]

#: Runs at once (an ACP run takes 5-15 s here, mostly the agent and Claude Code starting).
WORKERS = 3
#: Seconds one run may take.
RUN_TIMEOUT_S = 300
MISBEHAVING_SCRIPTS = misbehaving_scripts()
#: Provider failure scripts per profile → the code and retryable flag the execution must fail with.
PROVIDER_ERRORS = {
    "acpx-claude-sonnet": [
        ("anthropic-overloaded", "provider_http_529", True),
        ("anthropic-overloaded-mid-stream", "provider_http_529", True),
        ("anthropic-rate-limited", "provider_rate_limited", True),
        ("anthropic-auth-refused", "provider_auth_refused", False),
        ("anthropic-unknown-model", "provider_unknown_model", False),
        ("provider-stream-dropped", "provider_stream_dropped", True),
    ],
    # codex-acp runs evalhub's codex: OpenAI's failures, as the codex tests play them.
    "acpx-codex-sol": live_support.PROVIDER_ERRORS,
}
PROVIDER_CASES = [
    pytest.param(candidate, script, code, retryable, id=f"{candidate}-{script}", marks=param.marks)
    for param in CANDIDATES
    for candidate in param.values
    for script, code, retryable in PROVIDER_ERRORS[candidate]
]
KEY = random_key()
SHAPED = secret_shaped()


def _runs_of(item: pytest.Item) -> list[str]:
    """The runs a test reads, from its name and parameters (see :func:`_submit`)."""
    name = getattr(item, "originalname", item.name)
    params = getattr(getattr(item, "callspec", None), "params", {})
    candidate = params.get("candidate")
    if candidate is None:
        return []
    if name == "test_well_behaved_case_completes_and_scores_passed":
        return [f"{candidate}|case:{params['case_id']}"]
    if name == "test_misbehaving_script_fails_exactly_its_checks":
        return [f"{candidate}|misbehaving:{params['script']}"]
    if name == "test_provider_error_is_an_infrastructure_failure_with_its_code":
        return [f"{candidate}|provider:{params['script']}"]
    runs = {
        "test_runs_are_isolated_in_a_loopback_only_namespace": ["case:final-response"],
        "test_every_frame_is_interpreted_once_and_validates": ["case:rich-activity", "case:trace-lineage"],
        "test_usage_over_a_small_token_budget_stops_the_candidate": ["budget:over"],
        "test_usage_exactly_at_the_token_budget_is_budget_reached": ["budget:exact"],
        "test_restart_loads_the_same_session_in_a_new_process": ["case:restart-recovery"],
        "test_cancel_is_session_cancel_after_the_permission": ["case:cancellation-permissions"],
        "test_steering_is_the_agents_steering_extension": ["case:steering-causality"],
        "test_echoed_key_and_secret_shaped_text_are_scrubbed_everywhere": ["echo"],
        "test_no_connection_attempt_leaves_loopback": ["strace"],
    }.get(name, [])
    return [f"{candidate}|{run}" for run in runs]


def _submit(runs: CliRuns, name: str, root: Path) -> None:
    """Run ``<candidate>|<scenario>`` (:func:`submit_scenario`), unless the candidate's agent is not installed."""
    candidate, _, what = name.partition("|")
    if not _installed(candidate):
        return
    submit_scenario(
        runs,
        name,
        what,
        root,
        misbehaving_cases=MISBEHAVING_EXPECTED,
        key=KEY,
        shaped=SHAPED,
        strace_log=root / f"{candidate}-connect.strace",
        candidate=candidate,
        timeout_s=RUN_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Every run the selected tests of this module read, started at once."""
    yield from module_runs(request, tmp_path_factory.mktemp("acp-e2e"), runs_of=_runs_of, submit=_submit, workers=WORKERS)


def _acp(run: Any, direction: str | None = None) -> list[dict[str, Any]]:
    """The JSON-RPC frames of the run (``direction`` ``out``: evalhub's; ``in``: the agent's)."""
    return [f for f in run.frames() if f["json"] is not None and (direction is None or f["direction"] == direction)]


def _requests(run: Any, method: str) -> list[dict[str, Any]]:
    """The frames evalhub sent calling ``method`` (requests and notifications)."""
    return [f["json"] for f in _acp(run, "out") if f["json"].get("method") == method]


def _answer(run: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The agent's answer to one of evalhub's requests (same id, after it)."""
    return next(f["json"] for f in _acp(run, "in") if f["json"].get("id") == request["id"] and "method" not in f["json"])


def _updates(run: Any, kind: str) -> list[dict[str, Any]]:
    return [
        f["json"]["params"]["update"]
        for f in _acp(run, "in")
        if f["json"].get("method") == "session/update" and f["json"]["params"]["update"].get("sessionUpdate") == kind
    ]


# ------------------------------------------------------------------ isolation


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_runs_are_isolated_in_a_loopback_only_namespace(candidate: str, runs: CliRuns) -> None:
    require_loopback_only_namespace()
    run = runs.get(f"{candidate}|case:final-response")
    assert run.isolated is True and run.result["scripted"] is True


# ------------------------------------------------------------------ 1. well-behaved cases


@pytest.mark.parametrize("case_id", case_ids())
@pytest.mark.parametrize("candidate", CANDIDATES)
def test_well_behaved_case_completes_and_scores_passed(candidate: str, case_id: str, runs: CliRuns) -> None:
    run = runs.get(f"{candidate}|case:{case_id}")
    assert_completed_and_passed(run, case_id, reference_candidate(candidate))
    # The scripted model saw one conversation (side requests apart): the ACP session.
    session = _answer(run, _requests(run, "session/new")[0])["result"]["sessionId"]
    conversations = {entry["conversation"] for entry in run.result["modelLog"] if entry["answer"] == "outputs"}
    assert conversations == {f"thread:{session}"}, run.result["modelLog"]
    # The ACP handshake and the modes evalhub switches on against a script.
    initialize = _requests(run, "initialize")[0]["params"]
    assert initialize["protocolVersion"] == 1 and initialize["clientCapabilities"]["terminal"] is False
    (new,) = _requests(run, "session/new")
    assert new["params"]["mcpServers"] == [{"type": "http", "name": "evalhub", "url": new["params"]["mcpServers"][0]["url"], "headers": []}]
    assert new["params"]["mcpServers"][0]["url"].startswith("http://127.0.0.1:")
    modes = {request["params"]["modeId"] for request in _requests(run, "session/set_mode")}
    assert modes == {"default" if candidate == "acpx-claude-sonnet" else "workspace-write"}


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_every_frame_is_interpreted_once_and_validates(candidate: str, runs: CliRuns) -> None:
    for case_id in ("rich-activity", "trace-lineage"):
        run = runs.get(f"{candidate}|case:{case_id}")
        interpreted: dict[int, int] = {}
        for record in run.records:
            if record.get("kind") == "interpretation":
                interpreted[record["frameId"]] = interpreted.get(record["frameId"], 0) + 1
        frames = {frame["frameId"] for frame in run.frames()}
        assert set(interpreted) == frames, sorted(frames - set(interpreted))
        assert set(interpreted.values()) == {1}
        # usage comes from the prompt results (uncached input + cached), priced at the scripted $0.
        metrics = run.observation["metrics"]
        assert metrics["totalTokens"] > 0 and metrics["costUsd"] == 0
    # trace-lineage asks for all five dispositions, the probe's rejection among them.
    run = runs.get(f"{candidate}|case:trace-lineage")
    assert set(run.observation["traceLineage"]["dispositions"]) == {"mapped", "generic", "ignored", "rejected", "operator_only"}
    probe = _requests(run, "evalhub/traceProbe")
    assert len(probe) == 1 and "error" in _answer(run, probe[0])


# ------------------------------------------------------------------ 2. misbehaving scripts


def test_every_misbehaving_script_has_an_expectation() -> None:
    assert set(MISBEHAVING_SCRIPTS) == set(MISBEHAVING_EXPECTED)


@pytest.mark.parametrize("script", MISBEHAVING_SCRIPTS)
@pytest.mark.parametrize("candidate", CANDIDATES)
def test_misbehaving_script_fails_exactly_its_checks(candidate: str, script: str, runs: CliRuns) -> None:
    _, code, expected = MISBEHAVING_EXPECTED[script]
    run = runs.get(f"{candidate}|misbehaving:{script}")
    if script == "cancellation-permissions--forbidden-call":
        assert_forbidden_call_fails(run, code, expected, reference_candidate(candidate))
    else:
        assert_candidate_failure(run, code, expected, reference_candidate(candidate))


# ------------------------------------------------------------------ 3. provider errors


@pytest.mark.parametrize(("candidate", "script", "code", "retryable"), PROVIDER_CASES)
def test_provider_error_is_an_infrastructure_failure_with_its_code(
    candidate: str, script: str, code: str, retryable: bool, runs: CliRuns
) -> None:
    run = runs.get(f"{candidate}|provider:{script}")
    assert_provider_failure(run, code, retryable, f"{'claude-agent-acp' if 'claude' in candidate else 'codex-acp'} (ACP)")
    # Neither agent retries by itself (CLAUDE_CODE_MAX_RETRIES=0, codex's retries 0): a failed
    # request is asked once more at most (Claude Code's non-streaming fallback after a cut stream).
    failed = [entry for entry in run.result["modelLog"] if entry["answer"] in ("fail", "drop")]
    assert 1 <= len(failed) <= 2, run.result["modelLog"]
    assert run.result["trace"]["frameCount"] > 0 and run.records


# ------------------------------------------------------------------ 4. budget stop


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_usage_over_a_small_token_budget_stops_the_candidate(candidate: str, runs: CliRuns) -> None:
    assert_budget_exceeded(runs.get(f"{candidate}|budget:over"), reference_candidate(candidate))


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_usage_exactly_at_the_token_budget_is_budget_reached(candidate: str, runs: CliRuns) -> None:
    assert_budget_reached(runs.get(f"{candidate}|budget:exact"))


# ------------------------------------------------------------------ 5. restart, cancel, steering


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_restart_loads_the_same_session_in_a_new_process(candidate: str, runs: CliRuns) -> None:
    run = runs.get(f"{candidate}|case:restart-recovery")
    observation = run.observation
    assert run.error is None and observation["classification"] == "completed", run.describe()
    (new,) = _requests(run, "session/new")
    session = _answer(run, new)["result"]["sessionId"]
    # Two process_restart steps: three processes, each initialized; the two new ones load the session.
    assert len(_requests(run, "initialize")) == 3
    loads = _requests(run, "session/load")
    assert len(loads) == 2 and {load["params"]["sessionId"] for load in loads} == {session}
    assert all("result" in _answer(run, load) for load in loads)
    prompts = _requests(run, "session/prompt")
    assert prompts and {prompt["params"]["sessionId"] for prompt in prompts} == {session}
    assert {entry["conversation"] for entry in run.result["modelLog"] if entry["answer"] == "outputs"} == {f"thread:{session}"}
    assert_resumed_same_session(observation)


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_cancel_is_session_cancel_after_the_permission(candidate: str, runs: CliRuns) -> None:
    run = runs.get(f"{candidate}|case:cancellation-permissions")
    observation = run.observation
    assert run.error is None and observation["classification"] == "completed", run.describe()
    asked = [f for f in _acp(run, "in") if f["json"].get("method") == "session/request_permission"]
    assert len(asked) == 1, [f["json"] for f in asked]
    answer = next(f for f in _acp(run, "out") if f["json"].get("id") == asked[0]["json"]["id"] and "result" in f["json"])
    # accept_for_session → the option of kind allow_always, where the agent offers one (Claude
    # Code offers none for a shell command: then allow_once)
    options = {o["optionId"]: o["kind"] for o in asked[0]["json"]["params"]["options"]}
    wanted = "allow_always" if "allow_always" in options.values() else "allow_once"
    assert options[answer["json"]["result"]["outcome"]["optionId"]] == wanted
    assert asked[0]["json"]["params"]["toolCall"]["kind"] == "execute"
    cancels = [f for f in _acp(run, "out") if f["json"].get("method") == "session/cancel"]
    assert len(cancels) == 1 and answer["frameId"] < cancels[0]["frameId"]
    results = [
        f["json"]["result"] for f in _acp(run, "in") if isinstance(f["json"].get("result"), dict) and "stopReason" in f["json"]["result"]
    ]
    assert results[-1]["stopReason"] == "cancelled"
    assert_stopped_after_permission(observation)


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_steering_is_the_agents_steering_extension(candidate: str, runs: CliRuns) -> None:
    run = runs.get(f"{candidate}|case:steering-causality")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    (initialize,) = _requests(run, "initialize")
    assert _answer(run, initialize)["result"]["_meta"]["steering"]["supported"] is True
    steers = _requests(run, "_session/steering")
    assert len(steers) == 1 and "Operator follow-up (steer-2)" in steers[0]["params"]["prompt"][0]["text"]
    assert _answer(run, steers[0])["result"]["outcome"] == "injected"
    assert run.observation["observedPrpEventTypes"].count("turn.steering.acknowledged") == 1


# ------------------------------------------------------------------ 6. the echoed key


@pytest.mark.parametrize("candidate", CANDIDATES)
def test_echoed_key_and_secret_shaped_text_are_scrubbed_everywhere(candidate: str, runs: CliRuns) -> None:
    run = runs.get(f"{candidate}|echo")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    # The model really did say them (Claude Code sends the key as x-api-key, codex as a bearer
    # token): the trace holds the redaction marker where they were.
    said = [json.dumps(update) for update in _updates(run, "agent_message_chunk")]
    assert any("[REDACTED]" in text and ("Authorization: " in text or "x-api-key: " in text) for text in said), said
    assert any("A token I found: [REDACTED]" in text for text in said)
    assert_secrets_left_nowhere(run, KEY, SHAPED)
    assert_no_key_fragment(run, KEY)
    # The agent's own files (Claude's and codex's session stores hold the conversation) went with the execution.
    root = runs.root / f"{candidate}_echo" / "tmp"
    left = list(root.rglob("*"))
    assert left == [], left


# ------------------------------------------------------------------ 7. loopback only


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed: connect() calls cannot be traced")
@pytest.mark.parametrize("candidate", CANDIDATES)
def test_no_connection_attempt_leaves_loopback(candidate: str, runs: CliRuns) -> None:
    run = runs.get(f"{candidate}|strace")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    # the agent → scripted model and MCP server, and nothing else: no telemetry, no update check, no api.anthropic.com.
    assert_connects_only_to_loopback((runs.root / f"{candidate}-connect.strace").read_text())
