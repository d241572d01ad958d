"""Evidence → observation: misbehaving agents fail exactly the checks they should, and the
derivations (markers, response source, recovery owner, activity families) follow the table in
docs/live-evaluation.md."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from runs.evaluation.observation_schema import validate_observation
from runs.evaluation.scoring import score_observation
from runs.executors.live.contracts import CanonicalEvent
from runs.executors.live.observe import (
    activity_families,
    is_subsequence,
    observe,
    presentation_markers,
    recovery_owner,
    response_source,
)
from tests.harness.test_case_driver import BUDGET, TRACE, failing, play

pytestmark = pytest.mark.database_free

MISBEHAVING = {
    # never calls finish_task, even after the one reminder turn
    "final-response--never-finishes": (
        "final-response",
        "candidate_never_finished",
        {
            "lifecycle/semantic-disposition",
            "lifecycle/issue-status",
            "lifecycle/run-status",
            "lifecycle/semantic-disposition-value",
            "lifecycle/required-prp-events",
            "continuation/required-calls",
            "presentation/comment-count",
            "presentation/response-source",
        },
    ),
    # a mutating call the case does not expect
    "final-response--extra-call": ("final-response", "candidate_checks_failed", {"continuation/trajectory-restraint"}),
    # a blank summary comment and a blank final message
    "final-response--empty-final-comment": ("final-response", "candidate_checks_failed", {"presentation/no-empty-comment"}),
    # finish_task replayed with the same idempotency key
    "final-response--duplicate-finish": ("final-response", "candidate_checks_failed", {"continuation/no-repeated-work"}),
    # usage far above maxTotalTokens (and the cost limit): stopped, budget verdict
    "final-response--over-budget": (
        "final-response",
        "candidate_budget_exceeded",
        {
            "lifecycle/token-budget",
            "lifecycle/cost-budget",
            "lifecycle/candidate-budget-stop",
            "lifecycle/terminal-authority",
            "presentation/terminal-presentation",
        },
    ),
    # any call in a case that leaves every operation to the control plane
    "cancellation-permissions--forbidden-call": (
        "cancellation-permissions",
        "candidate_checks_failed",
        {"continuation/control-plane-owned"},
    ),
}


@pytest.mark.parametrize("script", list(MISBEHAVING))
def test_misbehaving_script_fails_exactly_its_checks(script: str) -> None:
    case_id, code, expected = MISBEHAVING[script]
    evidence, _ = play(case_id, script)
    observation = observe(evidence)
    assert validate_observation(observation) == []
    assert failing(observation) == expected
    assert observation["classification"] == "candidate_failure"
    failure = observation["failure"]
    assert failure["code"] == code and failure["category"] == "candidate" and failure["retryable"] is False
    for check in expected:
        assert check in failure["message"]
    scorecard = score_observation(observation, {"bundleId": "b"})
    assert scorecard["overall"] == {"score": 0, "gatePassed": False, "passed": False}


def test_a_forbidden_call_also_fails_the_hard_gate() -> None:
    evidence, _ = play("cancellation-permissions", "cancellation-permissions--forbidden-call")
    scorecard = score_observation(observe(evidence), {"bundleId": "b"})
    assert scorecard["dimensions"]["hard_invariants"]["passed"] is False


def test_over_budget_message_quotes_the_recorded_stop() -> None:
    evidence, _ = play("final-response", "final-response--over-budget")
    message = observe(evidence)["failure"]["message"]
    assert message.startswith("candidate_budget_exceeded: candidate reported usage budget stop: total tokens ")


# ------------------------------------------------------------------ fields and metrics


def test_observation_fields_of_a_completed_execution() -> None:
    evidence, _ = play("final-response", "final-response")
    observation = observe(evidence)
    assert observation["lifecycle"]["issueStatus"] == "done"
    assert observation["lifecycle"]["runStatus"] == "succeeded"
    assert observation["lifecycle"]["semanticDisposition"] == "done"
    assert observation["lifecycle"]["runs"] == 1 and observation["lifecycle"]["recoveryOwner"] == "none"
    assert observation["presentation"]["responseSource"] == "final_agent_message"
    assert observation["presentation"]["commentCount"] == 1
    assert observation["presentation"]["terminalLabel"] == "Completed"
    assert observation["traceLineage"] == TRACE
    metrics = observation["metrics"]
    assert metrics["toolCount"] == 2 and metrics["attempts"] == 1
    assert metrics["totalTokens"] == evidence.usage.total > 0
    assert metrics["costUsd"] > 0
    assert 0 <= metrics["timeToFirstVisibleProgressMs"] <= metrics["settlementMs"]
    base = observation["base"]
    assert base["observedCalls"] == ["finish_task"]  # reads are not scorable unless expected
    assert base["trace"]["receiptIds"] == ["rcpt-1", "rcpt-2"]
    assert base["trace"]["itemId"] == "rcpt-1" and base["trace"]["sessionId"] == "eval-rwe-test"
    assert base["budget"] == BUDGET


def test_unknown_cost_is_omitted_and_never_zero() -> None:
    evidence, _ = play("trace-lineage", "trace-lineage", price=None)
    observation = observe(evidence)
    assert "costUsd" not in observation["metrics"] and "costUsd" not in observation["base"]["efficiency"]
    cost = next(c for c in observation["lifecycle"]["checks"] if c["id"] == "cost-budget")
    assert cost["passed"] is True and "cost unknown" in cost["reason"]
    # the reference's quality_efficiency counts an unobserved cost as a miss
    scorecard = score_observation(observation, {"bundleId": "b"})
    assert scorecard["dimensions"]["quality_efficiency"]["reasons"] == ["no observed costUsd to check against budget"]


def test_trace_expectations_fail_without_a_verified_trace() -> None:
    evidence, _ = play("trace-lineage", "trace-lineage", trace={**TRACE, "digestVerified": False, "lineage": ["one_to_one"]})
    observation = observe(evidence)
    assert failing(observation) == {"presentation/trace-expectations"}
    check = next(c for c in observation["presentation"]["checks"] if c["id"] == "trace-expectations")
    assert check["reason"] == "frame digests did not verify; lineage kinds not exercised: one_to_many, many_to_one"


def test_cancelled_execution_presents_a_placeholder_and_stops() -> None:
    evidence, _ = play("cancellation-permissions", "cancellation-permissions")
    observation = observe(evidence)
    assert observation["presentation"]["responseSource"] == "none"
    assert observation["presentation"]["terminalLabel"] == "Stopped"
    assert observation["base"]["controlPlaneOwned"] is True
    assert observation["base"]["authorization"] == {"expected": "absent", "observed": "absent"}
    assert observation["base"]["finalState"] == {"expected": "unchanged", "observed": "unchanged"}
    assert observation["base"]["trace"]["itemId"] == "item-1"  # the first runtime item: no tool call was made


def test_checks_only_for_declared_assertions() -> None:
    evidence, _ = play("trace-lineage", "trace-lineage")
    ids = {c["id"] for group in ("lifecycle", "continuation", "presentation") for c in observe(evidence)[group]["checks"]}
    assert {"comment-count", "response-source", "ordered-markers", "max-runs", "recovery-owner"}.isdisjoint(ids)
    assert {"issue-status", "run-status", "semantic-disposition-value", "trace-expectations"} <= ids


# ------------------------------------------------------------------ derivations


def _events(*specs: tuple[str, dict[str, Any]] | str) -> list[CanonicalEvent]:
    events = []
    for n, spec in enumerate(specs, 1):
        type_, data = (spec, {}) if isinstance(spec, str) else spec
        source = (
            "harness"
            if type_.startswith(("run.started", "run.presentation", "review.", "interaction.resolved", "turn.steering.delivered"))
            else "runtime"
        )
        events.append(CanonicalEvent(id=f"evt-{n}", type=type_, source=source, at_ms=n, data=data))
    return events


def test_markers_for_a_review_cycle() -> None:
    events = _events(
        ("run.started", {"runId": "run-1", "wakeReason": "start"}),
        ("interaction.requested", {"kind": "confirmation"}),
        ("review.rejected", {}),
        ("run.started", {"runId": "run-2", "wakeReason": "review_rejected"}),
        ("item.completed", {"text": "Re-checking only."}),
        ("run.result.accepted", {"receiptId": "rcpt-3", "disposition": "needs_review"}),
        ("review.approved", {"target": "completion"}),
        ("run.presentation.resolved", {"responseSource": "semantic_result_summary"}),
    )
    markers = presentation_markers(events, {"runResult": {"receiptId": "rcpt-3", "verifications": []}})
    assert markers == [
        "review",
        "rejection",
        "continuation",
        "commentary",
        "verification-only",
        "replacement-review",
        "same-issue",
        "parent-final",
        "acceptance",
        "approval",
        "final",
    ]


def test_a_plan_change_after_rejection_is_not_verification_only() -> None:
    events = _events(
        ("review.rejected", {}),
        ("plan.updated", {"revision": 2}),
        ("interaction.requested", {"kind": "confirmation"}),
    )
    assert presentation_markers(events, {}) == ["rejection", "plan-v2", "replacement-review"]


def test_steering_markers_split_output_around_the_first_delivery() -> None:
    events = _events(
        ("item.completed", {"text": "draft"}),
        ("turn.steering.delivered", {"steerId": "steer-1"}),
        ("item.completed", {"text": "bullets"}),
    )
    assert presentation_markers(events, {}) == ["pre-steer", "commentary", "steering", "post-steer", "commentary"]


def test_blank_text_is_not_commentary() -> None:
    assert presentation_markers(_events(("item.completed", {"text": "  "})), {}) == []


def test_response_source_rules() -> None:
    long = "x" * 300
    result = {"runId": "run-1", "summary": "short summary"}
    run1 = ("run.started", {"runId": "run-1", "wakeReason": "start"})
    board = {"tasks": [{"id": "task-1", "status": "done"}], "runResult": result}
    assert response_source(_events(run1, ("item.completed", {"text": long})), board) == "final_agent_message"
    assert response_source(_events(run1, ("item.completed", {"text": "ok"})), board) == "semantic_result_summary"
    run2 = ("run.started", {"runId": "run-2", "wakeReason": "steer"})
    assert response_source(_events(run1, run2, ("item.completed", {"text": long})), board) == "existing_issue_comment"
    no_result = {"tasks": [{"id": "task-1", "status": "in_progress"}], "runResult": None}
    assert response_source(_events(run1, ("item.completed", {"text": "partial"})), no_result) == "adapter_final"
    assert response_source(_events(run1), no_result) == "none"
    cancelled = {"tasks": [{"id": "task-1", "status": "cancelled"}], "runResult": None}
    assert response_source(_events(run1, ("item.completed", {"text": "bye"})), cancelled) == "none"


@pytest.mark.parametrize(
    ("board", "owner"),
    [
        ({"interactions": [{"status": "pending"}], "tasks": [{"id": "task-1", "status": "in_progress"}]}, "human"),
        ({"runResult": {"disposition": "needs_review"}, "tasks": [{"id": "task-1", "status": "done"}]}, "human"),
        ({"tasks": [{"id": "task-1", "status": "blocked", "blockedBy": ["task-2"]}, {"id": "task-2", "status": "todo"}]}, "board"),
        ({"tasks": [{"id": "task-1", "status": "blocked", "blockedBy": []}]}, "human"),
        ({"tasks": [{"id": "task-1", "status": "in_progress"}]}, "agent"),
        ({"runResult": {"disposition": "done"}, "tasks": [{"id": "task-1", "status": "done"}]}, "none"),
        ({"tasks": [{"id": "task-1", "status": "cancelled"}]}, "none"),
    ],
)
def test_recovery_owner(board: dict[str, Any], owner: str) -> None:
    assert recovery_owner(board) == owner


def test_activity_families_skip_harness_events() -> None:
    events = _events("tool.execution.completed", "research.completed", "run.started", "session.started")
    assert activity_families(events) == ["tool_execution", "research", "session"]


def test_subsequence() -> None:
    assert is_subsequence(["a", "c"], ["a", "b", "c"])
    assert not is_subsequence(["c", "a"], ["a", "b", "c"])
    assert is_subsequence([], [])


def test_attempt_beyond_the_case_bound_fails_max_attempts() -> None:
    evidence, _ = play("restart-recovery", "restart-recovery")
    observation = observe(replace(evidence, attempt=3))
    assert failing(observation) == {"lifecycle/max-attempts"}
