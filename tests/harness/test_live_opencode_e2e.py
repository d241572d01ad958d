"""End-to-end: the real ``opencode serve`` against the scripted model, through the DB-free CLI.

The same scenarios as the codex end-to-end tests, for the opencode candidate ``opencode-kimi``
(OpenRouter's Chat Completions, played by the scripted model): the twelve cases completed and
passed, each misbehaving script failing exactly its checks, provider failures with their codes,
budgets over and at the cap, restart, cancel, the echoed key leaving nothing anywhere, and no
connection leaving loopback. Each run is ``python -m runs.executors.live run-case`` inside a
loopback-only network namespace (``tests/harness/live_support.py``).

opencode takes 10-20 s to start here, so the module runs every execution its selected tests read
at once (:class:`CliRuns`, four at a time) before the first test waits for its own, and the
tests that look at the same case read the same run. All of them stay on one xdist worker
(``xdist_group``: the suite runs with ``--dist loadgroup``). Skipped only when opencode is not
installed (``npm ci`` installs it).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.harness.live_support import (
    OPENCODE,
    PROVIDER_ERRORS,
    CliRuns,
    assert_budget_exceeded,
    assert_budget_reached,
    assert_candidate_failure,
    assert_completed_and_passed,
    assert_connects_only_to_loopback,
    assert_forbidden_call_fails,
    assert_no_key_fragment,
    assert_none_outlives,
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
    run_case_held_by_the_model,
    secret_shaped,
    submit_scenario,
)
from tests.harness.test_observe import MISBEHAVING as MISBEHAVING_EXPECTED

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.xdist_group("opencode-e2e"),
    pytest.mark.skipif(not OPENCODE.exists(), reason=f"the opencode runtime is not installed ({OPENCODE} is missing; run `npm ci`)"),
]

CANDIDATE_ID = "opencode-kimi"
CANDIDATE = reference_candidate(CANDIDATE_ID)
#: Runs at once: a run is mostly opencode waiting for itself (10 s of CPU in 20-40 s).
WORKERS = 4
#: Seconds one run may take (a run takes 20-40 s here, four at a time).
RUN_TIMEOUT_S = 420
MISBEHAVING_SCRIPTS = misbehaving_scripts()
PROVIDER_SCRIPTS = [script for script, _, _ in PROVIDER_ERRORS] + ["provider-retry-after-long"]
KEY = random_key()
SHAPED = secret_shaped()


def _runs_of(item: pytest.Item) -> list[str]:
    """The runs a test reads, from its name and parameters (see :func:`_submit`)."""
    name = getattr(item, "originalname", item.name)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if name == "test_well_behaved_case_completes_and_scores_passed":
        return [f"case:{params['case_id']}"]
    if name == "test_misbehaving_script_fails_exactly_its_checks":
        return [f"misbehaving:{params['script']}"]
    if name == "test_provider_error_is_an_infrastructure_failure_with_its_code":
        return [f"provider:{params['script']}"]
    return {
        "test_runs_are_isolated_in_a_loopback_only_namespace": ["case:final-response"],
        "test_forbidden_call_fails_only_control_plane_owned_and_the_hard_gate": ["misbehaving:cancellation-permissions--forbidden-call"],
        "test_a_retry_far_away_stops_the_turn_at_once": ["provider:provider-retry-after-long"],
        "test_usage_over_a_small_token_budget_stops_the_candidate": ["budget:over"],
        "test_usage_exactly_at_the_token_budget_is_budget_reached": ["budget:exact"],
        "test_restart_continues_the_same_session": ["case:restart-recovery"],
        "test_cancel_aborts_the_active_turn_after_the_permission": ["case:cancellation-permissions"],
        "test_steering_lands_in_the_running_loop": ["case:steering-causality"],
        "test_echoed_key_and_secret_shaped_text_are_scrubbed_everywhere": ["echo"],
        "test_no_fragment_of_the_echoed_key_is_left_in_any_frame": ["echo"],
        "test_no_connection_attempt_leaves_loopback": ["strace"],
    }.get(name, [])


def _submit(runs: CliRuns, name: str, root: Path) -> None:
    """Run ``<scenario>`` (:func:`submit_scenario`) on the candidate."""
    submit_scenario(
        runs,
        name,
        name,
        root,
        misbehaving_cases=MISBEHAVING_EXPECTED,
        key=KEY,
        shaped=SHAPED,
        strace_log=root / "connect.strace",
        candidate=CANDIDATE_ID,
        timeout_s=RUN_TIMEOUT_S,
    )


def _slowest_first(name: str) -> tuple[bool, str]:
    """The provider storms and restarts first, then the rest."""
    return not name.startswith(("provider", "case:restart", "strace")), name


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Every run the selected tests of this module read, started at once."""
    root = tmp_path_factory.mktemp("opencode-e2e")
    yield from module_runs(request, root, runs_of=_runs_of, submit=_submit, workers=WORKERS, order=_slowest_first)


