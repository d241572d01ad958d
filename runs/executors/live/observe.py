"""Evidence → observation: what one live execution recorded, judged against its case.

Pure: no clock, no I/O, no Django. :func:`observe` turns :class:`~runs.executors.live.contracts.Evidence`
into a ``paperclip.runner.workflow-observation.v1`` document that passes
``runs.evaluation.observation_schema.validate_observation`` and is scored by ``runs.evaluation.scoring``.

The document carries every check the reference's live path makes (the reference live executor's checks, same ids,
same pass rules) **plus** one check per case assertion the reference never evaluates live
(docs/live-evaluation.md). The checks are the table :data:`CHECKS`, one named function each (the
check ``max-runs`` is ``check_max_runs``), reading the :class:`Facts` that :func:`gather_facts`
derives once. The derivations (run status, issue status, semantic disposition, recovery owner,
response source, comment count, presentation markers, activity families) are documented with
tables in ``docs/live-evaluation.md`` (the markers of each event type: :data:`MARKER_RULES`); the helpers here (:func:`presentation_markers`,
:func:`response_source`, :func:`recovery_owner`, :func:`activity_families`) are the single
implementation both the case driver and the observer use.

Events are :class:`~runs.executors.live.contracts.CanonicalEvent` objects (``type``, ``source``,
``at_ms``, ``data``); the board is ``ControlPlane.snapshot()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runs.evaluation.observations import OBSERVATION_SCHEMA, provenance
from runs.executors.live.budgets import budget_limits, budget_verdict
from runs.executors.live.contracts import CanonicalEvent, Evidence, TurnOutcome

SOURCE_TASK = "task-1"

#: Event types that are the agent's *visible progress* (the reference's live executor: the first
#: delta/activity): streamed or completed assistant text, a progress report, a tool starting.
VISIBLE_PROGRESS_TYPES = frozenset({"assistant.message.delta", "run.progress.reported", "tool.execution.started", "research.completed"})
#: Event types that are the agent's tool *activity* (presentation marker ``activity``).
ACTIVITY_TYPES = frozenset(
    {
        "tool.execution.started",
        "tool.execution.completed",
        "research.completed",
        "run.progress.reported",
        "file.change.completed",
    }
)
#: Control-plane mutations that are *not* a verification-only revision (plans, documents,
#: delegation, dependencies, blocking) — any of them after a rejection forbids ``verification-only``.
NON_VERIFICATION_TYPES = frozenset(
    {"plan.updated", "document.updated", "delegation.created", "task.dependencies.updated", "task.blocked", "file.change.completed"}
)
#: Sources whose events count for activity families (harness bookkeeping does not).
ACTIVITY_SOURCES = frozenset({"runtime", "control_plane"})


# ---------------------------------------------------------------------------- small facts


def is_assistant_text(event: CanonicalEvent) -> bool:
    """An ``item.completed`` that carries assistant text (``data.text``, the full message)."""
    return event.type == "item.completed" and isinstance(event.data.get("text"), str)


def is_visible_progress(event: CanonicalEvent) -> bool:
    """Whether ``event`` is visible progress: assistant text (delta or completed), a progress
    report, a tool start or a research result."""
    return event.type in VISIBLE_PROGRESS_TYPES or (is_assistant_text(event) and bool(event.data["text"].strip()))


def first_visible_progress_at(events: Sequence[CanonicalEvent]) -> int | None:
    """``at_ms`` of the first visible-progress event, or ``None``."""
    return next((event.at_ms for event in events if is_visible_progress(event)), None)


def case_steps(case: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The case's steps of ``kind``, in order."""
    return [step for step in case.get("steps", ()) if step.get("kind") == kind]


def _source_task(board: Mapping[str, Any]) -> Mapping[str, Any]:
    return next((task for task in board.get("tasks", ()) if task.get("id") == SOURCE_TASK), {})


def _segments(events: Sequence[CanonicalEvent]) -> list[tuple[str | None, list[CanonicalEvent]]]:
    """Events split by the harness's ``run.started`` events: ``[(runId, events of that run)]``
    (events before the first run under ``None``)."""
    segments: list[tuple[str | None, list[CanonicalEvent]]] = [(None, [])]
    for event in events:
        if event.type == "run.started":
            segments.append((event.data.get("runId"), []))
        segments[-1][1].append(event)
    return segments


def activity_families(events: Iterable[CanonicalEvent]) -> list[str]:
    """Distinct activity families of runtime and control-plane events, first seen first.

    A family is the event type without its last segment, dots as underscores
    (``tool.execution.completed`` → ``tool_execution``, ``research.completed`` → ``research``);
    a one-segment type is its own family (the case assertion ``requiredActivityFamilies``).
    """
    families: list[str] = []
    for event in events:
        if event.source not in ACTIVITY_SOURCES:
            continue
        parts = event.type.split(".")
        family = "_".join(parts[:-1]) if len(parts) > 1 else parts[0]
        if family not in families:
            families.append(family)
    return families


# ---------------------------------------------------------------------------- derivations


