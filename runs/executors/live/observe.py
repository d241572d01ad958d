"""Evidence → observation: what one live execution recorded, judged against its case.

Pure: no clock, no I/O, no Django. :func:`observe` turns :class:`~runs.executors.live.contracts.Evidence`
into a ``paperclip.runner.workflow-observation.v1`` document that passes
``runs.evaluation.observation_schema.validate_observation`` and is scored by ``runs.evaluation.scoring``.

The document carries every check the reference's live path makes (the reference live executor's checks, same ids,
same pass rules) **plus** one check per case assertion the reference never evaluates live
(docs/live-evaluation.md). The derivations (run status, issue status, semantic disposition, recovery owner,
response source, comment count, presentation markers, activity families) are documented with
tables in ``docs/live-evaluation.md``; the helpers here (:func:`presentation_markers`,
:func:`response_source`, :func:`recovery_owner`, :func:`activity_families`) are the single
implementation both the case driver and the observer use.

Events are :class:`~runs.executors.live.contracts.CanonicalEvent` objects (``type``, ``source``,
``at_ms``, ``data``); the board is ``ControlPlane.snapshot()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from runs.evaluation.observations import OBSERVATION_SCHEMA, provenance
from runs.executors.live.budgets import budget_limits, budget_verdict
from runs.executors.live.contracts import CanonicalEvent, Evidence

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


def presentation_markers(events: Sequence[CanonicalEvent], board: Mapping[str, Any]) -> list[str]:
    """The ordered presentation markers of an execution (``orderedMarkers``).

    Each event adds the markers of the table in ``docs/live-evaluation.md`` §Markers, in the
    order the events happened; a marker equal to the one just before it is not repeated. The
    case's ``orderedMarkers`` assertion must be an ordered subsequence of this list.
    """
    markers: list[str] = []

    def add(*names: str) -> None:
        for name in names:
            if not markers or markers[-1] != name:
                markers.append(name)

    first_steer = next((i for i, e in enumerate(events) if e.type == "turn.steering.delivered"), None)
    delegated = any(event.type == "delegation.created" for event in events)
    result = board.get("runResult") or {}
    rejected = False
    non_verification_since_rejection = False
    for index, event in enumerate(events):
        kind, data = event.type, event.data
        agent_output = is_assistant_text(event) and bool(data["text"].strip()) or kind in ACTIVITY_TYPES
        if agent_output and first_steer is not None:
            add("pre-steer" if index < first_steer else "post-steer")
        if is_assistant_text(event) and data["text"].strip():
            add("commentary")
        if kind in NON_VERIFICATION_TYPES and rejected:
            non_verification_since_rejection = True
        if kind in ACTIVITY_TYPES:
            add("activity")
        if kind == "research.completed":
            add("research")
        elif kind == "tool.execution.completed":
            add("tool")
        elif kind in ("file.change.completed", "document.updated"):
            add("file")
        elif kind == "plan.updated":
            add(f"plan-v{data.get('revision', 1)}")
        elif kind == "interaction.requested":
            if data.get("kind") == "confirmation":
                if rejected and not non_verification_since_rejection:
                    add("verification-only")
                add("replacement-review" if rejected else "review")
            else:
                add("question")
        elif kind == "interaction.resolved":
            add("answer")
        elif kind == "review.rejected":
            rejected, non_verification_since_rejection = True, False
            add("rejection")
        elif kind == "review.approved":
            add("acceptance", "approval")
        elif kind == "run.started":
            if data.get("wakeReason") not in (None, "start"):
                add("continuation")
            if data.get("wakeReason") == "blockers_resolved":
                add("parent-wake")
        elif kind == "turn.steering.delivered":
            add("steering")
        elif kind == "runtime_request.resolved":
            add("permission")
        elif kind == "delegation.completed":
            add("child-result")
        elif kind == "run.result.accepted":
            verifications = result.get("verifications", []) if result.get("receiptId") == data.get("receiptId") else []
            if any(v.get("status") in ("passed", "failed") for v in verifications):
                add("test")
            if data.get("disposition") == "needs_review":
                if rejected and not non_verification_since_rejection:
                    add("verification-only")
                add("replacement-review" if rejected else "review")
            if not delegated:
                add("same-issue")
            add("parent-final")
        elif kind in ("turn.interrupted", "run.cancel.requested") or (kind == "run.terminal" and data.get("status") == "cancelled"):
            add("stopped")
        elif kind == "run.presentation.resolved":
            add("final")
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


# ---------------------------------------------------------------------------- the observation


def _check(check_id: str, passed: bool, reason: str, evidence_ids: Sequence[str] = ()) -> dict[str, Any]:
    """A reference check: reason only on failure, evidenceIds only when not empty."""
    check: dict[str, Any] = {"id": check_id, "passed": bool(passed)}
    if not passed:
        check["reason"] = reason
    if evidence_ids:
        check["evidenceIds"] = list(evidence_ids)
    return check


def _expect(checks: list[dict[str, Any]], assertions: Mapping[str, Any], key: str, check_id: str, observed: Any, reason: str) -> None:
    """Append ``check_id`` when the case asserts ``key``: passes when ``observed`` equals the
    asserted value; ``reason`` is formatted with ``observed`` and ``expected``."""
    if key in assertions:
        expected = assertions[key]
        checks.append(_check(check_id, observed == expected, reason.format(observed=observed, expected=expected)))


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


def observe(evidence: Evidence, *, scripted: bool = False) -> dict[str, Any]:
    """The observation document of one live execution (``paperclip.runner.workflow-observation.v1``).

    ``scripted``: the model was evalhub's scripted model, and ``base.provenance`` says so
    (``runs.evaluation.observations.provenance``: source ``fixture``, never ``live_model``).

    ``evidence.case`` is the case document (``id``, ``steps``, ``assertions``),
    ``evidence.candidate`` the candidate document (``id``, ``provider``, ``budget`` with
    ``maxLatencyMs`` ms, ``maxAttempts``, ``maxTotalTokens`` tokens, ``maxCostUsd`` USD).
    Classification is ``completed`` when every check passes and there is no budget verdict, else
    ``candidate_failure`` with ``failure`` ``{code, category: "candidate", retryable: False,
    message}``: the code is the budget verdict (``candidate_budget_exceeded``/``_reached``), else
    the case driver's ``candidate_failure`` code, else ``candidate_checks_failed``; the message
    names every failing check as ``<group>/<id>``. Never raises for odd evidence; infrastructure
    failures are raised by the executor before observing.
    """
    case = evidence.case
    case_id = case["id"]
    assertions: Mapping[str, Any] = case.get("assertions", {})
    candidate = evidence.candidate
    budget: Mapping[str, Any] = dict(candidate.get("budget") or {})
    board = evidence.board
    events = list(evidence.events)
    event_types = [event.type for event in events]

    # --- snapshot facts (the reference live executor's checks) --------------------------------------------
    tool_calls = list(board.get("toolCalls", ()))
    calls = [str(call.get("operation")) for call in tool_calls]
    read_only = {str(call.get("operation")) for call in tool_calls if call.get("readOnly")}
    expected = list(assertions.get("requiredOperationIds", []))
    scorable = [call for call in calls if call in expected or call not in read_only]
    extra = _unique(call for call in scorable if call not in expected)
    missing = [op for op in expected if op not in calls]
    duplicates = [call for call in tool_calls if call.get("outcome") == "duplicate"]
    pending = [i for i in board.get("interactions", ()) if i.get("status") == "pending"]
    source = _source_task(board)
    issue_status = source.get("status")
    restarted_turns = {e.data.get("turnId") for e in events if e.type == "process.restarted" and e.data.get("turnId")}
    turns = [turn for turn in evidence.turns if turn.turn_id not in restarted_turns]
    texts = [event.data["text"] for event in events if is_assistant_text(event)]
    comments = [c for c in board.get("comments", ()) if c.get("taskId") == SOURCE_TASK]
    mutated = any(entry.get("actor") == "agent" for entry in board.get("stateHistory", ()))
    tokens = evidence.usage.total
    cost = evidence.cost_usd
    cancel_case = bool(case_steps(case, "cancel"))
    restart_case = bool(case_steps(case, "process_restart"))
    if cancel_case:
        terminal_okay = any(turn.status in ("cancelled", "interrupted") for turn in evidence.turns)
    else:
        terminal_okay = bool(turns) and all(turn.status == "completed" for turn in turns)
    finishing_calls = [c for c in tool_calls if c.get("operation") in ("finish_task", "request_review")]
    result = board.get("runResult") or None
    attempts = int(evidence.attempt)
    max_tokens, max_cost = budget_limits(budget)
    verdict = budget_verdict(
        total_tokens=tokens,
        cost_usd=cost,
        stop_message=evidence.budget_stop,
        max_total_tokens=max_tokens,
        max_cost_usd=max_cost,
    )
    markers = presentation_markers(events, board)
    families = activity_families(events)
    source_of_response = response_source(events, board)
    owner = recovery_owner(board)
    last_run_status = run_status(board)
    receipts = [str(call.get("receiptId")) for call in tool_calls if call.get("receiptId")]

    # --- lifecycle --------------------------------------------------------------------
    lifecycle: list[dict[str, Any]] = []
    lifecycle.append(
        _check(
            "terminal-authority",
            terminal_okay,
            "no turn was interrupted or cancelled"
            if cancel_case
            else "turns did not all complete: " + ", ".join(f"{t.turn_id} {t.status}" for t in turns)
            if turns
            else "no runtime turn ran",
        )
    )
    max_attempts = budget.get("maxAttempts")
    lifecycle.append(
        _check(
            "attempt-bound",
            max_attempts is None or attempts <= max_attempts,
            f"attempt {attempts} exceeds the candidate's maxAttempts {max_attempts}",
        )
    )
    lifecycle.append(
        _check(
            "token-budget",
            max_tokens is None or tokens <= max_tokens,
            f"total tokens {tokens} exceed maxTotalTokens {max_tokens}",
        )
    )
    cost_check = _check(
        "cost-budget",
        max_cost is None or cost is None or cost <= max_cost,
        f"cost ${cost} exceeds maxCostUsd ${max_cost}",
    )
    if cost is None and max_cost is not None:
        # Unknown is not $0: the limit was not checked. Said, although the check passes.
        cost_check["reason"] = "cost unknown (no price for the model): the cost budget was not checked"
    lifecycle.append(cost_check)
    lifecycle.append(
        _check(
            "candidate-budget-stop",
            verdict is None,
            f"{verdict}: {evidence.budget_stop or f'usage reached the budget (tokens {tokens})'}",
        )
    )
    lifecycle.append(
        _check(
            "semantic-disposition",
            cancel_case or bool(finishing_calls),
            "the agent never called finish_task or request_review",
            [str(c["receiptId"]) for c in finishing_calls if c.get("receiptId")],
        )
    )
    lifecycle.append(
        _check(
            "owned-wait",
            not pending,
            "interactions still pending: " + ", ".join(str(i.get("id")) for i in pending),
        )
    )
    _expect(lifecycle, assertions, "issueStatus", "issue-status", issue_status, "source task is {observed}, expected {expected}")
    _expect(lifecycle, assertions, "runStatus", "run-status", last_run_status, "last run ended {observed}, expected {expected}")
    if "semanticDisposition" in assertions:
        disposition = result.get("disposition") if result else None
        lifecycle.append(
            _check(
                "semantic-disposition-value",
                disposition == assertions["semanticDisposition"],
                f"accepted result disposition is {disposition or 'missing'}, expected {assertions['semanticDisposition']}",
            )
        )
    runs = list(board.get("runs", ()))
    if "maxRuns" in assertions:
        lifecycle.append(
            _check("max-runs", len(runs) <= assertions["maxRuns"], f"{len(runs)} runs, at most {assertions['maxRuns']} allowed")
        )
    if "maxAttempts" in assertions:
        lifecycle.append(
            _check(
                "max-attempts",
                attempts <= assertions["maxAttempts"],
                f"attempt {attempts}, at most {assertions['maxAttempts']} allowed",
            )
        )
    _expect(lifecycle, assertions, "recoveryOwner", "recovery-owner", owner, "recovery owner is {observed}, expected {expected}")
    if "requiredPrpEventTypes" in assertions:
        absent = [t for t in assertions["requiredPrpEventTypes"] if t not in event_types]
        lifecycle.append(_check("required-prp-events", not absent, "required events missing: " + ", ".join(absent)))
    if "forbiddenPrpEventTypes" in assertions:
        present = [t for t in assertions["forbiddenPrpEventTypes"] if t in event_types]
        lifecycle.append(_check("forbidden-prp-events", not present, "forbidden events present: " + ", ".join(present)))

    # --- continuation -------------------------------------------------------------------
    continuation: list[dict[str, Any]] = [
        _check("required-calls", not missing, "missing required call(s): " + ", ".join(missing)),
        _check("trajectory-restraint", not extra, "unexpected call(s): " + ", ".join(extra)),
        _check(
            "no-repeated-work",
            restart_case or not duplicates,
            "repeated call(s): " + ", ".join(f"{c.get('operation')} ({c.get('receiptId')})" for c in duplicates),
        ),
    ]
    if not expected and "requiredOperationIds" in assertions:
        continuation.append(
            _check(
                "control-plane-owned",
                not calls,
                "the case leaves every operation to the control plane, but the agent called: " + ", ".join(_unique(calls)),
            )
        )
    if case_steps(case, "steer"):
        delivered = _unique(
            str(e.data.get("steerId")) for e in events if e.type == "turn.steering.delivered" and e.data.get("delivery") == "active_turn"
        )
        acks = event_types.count("turn.steering.acknowledged")
        continuation.append(
            _check(
                "steering-acknowledged-once",
                acks == len(delivered),
                f"{acks} steering acknowledgement(s) for {len(delivered)} active-turn steer id(s); expected exactly one each",
            )
        )
    if restart_case:
        accepted_runs = [e.data.get("runId") for e in events if e.type == "run.result.accepted"]
        twice = _unique(str(run) for run in accepted_runs if accepted_runs.count(run) > 1)
        ended = [run for run in runs if run.get("status") not in (None, "running")]
        continuation.append(
            _check(
                "single-finalization",
                not twice and len(ended) == len(runs),
                "run(s) finalised twice: " + ", ".join(twice) if twice else "a run was never finalised",
            )
        )

    # --- presentation -------------------------------------------------------------------
    blank_texts = [text for text in texts if not text.strip()]
    blank_comments = [c for c in comments if not str(c.get("body") or "").strip()]
    presentation: list[dict[str, Any]] = [
        _check(
            "first-visible-progress",
            cancel_case or evidence.first_visible_progress_ms is not None,
            "no visible progress (assistant text, progress report or tool activity) was seen",
        ),
        _check(
            "substantive-response",
            cancel_case or any(len(text.strip()) >= 2 for text in texts),
            "no assistant text of at least 2 characters",
        ),
        _check(
            "no-empty-comment",
            not blank_texts and not blank_comments,
            f"{len(blank_texts)} blank assistant message(s) and {len(blank_comments)} blank comment(s)",
            [str(c.get("id")) for c in blank_comments],
        ),
        _check(
            "terminal-presentation",
            terminal_okay,
            "the execution did not end in the expected terminal state",
        ),
    ]
    _expect(
        presentation,
        assertions,
        "commentCount",
        "comment-count",
        len(comments),
        "{observed} comment(s) on the source task, expected {expected}",
    )
    _expect(
        presentation,
        assertions,
        "responseSource",
        "response-source",
        source_of_response,
        "response source is {observed}, expected {expected}",
    )
    if "orderedMarkers" in assertions:
        presentation.append(
            _check(
                "ordered-markers",
                is_subsequence(assertions["orderedMarkers"], markers),
                "markers " + " > ".join(assertions["orderedMarkers"]) + " not in order in: " + " > ".join(markers),
            )
        )
    if "requiredActivityFamilies" in assertions:
        absent = [f for f in assertions["requiredActivityFamilies"] if f not in families]
        presentation.append(_check("activity-families", not absent, "activity families missing: " + ", ".join(absent)))
    lineage = _trace_lineage(evidence.trace)
    if "trace" in assertions:
        problems = _trace_problems(assertions["trace"], lineage)
        presentation.append(_check("trace-expectations", not problems, "; ".join(problems)))

    # --- classification ---------------------------------------------------------------
    groups = {"lifecycle": lifecycle, "continuation": continuation, "presentation": presentation}
    failing = [f"{group}/{check['id']}" for group, checks in groups.items() for check in checks if not check["passed"]]
    classification = "completed" if not failing and verdict is None else "candidate_failure"
    wake_reasons = [run.get("wakeReason") for run in runs if run.get("wakeReason") not in (None, "start")]
    consumed = [i.get("id") for i in board.get("interactions", ()) if i.get("status") != "pending"]
    consumed += _unique(str(e.data.get("steerId")) for e in events if e.type == "turn.steering.delivered")
    terminal_label = "Stopped" if issue_status == "cancelled" else "Completed" if classification == "completed" else "Needs attention"
    efficiency: dict[str, Any] = {"latencyMs": evidence.wall_ms, "totalTokens": tokens, "attempts": attempts}
    if cost is not None:
        efficiency["costUsd"] = cost
    trace: dict[str, Any] = {
        "runId": evidence.execution_id,
        "sessionId": f"eval-{evidence.execution_id}",
        "receiptIds": receipts,
        "terminalPresent": bool(evidence.turns),
    }
    if evidence.turns:
        trace["turnId"] = evidence.turns[-1].turn_id
    item_id = receipts[0] if receipts else _first_item_id(events)
    if item_id:
        trace["itemId"] = item_id
    base = {
        "caseId": case_id,
        "provenance": provenance(case_id, scripted=scripted),
        "controlPlaneOwned": not expected,
        "expectedCalls": expected,
        "observedCalls": scorable,
        "forbiddenCalls": [],
        "finalState": {"expected": "mutated" if expected else "unchanged", "observed": "mutated" if mutated else "unchanged"},
        "authorization": {
            "expected": "allowed" if expected else "absent",
            "observed": "absent" if not calls else "denied" if any(c.get("errorCode") == "not_allowed" for c in tool_calls) else "allowed",
        },
        "trace": trace,
        "efficiency": efficiency,
        "budget": budget,
    }
    metrics: dict[str, Any] = {"attempts": attempts, "toolCount": len(tool_calls), "totalTokens": tokens}
    if evidence.first_visible_progress_ms is not None:
        metrics["timeToFirstVisibleProgressMs"] = max(0, evidence.first_visible_progress_ms)
    if evidence.settlement_ms is not None:
        metrics["settlementMs"] = max(0, evidence.settlement_ms)
    if cost is not None:
        metrics["costUsd"] = cost
    lifecycle_doc: dict[str, Any] = {"checks": lifecycle, "attempts": attempts, "runs": len(runs), "recoveryOwner": owner}
    if issue_status:
        lifecycle_doc["issueStatus"] = issue_status
    if last_run_status in ("succeeded", "failed", "cancelled", "yielded"):
        lifecycle_doc["runStatus"] = last_run_status
    if result and result.get("disposition"):
        lifecycle_doc["semanticDisposition"] = result["disposition"]
    observation: dict[str, Any] = {
        "schema": OBSERVATION_SCHEMA,
        "caseId": case_id,
        "candidateId": candidate["id"],
        "provider": candidate["provider"],
        "classification": classification,
        "base": base,
        "lifecycle": lifecycle_doc,
        "continuation": {
            "checks": continuation,
            "wakeReasons": wake_reasons,
            "consumedInputIds": [str(i) for i in consumed],
            "sessionPolicy": "same_session",
            "repeatedWorkSignals": _unique([*extra, *(str(c.get("operation")) for c in duplicates)]),
        },
        "presentation": {
            "checks": presentation,
            "responseSource": source_of_response,
            "commentCount": len(comments),
            "orderedMarkers": markers,
            "visibleActivityFamilies": families,
            "terminalLabel": terminal_label,
        },
        "traceLineage": lineage,
        "metrics": metrics,
        "observedPrpEventTypes": _unique(event_types),
        "artifactDigests": [],
    }
    if classification == "candidate_failure":
        code = verdict or evidence.candidate_failure or "candidate_checks_failed"
        message = "failed checks: " + (", ".join(failing) if failing else "none")
        if verdict is not None:
            message = f"{verdict}: {evidence.budget_stop or 'usage reached the budget'}; {message}"
        observation["failure"] = {"code": code, "category": "candidate", "retryable": False, "message": message[:1000]}
    return observation


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
