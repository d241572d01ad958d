"""The case driver plays each case's steps against a fake runtime and the real control plane.

``FakeDriver`` stands in for a real runtime driver: it plays a scripted-model script (the same
JSON files ``runs/executors/live/scripts/`` gives the scripted model server) the way a runtime would —
one script step per model request, tool calls into the real ``ControlPlane``, the canonical
runtime events a driver emits — so the case driver, the observer and the scorer are exercised
end to end without a binary. The real runtime runs the same scripts in the end-to-end tests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from runs.evaluation.observation_schema import validate_observation
from runs.evaluation.scoring import score_observation
from runs.executors.candidate import Budget, CandidateSpec
from runs.executors.live.budgets import BudgetGuard
from runs.executors.live.case_driver import MODE_INSTRUCTIONS, CaseCallbacks, case_callbacks, run_case, typed_answer
from runs.executors.live.contracts import Driver, EventLog, Evidence, RuntimeRequest, TurnOutcome, Usage
from runs.executors.live.controlplane import ControlPlane
from runs.executors.live.observe import observe
from runs.executors.live.pricing import Price, cost_usd

pytestmark = pytest.mark.database_free

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "runs" / "executors" / "live" / "scripts"
CASES = {case["id"]: case for case in json.loads((ROOT / "evalhub/reference_data/workflow-cases.json").read_text())["cases"]}
BUDGET = {"maxLatencyMs": 20_000, "maxAttempts": 3, "maxCostUsd": 0.2, "maxTotalTokens": 64_000}
CANDIDATE = {"id": "fake-codex", "provider": "codex", "model": "scripted-model", "budget": BUDGET}
PRICE = Price("scripted-model", Decimal("0.5"), Decimal("0.05"), Decimal("2"), Decimal("2"))
#: A complete, verified trace summary (the fake runtime writes no frames).
TRACE = {
    "capture": "on",
    "frameCount": 12,
    "byteCount": 3456,
    "digestVerified": True,
    "ordered": True,
    "dispositions": ["mapped", "generic", "ignored", "rejected", "operator_only"],
    "lineage": ["one_to_one", "one_to_many", "many_to_one"],
    "traceRef": "sha256:" + "0" * 64,
}


def load_script(name: str) -> dict[str, Any]:
    path = SCRIPTS / f"{name}.json"
    if not path.exists():
        path = SCRIPTS / "misbehaving" / f"{name}.json"
    return json.loads(path.read_text())


class FakeDriver(Driver):
    """A runtime that plays a script against the control plane, as a real driver reports it.

    Each model request takes the next script step (after the last one: a short final text), as
    the scripted model server does; a step's ``delayMs`` is waited (scaled by ``time_scale``) and
    can be interrupted; ``say`` → ``item.started``/``assistant.message.delta``/``item.completed``;
    a control-plane ``call`` → ``item.started``, ``tool.execution.started``, ``ControlPlane.call``,
    ``tool.execution.completed``, ``item.completed``; ``exec_command`` (or ``shell_command``, ``shell``) asks for
    approval through the callbacks (``runtime_request.opened``/``resolved``) and then runs;
    ``apply_patch`` → ``file.change.completed``; ``usage`` → ``usage.updated`` and ``callbacks.on_usage`` with the
    cumulative total. A turn with a call asks the model again; one without ends the turn.
    ``restart`` kills the active turn silently (the step in flight is lost, as with a real
    process) and resumes the same conversation.
    """

    runtime_name = "fake runtime"
    capabilities = frozenset({"steer", "interrupt", "resume"})

    def __init__(self, script: Mapping[str, Any], control_plane: ControlPlane, events: EventLog, *, time_scale: float = 0.1) -> None:
        self.callbacks: Any = None
        self.steps = list(script["steps"])
        self.final_text = script.get("finalText", "Scripted run finished.")
        self.cp = control_plane
        self.events = events
        self.time_scale = time_scale
        self.operations = {op["name"] for op in control_plane.operations()}
        self.next_step = 0
        self.usage = Usage()
        self.turn_count = 0
        self.items = 0
        self.started = False
        self.restarts = 0
        self.steered: list[str] = []
        self.turn_inputs: list[str] = []
        self._thread: threading.Thread | None = None
        self._interrupt = threading.Event()
        self._killed = threading.Event()
        self._outcome: TurnOutcome | None = None
        self._turn_id: str | None = None
        self._started_ms = 0

    def _emit(self, type: str, **data: Any) -> None:
        self.events.emit(type, source="runtime", turn_id=self._turn_id, data=data)

    def start(self) -> None:
        self.started = True
        self._emit("session.started")

    def start_turn(self, text: str) -> str:
        assert self._thread is None or not self._thread.is_alive(), "a turn is already active"
        self.turn_count += 1
        self.turn_inputs.append(text)
        self._turn_id = f"turn-{self.turn_count}"
        self._interrupt = threading.Event()
        self._killed = threading.Event()
        self._outcome = None
        self._started_ms = self.events.now_ms()
        self._emit("turn.started")
        self._thread = threading.Thread(target=self._play, args=(self._turn_id, self._interrupt, self._killed), daemon=True)
        self._thread.start()
        return self._turn_id

    def _item(self) -> str:
        self.items += 1
        return f"item-{self.items}"

    def _play(self, turn_id: str, interrupt: threading.Event, killed: threading.Event) -> None:
        status = "completed"
        while True:
            if interrupt.is_set():
                status = "interrupted"
                break
            if self.next_step < len(self.steps):
                step = self.steps[self.next_step]
            else:
                step = {"outputs": [{"say": self.final_text}]}
            self.next_step += 1
            if interrupt.wait(step.get("delayMs", 0) / 1000 * self.time_scale):
                if killed.is_set():
                    return
                status = "interrupted"
                break
            called = False
            for output in step.get("outputs", []):
                if killed.is_set():
                    return
                if "say" in output:
                    item = self._item()
                    self._emit("item.started", itemType="agentMessage", itemId=item)
                    self._emit("assistant.message.delta", itemId=item)
                    self._emit("item.completed", itemType="agentMessage", itemId=item, text=output["say"])
                elif "call" in output:
                    called = True
                    self._call(output["call"], output.get("arguments", {}))
            if "usage" in step:
                u = step["usage"]
                self.usage = self.usage + Usage(u.get("input", 0), u.get("cachedInput", 0), u.get("output", 0), u.get("reasoning", 0))
                self._emit("usage.updated", total=self.usage.total)
                self.callbacks.on_usage(turn_id, self.usage)
                interrupt.wait(0.02)  # a budget interrupt is requested from another thread
            if killed.is_set():
                return
            if not called:
                break
        if status == "interrupted":
            self._emit("turn.interrupted")
        self._emit("turn.completed", status=status)
        self._outcome = TurnOutcome(turn_id, status, self._started_ms, self.events.now_ms())

    def _call(self, name: str, arguments: Mapping[str, Any]) -> None:
        item = self._item()
        if name in self.operations:
            self._emit("item.started", itemType="mcpToolCall", itemId=item)
            self._emit("tool.execution.started", tool=name, server="evalhub")
            result = self.cp.call(name, dict(arguments))
            self._emit("tool.execution.completed", tool=name, server="evalhub", ok=result["ok"])
            self._emit("item.completed", itemType="mcpToolCall", itemId=item)
        elif name in ("shell", "shell_command", "exec_command"):
            command = arguments.get("command", "")
            subject = command if isinstance(command, str) else " ".join(command)
            self._emit("runtime_request.opened", kind="command", subject=subject)
            decision = self.callbacks.on_runtime_request(RuntimeRequest("command", subject, self._turn_id))
            self._emit("runtime_request.resolved", decision=decision)
            if decision != "deny":
                self._emit("item.started", itemType="commandExecution", itemId=item)
                self._emit("tool.execution.started", tool="command")
                self._emit("tool.execution.completed", tool="command")
                self._emit("item.completed", itemType="commandExecution", itemId=item)
        elif name == "apply_patch":
            self._emit("item.started", itemType="fileChange", itemId=item)
            self._emit("file.change.completed", itemId=item)
            self._emit("item.completed", itemType="fileChange", itemId=item)
        else:
            self._emit("tool.execution.completed", tool=name, ok=False)

    def wait_turn(self, timeout_ms: int) -> TurnOutcome:
        assert self._thread is not None
        self._thread.join(timeout_ms / 1000)
        if self._thread.is_alive():
            self._interrupt.set()
            self._thread.join(5)
            return TurnOutcome(self._turn_id or "", "timed_out", self._started_ms, self.events.now_ms())
        assert self._outcome is not None
        return self._outcome

    def steer(self, text: str) -> bool:
        if self._thread is None or not self._thread.is_alive():
            return False
        self.steered.append(text)
        self._emit("turn.steering.acknowledged")
        return True

    def interrupt(self) -> None:
        self._interrupt.set()

    def restart(self) -> None:
        self.restarts += 1
        self._killed.set()
        self._interrupt.set()
        if self._thread is not None:
            self._thread.join(5)
        self._emit("session.resumed")

    def close(self) -> None:
        self.interrupt()


def play(
    case_id: str,
    script: str | Mapping[str, Any],
    *,
    budget: Mapping[str, Any] | None = None,
    price: Price | None = PRICE,
    trace: Mapping[str, Any] | None = TRACE,
    built_with_callbacks: bool = False,
    case: Mapping[str, Any] | None = None,
) -> tuple[Evidence, FakeDriver]:
    """Run ``case_id`` with ``script`` (a name under runs/executors/live/scripts or a script document).
    ``built_with_callbacks`` wires callbacks as real drivers need them: made first, given to the
    driver and to ``run_case``."""
    case = case or CASES[case_id]
    candidate = {**CANDIDATE, "budget": dict(budget or BUDGET)}
    events = EventLog()
    control_plane = ControlPlane(execution_id="rwe-test", case=case, prompt=f"Prompt for {case_id}.", events=events)
    driver = FakeDriver(load_script(script) if isinstance(script, str) else script, control_plane, events)
    guard = BudgetGuard(Budget.from_document(candidate["budget"]), price=price, cost_of=cost_usd)
    callbacks = None
    if built_with_callbacks:
        callbacks = case_callbacks(case, events=events, budget_guard=guard)
        driver.callbacks = callbacks
    evidence = run_case(
        execution_id="rwe-test",
        case=case,
        candidate=CandidateSpec.from_snapshot(candidate),
        prompt=f"Prompt for {case_id}.",
        driver=driver,
        control_plane=control_plane,
        events=events,
        budget_guard=guard,
        trace=trace,
        activity_wait_ms=3000,
        callbacks=callbacks,
    )
    return evidence, driver


def failing(observation: Mapping[str, Any]) -> set[str]:
    return {
        f"{group}/{check['id']}"
        for group in ("lifecycle", "continuation", "presentation")
        for check in observation[group]["checks"]
        if not check["passed"]
    }


# ------------------------------------------------------------------ well-behaved scripts


@pytest.mark.parametrize("case_id", list(CASES))
def test_well_behaved_script_completes_and_scores_passed(case_id: str) -> None:
    evidence, _ = play(case_id, case_id)
    observation = observe(evidence)
    assert validate_observation(observation) == []
    assert failing(observation) == set(), (observation["presentation"]["orderedMarkers"], evidence.notes)
    assert observation["classification"] == "completed"
    scorecard = score_observation(observation, {"bundleId": "test-bundle"})
    reasons = {d["dimension"]: d["reasons"] for d in scorecard["dimensions"].values() if not d["passed"]}
    assert scorecard["overall"]["passed"] is True, reasons
    assert scorecard["overall"]["score"] == 1


def test_every_case_has_exactly_one_well_behaved_script() -> None:
    assert sorted(path.stem for path in SCRIPTS.glob("*.json")) == sorted(CASES)


def test_scripts_name_tools_without_server_prefix() -> None:
    for path in SCRIPTS.rglob("*.json"):
        script = json.loads(path.read_text())
        assert script["name"] == path.stem
        for step in script["steps"]:
            for output in step.get("outputs", []):
                assert "__" not in output.get("call", ""), path.name


# ------------------------------------------------------------------ step semantics


def test_run_start_sends_prompt_with_task_mode_and_starts_the_driver() -> None:
    evidence, driver = play("planning-lifecycle", "planning-lifecycle")
    assert driver.started
    assert driver.turn_inputs[0] == "Prompt for planning-lifecycle.\n\n" + MODE_INSTRUCTIONS["plan"]
    runs = evidence.board["runs"]
    assert [(r["wakeReason"], r["status"]) for r in runs] == [
        ("start", "yielded"),
        ("review_rejected", "yielded"),
        ("interaction_resolved", "succeeded"),
    ]
    assert [i["status"] for i in evidence.board["interactions"]] == ["rejected", "accepted"]
    assert "verification-only" in evidence.board["interactions"][0]["answer"]["note"]


def test_governed_interactions_are_answered_in_batches_with_one_wake_each() -> None:
    evidence, driver = play("governed-interaction", "governed-interaction")
    assert [r["wakeReason"] for r in evidence.board["runs"]] == ["start", "interaction_resolved", "interaction_resolved"]
    resolved = [e.data for e in evidence.events if e.type == "interaction.resolved"]
    assert [(d["kind"], d["partial"]) for d in resolved] == [
        ("questions", False),
        ("suggest_tasks", False),
        ("checkbox", False),
        ("item_verdicts", True),
        ("item_verdicts", False),
    ]
    verdicts = next(i for i in evidence.board["interactions"] if i["kind"] == "item_verdicts")
    assert verdicts["answer"] == {"verdicts": {"i1": "accept", "i2": "accept"}}
    assert "partially answered" in driver.turn_inputs[1]


def test_steering_queued_becomes_turn_input_and_duplicate_is_acknowledged_once() -> None:
    evidence, driver = play("steering-causality", "steering-causality")
    delivered = [e.data for e in evidence.events if e.type == "turn.steering.delivered"]
    assert [(d["steerId"], d["delivery"], d["attempt"], d["forwarded"]) for d in delivered] == [
        ("steer-1", "queued", 1, True),
        ("steer-2", "active_turn", 1, True),
        ("steer-2", "active_turn", 2, False),
    ]
    assert "steer-1" in driver.turn_inputs[1]
    assert len(driver.steered) == 1
    assert [e.type for e in evidence.events].count("turn.steering.acknowledged") == 1


def test_permission_and_cancel_interrupt_the_active_turn() -> None:
    evidence, driver = play("cancellation-permissions", "cancellation-permissions")
    resolved = [e.data["decision"] for e in evidence.events if e.type == "runtime_request.resolved"]
    assert resolved == ["accept_for_session"]
    assert [t.status for t in evidence.turns] == ["interrupted"]
    assert evidence.board["tasks"][0]["status"] == "cancelled"
    assert evidence.board["runs"][-1]["status"] == "cancelled"
    assert [e.data for e in evidence.events if e.type == "run.cancel.requested"] == [{"actor": "operator"}]
    assert evidence.events[-1].type == "run.terminal" and evidence.events[-1].data == {"status": "cancelled"}
    assert "run.presentation.placeholder" in [e.type for e in evidence.events]


def test_restarts_continue_the_same_run_and_finalise_once() -> None:
    evidence, driver = play("restart-recovery", "restart-recovery")
    assert driver.restarts == 2
    phases = [e.data["phase"] for e in evidence.events if e.type == "process.restarted"]
    assert phases == ["provider_turn", "finalization"]
    assert len(evidence.board["runs"]) == 1 and evidence.board["runs"][0]["status"] == "succeeded"
    # the killed turn, then the continuation turn (and, when the restart came before the model's
    # next request, the one missing-result reminder) — all in the same run
    statuses = [t.status for t in evidence.turns]
    assert statuses[0] == "interrupted" and set(statuses[1:]) == {"completed"}
    assert "worker restarted" in driver.turn_inputs[1]
    types = [e.type for e in evidence.events]
    assert types.count("run.result.accepted") == 1 and types.count("run.ended") == 1
    # the finalization restart happened after the result was accepted and before the run ended
    assert types.index("run.result.accepted") < len(types) - 1 - types[::-1].index("process.restarted") < types.index("run.ended")


def test_approval_while_blocked_waits_for_the_child_and_wakes_the_parent_once() -> None:
    evidence, driver = play("delegation-return", "delegation-return")
    assert [r["wakeReason"] for r in evidence.board["runs"]] == ["start", "blockers_resolved"]
    types = [e.type for e in evidence.events]
    assert "run.wake.deferred" in types and "delegation.completed" in types
    assert "was approved" in driver.turn_inputs[1] and "task-2 is done" in driver.turn_inputs[1]


def test_review_approval_of_a_needs_review_result_approves_the_completion() -> None:
    evidence, _ = play("review-lifecycle", "review-lifecycle")
    approvals = [e.data for e in evidence.events if e.type == "review.approved"]
    assert approvals == [{"target": "completion"}]
    assert evidence.board["tasks"][0]["status"] == "done"
    assert len(evidence.board["runs"]) == 2


def test_a_step_without_its_target_is_skipped_with_a_note() -> None:
    script = {"name": "x", "steps": [{"outputs": [{"call": "finish_task", "arguments": {"summary": "Finished at once."}}]}]}
    evidence, _ = play("governed-interaction", script)
    assert any("no pending questions interaction" in note for note in evidence.notes)
    assert len(evidence.board["runs"]) == 1


def test_no_turn_starts_after_a_budget_stop() -> None:
    evidence, driver = play("governed-interaction", "governed-interaction", budget={**BUDGET, "maxTotalTokens": 1000})
    assert evidence.budget_stop is not None and evidence.budget_stop.startswith("candidate reported usage budget stop: ")
    assert driver.turn_count == 1
    assert [e.type for e in evidence.events].count("candidate.budget.stop") == 1


def test_typed_answers_per_kind() -> None:
    assert typed_answer({"kind": "questions", "questions": [{"id": "a", "options": ["x", "y"]}, {"id": "b"}]}, partial=False) == {
        "answers": {"a": "x", "b": "eval-choice"}
    }
    assert typed_answer({"kind": "item_verdicts", "items": [{"id": "1"}, {"id": "2"}, {"id": "3"}]}, partial=True) == {
        "verdicts": {"1": "accept"}
    }
    assert typed_answer({"kind": "item_verdicts", "items": [{"id": "1"}, {"id": "2"}], "answeredItems": ["1"]}, partial=False) == {
        "verdicts": {"2": "accept"}
    }
    assert typed_answer({"kind": "suggest_tasks", "options": ["a", "b"]}, partial=False) == {"accepted": [0], "rejected": [1]}
    assert typed_answer({"kind": "checkbox", "options": ["a", "b"]}, partial=False) == {"checked": ["a"]}
    with pytest.raises(ValueError, match="unknown interaction kind"):
        typed_answer({"kind": "poll"}, partial=False)


def test_callbacks_give_the_kth_permission_decision_then_keep_the_session() -> None:
    events = EventLog()
    callbacks = CaseCallbacks(events=events, budget_guard=BudgetGuard(), decisions=["deny", "accept_for_session"])
    request = RuntimeRequest("command", "ls")
    assert [callbacks.on_runtime_request(request) for _ in range(3)] == ["deny", "accept_for_session", "accept_for_session"]
    plain = CaseCallbacks(events=events, budget_guard=BudgetGuard())
    assert plain.on_runtime_request(request) == "allow_once"
    with pytest.raises(ValueError, match="unknown permission decision"):
        CaseCallbacks(events=events, budget_guard=BudgetGuard(), decisions=["maybe"])


def test_callbacks_built_before_the_driver_answer_permissions_and_stop_the_budget() -> None:
    evidence, driver = play("cancellation-permissions", "cancellation-permissions", built_with_callbacks=True)
    assert [e.data["decision"] for e in evidence.events if e.type == "runtime_request.resolved"] == ["accept_for_session"]
    evidence, driver = play("final-response", "final-response--over-budget", built_with_callbacks=True)
    assert evidence.turns[-1].status == "interrupted" and evidence.budget_stop is not None


def test_restart_right_after_the_result_is_proposed_does_not_finish_twice() -> None:
    case = {
        **CASES["restart-recovery"],
        "steps": [
            {"kind": "run_start", "taskMode": "execute"},
            {"kind": "process_restart", "phase": "semantic_result"},
        ],
    }
    script = {
        "name": "x",
        "steps": [
            {"outputs": [{"call": "report_progress", "arguments": {"message": "working"}}]},
            {"outputs": [{"call": "finish_task", "arguments": {"summary": "Finished the work once."}}]},
            {"outputs": [{"say": "Result already recorded; nothing more to do."}], "delayMs": 3000},
        ],
    }
    evidence, driver = play("restart-recovery", script, case=case)
    assert [e.data["phase"] for e in evidence.events if e.type == "process.restarted"] == ["semantic_result"]
    types = [e.type for e in evidence.events]
    assert types.index("run.result.proposed") < types.index("process.restarted")
    assert types.count("run.result.accepted") == 1
    assert "do not call it again" in driver.turn_inputs[-1]
    assert [r["status"] for r in evidence.board["runs"]] == ["succeeded"]