def response_source(events: Sequence[CanonicalEvent], board: Mapping[str, Any]) -> str:
    """Which text the presentation shows as the execution's response (the ``responseSource``).

    * ``none`` — the source task was cancelled, or there is neither a result nor assistant text;
    * with an accepted run result (``board["runResult"]``):
      ``existing_issue_comment`` when it came from an earlier run than the last one (the last run
      added no response; the earlier comment stands); else ``final_agent_message`` when the
      longest assistant message of the result's run is longer than the result summary (both
      stripped); else ``semantic_result_summary``;
    * without a result: ``adapter_final`` when the last run's turns ended with non-blank
      assistant text, else ``none``.
    """
    if _source_task(board).get("status") == "cancelled":
        return "none"
    segments = _segments(events)
    runs = [run_id for run_id, _ in segments if run_id is not None]
    result = board.get("runResult")
    if result:
        result_run = result.get("runId")
        if runs and result_run is not None and result_run != runs[-1]:
            return "existing_issue_comment"
        texts = [
            event.data["text"].strip()
            for run_id, run_events in segments
            if run_id == result_run
            for event in run_events
            if is_assistant_text(event)
        ]
        longest = max(texts, key=len, default="")
        summary = str(result.get("summary") or "").strip()
        return "final_agent_message" if longest and len(longest) > len(summary) else "semantic_result_summary"
    last_events = segments[-1][1] if segments else []
    texts = [event.data["text"] for event in last_events if is_assistant_text(event)]
    return "adapter_final" if texts and texts[-1].strip() else "none"


def recovery_owner(board: Mapping[str, Any]) -> str:
    """Who owns the next move when the execution ended (``recoveryOwner``).

    ``human`` — an interaction is still pending, or the accepted result asked for review
    (disposition ``needs_review``, whether or not the human has approved it since);
    ``board`` — the source task is blocked by open dependencies (the board must finish them);
    ``human`` — the source task was blocked by the agent itself (``block_task``: a person must
    unblock it); ``agent`` — the source task is still ``todo``/``in_progress`` with no result
    (the agent must pick it up again); ``none`` — nothing left to recover (done, cancelled).
    """
    if any(interaction.get("status") == "pending" for interaction in board.get("interactions", ())):
        return "human"
    result = board.get("runResult") or {}
    if result.get("disposition") == "needs_review":
        return "human"
    source = _source_task(board)
    status = source.get("status")
    if status == "blocked":
        tasks = {task.get("id"): task for task in board.get("tasks", ())}
        open_blockers = [b for b in source.get("blockedBy", ()) if tasks.get(b, {}).get("status") != "done"]
        return "board" if open_blockers else "human"
    if status in ("todo", "in_progress"):
        return "agent"
    return "none"


@dataclass
class _MarkerState:
    """What the marker rules remember while the events are read in order: the accepted result
    (for ``test``), whether the execution delegated (for ``same-issue``), and where the review
    cycle stands (for ``verification-only`` and ``replacement-review``)."""

    result: Mapping[str, Any]
    delegated: bool
    rejected: bool = False
    non_verification_since_rejection: bool = False

    def review_markers(self) -> tuple[str, ...]:
        """The markers of a review request: ``review`` before any rejection; after one,
        ``replacement-review``, preceded by ``verification-only`` when nothing but verification
        happened since the rejection."""
        if not self.rejected:
            return ("review",)
        if self.non_verification_since_rejection:
            return ("replacement-review",)
        return ("verification-only", "replacement-review")


#: A marker rule: the event's ``data`` and the state so far → the markers the event adds.
MarkerRule = Callable[[Mapping[str, Any], _MarkerState], Sequence[str]]


def _markers(*names: str) -> MarkerRule:
    """A rule that always adds ``names``."""
    return lambda data, state: names


def _plan_markers(data: Mapping[str, Any], state: _MarkerState) -> Sequence[str]:
    return (f"plan-v{data.get('revision', 1)}",)


def _interaction_requested_markers(data: Mapping[str, Any], state: _MarkerState) -> Sequence[str]:
    return state.review_markers() if data.get("kind") == "confirmation" else ("question",)


def _review_rejected_markers(data: Mapping[str, Any], state: _MarkerState) -> Sequence[str]:
    state.rejected, state.non_verification_since_rejection = True, False
    return ("rejection",)


def _run_started_markers(data: Mapping[str, Any], state: _MarkerState) -> Sequence[str]:
    markers = []
    if data.get("wakeReason") not in (None, "start"):
        markers.append("continuation")
    if data.get("wakeReason") == "blockers_resolved":
        markers.append("parent-wake")
    return markers


def _result_accepted_markers(data: Mapping[str, Any], state: _MarkerState) -> Sequence[str]:
    markers = []
    result = state.result
    verifications = result.get("verifications", []) if result.get("receiptId") == data.get("receiptId") else []
    if any(v.get("status") in ("passed", "failed") for v in verifications):
        markers.append("test")
    if data.get("disposition") == "needs_review":
        markers.extend(state.review_markers())
    if not state.delegated:
        markers.append("same-issue")
    markers.append("parent-final")
    return markers


def _run_terminal_markers(data: Mapping[str, Any], state: _MarkerState) -> Sequence[str]:
    return ("stopped",) if data.get("status") == "cancelled" else ()


