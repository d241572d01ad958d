"""End-to-end: the real ``codex app-server`` against the scripted model, through the DB-free CLI.

Every test runs ``python -m runs.harness run-case`` as a subprocess (``tests/live_support.py``),
inside a loopback-only network namespace when ``unshare -n`` works here (otherwise it runs
without one and a warning in the test output says so). The model key is a fake value passed as
``OPENAI_API_KEY``. Covered (issue 4 §7): the twelve cases with their well-behaved scripts are
completed, valid and scored passed; each misbehaving script fails exactly the checks
docs/live-evaluation.md lists; provider errors give their codes and retryable flags; token budget
stops; restart-and-resume; cancel; the echoed key and secret-shaped text are scrubbed from the
result, the trace artifact and the process output; no connection leaves loopback.

Scripts for the failure scenarios live in ``tests/fixtures/live-scripts/``; scripts that must carry
a per-test random fake key are written to ``tmp_path``. Skipped only when the codex binary is
missing (``npm ci`` installs it).
"""

from __future__ import annotations

import json
import secrets
import shutil
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runs.observation_schema import validate_observation
from runs.scoring import score_observation
from tests.live_support import (
    CODEX,
    LIVE_SCRIPTS,
    MISBEHAVING,
    bundle_id,
    case_ids,
    failing_checks,
    inet_connects,
    is_loopback,
    is_subsequence,
    key_fragments,
    namespace_available,
    run_cli,
    trace_expectations,
)
from tests.test_observe import MISBEHAVING as MISBEHAVING_TABLE

pytestmark = pytest.mark.skipif(
    not CODEX.exists(), reason=f"the codex runtime is not installed ({CODEX} is missing; run `npm ci`)"
)

#: A price that makes the over-budget script's cost exceed codex-luna's maxCostUsd (1.5): a scripted
#: model otherwise bills a known $0, so the cost limit could never fail (USD per million tokens).
PRICE = {"input": 2, "cachedInput": 0.2, "output": 8, "reasoning": 8}

#: docs/live-evaluation.md §4: misbehaving script → (case, failure code, the exact failing checks);
#: the same table the fake-runtime tests use, so the real binary must fail exactly as they do.
MISBEHAVING_EXPECTED = MISBEHAVING_TABLE

def _misbehaving_params() -> list[Any]:
    params = []
    for path in sorted(MISBEHAVING.glob("*.json")):
        params.append(pytest.param(path.stem, id=path.stem))
    return params


def _score(observation: dict[str, Any]) -> dict[str, Any]:
    return score_observation(observation, {"bundleId": bundle_id()}, trace_expectations=trace_expectations())


def _assert_candidate_failure(run: Any, code: str, expected: set[str]) -> dict[str, Any]:
    observation = run.observation
    assert run.error is None, run.describe()
    assert validate_observation(observation) == []
    assert failing_checks(observation) == expected, run.describe()
    assert observation["classification"] == "candidate_failure"
    failure = observation["failure"]
    assert (failure["code"], failure["category"], failure["retryable"]) == (code, "candidate", False)
    for check in expected:
        assert check in failure["message"]
    scorecard = _score(observation)
    assert scorecard["overall"] == {"score": 0, "gatePassed": False, "passed": False}
    return scorecard


# ------------------------------------------------------------------ isolation


def test_runs_are_isolated_in_a_loopback_only_namespace(tmp_path: Path) -> None:
    if not namespace_available():
        pytest.skip("unshare -n is not available here: every live run in this file runs WITHOUT a network namespace")
    links = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up; ip -o link"], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split(":")[1].strip() for line in links.splitlines() if line.strip()}
    assert names == {"lo"}, links
    run = run_cli("final-response", tmp_path)
    assert run.isolated is True
    assert run.result["scripted"] is True


# ------------------------------------------------------------------ 1. well-behaved cases


