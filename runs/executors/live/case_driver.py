"""The case driver: plays the human side of a workflow case against a runtime.

Runtime-neutral. :func:`run_case` interprets the case's ``steps`` in order — it never branches on
the case id — against a :class:`~runs.executors.live.contracts.Driver` (the runtime under test) and the
execution's control plane (``runs.executors.live.controlplane.ControlPlane``), then returns the
:class:`~runs.executors.live.contracts.Evidence` the observer (``runs.executors.live.observe``) judges.

Vocabulary. A **run** is one wake of the agent on the source task (``ControlPlane.begin_run`` with
a wake reason … ``end_run`` with a status); a run holds one or more **turns** (one
``Driver.start_turn`` … ``wait_turn`` each). A new run starts for the case start, an answered
interaction, a rejected review, a queued steer and a resolved blocker; a restart and the one
missing-result reminder continue the *same* run in a new turn.

Steps (``schedules/case_schema.py``) and what the driver does — the exact table is in
``docs/live-evaluation.md``:

* ``run_start`` {taskMode ask|execute|plan} — run ``start`` with the prompt plus the mode's
  instruction; one turn, timeout = the candidate's ``maxLatencyMs``.
* ``interaction_response`` {interaction, partial?} and ``review_decision`` {decision} —
  consecutive steps form one **batch** answered before the agent is woken once: each
  ``interaction_response`` answers the oldest pending interaction of its kind with a typed
  answer (``partial`` answers the first half); the k-th ``review_decision`` decides the k-th
  confirmation (reject with a narrow note asking for a verification-only revision, or approve),
  or, when there is no such confirmation and the accepted result is ``needs_review``, approves
  the completion (``approve_completion``; the task is done, nobody is woken). A batch stops
  before a step whose target is not there yet or was already touched in the batch (a partial
  answer must reach the agent first). The wake (``review_rejected`` when the batch rejected
  something, else ``interaction_resolved``) happens only while the source task is actionable
  (not done, cancelled or blocked by open dependencies); otherwise the news waits for the next
  wake.
* ``steer`` {delivery queued|active_turn, duplicate?} — ``queued``: run ``steer`` whose turn input
  is the steer text; ``active_turn``: ``Driver.steer`` into the active turn of the run just
  woken. ``duplicate`` delivers the same steer id twice (``turn.steering.delivered`` twice); the
  harness forwards a repeated id to the runtime only when the first delivery was not
  acknowledged, so exactly one ``turn.steering.acknowledged`` is expected per id.
* ``permission_decision`` {decision} — the k-th runtime approval request of the execution gets the
  k-th decision (``allow_once`` when the steps give none); ``accept_for_session`` then also
  answers later requests.
* ``cancel`` {actor} — once the active turn showed activity (after as many resolved runtime
  approval requests as the case has ``permission_decision`` steps), ``run.cancel.requested``,
  ``Driver.interrupt`` and ``ControlPlane.cancel(actor)``; nothing runs afterwards.
* ``process_restart`` {phase} — ``provider_turn``: once the active turn showed activity;
  ``semantic_result``: right after ``run.result.proposed``; ``finalization``: after the run's
  turns, before ``end_run``. ``Driver.restart`` + ``process.restarted`` {phase, turnId?}; an
  interrupted turn is followed by a continuation turn in the same run and thread. A run is ended
  exactly once.
* ``child_completion`` {childProvider} — when the source has exactly one child and is blocked by
  it: ``ControlPlane.complete_child`` and run ``blockers_resolved``.

Afterwards: when the agent never produced a result and no step remains that would wake it, one
reminder turn in the same run (the reference's bounded missing-result recovery); then
``run.presentation.resolved`` {responseSource} (or ``run.presentation.placeholder``) and
``run.terminal`` {status}. No new turn starts once the budget guard recorded a stop or a total
reached its limit (``runs/executors/live/budgets.py``), after a cancel, or after a turn failed or timed out.

Harness events emitted here (``source="harness"``): ``run.started`` {runId, wakeReason},
``run.ended`` {runId, status}, ``interaction.resolved`` {interactionId, kind, partial},
``review.rejected`` / ``review.approved`` {interactionId?, target}, ``turn.steering.delivered``
{steerId, delivery, attempt, duplicate, forwarded}, ``process.restarted`` {phase, turnId?},
``run.cancel.requested`` {actor}, ``candidate.budget.stop`` {message}, ``run.wake.deferred``
{reason}, ``run.presentation.resolved`` {responseSource}, ``run.presentation.placeholder``,
``run.terminal`` {status}.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runs.executors.candidate import CandidateSpec
from runs.executors.live.budgets import BudgetGuard
from runs.executors.live.contracts import (
    PERMISSION_DECISIONS,
    CanonicalEvent,
    Driver,
    EventLog,
    Evidence,
    RuntimeRequest,
    TurnOutcome,
    Usage,
)
from runs.executors.live.observe import (
    first_visible_progress_at,
    is_assistant_text,
    presentation_markers,
    response_source,
)

SOURCE_TASK = "task-1"

#: What each ``run_start`` task mode adds to the case prompt. Editable per call (``mode_instructions``).
MODE_INSTRUCTIONS: Mapping[str, str] = {
    "ask": "Task mode: ask. Answer the request on task-1 as the steps above say; change nothing else.",
    "execute": "Task mode: execute. Do the work on task-1 as the steps above say.",
    "plan": "Task mode: plan. Plan before you act: follow the steps above for writing the plan and "
    "asking for its approval, and carry the plan out only once it is accepted.",
}

#: The note of a rejecting review step: narrow, verification-only.
REJECT_NOTE = (
    "Rejected: change nothing else — make only a narrow, verification-only revision: re-check the "
    "verification, state its outcome, then ask for review again."
)
APPROVE_NOTE = "Approved."
STEER_TEXT = "Operator follow-up ({steer_id}): present the result as bullet points only, and call finish_task exactly once."
RESTART_TEXT = (
    "The worker restarted and your session was restored from its checkpoint. Reuse the progress "
    "already recorded on task-1 (get_task_context); do not repeat work. If task-1 has no result yet, "
    "call finish_task once; if it has one, do not call it again — end with a brief note."
)
REMINDER_TEXT = (
    "You ended your turn without recording a result. Call finish_task once now with your result "
    "on task-1 (or request_human_input if you need the human), then end with a brief note."
)
CHILD_SUMMARY = "Delegated child {task_id} completed by the {provider} agent; its result is recorded on {task_id}."

#: Steps that act inside the active turn of the run just woken.
_DURING = {("steer", "active_turn"), ("cancel", None), ("process_restart", "provider_turn"), ("process_restart", "semantic_result")}
#: Steps that would wake the agent later (the reminder waits for them).
_WAKING = {"interaction_response", "review_decision", "child_completion"}


def _step_key(step: Mapping[str, Any]) -> tuple[str, str | None]:
    kind = step.get("kind")
    if kind == "steer":
        return kind, step.get("delivery")
    if kind == "process_restart":
        return kind, step.get("phase")
    return kind, None


def _is_waking(step: Mapping[str, Any]) -> bool:
    return step.get("kind") in _WAKING or _step_key(step) == ("steer", "queued")


class CaseCallbacks:
    """The :class:`~runs.executors.live.contracts.DriverCallbacks` of one execution.

    ``on_runtime_request`` answers the k-th approval request with the k-th ``permission_decision``
    of the case (``allow_once`` beyond them; after ``accept_for_session`` the session stays
    accepted). ``on_usage`` feeds the budget guard and, the first time the guard records a stop,
    emits ``candidate.budget.stop`` and interrupts the active turn once (from a helper thread, so
    a driver may call back from its reader thread); an interrupt error is kept in
    :attr:`interrupt_error` and re-raised by :func:`run_case`.
    """

    def __init__(self, *, events: EventLog, budget_guard: BudgetGuard, decisions: Sequence[str] = ()) -> None:
        unknown = [d for d in decisions if d not in PERMISSION_DECISIONS]
        if unknown:
            raise ValueError(f"unknown permission decision(s) {unknown}; expected {', '.join(PERMISSION_DECISIONS)}")
        self.events = events
        self.budget_guard = budget_guard
        self._decisions = list(decisions)
        self._lock = threading.Lock()
        self._session_accepted = False
        self.requests: list[tuple[RuntimeRequest, str]] = []
        self.driver: Driver | None = None
        self.interrupt_error: BaseException | None = None
        self._interrupt_threads: list[threading.Thread] = []

    def attach(self, driver: Driver) -> None:
        """The driver to interrupt on a budget stop."""
        self.driver = driver

    def on_runtime_request(self, request: RuntimeRequest) -> str:
        """Returns one of :data:`~runs.executors.live.contracts.PERMISSION_DECISIONS`."""
        with self._lock:
            index = len(self.requests)
            if index < len(self._decisions):
                decision = self._decisions[index]
            else:
                decision = "accept_for_session" if self._session_accepted else "allow_once"
            if decision == "accept_for_session":
                self._session_accepted = True
            self.requests.append((request, decision))
            return decision

    def on_usage(self, turn_id: str | None, usage: Usage) -> None:
        """``usage`` is the execution's cumulative usage so far."""
        if self.budget_guard.update(usage):
            self.events.emit(
                "candidate.budget.stop",
                source="harness",
                turn_id=turn_id,
                data={"message": self.budget_guard.stop_message or ""},
            )
            driver = self.driver
            if driver is not None:
                thread = threading.Thread(target=self._interrupt, args=(driver,), daemon=True)
                thread.start()  # started before join() can see it (joining an unstarted thread raises)
                self._interrupt_threads.append(thread)

    def _interrupt(self, driver: Driver) -> None:
        try:
            driver.interrupt()
        except BaseException as error:  # re-raised by run_case as the reference does (§6.3)
            self.interrupt_error = error

    def join(self, timeout_s: float = 10.0) -> None:
        """Wait for pending budget interrupts (a budget stop interrupts the turn before the case goes on)."""
        for thread in self._interrupt_threads:
            thread.join(timeout_s)


