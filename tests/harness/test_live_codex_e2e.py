"""End-to-end: the real ``codex app-server`` against the scripted model, through the DB-free CLI.

Every run is ``python -m runs.executors.live run-case`` as a subprocess (``tests/harness/live_support.py``),
inside a loopback-only network namespace when ``unshare -n`` works here (otherwise it runs
without one and a warning in the test output says so). The model key is a fake value passed as
``OPENAI_API_KEY``. Covered: the twelve cases with their well-behaved scripts are
completed, valid and scored passed; each misbehaving script fails exactly the checks
docs/live-evaluation.md lists; provider errors give their codes and retryable flags; token budget
stops; restart-and-resume; cancel; the echoed key and secret-shaped text are scrubbed from the
result, the trace artifact and the process output; no connection leaves loopback.

Scripts for the failure scenarios live in ``tests/fixtures/live-scripts/``; the echo script, which
carries the module's random fake key, is written beside the runs. Like the opencode and ACP
modules, this one runs every execution its selected tests read at once (:class:`CliRuns`, four at
a time: a run is mostly codex starting and the scripted model's pauses) before the first test waits
for its own, and the tests that look at the same case read the same run; all of them stay on one
xdist worker (``xdist_group``: the suite runs with ``--dist loadgroup``). Skipped only when the
codex binary is missing (``npm ci`` installs it).
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.harness.live_support import (
    CODEX,
    PROVIDER_ERRORS,
    CliRuns,
    alive,
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
    describe,
    misbehaving_scripts,
    module_runs,
    random_key,
    reference_candidate,
    require_loopback_only_namespace,
    run_case_held_by_the_model,
    score,
    secret_shaped,
    submit_scenario,
)
from tests.harness.test_observe import MISBEHAVING as MISBEHAVING_TABLE

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.xdist_group("codex-e2e"),
    pytest.mark.skipif(not CODEX.exists(), reason=f"the codex runtime is not installed ({CODEX} is missing; run `npm ci`)"),
]

CANDIDATE_ID = "codex-luna"
CANDIDATE = reference_candidate(CANDIDATE_ID)
#: Runs at once: a run is codex starting (~1 s), the MCP handshake and the scripts' pauses.
WORKERS = 4
#: Seconds one run may take (a run takes 1-6 s alone, more four at a time on a loaded machine).
RUN_TIMEOUT_S = 300
KEY = random_key()
SHAPED = secret_shaped()

#: docs/live-evaluation.md §4: misbehaving script → (case, failure code, the exact failing checks);
#: the same table the fake-runtime tests use, so the real binary must fail exactly as they do.
MISBEHAVING_EXPECTED = MISBEHAVING_TABLE


def _score(observation: dict[str, Any]) -> dict[str, Any]:
    return score(observation, CANDIDATE)


def _assert_candidate_failure(run: Any, code: str, expected: set[str]) -> dict[str, Any]:
    return assert_candidate_failure(run, code, expected, CANDIDATE)


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
        "test_usage_over_a_small_token_budget_stops_the_candidate": ["budget:over"],
        "test_usage_exactly_at_the_token_budget_is_budget_reached": ["budget:exact"],
        "test_restart_resumes_the_same_thread": ["case:restart-recovery"],
        "test_cancel_interrupts_the_active_turn": ["case:cancellation-permissions"],
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
    """The restarts, the budget scripts (which wait on the model) and the traced run first, then the rest."""
    return not name.startswith(("case:restart", "budget", "strace")), name


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Every run the selected tests of this module read, started at once."""
    root = tmp_path_factory.mktemp("codex-e2e")
    yield from module_runs(request, root, runs_of=_runs_of, submit=_submit, workers=WORKERS, order=_slowest_first)


# ------------------------------------------------------------------ isolation


def test_runs_are_isolated_in_a_loopback_only_namespace(runs: CliRuns) -> None:
    require_loopback_only_namespace()
    run = runs.get("case:final-response")
    assert run.isolated is True
    assert run.result["scripted"] is True


# ------------------------------------------------------------------ 1. well-behaved cases


@pytest.mark.parametrize("case_id", case_ids())
def test_well_behaved_case_completes_and_scores_passed(case_id: str, runs: CliRuns) -> None:
    run = runs.get(f"case:{case_id}")
    assert_completed_and_passed(run, case_id, CANDIDATE)
    # Against the scripted model the observation says so itself: a fixture, never a live model.
    assert run.observation["base"]["provenance"] == {"source": "fixture", "behavior": f"scripted-model:{case_id}"}
    # Every stored protocol frame (stdio in and out) is JSON, as the runtime wrote it.
    assert [frame["frameId"] for frame in run.frames() if frame["direction"] != "stderr" and frame["json"] is None] == []


# ------------------------------------------------------------------ 2. misbehaving scripts


def test_every_misbehaving_script_has_an_expectation() -> None:
    assert set(misbehaving_scripts()) == set(MISBEHAVING_EXPECTED)