@pytest.mark.parametrize("case_id", case_ids())
def test_well_behaved_case_completes_and_scores_passed(case_id: str, tmp_path: Path) -> None:
    run = run_cli(case_id, tmp_path)
    observation = run.observation
    assert run.error is None, run.describe()
    assert run.result["scripted"] is True and run.result["caseId"] == case_id
    assert observation["classification"] == "completed", run.describe()
    assert failing_checks(observation) == set()
    assert validate_observation(observation) == []
    scorecard = _score(observation)
    reasons = {name: d["reasons"] for name, d in scorecard["dimensions"].items() if not d["passed"]}
    assert scorecard["overall"]["passed"] is True, reasons
    assert scorecard["overall"]["score"] == 1
    assert scorecard["bundleId"].startswith("runner-live-v2-")
    # The real trace was captured and verified, and the artifact matches what the observation says.
    lineage = observation["traceLineage"]
    assert lineage["capture"] == "on" and lineage["digestVerified"] is True and lineage["ordered"] is True
    assert run.result["trace"]["digest"] == lineage["traceRef"]
    assert run.result["trace"]["frameCount"] == len(run.frames()) == lineage["frameCount"]
    assert run.result["trace"]["truncated"] is False


# ------------------------------------------------------------------ 2. misbehaving scripts


def test_every_misbehaving_script_has_an_expectation() -> None:
    assert {path.stem for path in MISBEHAVING.glob("*.json")} == set(MISBEHAVING_EXPECTED)


@pytest.mark.parametrize("script", _misbehaving_params())
def test_misbehaving_script_fails_exactly_its_checks(script: str, tmp_path: Path) -> None:
    case_id, code, expected = MISBEHAVING_EXPECTED[script]
    price = PRICE if script == "final-response--over-budget" else None
    run = run_cli(case_id, tmp_path, scripts=MISBEHAVING, script=script, price=price)
    _assert_candidate_failure(run, code, expected)


def test_forbidden_call_fails_only_control_plane_owned_and_the_hard_gate(
    tmp_path: Path,
) -> None:
    script = "cancellation-permissions--forbidden-call"
    case_id, code, expected = MISBEHAVING_EXPECTED[script]
    run = run_cli(case_id, tmp_path, scripts=MISBEHAVING, script=script)
    scorecard = _assert_candidate_failure(run, code, expected)
    assert scorecard["dimensions"]["hard_invariants"]["passed"] is False
    # The approval was asked and answered, and the cancel still stopped the turn.
    assert {"runtime_request.resolved", "turn.interrupted"} <= set(run.observation["observedPrpEventTypes"])


# ------------------------------------------------------------------ 3. provider errors

PROVIDER_ERRORS = [
    ("provider-http-503", "provider_http_503", True),
    ("provider-rate-limited", "provider_rate_limited", True),
    ("provider-stream-dropped", "provider_stream_dropped", True),
    ("provider-quota-exhausted", "provider_quota_exhausted", False),
    ("provider-auth-refused", "provider_auth_refused", False),
    ("provider-unknown-model", "provider_unknown_model", False),
]


@pytest.mark.parametrize(("script", "code", "retryable"), PROVIDER_ERRORS, ids=[p[0] for p in PROVIDER_ERRORS])
def test_provider_error_is_an_infrastructure_failure_with_its_code(
    script: str, code: str, retryable: bool, tmp_path: Path
) -> None:
    run = run_cli("final-response", tmp_path, scripts=LIVE_SCRIPTS, script=script)
    assert run.observation is None, run.describe()
    assert run.error is not None, run.describe()
    assert (run.error["code"], run.error["retryable"]) == (code, retryable), run.describe()
    assert run.error["message"].startswith("codex app-server: the model provider failed: ")
    # codex is configured not to retry on its own: one model request, the retry is the executor's.
    assert run.result["modelRequests"] == 1, run.describe()
    # The artifact of the failed execution is still written.
    assert run.result["trace"]["frameCount"] > 0 and run.records


# ------------------------------------------------------------------ 4. budget stop