def case_callbacks(case: Mapping[str, Any], *, events: EventLog, budget_guard: BudgetGuard) -> CaseCallbacks:
    """The :class:`CaseCallbacks` of an execution of ``case``: its ``permission_decision`` steps'
    decisions in order, usage into ``budget_guard``. Build it before the driver and pass the same
    object to the driver (``callbacks=``) and to :func:`run_case` (``callbacks=``)."""
    decisions = [str(step.get("decision")) for step in case.get("steps", ()) if step.get("kind") == "permission_decision"]
    return CaseCallbacks(events=events, budget_guard=budget_guard, decisions=decisions)


def typed_answer(interaction: Mapping[str, Any], *, partial: bool) -> dict[str, Any]:
    """The human's typed answer for a pending interaction of the control plane.

    ``questions`` → ``{"answers": {id: first option or "eval-choice"}}``; ``suggest_tasks`` →
    ``{"accepted": [index 0], "rejected": [the rest]}``; ``checkbox`` → ``{"checked": [first
    option]}``; ``item_verdicts`` → ``{"verdicts": {id: "accept"}}``; ``confirmation`` →
    ``{"confirmed": True}``. ``partial`` answers only the first half (at least one) of the
    questions, suggestions or items still unanswered. Raises ``ValueError`` for an unknown kind.
    """
    kind = interaction.get("kind")
    answered = set(interaction.get("answeredItems") or ())

    def part(values: list[Any]) -> list[Any]:
        return values[: max(1, len(values) // 2)] if partial else values

    if kind == "questions":
        questions = [q for q in interaction.get("questions") or () if q.get("id") not in answered]
        return {"answers": {q["id"]: (q.get("options") or ["eval-choice"])[0] for q in part(questions)}}
    if kind == "suggest_tasks":
        options = list(range(len(interaction.get("options") or ())))
        chosen = part(options)
        return {"accepted": chosen[:1], "rejected": chosen[1:]}
    if kind == "checkbox":
        options = list(interaction.get("options") or ())
        return {"checked": options[:1]}
    if kind == "item_verdicts":
        items = [item for item in interaction.get("items") or () if item.get("id") not in answered]
        return {"verdicts": {item["id"]: "accept" for item in part(items)}}
    if kind == "confirmation":
        return {"confirmed": True}
    raise ValueError(f"unknown interaction kind {kind!r}")


class _Stop(Exception):
    """Nothing more may run (cancel, budget stop, failed turn)."""


class _CaseRun:
    """The state of one :func:`run_case` call (not thread-safe apart from the event wait)."""

    def __init__(
        self,
        *,
        execution_id: str,
        case: Mapping[str, Any],
        candidate: CandidateSpec,
        prompt: str,
        driver: Driver,
        control_plane: Any,
        events: EventLog,
        budget_guard: BudgetGuard,
        callbacks: CaseCallbacks,
        mode_instructions: Mapping[str, str],
        activity_wait_ms: int | None,
    ) -> None:
        self.execution_id = execution_id
        self.case = case
        self.candidate = candidate
        self.prompt = prompt
        self.driver = driver
        self.cp = control_plane
        self.events = events
        self.guard = budget_guard
        self.callbacks = callbacks
        self.mode_instructions = mode_instructions
        self.max_latency_ms = candidate.budget.max_latency_ms
        self.activity_wait_ms = self.max_latency_ms if activity_wait_ms is None else activity_wait_ms
        self.turns: list[TurnOutcome] = []
        self.notes: list[str] = []
        self.run_id: str | None = None
        self.last_run_status: str | None = None
        self.cancelled = False
        self.stopped = False
        self.reminded = False
        self.review_index = 0
        self.steers = 0
        self.undelivered: list[str] = []
        self.first_turn_ms: int | None = None
        self._cond = threading.Condition()
        events.listeners.append(self._on_event)

    # ------------------------------------------------------------------ waiting on events

    def _on_event(self, event: CanonicalEvent) -> None:
        with self._cond:
            self._cond.notify_all()

    def _wait_for(self, predicate: Callable[[list[CanonicalEvent]], bool], since: int, timeout_ms: int) -> bool:
        """Wait until ``predicate(events[since:])`` holds; ``False`` on timeout."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._cond:
            while True:
                if predicate(self.events.events()[since:]):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.05))

    @staticmethod
    def _turn_ended(events: list[CanonicalEvent]) -> bool:
        return any(e.type == "turn.completed" for e in events)

    @staticmethod
    def _activity(events: list[CanonicalEvent]) -> bool:
        return any(
            e.type
            in (
                "tool.execution.completed",
                "run.progress.reported",
                "research.completed",
                "file.change.completed",
                "runtime_request.resolved",
            )
            or (is_assistant_text(e) and e.data["text"].strip())
            for e in events
        )

    @classmethod
    def _activity_after_permissions(cls, events: list[CanonicalEvent], permissions: int) -> bool:
        """Activity after the ``permissions``-th resolved runtime request (any activity when 0)."""
        resolved = [i for i, e in enumerate(events) if e.type == "runtime_request.resolved"]
        if len(resolved) < permissions:
            return False
        start = resolved[permissions - 1] + 1 if permissions else 0
        return cls._activity(events[start:])

    # ------------------------------------------------------------------ runs and turns

    def _emit(self, type: str, **data: Any) -> CanonicalEvent:
        return self.events.emit(type, source="harness", data=data)

    def _snapshot(self) -> dict[str, Any]:
        return self.cp.snapshot()

    def _source(self, board: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        board = board or self._snapshot()
        return next(task for task in board["tasks"] if task["id"] == SOURCE_TASK)

    def _actionable(self) -> bool:
        return self._source().get("status") not in ("done", "cancelled", "blocked")

    def _check_budget(self) -> None:
        if not self.guard.may_continue():
            self.notes.append("budget: no further turn started after the usage budget stop")
            self.stopped = True
            raise _Stop

    def _open_run(self, wake_reason: str) -> None:
        self._check_budget()
        self.run_id = self.cp.begin_run(wake_reason)
        self._emit("run.started", runId=self.run_id, wakeReason=wake_reason)

    def _end_run(self, status: str) -> None:
        if self.run_id is None:
            return
        self.cp.end_run(status)
        self._emit("run.ended", runId=self.run_id, status=status)
        self.last_run_status = status
        self.run_id = None

    def _wake(
        self,
        wake_reason: str,
        text: str,
        during: list[Mapping[str, Any]],
        finals: list[Mapping[str, Any]],
        remaining: Sequence[Mapping[str, Any]],
    ) -> None:
        news, self.undelivered = self.undelivered, []
        self._open_run(wake_reason)
        self._run_turns("\n\n".join([*news, text]), during, finals, remaining)

    def _run_turns(
        self, text: str, during: list[Mapping[str, Any]], finals: list[Mapping[str, Any]], remaining: Sequence[Mapping[str, Any]]
    ) -> None:
        """Play the run's turn(s), then its finalization restarts, then end it once."""
        try:
            outcome = self._turn(text, during)
            if (
                outcome.status == "completed"
                and not self.reminded
                and not any(_is_waking(step) for step in remaining)
                and not self._result_in_run()
                and not self.cp.pending_interactions()
                and self._source().get("status") in ("todo", "in_progress")
            ):
                self.reminded = True
                self._check_budget()
                self._turn(REMINDER_TEXT, [])
            for _ in finals:
                self._restart("finalization", None)
        except _Stop:
            pass
        finally:
            if self.run_id is not None:
                self._end_run(self._run_end_status(remaining))

    def _result_in_run(self) -> bool:
        result = self._snapshot().get("runResult")
        return bool(result) and result.get("runId") == self.run_id

    def _run_end_status(self, remaining: Sequence[Mapping[str, Any]]) -> str:
        board = self._snapshot()
        if self.cancelled:
            return "cancelled"
        result = board.get("runResult")
        if result and result.get("runId") == self.run_id:
            return "blocked" if result.get("disposition") == "blocked" else "succeeded"
        last = self.turns[-1] if self.turns else None
        if self.guard.stop_message is not None or (last is not None and last.status in ("failed", "timed_out")):
            return "failed"
        if any(i.get("status") == "pending" for i in board.get("interactions", ())):
            return "yielded"
        status = self._source(board).get("status")
        if status == "blocked":
            return "blocked"
        if status == "done":
            return "succeeded"
        return "yielded" if any(_is_waking(step) for step in remaining) else "failed"

    def _turn(self, text: str, during: list[Mapping[str, Any]]) -> TurnOutcome:
        """One turn (plus the continuation turn after a restart inside it). Raises ``_Stop``
        when nothing more may run afterwards."""
        since = len(self.events.events())
        started = self.events.now_ms()
        if self.first_turn_ms is None:
            self.first_turn_ms = started
        turn_id = self.driver.start_turn(text)
        for step in during:
            key = _step_key(step)
            if key == ("steer", "active_turn"):
                self._wait_for(
                    lambda evs: self._turn_ended(evs) or any(e.type == "turn.started" for e in evs), since, self.activity_wait_ms
                )
                self._steer_active(step, ended=self._turn_ended(self.events.events()[since:]))
            elif key == ("cancel", None):
                permissions = len([s for s in self.case.get("steps", ()) if s.get("kind") == "permission_decision"])
                self._wait_for(
                    lambda evs, permissions=permissions: self._turn_ended(evs) or self._activity_after_permissions(evs, permissions),
                    since,
                    self.activity_wait_ms,
                )
                actor = str(step.get("actor") or "operator")
                self._emit("run.cancel.requested", actor=actor)
                self.driver.interrupt()
                self.cp.cancel(actor)
                self.cancelled = True
            elif key in (("process_restart", "provider_turn"), ("process_restart", "semantic_result")):
                if key[1] == "provider_turn":
                    trigger = self._activity
                else:

                    def trigger(evs: list[CanonicalEvent]) -> bool:
                        return any(e.type == "run.result.proposed" for e in evs)

                self._wait_for(lambda evs, trigger=trigger: self._turn_ended(evs) or trigger(evs), since, self.max_latency_ms)
                if self._turn_ended(self.events.events()[since:]):
                    outcome = self._collect(turn_id, started)
                    self._restart(key[1], None)
                    if outcome.status != "completed" or self._result_in_run():
                        return outcome
                else:
                    self.turns.append(
                        TurnOutcome(
                            turn_id=turn_id,
                            status="interrupted",
                            started_ms=started,
                            ended_ms=self.events.now_ms(),
                            error="process restarted by the harness",
                        )
                    )
                    self._restart(key[1], turn_id)
                self._check_budget()
                since = len(self.events.events())
                started = self.events.now_ms()
                turn_id = self.driver.start_turn(RESTART_TEXT)
            else:
                self.notes.append(f"step {step} is not played inside a turn; skipped")
        outcome = self._collect(turn_id, started)
        if self.cancelled:
            self.stopped = True
            raise _Stop
        if outcome.status in ("failed", "timed_out"):
            self.notes.append(f"turn {outcome.turn_id} {outcome.status}: {outcome.error_code or outcome.error or ''}")
            self.stopped = True
            raise _Stop
        if self.guard.stop_message is not None:
            self.stopped = True
            raise _Stop
        return outcome

    def _collect(self, turn_id: str, started: int) -> TurnOutcome:
        outcome = self.driver.wait_turn(self.max_latency_ms)
        self.turns.append(outcome)
        return outcome

    def _restart(self, phase: str, turn_id: str | None) -> None:
        self.driver.restart()
        data: dict[str, Any] = {"phase": phase}
        if turn_id is not None:
            data["turnId"] = turn_id
        self._emit("process.restarted", **data)

    def _steer_active(self, step: Mapping[str, Any], *, ended: bool) -> None:
        self.steers += 1
        steer_id = f"steer-{self.steers}"
        if ended:
            self.notes.append(f"{steer_id}: no active turn to steer; skipped")
            return
        text = STEER_TEXT.format(steer_id=steer_id)
        self._emit("turn.steering.delivered", steerId=steer_id, delivery="active_turn", attempt=1, duplicate=False, forwarded=True)
        acknowledged = bool(self.driver.steer(text))
        if step.get("duplicate"):
            # The same steer id again: idempotent by id, forwarded only if the first was not acknowledged.
            self._emit(
                "turn.steering.delivered", steerId=steer_id, delivery="active_turn", attempt=2, duplicate=True, forwarded=not acknowledged
            )
            if not acknowledged:
                self.driver.steer(text)

    # ------------------------------------------------------------------ steps

    def play(self) -> None:
        steps = list(self.case.get("steps", ()))
        index = 0
        while index < len(steps) and not self.stopped:
            step = steps[index]
            kind = step.get("kind")
            if kind == "run_start":
                during, finals, index = self._collect_attached(steps, index + 1)
                mode = str(step.get("taskMode") or "execute")
                instruction = self.mode_instructions.get(mode, "")
                text = f"{self.prompt}\n\n{instruction}".strip()
                self._open_run_safely("start", text, during, finals, steps[index:])
            elif kind in ("interaction_response", "review_decision"):
                index = self._respond(steps, index)
            elif kind == "steer" and step.get("delivery") == "queued":
                during, finals, next_index = self._collect_attached(steps, index + 1)
                self.steers += 1
                steer_id = f"steer-{self.steers}"
                if not self._actionable():
                    self.notes.append(f"{steer_id}: the source task is not actionable; queued steer skipped")
                    index = next_index
                    continue
                news, self.undelivered = self.undelivered, []
                try:
                    self._open_run("steer")
                except _Stop:
                    break
                self._emit("turn.steering.delivered", steerId=steer_id, delivery="queued", attempt=1, duplicate=False, forwarded=True)
                if step.get("duplicate"):
                    self._emit("turn.steering.delivered", steerId=steer_id, delivery="queued", attempt=2, duplicate=True, forwarded=False)
                text = "\n\n".join([*news, STEER_TEXT.format(steer_id=steer_id)])
                self._run_turns(text, during, finals, steps[next_index:])
                index = next_index
            elif kind == "child_completion":
                index = self._child_completion(step, steps, index + 1)
            elif kind == "permission_decision":
                index += 1  # answered through CaseCallbacks when the runtime asks
            elif kind == "process_restart" and step.get("phase") == "finalization":
                # Not attached to a run (the run it follows ended early): restart between runs.
                self._restart("finalization", None)
                index += 1
            else:
                self.notes.append(f"step {index} ({kind}) has no active turn to act in; skipped")
                index += 1

    def _open_run_safely(self, reason: str, text: str, during: list, finals: list, remaining: Sequence[Mapping[str, Any]]) -> None:
        try:
            self._open_run(reason)
        except _Stop:
            return
        self._run_turns(text, during, finals, remaining)

    @staticmethod
    def _collect_attached(steps: Sequence[Mapping[str, Any]], index: int) -> tuple[list, list, int]:
        """The steps that act inside the coming run: the during-turn steps (and permission
        decisions, answered by callbacks) right after ``index``, then its finalization restarts."""
        during: list[Mapping[str, Any]] = []
        finals: list[Mapping[str, Any]] = []
        while index < len(steps):
            step = steps[index]
            key = _step_key(step)
            if key in _DURING and not finals:
                during.append(step)
            elif step.get("kind") == "permission_decision":
                pass
            elif key == ("process_restart", "finalization"):
                finals.append(step)
            else:
                break
            index += 1
        return during, finals, index

    def _respond(self, steps: Sequence[Mapping[str, Any]], index: int) -> int:
        touched: set[str] = set()
        messages: list[str] = []
        rejected = False
        woke_something = False
        while index < len(steps) and steps[index].get("kind") in ("interaction_response", "review_decision"):
            step = steps[index]
            if step.get("kind") == "interaction_response":
                kind = step.get("interaction")
                target = next((i for i in self.cp.pending_interactions() if i["kind"] == kind), None)
                if target is None or target["id"] in touched:
                    if messages or touched:
                        break
                    self.notes.append(f"step {index}: no pending {kind} interaction to answer; skipped")
                    index += 1
                    continue
                partial = bool(step.get("partial"))
                answer = typed_answer(target, partial=partial)
                self.cp.answer_interaction(target["id"], answer, partial=partial)
                self._emit("interaction.resolved", interactionId=target["id"], kind=kind, partial=partial)
                touched.add(target["id"])
                woke_something = True
                what = "partially answered (the rest follows later)" if partial else "answered"
                messages.append(f"Your {kind} request {target['id']} was {what}: {json.dumps(answer, sort_keys=True)}.")
                index += 1
                continue
            decision = step.get("decision")
            board = self._snapshot()
            confirmations = [i for i in board.get("interactions", ()) if i.get("kind") == "confirmation"]
            k = self.review_index
            target = confirmations[k] if k < len(confirmations) else None
            if target is not None and target.get("status") == "pending" and target["id"] not in touched:
                note = REJECT_NOTE if decision == "reject" else APPROVE_NOTE
                self.cp.decide_review(target["id"], decision, note)
                self._emit(
                    "review.rejected" if decision == "reject" else "review.approved", interactionId=target["id"], target="interaction"
                )
                touched.add(target["id"])
                woke_something = True
                rejected = rejected or decision == "reject"
                if decision == "reject":
                    messages.append(f"Your review request {target['id']} was rejected. Note: {REJECT_NOTE}")
                else:
                    messages.append(
                        f"Your review request {target['id']} was approved. Continue on task-1 (no new task for "
                        "this work) and call finish_task once when done."
                    )
                self.review_index += 1
                index += 1
                continue
            result = board.get("runResult") or {}
            source = self._source(board)
            if (
                target is None
                and decision == "approve"
                and result.get("disposition") == "needs_review"
                and source.get("status") == "in_review"
            ):
                self.cp.approve_completion()
                self._emit("review.approved", target="completion")
                self.review_index += 1
                index += 1
                continue
            if messages or touched:
                break
            self.notes.append(f"step {index}: no confirmation #{k + 1} to {decision}; skipped")
            self.review_index += 1
            index += 1
        if not woke_something:
            return index
        text = " ".join(messages) + " Continue on task-1; call finish_task once when your work is done."
        if not self._actionable():
            self.undelivered.append(text)
            self._emit("run.wake.deferred", reason=f"source task is {self._source().get('status')}")
            return index
        during, finals, index = self._collect_attached(steps, index)
        try:
            self._wake("review_rejected" if rejected else "interaction_resolved", text, during, finals, steps[index:])
        except _Stop:
            pass
        return index

    def _child_completion(self, step: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], index: int) -> int:
        """Complete the single delegated child and wake the parent; returns the next step index."""
        board = self._snapshot()
        source = self._source(board)
        children = [t for t in board["tasks"] if t.get("parentId") == SOURCE_TASK]
        if len(children) != 1 or children[0]["id"] not in source.get("blockedBy", ()) or children[0]["status"] == "done":
            self.notes.append("child_completion: the source is not blocked by exactly one open child; skipped")
            return index
        child = children[0]
        provider = str(step.get("childProvider") or "delegate")
        summary = CHILD_SUMMARY.format(task_id=child["id"], provider=provider)
        self.cp.complete_child(child["id"], summary)
        text = (
            f"The delegated child task {child['id']} is done: {summary} Finish task-1 with finish_task once; "
            "do not repeat the child's work."
        )
        during, finals, next_index = self._collect_attached(steps, index)
        if not self._actionable():
            self.undelivered.append(text)
            self._emit("run.wake.deferred", reason=f"source task is {self._source().get('status')}")
            return next_index
        try:
            self._wake("blockers_resolved", text, during, finals, steps[next_index:])
        except _Stop:
            pass
        return next_index

    # ------------------------------------------------------------------ the end

    def finish(self) -> Evidence:
        if self.run_id is not None:
            self._end_run(self._run_end_status(()))
        self.callbacks.join()
        board = self._snapshot()
        events = self.events.events()
        source = response_source(events, board)
        if source == "none":
            self._emit("run.presentation.placeholder", reason="cancelled" if self.cancelled else "no response")
        else:
            self._emit("run.presentation.resolved", responseSource=source)
        status = self.last_run_status or "failed"
        terminal = self._emit("run.terminal", status=status)
        events = self.events.events()
        board = self._snapshot()
        first_visible = first_visible_progress_at(events)
        origin = self.first_turn_ms if self.first_turn_ms is not None else 0
        failure = None
        if not board.get("runResult") and not self.cancelled and self._source(board).get("status") != "cancelled":
            failure = "candidate_never_finished"
        return Evidence(
            execution_id=self.execution_id,
            case=self.case,
            candidate=self.candidate.document,
            board=board,
            events=events,
            markers=presentation_markers(events, board),
            turns=list(self.turns),
            usage=self.guard.usage,
            cost_usd=self.guard.cost_usd,
            budget_stop=self.guard.stop_message,
            trace={},
            first_visible_progress_ms=None if first_visible is None else max(0, first_visible - origin),
            settlement_ms=max(0, terminal.at_ms - origin) if self.first_turn_ms is not None else None,
            wall_ms=terminal.at_ms,
            candidate_failure=failure,
            notes=list(self.notes),
        )


def run_case(
    *,
    execution_id: str,
    case: Mapping[str, Any],
    candidate: CandidateSpec,
    prompt: str,
    driver: Driver,
    control_plane: Any,
    events: EventLog,
    budget_guard: BudgetGuard,
    trace: Any = None,
    attempt: int = 1,
    callbacks: CaseCallbacks | None = None,
    mode_instructions: Mapping[str, str] | None = None,
    activity_wait_ms: int | None = None,
) -> Evidence:
    """Play ``case`` against ``driver`` and ``control_plane`` and return the evidence.

    ``case`` is the workflow case document (``id``, ``title``, ``steps``, ``assertions``);
    ``candidate`` the candidate (its budget's ``max_latency_ms`` is the per-turn timeout in ms;
    ``Evidence.candidate`` is its snapshot document); ``prompt`` the case prompt (the ``run_start`` task mode's instruction
    from ``mode_instructions``, default :data:`MODE_INSTRUCTIONS`, is appended); ``events`` the
    execution's log (the driver and the control plane emit into it too); ``budget_guard`` the
    execution's :class:`~runs.executors.live.budgets.BudgetGuard`; ``trace`` the trace recorder (its
    ``summary()`` becomes ``Evidence.trace``) or a ready summary mapping, or ``None``;
    ``attempt`` the executor's attempt number (1-based).

    ``callbacks`` is the :class:`CaseCallbacks` the driver was built with (make it with
    :func:`case_callbacks` before building the driver, which needs it); :func:`run_case` attaches
    the driver to it so a budget stop can interrupt the turn. Without one, a new one is made and
    set as ``driver.callbacks`` (for drivers that read that attribute, such as test doubles).
    ``activity_wait_ms`` bounds how long a ``cancel``/``provider_turn`` restart step waits for
    the active turn's first activity (and an ``active_turn`` steer for the turn to start) before
    acting anyway; ``None`` (the default) waits as long as the turn may last, the candidate's
    ``max_latency_ms`` — a runtime's first turn can take several seconds to show anything
    (opencode initialises its tools lazily: 5-10 s on a loaded machine).

    The driver is started here and **not** closed (the caller owns it). Errors: whatever the
    driver raises (``InfrastructureError``) propagates; so does an error of the budget interrupt.
    A failed or timed-out turn does not raise: playing stops and the turn is in
    ``Evidence.turns`` for the executor to classify.
    """
    if callbacks is None:
        callbacks = case_callbacks(case, events=events, budget_guard=budget_guard)
        driver.callbacks = callbacks  # type: ignore[attr-defined]  # drivers built without callbacks
    callbacks.attach(driver)
    state = _CaseRun(
        execution_id=execution_id,
        case=case,
        candidate=candidate,
        prompt=prompt,
        driver=driver,
        control_plane=control_plane,
        events=events,
        budget_guard=budget_guard,
        callbacks=callbacks,
        mode_instructions=MODE_INSTRUCTIONS if mode_instructions is None else mode_instructions,
        activity_wait_ms=activity_wait_ms,
    )
    try:
        started = events.now_ms()
        driver.start()
        start_ms = events.now_ms() - started
        if "rejected" in ((case.get("assertions") or {}).get("trace") or {}).get("dispositions", []):
            # A clean run never shows a rejected frame; the case asks for one (Driver.probe_rejection).
            probe = getattr(driver, "probe_rejection", None)
            if probe is not None and probe():
                events.emit("trace.rejection.probed", source="harness")
        state.play()
        evidence = state.finish()
    finally:
        if state._on_event in events.listeners:
            events.listeners.remove(state._on_event)
    if callbacks.interrupt_error is not None:
        raise callbacks.interrupt_error
    evidence.attempt = attempt
    evidence.start_ms = start_ms
    if trace is not None:
        evidence.trace = dict(trace.summary()) if hasattr(trace, "summary") else dict(trace)
    return evidence