# ------------------------------------------------------------------ isolation


def test_runs_are_isolated_in_a_loopback_only_namespace(runs: CliRuns) -> None:
    require_loopback_only_namespace()
    run = runs.get("case:final-response")
    assert run.isolated is True and run.result["scripted"] is True


# ------------------------------------------------------------------ 1. well-behaved cases


@pytest.mark.parametrize("case_id", case_ids())
def test_well_behaved_case_completes_and_scores_passed(case_id: str, runs: CliRuns) -> None:
    run = runs.get(f"case:{case_id}")
    assert_completed_and_passed(run, case_id, CANDIDATE)
    # The scripted model saw one conversation: the execution's opencode session.
    conversations = {entry["conversation"] for entry in run.result["modelLog"] if entry["answer"] != "side"}
    assert len(conversations) == 1 and next(iter(conversations)).startswith("thread:ses_"), run.result["modelLog"]


# ------------------------------------------------------------------ 2. misbehaving scripts


def test_every_misbehaving_script_has_an_expectation() -> None:
    assert set(MISBEHAVING_SCRIPTS) == set(MISBEHAVING_EXPECTED)


@pytest.mark.parametrize("script", MISBEHAVING_SCRIPTS)
def test_misbehaving_script_fails_exactly_its_checks(script: str, runs: CliRuns) -> None:
    _, code, expected = MISBEHAVING_EXPECTED[script]
    assert_candidate_failure(runs.get(f"misbehaving:{script}"), code, expected, CANDIDATE)


def test_forbidden_call_fails_only_control_plane_owned_and_the_hard_gate(runs: CliRuns) -> None:
    script = "cancellation-permissions--forbidden-call"
    _, code, expected = MISBEHAVING_EXPECTED[script]
    assert_forbidden_call_fails(runs.get(f"misbehaving:{script}"), code, expected, CANDIDATE)


# ------------------------------------------------------------------ 3. provider errors


def _sse(run: Any, kind: str) -> list[dict[str, Any]]:
    """The SSE events of ``kind`` in the trace (frames whose JSON has that ``type``)."""
    return [frame["json"] for frame in run.frames() if frame["json"] and frame["json"].get("type") == kind]


@pytest.mark.parametrize(("script", "code", "retryable"), PROVIDER_ERRORS, ids=[p[0] for p in PROVIDER_ERRORS])
def test_provider_error_is_an_infrastructure_failure_with_its_code(script: str, code: str, retryable: bool, runs: CliRuns) -> None:
    run = runs.get(f"provider:{script}")
    assert_provider_failure(run, code, retryable, "opencode serve")
    retries = [event["properties"]["status"] for event in _sse(run, "session.status") if event["properties"]["status"]["type"] == "retry"]
    requests = run.result["modelRequests"]
    if script in ("provider-http-503", "provider-rate-limited", "provider-quota-exhausted"):
        # opencode retries 5xx and 429 by itself (Retry-After: 0 here), five times, then fails
        # with the provider's status; evalhub counted each retry against the turn.
        assert requests == 6 and [r["attempt"] for r in retries] == [1, 2, 3, 4, 5], run.describe()
        notices = [
            record for record in run.records if record.get("kind") == "interpretation" and record["eventTypes"] == ["provider.notice"]
        ]
        assert len(notices) == 5
    elif script == "provider-stream-dropped":
        # opencode asks again after a cut stream, without end: evalhub aborts at the third cut.
        # The abort races opencode's next requests (it reaches the server a moment later, more
        # under load), so the count is bounded by what opencode reported, not by a constant: every
        # request the model served is a cut step opencode reported, bar at most one it was still
        # asking when the abort landed; one abort; and the turn ended on it, not on a timeout.
        cut_steps = {
            event["properties"]["part"]["id"]
            for event in _sse(run, "message.part.updated")
            if event["properties"]["part"].get("type") == "step-finish" and event["properties"]["part"].get("reason") == "unknown"
        }
        aborts = [frame for frame in run.frames() if frame["direction"] == "out" and re.search(r"/session/[^/ ]+/abort", frame["text"])]
        assert run.error["message"].endswith("the model's stream was cut 3 times in a row"), run.describe()
        assert len(cut_steps) >= 3 and 0 <= requests - len(cut_steps) <= 1 and len(aborts) == 1 and retries == [], run.describe()
    else:
        assert requests == 1 and retries == [], run.describe()  # 401 / 404: not retried
    assert run.result["trace"]["frameCount"] > 0 and run.records