def test_usage_over_a_small_token_budget_stops_the_candidate(tmp_path: Path) -> None:
    run = run_cli(
        "final-response", tmp_path, scripts=LIVE_SCRIPTS, script="budget-over", budget={"maxTotalTokens": 1000}
    )
    expected = {
        "lifecycle/token-budget",
        "lifecycle/candidate-budget-stop",
        "lifecycle/terminal-authority",
        "presentation/terminal-presentation",
    }
    _assert_candidate_failure(run, "candidate_budget_exceeded", expected)
    observation = run.observation
    assert observation["metrics"]["totalTokens"] == 660 + 2200
    assert observation["base"]["budget"]["maxTotalTokens"] == 1000
    assert observation["failure"]["message"].startswith(
        "candidate_budget_exceeded: candidate reported usage budget stop: total tokens 2860"
    )
    assert "turn.interrupted" in observation["observedPrpEventTypes"]


def test_usage_exactly_at_the_token_budget_is_budget_reached(tmp_path: Path) -> None:
    run = run_cli(
        "final-response", tmp_path, scripts=LIVE_SCRIPTS, script="budget-exact", budget={"maxTotalTokens": 1000}
    )
    observation = run.observation
    assert run.error is None, run.describe()
    assert validate_observation(observation) == []
    assert observation["metrics"]["totalTokens"] == 1000
    assert observation["classification"] == "candidate_failure"
    assert observation["failure"]["code"] == "candidate_budget_reached", run.describe()
    failed = failing_checks(observation)
    assert "lifecycle/candidate-budget-stop" in failed
    assert "lifecycle/token-budget" not in failed  # at the limit, not above it
    # The stop interrupted the turn before the result: no second model answer was used for work.
    assert "run.result.accepted" not in observation["observedPrpEventTypes"]
    assert _score(observation)["overall"]["passed"] is False


# ------------------------------------------------------------------ 5. restart and cancel


def _methods(frames: list[dict[str, Any]], direction: str, method: str) -> list[dict[str, Any]]:
    """The trace frames of ``direction`` that are JSON-RPC messages of ``method``."""
    return [
        frame
        for frame in frames
        if frame["direction"] == direction and frame["json"] and frame["json"].get("method") == method
    ]


def _responses(frames: list[dict[str, Any]], direction: str, ids: set[Any]) -> list[dict[str, Any]]:
    """The trace frames of ``direction`` that answer (``result``) one of the request ``ids``."""
    return [
        frame
        for frame in frames
        if frame["direction"] == direction and frame["json"] and frame["json"].get("id") in ids
        and "method" not in frame["json"] and "result" in frame["json"]
    ]


def test_restart_resumes_the_same_thread(tmp_path: Path) -> None:
    run = run_cli("restart-recovery", tmp_path)
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

    events = observation["observedPrpEventTypes"]
    assert {"process.restarted", "session.resumed"} <= set(events)
    assert observation["lifecycle"]["runs"] == 1
    assert observation["continuation"]["sessionPolicy"] == "same_session"
    assert observation["base"]["observedCalls"].count("finish_task") == 1
    passed = {c["id"] for c in observation["continuation"]["checks"] if c["passed"]}
    assert {"single-finalization", "no-repeated-work"} <= passed
    interpreted = {t for record in run.records if record.get("kind") == "interpretation" for t in record["eventTypes"]}
    assert "session.resumed" in interpreted


def test_cancel_interrupts_the_active_turn(tmp_path: Path) -> None:
    run = run_cli("cancellation-permissions", tmp_path)
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

    assert observation["lifecycle"]["issueStatus"] == "cancelled"
    assert observation["lifecycle"]["runStatus"] == "cancelled"
    assert observation["presentation"]["terminalLabel"] == "Stopped"
    assert observation["presentation"]["responseSource"] == "none"
    assert {"run.cancel.requested", "turn.interrupted", "runtime_request.resolved"} <= set(
        observation["observedPrpEventTypes"]
    )
    assert is_subsequence(["permission", "activity", "stopped"], observation["presentation"]["orderedMarkers"])
    assert observation["base"]["observedCalls"] == []  # no control-plane call at all


# ------------------------------------------------------------------ 6. the echoed key