#: The markers each event type adds after the ones every event may add (``pre-steer``/``post-steer``,
#: ``commentary``, ``activity``): the table of ``docs/live-evaluation.md`` §Markers.
MARKER_RULES: Mapping[str, MarkerRule] = {
    "research.completed": _markers("research"),
    "tool.execution.completed": _markers("tool"),
    "file.change.completed": _markers("file"),
    "document.updated": _markers("file"),
    "plan.updated": _plan_markers,
    "interaction.requested": _interaction_requested_markers,
    "interaction.resolved": _markers("answer"),
    "review.rejected": _review_rejected_markers,
    "review.approved": _markers("acceptance", "approval"),
    "run.started": _run_started_markers,
    "turn.steering.delivered": _markers("steering"),
    "runtime_request.resolved": _markers("permission"),
    "delegation.completed": _markers("child-result"),
    "run.result.accepted": _result_accepted_markers,
    "turn.interrupted": _markers("stopped"),
    "run.cancel.requested": _markers("stopped"),
    "run.terminal": _run_terminal_markers,
    "run.presentation.resolved": _markers("final"),
}


def presentation_markers(events: Sequence[CanonicalEvent], board: Mapping[str, Any]) -> list[str]:
    """The ordered presentation markers of an execution (``orderedMarkers``).

    Each event adds the markers of the table in ``docs/live-evaluation.md`` §Markers
    (:data:`MARKER_RULES` for the markers of one event type), in the order the events happened;
    a marker equal to the one just before it is not repeated. The case's ``orderedMarkers``
    assertion must be an ordered subsequence of this list.
    """
    markers: list[str] = []

    def add(*names: str) -> None:
        for name in names:
            if not markers or markers[-1] != name:
                markers.append(name)

    first_steer = next((i for i, e in enumerate(events) if e.type == "turn.steering.delivered"), None)
    state = _MarkerState(
        result=board.get("runResult") or {},
        delegated=any(event.type == "delegation.created" for event in events),
    )
    for index, event in enumerate(events):
        commentary = is_assistant_text(event) and bool(event.data["text"].strip())
        if first_steer is not None and (commentary or event.type in ACTIVITY_TYPES):
            add("pre-steer" if index < first_steer else "post-steer")
        if commentary:
            add("commentary")
        if event.type in NON_VERIFICATION_TYPES and state.rejected:
            state.non_verification_since_rejection = True
        if event.type in ACTIVITY_TYPES:
            add("activity")
        rule = MARKER_RULES.get(event.type)
        if rule is not None:
            add(*rule(event.data, state))
    return markers


def is_subsequence(expected: Sequence[str], observed: Sequence[str]) -> bool:
    """Whether ``expected`` occurs in ``observed`` in order (not necessarily adjacent)."""
    remaining = iter(observed)
    return all(any(item == seen for seen in remaining) for item in expected)


def run_status(board: Mapping[str, Any]) -> str | None:
    """The last run's status (``succeeded``/``failed``/``cancelled``/``yielded``/``blocked``),
    ``None`` when no run ended."""
    runs = [run for run in board.get("runs", ()) if run.get("status") not in (None, "running")]
    return runs[-1]["status"] if runs else None