def test_a_retry_far_away_stops_the_turn_at_once(runs: CliRuns) -> None:
    run = runs.get("provider:provider-retry-after-long")
    assert (run.error["code"], run.error["retryable"]) == ("provider_rate_limited", True), run.describe()
    away = re.search(r"the next retry was (\d+) s away", run.error["message"])
    assert away and 500 < int(away.group(1)) <= 600, run.error["message"]
    assert run.result["modelRequests"] == 1


# ------------------------------------------------------------------ 4. budget stop


def test_usage_over_a_small_token_budget_stops_the_candidate(runs: CliRuns) -> None:
    run = runs.get("budget:over")
    observation = assert_budget_exceeded(run, CANDIDATE, total_tokens=660 + 2200)
    assert "turn.interrupted" in observation["observedPrpEventTypes"]
    # The stop aborted the turn through opencode's own route.
    assert any(frame["text"].startswith("POST /session/ses_") and "/abort " in frame["text"] for frame in run.frames())


def test_usage_exactly_at_the_token_budget_is_budget_reached(runs: CliRuns) -> None:
    observation = assert_budget_reached(runs.get("budget:exact"))
    assert "run.result.accepted" not in observation["observedPrpEventTypes"]


# ------------------------------------------------------------------ 5. restart, cancel, steering


def _requests(run: Any, method: str, pattern: str) -> list[dict[str, Any]]:
    """The HTTP request frames evalhub sent whose start line is ``METHOD <path matching pattern>``."""
    start = re.compile(rf"^{method} {pattern} HTTP/1\.1\r\n")
    return [frame for frame in run.frames() if frame["direction"] == "out" and start.match(frame["text"])]