@pytest.mark.parametrize("script", misbehaving_scripts())
def test_misbehaving_script_fails_exactly_its_checks(script: str, runs: CliRuns) -> None:
    _, code, expected = MISBEHAVING_EXPECTED[script]
    _assert_candidate_failure(runs.get(f"misbehaving:{script}"), code, expected)


def test_forbidden_call_fails_only_control_plane_owned_and_the_hard_gate(runs: CliRuns) -> None:
    script = "cancellation-permissions--forbidden-call"
    _, code, expected = MISBEHAVING_EXPECTED[script]
    assert_forbidden_call_fails(runs.get(f"misbehaving:{script}"), code, expected, CANDIDATE)


# ------------------------------------------------------------------ 3. provider errors


@pytest.mark.parametrize(("script", "code", "retryable"), PROVIDER_ERRORS, ids=[p[0] for p in PROVIDER_ERRORS])
def test_provider_error_is_an_infrastructure_failure_with_its_code(script: str, code: str, retryable: bool, runs: CliRuns) -> None:
    run = runs.get(f"provider:{script}")
    assert_provider_failure(run, code, retryable, "codex app-server")
    # codex is configured not to retry on its own: one model request, the retry is the executor's.
    assert run.result["modelRequests"] == 1, run.describe()
    # The artifact of the failed execution is still written.
    assert run.result["trace"]["frameCount"] > 0 and run.records


# ------------------------------------------------------------------ 4. budget stop


def test_usage_over_a_small_token_budget_stops_the_candidate(runs: CliRuns) -> None:
    run = runs.get("budget:over")
    observation = assert_budget_exceeded(run, CANDIDATE, total_tokens=660 + 2200)
    assert "turn.interrupted" in observation["observedPrpEventTypes"]


def test_usage_exactly_at_the_token_budget_is_budget_reached(runs: CliRuns) -> None:
    observation = assert_budget_reached(runs.get("budget:exact"))
    # The stop interrupted the turn before the result: no second model answer was used for work.
    assert "run.result.accepted" not in observation["observedPrpEventTypes"]
    assert _score(observation)["overall"]["passed"] is False


# ------------------------------------------------------------------ 5. restart and cancel


def _methods(frames: list[dict[str, Any]], direction: str, method: str) -> list[dict[str, Any]]:
    """The trace frames of ``direction`` that are JSON-RPC messages of ``method``."""
    return [frame for frame in frames if frame["direction"] == direction and frame["json"] and frame["json"].get("method") == method]


def _responses(frames: list[dict[str, Any]], direction: str, ids: set[Any]) -> list[dict[str, Any]]:
    """The trace frames of ``direction`` that answer (``result``) one of the request ``ids``."""
    return [
        frame
        for frame in frames
        if frame["direction"] == direction
        and frame["json"]
        and frame["json"].get("id") in ids
        and "method" not in frame["json"]
        and "result" in frame["json"]
    ]


def test_restart_resumes_the_same_thread(runs: CliRuns) -> None:
    run = runs.get("case:restart-recovery")
    observation = run.observation
    assert run.error is None and observation["classification"] == "completed", run.describe()

    frames = run.frames()
    starts = _methods(frames, "out", "thread/start")
    resumes = _methods(frames, "out", "thread/resume")
    initializes = _methods(frames, "out", "initialize")
    assert len(starts) == 1
    # Two process_restart steps (provider_turn, finalization): two new processes, two resumes.
    assert len(resumes) == 2 and len(initializes) == 3
    thread_id = _methods(frames, "in", "thread/started")[0]["json"]["params"]["thread"]["id"]
    assert all(resume["json"]["params"]["threadId"] == thread_id for resume in resumes)
    # Each resume was answered with the same thread, after the process it belongs to started.
    for resume in resumes:
        answers = [
            answer
            for answer in _responses(frames, "in", {resume["json"]["id"]})
            if answer["frameId"] > resume["frameId"] and "thread" in answer["json"]["result"]
        ]
        assert answers and answers[0]["json"]["result"]["thread"]["id"] == thread_id
        assert any(init["frameId"] < resume["frameId"] for init in initializes[1:])
    # Every turn, before and after the restarts, ran in that thread.
    assert all(turn["json"]["params"]["threadId"] == thread_id for turn in _methods(frames, "out", "turn/start"))
    # The scripted model saw one conversation: the thread's.
    assert {entry["conversation"] for entry in run.result["modelLog"]} == {f"thread:{thread_id}"}

    assert_resumed_same_session(observation)
    assert observation["lifecycle"]["runs"] == 1
    passed = {c["id"] for c in observation["continuation"]["checks"] if c["passed"]}
    assert {"single-finalization", "no-repeated-work"} <= passed
    interpreted = {t for record in run.records if record.get("kind") == "interpretation" for t in record["eventTypes"]}
    assert "session.resumed" in interpreted