def _random_key() -> str:
    return "sk-test-echo-" + secrets.token_hex(12)


def _secret_shaped() -> str:
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


def _echo_script(directory: Path, shaped: str) -> None:
    # The secret-shaped text sits in the first 200 characters of a >400-character message, so the
    # scripted model streams it whole inside one delta.
    padding = "Here is everything I found while checking the task board, " * 8
    text = f"A token I found: {shaped} — " + padding
    usage = {"input": 800, "cachedInput": 200, "output": 60, "reasoning": 0}
    finish = {"call": "finish_task", "arguments": {"summary": "Answered task-1.", "disposition": "done"}}
    script = {
        "name": "echo-key",
        "description": "Says the received bearer key back, and a secret-shaped token, then finishes.",
        "steps": [
            {"outputs": [{"echoKey": True}, {"call": "get_task_context", "arguments": {}}], "usage": usage},
            {"outputs": [{"say": text}, {"echoKey": True}], "usage": usage},
            {"outputs": [finish], "usage": usage},
            {"outputs": [{"say": "Done."}], "usage": usage},
        ],
    }
    (directory / "echo-key.json").write_text(json.dumps(script))


def _echo_run(tmp_path: Path) -> tuple[Any, str, str]:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    key, shaped = _random_key(), _secret_shaped()
    _echo_script(scripts, shaped)
    run = run_cli("final-response", tmp_path, scripts=scripts, script="echo-key", key=key)
    return run, key, shaped


def test_echoed_key_and_secret_shaped_text_are_scrubbed_everywhere(tmp_path: Path) -> None:
    run, key, shaped = _echo_run(tmp_path)
    assert run.error is None, run.describe()
    assert run.observation["classification"] == "completed", run.describe()
    frames = run.frames()
    # The model really did say them: the trace holds the redaction marker where they were.
    said = [frame["text"] for frame in frames if "item/agentMessage/delta" in frame["text"]]
    assert any("Authorization: [REDACTED]" in text for text in said)
    assert any("A token I found: [REDACTED]" in text for text in said)
    places = {
        "result JSON": run.result_text,
        "trace artifact (decompressed)": "\n".join(json.dumps(record) for record in run.records),
        "stdout": run.stdout,
        "stderr": run.stderr,
    }
    places.update({f"trace frame {frame['frameId']} (decoded)": frame["text"] for frame in frames})
    for secret, label in ((key, "the fake key"), (shaped, "a secret-shaped token")):
        leaks = [place for place, text in places.items() if secret in text]
        assert leaks == [], f"{label} left in: {leaks}"
    assert run.trace_bytes and key.encode() not in run.trace_bytes


def test_no_fragment_of_the_echoed_key_is_left_in_any_frame(tmp_path: Path) -> None:
    run, key, _ = _echo_run(tmp_path)
    assert run.error is None, run.describe()
    fragments = key_fragments(key, 10)
    leaks = sorted(
        {frame["frameId"] for frame in run.frames() if any(fragment in frame["text"] for fragment in fragments)}
    )
    assert leaks == [], f"frames holding 10+ characters of the key: {leaks}"


# ------------------------------------------------------------------ 7. loopback only


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed: connect() calls cannot be traced")
def test_no_connection_attempt_leaves_loopback(tmp_path: Path) -> None:
    log = tmp_path / "connect.strace"
    prefix = ["strace", "-f", "-qq", "-e", "trace=connect", "-e", "signal=none", "-o", str(log)]
    run = run_cli("final-response", tmp_path, prefix=prefix)
    assert run.error is None and run.observation["classification"] == "completed", run.describe()
    connects = inet_connects(log.read_text())
    # The codex → scripted model and codex → MCP server connections were seen (strace works) ...
    assert any(family == "AF_INET" and is_loopback(address) for family, address in connects), connects
    # ... and none went anywhere but loopback.
    outside = sorted({(family, address) for family, address in connects if not is_loopback(address)})
    assert outside == [], f"non-loopback connect() attempts: {outside}"