def _answer_to(run: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The first HTTP response frame after ``request`` (right for the requests these tests look at,
    which nothing else overlaps: the session, its resumes, a steer)."""
    return next(
        f for f in run.frames() if f["frameId"] > request["frameId"] and f["direction"] == "in" and f["text"].startswith("HTTP/1.1 ")
    )


def test_restart_continues_the_same_session(runs: CliRuns) -> None:
    run = runs.get("case:restart-recovery")
    observation = run.observation
    assert run.error is None and observation["classification"] == "completed", run.describe()
    created = _requests(run, "POST", "/session")
    assert len(created) == 1
    session = json.loads(_answer_to(run, created[0])["text"].split("\r\n\r\n", 1)[1])["id"]
    # Two process_restart steps (provider_turn, finalization): three servers, each answering
    # health, each resuming the one session, which every prompt continues.
    assert len(_requests(run, "GET", "/global/health")) == 3
    resumes = _requests(run, "GET", f"/session/{session}")
    assert len(resumes) == 2
    assert all(_answer_to(run, resume)["text"].startswith("HTTP/1.1 200 ") for resume in resumes)
    prompts = _requests(run, "POST", r"/session/[^ ]+/prompt_async")
    assert prompts and all(f"/session/{session}/prompt_async " in prompt["text"] for prompt in prompts)
    assert {entry["conversation"] for entry in run.result["modelLog"] if entry["answer"] != "side"} == {f"thread:{session}"}
    assert_resumed_same_session(observation)
    assert observation["lifecycle"]["runs"] == 1
    passed = {c["id"] for c in observation["continuation"]["checks"] if c["passed"]}
    assert {"single-finalization", "no-repeated-work"} <= passed


def test_cancel_aborts_the_active_turn_after_the_permission(runs: CliRuns) -> None:
    run = runs.get("case:cancellation-permissions")
    observation = run.observation
    assert run.error is None and observation["classification"] == "completed", run.describe()
    asked = _sse(run, "permission.asked")
    replies = _requests(run, "POST", r"/permission/per_[^/ ]+/reply")
    aborts = _requests(run, "POST", r"/session/ses_[^/ ]+/abort")
    assert len(asked) == 1 and asked[0]["properties"]["permission"] == "bash"
    assert len(replies) == 1 and replies[0]["text"].endswith('{"reply":"always"}')  # accept_for_session
    assert f"/permission/{asked[0]['properties']['id']}/reply " in replies[0]["text"]
    assert len(aborts) == 1 and replies[0]["frameId"] < aborts[0]["frameId"]
    idle = [
        f
        for f in run.frames()
        if f["json"] and f["json"].get("type") == "session.status" and f["json"]["properties"]["status"]["type"] == "idle"
    ]
    assert idle and idle[-1]["frameId"] > aborts[0]["frameId"]
    assert_stopped_after_permission(observation)
    assert observation["lifecycle"]["runStatus"] == "cancelled"
    assert observation["presentation"]["responseSource"] == "none"
    assert observation["base"]["observedCalls"] == []


def test_steering_lands_in_the_running_loop(runs: CliRuns) -> None:
    run = runs.get("case:steering-causality")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    # The active-turn steer is a second prompt while the session is busy, acknowledged by its 204.
    prompts = _requests(run, "POST", r"/session/[^ ]+/prompt_async")
    steers = [p for p in prompts if "Operator follow-up (steer-2)" in p["text"]]
    assert len(steers) == 1 and _answer_to(run, steers[0])["text"].startswith("HTTP/1.1 204 ")
    assert run.observation["observedPrpEventTypes"].count("turn.steering.acknowledged") == 1


# ------------------------------------------------------------------ 6. the echoed key


def test_echoed_key_and_secret_shaped_text_are_scrubbed_everywhere(runs: CliRuns) -> None:
    run = runs.get("echo")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    # The model really did say them: the trace holds the redaction marker where they were.
    said = [frame["text"] for frame in run.frames() if '"message.part.delta"' in frame["text"] or '"message.part.updated"' in frame["text"]]
    assert any("Authorization: [REDACTED]" in text for text in said)
    assert any("A token I found: [REDACTED]" in text for text in said)
    assert_secrets_left_nowhere(run, KEY, SHAPED)
    # opencode's own files (its database holds the conversation) went with the execution.
    left = list((runs.root / "echo" / "tmp").rglob("*"))
    assert left == [], left


def test_no_fragment_of_the_echoed_key_is_left_in_any_frame(runs: CliRuns) -> None:
    assert_no_key_fragment(runs.get("echo"), KEY)


# ------------------------------------------------------------------ 7. loopback only


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed: connect() calls cannot be traced")
def test_no_connection_attempt_leaves_loopback(runs: CliRuns) -> None:
    run = runs.get("strace")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    # opencode → scripted model and MCP server, evalhub → opencode, and nothing else: no registry, no models.dev, no update check.
    assert_connects_only_to_loopback((runs.root / "connect.strace").read_text())


# ------------------------------------------------------------------ a killed command


def test_sigkill_of_run_case_leaves_no_opencode_server_behind(tmp_path: Path, runs: CliRuns) -> None:
    """``kill -9`` runs no cleanup, and ``opencode serve`` (unlike a stdio runtime, which ends with
    its stdin) would serve, and spend, forever: its lifeline kills it with the command
    (runs/executors/live/drivers/lifeline.py)."""
    runs.settle()  # alone on its worker: the module's runs may still be starting beside it
    with run_case_held_by_the_model(tmp_path, CANDIDATE_ID) as (process, started, _):
        process.kill()
        process.communicate(timeout=30)
        assert_none_outlives(started)