def _unique(values: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _trace_lineage(trace: Mapping[str, Any] | None) -> dict[str, Any]:
    trace = dict(trace or {})
    lineage = {
        "capture": "on" if trace.get("capture") == "on" else "off",
        "frameCount": int(trace.get("frameCount") or 0),
        "byteCount": int(trace.get("byteCount") or 0),
        "digestVerified": bool(trace.get("digestVerified")),
        "ordered": bool(trace.get("ordered")),
        "dispositions": list(trace.get("dispositions") or []),
        "lineage": list(trace.get("lineage") or []),
    }
    if isinstance(trace.get("traceRef"), str):
        lineage["traceRef"] = trace["traceRef"]
    return lineage


# ---------------------------------------------------------------------------- the facts


@dataclass(frozen=True)
class Facts:
    """What the checks and the document read from one execution's evidence, derived once.

    ``calls`` are the operations of the agent's control-plane calls in order; ``expected`` the
    case's ``requiredOperationIds``; ``scorable`` the calls that count (expected, or not
    read-only); ``extra`` the scorable calls the case does not expect (distinct); ``missing`` the
    expected operations never called; ``duplicates`` the calls replayed as duplicates; ``turns``
    the runtime turns minus those a process restart killed; ``texts`` every assistant text;
    ``comments`` the comments on the source task; ``tokens`` and ``cost`` (USD, ``None`` when
    unknown) the usage, ``max_tokens``/``max_cost`` the candidate's limits and ``verdict`` the
    budget verdict (``None`` within budget); ``terminal_okay`` whether the turns ended as the
    case expects (interrupted/cancelled in a cancel case, else all completed).
    """

    evidence: Evidence
    case_id: str
    case: Mapping[str, Any]
    assertions: Mapping[str, Any]
    budget: Mapping[str, Any]
    board: Mapping[str, Any]
    events: list[CanonicalEvent]
    event_types: list[str]
    tool_calls: list[Mapping[str, Any]]
    calls: list[str]
    expected: list[str]
    scorable: list[str]
    extra: list[str]
    missing: list[str]
    duplicates: list[Mapping[str, Any]]
    pending: list[Mapping[str, Any]]
    issue_status: str | None
    turns: list[TurnOutcome]
    texts: list[str]
    comments: list[Mapping[str, Any]]
    mutated: bool
    tokens: int
    cost: float | None
    cancel_case: bool
    restart_case: bool
    terminal_okay: bool
    finishing_calls: list[Mapping[str, Any]]
    result: Mapping[str, Any] | None
    runs: list[Mapping[str, Any]]
    attempts: int
    max_tokens: int | None
    max_cost: float | None
    verdict: str | None
    markers: list[str]
    families: list[str]
    response_source: str
    recovery_owner: str
    run_status: str | None
    receipts: list[str]
    lineage: dict[str, Any]


def gather_facts(evidence: Evidence) -> Facts:
    """The :class:`Facts` of ``evidence`` (the snapshot facts the reference live executor's
    checks read, and the derivations of ``docs/live-evaluation.md`` §2)."""
    case = evidence.case
    assertions: Mapping[str, Any] = case.get("assertions", {})
    budget: Mapping[str, Any] = dict(evidence.candidate.get("budget") or {})
    board = evidence.board
    events = list(evidence.events)
    tool_calls = list(board.get("toolCalls", ()))
    calls = [str(call.get("operation")) for call in tool_calls]
    read_only = {str(call.get("operation")) for call in tool_calls if call.get("readOnly")}
    expected = list(assertions.get("requiredOperationIds", []))
    scorable = [call for call in calls if call in expected or call not in read_only]
    restarted_turns = {e.data.get("turnId") for e in events if e.type == "process.restarted" and e.data.get("turnId")}
    turns = [turn for turn in evidence.turns if turn.turn_id not in restarted_turns]
    cancel_case = bool(case_steps(case, "cancel"))
    if cancel_case:
        terminal_okay = any(turn.status in ("cancelled", "interrupted") for turn in evidence.turns)
    else:
        terminal_okay = bool(turns) and all(turn.status == "completed" for turn in turns)
    tokens = evidence.usage.total
    max_tokens, max_cost = budget_limits(budget)
    return Facts(
        evidence=evidence,
        case_id=case["id"],
        case=case,
        assertions=assertions,
        budget=budget,
        board=board,
        events=events,
        event_types=[event.type for event in events],
        tool_calls=tool_calls,
        calls=calls,
        expected=expected,
        scorable=scorable,
        extra=_unique(call for call in scorable if call not in expected),
        missing=[op for op in expected if op not in calls],
        duplicates=[call for call in tool_calls if call.get("outcome") == "duplicate"],
        pending=[i for i in board.get("interactions", ()) if i.get("status") == "pending"],
        issue_status=_source_task(board).get("status"),
        turns=turns,
        texts=[event.data["text"] for event in events if is_assistant_text(event)],
        comments=[c for c in board.get("comments", ()) if c.get("taskId") == SOURCE_TASK],
        mutated=any(entry.get("actor") == "agent" for entry in board.get("stateHistory", ())),
        tokens=tokens,
        cost=evidence.cost_usd,
        cancel_case=cancel_case,
        restart_case=bool(case_steps(case, "process_restart")),
        terminal_okay=terminal_okay,
        finishing_calls=[c for c in tool_calls if c.get("operation") in ("finish_task", "request_review")],
        result=board.get("runResult") or None,
        runs=list(board.get("runs", ())),
        attempts=int(evidence.attempt),
        max_tokens=max_tokens,
        max_cost=max_cost,
        verdict=budget_verdict(
            total_tokens=tokens,
            cost_usd=evidence.cost_usd,
            stop_message=evidence.budget_stop,
            max_total_tokens=max_tokens,
            max_cost_usd=max_cost,
        ),
        markers=presentation_markers(events, board),
        families=activity_families(events),
        response_source=response_source(events, board),
        recovery_owner=recovery_owner(board),
        run_status=run_status(board),
        receipts=[str(call.get("receiptId")) for call in tool_calls if call.get("receiptId")],
        lineage=_trace_lineage(evidence.trace),
    )


# ---------------------------------------------------------------------------- the checks


@dataclass(frozen=True)
class Outcome:
    """A check's result: ``reason`` is said only when it fails (or always, with ``said_anyway``);
    ``evidence_ids`` name what it failed on."""

    passed: bool
    reason: str
    evidence_ids: Sequence[str] = ()
    said_anyway: bool = False


@dataclass(frozen=True)
class Check:
    """One check of the observation: its ``group`` (``lifecycle``, ``continuation``,
    ``presentation``) and ``id`` in the document, ``judge`` (facts → :class:`Outcome`), and
    ``applies`` (facts → whether the execution gets this check; always, by default)."""

    group: str
    id: str
    judge: Callable[[Facts], Outcome]
    applies: Callable[[Facts], bool] = lambda facts: True

    def made(self, facts: Facts) -> dict[str, Any]:
        """The check as the document holds it: ``{id, passed, reason?, evidenceIds?}``."""
        outcome = self.judge(facts)
        check: dict[str, Any] = {"id": self.id, "passed": bool(outcome.passed)}
        if not outcome.passed or outcome.said_anyway:
            check["reason"] = outcome.reason
        if outcome.evidence_ids:
            check["evidenceIds"] = list(outcome.evidence_ids)
        return check


def asserted(key: str) -> Callable[[Facts], bool]:
    """``applies`` for a check made only when the case declares the assertion ``key``."""
    return lambda facts: key in facts.assertions


def _equal(observed: Any, expected: Any, reason: str) -> Outcome:
    """Passes when ``observed`` equals ``expected``; ``reason`` is formatted with both."""
    return Outcome(observed == expected, reason.format(observed=observed, expected=expected))


# --- lifecycle: the reference live executor's checks


def check_terminal_authority(f: Facts) -> Outcome:
    if f.cancel_case:
        reason = "no turn was interrupted or cancelled"
    elif f.turns:
        reason = "turns did not all complete: " + ", ".join(f"{t.turn_id} {t.status}" for t in f.turns)
    else:
        reason = "no runtime turn ran"
    return Outcome(f.terminal_okay, reason)


def check_attempt_bound(f: Facts) -> Outcome:
    max_attempts = f.budget.get("maxAttempts")
    return Outcome(
        max_attempts is None or f.attempts <= max_attempts,
        f"attempt {f.attempts} exceeds the candidate's maxAttempts {max_attempts}",
    )


def check_token_budget(f: Facts) -> Outcome:
    return Outcome(f.max_tokens is None or f.tokens <= f.max_tokens, f"total tokens {f.tokens} exceed maxTotalTokens {f.max_tokens}")


def check_cost_budget(f: Facts) -> Outcome:
    if f.cost is None and f.max_cost is not None:
        # Unknown is not $0: the limit was not checked. Said, although the check passes.
        return Outcome(True, "cost unknown (no price for the model): the cost budget was not checked", said_anyway=True)
    return Outcome(
        f.max_cost is None or f.cost is None or f.cost <= f.max_cost,
        f"cost ${f.cost} exceeds maxCostUsd ${f.max_cost}",
    )


def check_candidate_budget_stop(f: Facts) -> Outcome:
    return Outcome(
        f.verdict is None,
        f"{f.verdict}: {f.evidence.budget_stop or f'usage reached the budget (tokens {f.tokens})'}",
    )


def check_semantic_disposition(f: Facts) -> Outcome:
    return Outcome(
        f.cancel_case or bool(f.finishing_calls),
        "the agent never called finish_task or request_review",
        [str(c["receiptId"]) for c in f.finishing_calls if c.get("receiptId")],
    )


def check_owned_wait(f: Facts) -> Outcome:
    return Outcome(not f.pending, "interactions still pending: " + ", ".join(str(i.get("id")) for i in f.pending))


# --- lifecycle: one per lifecycle assertion of the case


def check_issue_status(f: Facts) -> Outcome:
    return _equal(f.issue_status, f.assertions["issueStatus"], "source task is {observed}, expected {expected}")


def check_run_status(f: Facts) -> Outcome:
    return _equal(f.run_status, f.assertions["runStatus"], "last run ended {observed}, expected {expected}")


def check_semantic_disposition_value(f: Facts) -> Outcome:
    disposition = f.result.get("disposition") if f.result else None
    expected = f.assertions["semanticDisposition"]
    return Outcome(disposition == expected, f"accepted result disposition is {disposition or 'missing'}, expected {expected}")


def check_max_runs(f: Facts) -> Outcome:
    return Outcome(len(f.runs) <= f.assertions["maxRuns"], f"{len(f.runs)} runs, at most {f.assertions['maxRuns']} allowed")


def check_max_attempts(f: Facts) -> Outcome:
    return Outcome(f.attempts <= f.assertions["maxAttempts"], f"attempt {f.attempts}, at most {f.assertions['maxAttempts']} allowed")


def check_recovery_owner(f: Facts) -> Outcome:
    return _equal(f.recovery_owner, f.assertions["recoveryOwner"], "recovery owner is {observed}, expected {expected}")


def check_required_prp_events(f: Facts) -> Outcome:
    absent = [t for t in f.assertions["requiredPrpEventTypes"] if t not in f.event_types]
    return Outcome(not absent, "required events missing: " + ", ".join(absent))


def check_forbidden_prp_events(f: Facts) -> Outcome:
    present = [t for t in f.assertions["forbiddenPrpEventTypes"] if t in f.event_types]
    return Outcome(not present, "forbidden events present: " + ", ".join(present))


# --- continuation


def check_required_calls(f: Facts) -> Outcome:
    return Outcome(not f.missing, "missing required call(s): " + ", ".join(f.missing))


def check_trajectory_restraint(f: Facts) -> Outcome:
    return Outcome(not f.extra, "unexpected call(s): " + ", ".join(f.extra))


def check_no_repeated_work(f: Facts) -> Outcome:
    return Outcome(
        f.restart_case or not f.duplicates,
        "repeated call(s): " + ", ".join(f"{c.get('operation')} ({c.get('receiptId')})" for c in f.duplicates),
    )


def leaves_every_operation_to_the_control_plane(f: Facts) -> bool:
    """The case declares ``requiredOperationIds`` and it is empty."""
    return not f.expected and "requiredOperationIds" in f.assertions


def check_control_plane_owned(f: Facts) -> Outcome:
    return Outcome(
        not f.calls,
        "the case leaves every operation to the control plane, but the agent called: " + ", ".join(_unique(f.calls)),
    )


def steers(f: Facts) -> bool:
    """The case has a ``steer`` step."""
    return bool(case_steps(f.case, "steer"))


def check_steering_acknowledged_once(f: Facts) -> Outcome:
    delivered = _unique(
        str(e.data.get("steerId")) for e in f.events if e.type == "turn.steering.delivered" and e.data.get("delivery") == "active_turn"
    )
    acks = f.event_types.count("turn.steering.acknowledged")
    return Outcome(
        acks == len(delivered),
        f"{acks} steering acknowledgement(s) for {len(delivered)} active-turn steer id(s); expected exactly one each",
    )


def restarts(f: Facts) -> bool:
    """The case has a ``process_restart`` step."""
    return f.restart_case


def check_single_finalization(f: Facts) -> Outcome:
    accepted_runs = [e.data.get("runId") for e in f.events if e.type == "run.result.accepted"]
    twice = _unique(str(run) for run in accepted_runs if accepted_runs.count(run) > 1)
    ended = [run for run in f.runs if run.get("status") not in (None, "running")]
    return Outcome(
        not twice and len(ended) == len(f.runs),
        "run(s) finalised twice: " + ", ".join(twice) if twice else "a run was never finalised",
    )


# --- presentation


def check_first_visible_progress(f: Facts) -> Outcome:
    return Outcome(
        f.cancel_case or f.evidence.first_visible_progress_ms is not None,
        "no visible progress (assistant text, progress report or tool activity) was seen",
    )


def check_substantive_response(f: Facts) -> Outcome:
    return Outcome(f.cancel_case or any(len(text.strip()) >= 2 for text in f.texts), "no assistant text of at least 2 characters")


def check_no_empty_comment(f: Facts) -> Outcome:
    blank_texts = [text for text in f.texts if not text.strip()]
    blank_comments = [c for c in f.comments if not str(c.get("body") or "").strip()]
    return Outcome(
        not blank_texts and not blank_comments,
        f"{len(blank_texts)} blank assistant message(s) and {len(blank_comments)} blank comment(s)",
        [str(c.get("id")) for c in blank_comments],
    )


def check_terminal_presentation(f: Facts) -> Outcome:
    return Outcome(f.terminal_okay, "the execution did not end in the expected terminal state")


def check_comment_count(f: Facts) -> Outcome:
    return _equal(len(f.comments), f.assertions["commentCount"], "{observed} comment(s) on the source task, expected {expected}")


def check_response_source(f: Facts) -> Outcome:
    return _equal(f.response_source, f.assertions["responseSource"], "response source is {observed}, expected {expected}")


def check_ordered_markers(f: Facts) -> Outcome:
    expected = f.assertions["orderedMarkers"]
    return Outcome(
        is_subsequence(expected, f.markers),
        "markers " + " > ".join(expected) + " not in order in: " + " > ".join(f.markers),
    )


def check_activity_families(f: Facts) -> Outcome:
    absent = [family for family in f.assertions["requiredActivityFamilies"] if family not in f.families]
    return Outcome(not absent, "activity families missing: " + ", ".join(absent))


def check_trace_expectations(f: Facts) -> Outcome:
    problems = _trace_problems(f.assertions["trace"], f.lineage)
    return Outcome(not problems, "; ".join(problems))


#: Every check, in the order the document lists them (``docs/live-evaluation.md`` §3): first the
#: reference live executor's checks, always made; then one per assertion the case declares.
CHECKS: tuple[Check, ...] = (
    Check("lifecycle", "terminal-authority", check_terminal_authority),
    Check("lifecycle", "attempt-bound", check_attempt_bound),
    Check("lifecycle", "token-budget", check_token_budget),
    Check("lifecycle", "cost-budget", check_cost_budget),
    Check("lifecycle", "candidate-budget-stop", check_candidate_budget_stop),
    Check("lifecycle", "semantic-disposition", check_semantic_disposition),
    Check("lifecycle", "owned-wait", check_owned_wait),
    Check("lifecycle", "issue-status", check_issue_status, asserted("issueStatus")),
    Check("lifecycle", "run-status", check_run_status, asserted("runStatus")),
    Check("lifecycle", "semantic-disposition-value", check_semantic_disposition_value, asserted("semanticDisposition")),
    Check("lifecycle", "max-runs", check_max_runs, asserted("maxRuns")),
    Check("lifecycle", "max-attempts", check_max_attempts, asserted("maxAttempts")),
    Check("lifecycle", "recovery-owner", check_recovery_owner, asserted("recoveryOwner")),
    Check("lifecycle", "required-prp-events", check_required_prp_events, asserted("requiredPrpEventTypes")),
    Check("lifecycle", "forbidden-prp-events", check_forbidden_prp_events, asserted("forbiddenPrpEventTypes")),
    Check("continuation", "required-calls", check_required_calls),
    Check("continuation", "trajectory-restraint", check_trajectory_restraint),
    Check("continuation", "no-repeated-work", check_no_repeated_work),
    Check("continuation", "control-plane-owned", check_control_plane_owned, leaves_every_operation_to_the_control_plane),
    Check("continuation", "steering-acknowledged-once", check_steering_acknowledged_once, steers),
    Check("continuation", "single-finalization", check_single_finalization, restarts),
    Check("presentation", "first-visible-progress", check_first_visible_progress),
    Check("presentation", "substantive-response", check_substantive_response),
    Check("presentation", "no-empty-comment", check_no_empty_comment),
    Check("presentation", "terminal-presentation", check_terminal_presentation),
    Check("presentation", "comment-count", check_comment_count, asserted("commentCount")),
    Check("presentation", "response-source", check_response_source, asserted("responseSource")),
    Check("presentation", "ordered-markers", check_ordered_markers, asserted("orderedMarkers")),
    Check("presentation", "activity-families", check_activity_families, asserted("requiredActivityFamilies")),
    Check("presentation", "trace-expectations", check_trace_expectations, asserted("trace")),
)
#: The check groups, in the order the document holds them.
GROUPS = ("lifecycle", "continuation", "presentation")


# ---------------------------------------------------------------------------- the observation


def observe(evidence: Evidence, *, scripted: bool = False) -> dict[str, Any]:
    """The observation document of one live execution (``paperclip.runner.workflow-observation.v1``).

    ``scripted``: the model was evalhub's scripted model, and ``base.provenance`` says so
    (``runs.evaluation.observations.provenance``: source ``fixture``, never ``live_model``).

    ``evidence.case`` is the case document (``id``, ``steps``, ``assertions``),
    ``evidence.candidate`` the candidate document (``id``, ``provider``, ``budget`` with
    ``maxLatencyMs`` ms, ``maxAttempts``, ``maxTotalTokens`` tokens, ``maxCostUsd`` USD).
    The checks are :data:`CHECKS`, each made when it applies. Classification is ``completed``
    when every check passes and there is no budget verdict, else ``candidate_failure`` with
    ``failure`` ``{code, category: "candidate", retryable: False, message}``: the code is the
    budget verdict (``candidate_budget_exceeded``/``_reached``), else the case driver's
    ``candidate_failure`` code, else ``candidate_checks_failed``; the message names every
    failing check as ``<group>/<id>``. Never raises for odd evidence; infrastructure failures
    are raised by the executor before observing.
    """
    facts = gather_facts(evidence)
    checks: dict[str, list[dict[str, Any]]] = {group: [] for group in GROUPS}
    for check in CHECKS:
        if check.applies(facts):
            checks[check.group].append(check.made(facts))
    failing = [f"{group}/{check['id']}" for group, made in checks.items() for check in made if not check["passed"]]
    classification = "completed" if not failing and facts.verdict is None else "candidate_failure"
    observation: dict[str, Any] = {
        "schema": OBSERVATION_SCHEMA,
        "caseId": facts.case_id,
        "candidateId": evidence.candidate["id"],
        "provider": evidence.candidate["provider"],
        "classification": classification,
        "base": _base(facts, scripted=scripted),
        "lifecycle": _lifecycle(facts, checks["lifecycle"]),
        "continuation": _continuation(facts, checks["continuation"]),
        "presentation": _presentation(facts, checks["presentation"], classification),
        "traceLineage": facts.lineage,
        "metrics": _metrics(facts),
        "observedPrpEventTypes": _unique(facts.event_types),
        "artifactDigests": [],
    }
    if classification == "candidate_failure":
        observation["failure"] = _failure(facts, failing)
    return observation


def _base(f: Facts, *, scripted: bool) -> dict[str, Any]:
    """``base``: the reference's snapshot section (calls, final state, authorization, trace ids,
    efficiency, budget)."""
    if not f.calls:
        authorization = "absent"
    elif any(c.get("errorCode") == "not_allowed" for c in f.tool_calls):
        authorization = "denied"
    else:
        authorization = "allowed"
    return {
        "caseId": f.case_id,
        "provenance": provenance(f.case_id, scripted=scripted),
        "controlPlaneOwned": not f.expected,
        "expectedCalls": f.expected,
        "observedCalls": f.scorable,
        "forbiddenCalls": [],
        "finalState": {"expected": "mutated" if f.expected else "unchanged", "observed": "mutated" if f.mutated else "unchanged"},
        "authorization": {"expected": "allowed" if f.expected else "absent", "observed": authorization},
        "trace": _trace_ids(f),
        "efficiency": _efficiency(f),
        "budget": f.budget,
    }


def _trace_ids(f: Facts) -> dict[str, Any]:
    """``base.trace``: run, session, receipt, last turn and first item ids."""
    evidence = f.evidence
    trace: dict[str, Any] = {
        "runId": evidence.execution_id,
        "sessionId": f"eval-{evidence.execution_id}",
        "receiptIds": f.receipts,
        "terminalPresent": bool(evidence.turns),
    }
    if evidence.turns:
        trace["turnId"] = evidence.turns[-1].turn_id
    item_id = f.receipts[0] if f.receipts else _first_item_id(f.events)
    if item_id:
        trace["itemId"] = item_id
    return trace


def _efficiency(f: Facts) -> dict[str, Any]:
    """``base.efficiency``: latency (ms), tokens, attempts, and the cost (USD) when known."""
    efficiency: dict[str, Any] = {"latencyMs": f.evidence.wall_ms, "totalTokens": f.tokens, "attempts": f.attempts}
    if f.cost is not None:
        efficiency["costUsd"] = f.cost
    return efficiency


def _lifecycle(f: Facts, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """``lifecycle``: its checks, attempts, runs, recovery owner, and the issue status, run
    status and semantic disposition when there are any."""
    lifecycle: dict[str, Any] = {"checks": checks, "attempts": f.attempts, "runs": len(f.runs), "recoveryOwner": f.recovery_owner}
    if f.issue_status:
        lifecycle["issueStatus"] = f.issue_status
    if f.run_status in ("succeeded", "failed", "cancelled", "yielded"):
        lifecycle["runStatus"] = f.run_status
    if f.result and f.result.get("disposition"):
        lifecycle["semanticDisposition"] = f.result["disposition"]
    return lifecycle


def _continuation(f: Facts, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """``continuation``: its checks, the wake reasons after the start, the settled interaction and
    steer ids, and the repeated-work signals."""
    consumed = [i.get("id") for i in f.board.get("interactions", ()) if i.get("status") != "pending"]
    consumed += _unique(str(e.data.get("steerId")) for e in f.events if e.type == "turn.steering.delivered")
    return {
        "checks": checks,
        "wakeReasons": [run.get("wakeReason") for run in f.runs if run.get("wakeReason") not in (None, "start")],
        "consumedInputIds": [str(i) for i in consumed],
        "sessionPolicy": "same_session",
        "repeatedWorkSignals": _unique([*f.extra, *(str(c.get("operation")) for c in f.duplicates)]),
    }


def _presentation(f: Facts, checks: list[dict[str, Any]], classification: str) -> dict[str, Any]:
    """``presentation``: its checks and the derived presentation fields."""
    if f.issue_status == "cancelled":
        terminal_label = "Stopped"
    elif classification == "completed":
        terminal_label = "Completed"
    else:
        terminal_label = "Needs attention"
    return {
        "checks": checks,
        "responseSource": f.response_source,
        "commentCount": len(f.comments),
        "orderedMarkers": f.markers,
        "visibleActivityFamilies": f.families,
        "terminalLabel": terminal_label,
    }


def _metrics(f: Facts) -> dict[str, Any]:
    """``metrics``: attempts, tool calls, tokens, and the times (ms) and cost (USD) when known."""
    metrics: dict[str, Any] = {"attempts": f.attempts, "toolCount": len(f.tool_calls), "totalTokens": f.tokens}
    if f.evidence.first_visible_progress_ms is not None:
        metrics["timeToFirstVisibleProgressMs"] = max(0, f.evidence.first_visible_progress_ms)
    if f.evidence.settlement_ms is not None:
        metrics["settlementMs"] = max(0, f.evidence.settlement_ms)
    if f.cost is not None:
        metrics["costUsd"] = f.cost
    return metrics


def _failure(f: Facts, failing: list[str]) -> dict[str, Any]:
    """``failure`` of a ``candidate_failure``: the budget verdict, the case driver's code or
    ``candidate_checks_failed``, and a message naming the failing checks (at most 1,000 characters)."""
    code = f.verdict or f.evidence.candidate_failure or "candidate_checks_failed"
    message = "failed checks: " + (", ".join(failing) if failing else "none")
    if f.verdict is not None:
        message = f"{f.verdict}: {f.evidence.budget_stop or 'usage reached the budget'}; {message}"
    return {"code": code, "category": "candidate", "retryable": False, "message": message[:1000]}


def _first_item_id(events: Sequence[CanonicalEvent]) -> str | None:
    """The first runtime item's id (``data.itemId``, else the event id), for executions in which
    the agent made no control-plane call (the reference leaves ``itemId`` empty then)."""
    for event in events:
        if event.type == "item.started":
            return str(event.data.get("itemId") or event.id)
    return None


def _trace_problems(expected: Mapping[str, Any], lineage: Mapping[str, Any]) -> list[str]:
    """What the trace lacks against the case's ``assertions.trace`` (empty when it meets them)."""
    problems = []
    capture = expected.get("capture", "either")
    if capture == "on" and not (lineage["capture"] == "on" and lineage["frameCount"] > 0 and lineage["byteCount"] > 0):
        problems.append("trace capture is empty")
    if capture == "off" and (lineage["capture"] != "off" or lineage["frameCount"] or "traceRef" in lineage):
        problems.append("trace was captured although capture is off")
    if expected.get("digestVerified") and not lineage["digestVerified"]:
        problems.append("frame digests did not verify")
    if expected.get("ordered") and not lineage["ordered"]:
        problems.append("frames are not strictly ordered")
    absent = [d for d in expected.get("dispositions", ()) if d not in lineage["dispositions"]]
    if absent:
        problems.append("dispositions not exercised: " + ", ".join(absent))
    absent = [k for k in expected.get("lineage", ()) if k not in lineage["lineage"]]
    if absent:
        problems.append("lineage kinds not exercised: " + ", ".join(absent))
    return problems