def test_cancel_interrupts_the_active_turn(runs: CliRuns) -> None:
    run = runs.get("case:cancellation-permissions")
    observation = run.observation
    assert run.error is None and observation["classification"] == "completed", run.describe()

    frames = run.frames()
    turns = _methods(frames, "in", "turn/started")
    assert len(turns) == 1
    turn_id = turns[0]["json"]["params"]["turn"]["id"]
    approvals = _methods(frames, "in", "item/commandExecution/requestApproval")
    interrupts = _methods(frames, "out", "turn/interrupt")
    assert len(approvals) == 1 and len(interrupts) == 1
    assert interrupts[0]["json"]["params"]["turnId"] == turn_id
    answers = _responses(frames, "out", {approvals[0]["json"]["id"]})
    assert len(answers) == 1 and answers[0]["json"]["result"] == {"decision": "acceptForSession"}
    completed = [c for c in _methods(frames, "in", "turn/completed") if c["json"]["params"]["turn"]["id"] == turn_id]
    assert len(completed) == 1 and completed[0]["json"]["params"]["turn"]["status"] == "interrupted"
    # permission answered → interrupt sent → turn reported interrupted, in that order.
    assert answers[0]["frameId"] < interrupts[0]["frameId"] < completed[0]["frameId"]

    assert_stopped_after_permission(observation)
    assert observation["lifecycle"]["runStatus"] == "cancelled"
    assert observation["presentation"]["responseSource"] == "none"
    assert observation["base"]["observedCalls"] == []  # no control-plane call at all


# ------------------------------------------------------------------ 6. the echoed key


def test_echoed_key_and_secret_shaped_text_are_scrubbed_everywhere(runs: CliRuns) -> None:
    run, key, shaped = runs.get("echo"), KEY, SHAPED
    assert run.error is None, run.describe()
    assert run.observation["classification"] == "completed", run.describe()
    frames = run.frames()
    # The model really did say them: the trace holds the redaction marker where they were.
    # The model really did say them: the trace holds the redaction marker where they were. The
    # key streams in two deltas (neither holds a whole token), so the completed message is where
    # "Authorization: [REDACTED]" reads whole; each delta has its piece of the key redacted.
    said = [frame["text"] for frame in frames if "agentMessage" in frame["text"]]
    assert any("Authorization: [REDACTED]" in text for text in said)
    assert any("A token I found: [REDACTED]" in text for text in said)
    # Scrubbing replaced the secrets and nothing else: every protocol frame is still JSON.
    assert [frame["frameId"] for frame in frames if frame["direction"] != "stderr" and frame["json"] is None] == []
    messages = [
        frame["json"]["params"]["item"]["text"]
        for frame in frames
        if frame["json"] and frame["json"].get("method") == "item/completed" and frame["json"]["params"]["item"]["type"] == "agentMessage"
    ]
    assert "Authorization: [REDACTED]" in messages
    deltas = "".join(
        frame["json"]["params"]["delta"] for frame in frames if frame["json"] and frame["json"].get("method") == "item/agentMessage/delta"
    )
    assert "Authorization: Bearer [REDACTED][REDACTED]" in deltas
    assert_secrets_left_nowhere(run, key, shaped)


def test_no_fragment_of_the_echoed_key_is_left_in_any_frame(runs: CliRuns) -> None:
    run, key = runs.get("echo"), KEY
    assert run.error is None, run.describe()
    assert_no_key_fragment(run, key)


# ------------------------------------------------------------------ 7. loopback only


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed: connect() calls cannot be traced")
def test_no_connection_attempt_leaves_loopback(runs: CliRuns) -> None:
    run = runs.get("strace")
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    # codex → scripted model and codex → MCP server, and nothing else.
    assert_connects_only_to_loopback((runs.root / "connect.strace").read_text())


def test_sigterm_to_run_case_kills_the_runtime_and_writes_an_interrupted_result(tmp_path: Path, runs: CliRuns) -> None:
    """``kill <pid>`` of ``run-case`` while codex waits on a model that answers in a minute: the
    command exits 130 with an ``interrupted`` result and no traceback, and no process it started
    (codex runs in a process group of its own) outlives it."""
    runs.settle()  # alone on its worker: the module's runs may still be starting beside it
    with run_case_held_by_the_model(tmp_path) as (process, started, out):
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr
        result = json.loads(out.read_text())
        assert result["error"]["code"] == "interrupted" and result["observation"] is None, result["error"]
        survivors = {pid: describe(pid) for pid in started if alive(pid)}
        assert not survivors, f"processes outlived run-case: {survivors}"


def test_sigkill_of_run_case_leaves_no_runtime_behind(tmp_path: Path, runs: CliRuns) -> None:
    """``kill -9`` runs no cleanup at all, yet codex and its helpers die with the command: codex
    ends with its stdin, and its lifeline (runs/executors/live/drivers/lifeline.py) would kill its
    group if it did not. Nothing keeps running, and spending, unowned."""
    runs.settle()  # alone on its worker: the module's runs may still be starting beside it
    with run_case_held_by_the_model(tmp_path) as (process, started, _):
        process.kill()
        process.communicate(timeout=30)
        assert_none_outlives(started)
