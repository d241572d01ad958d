"""The chaos lane: each of the eight scenarios injects its fault into evalhub's own pipeline and
checks its invariant, made concrete as rows, states and money.

A scenario runs on a scratch run of tonight's first schedule entry (lane ``chaos``, its executor
replaced through ``runs.execution.FAULT_INJECTION`` by one that injects the fault) through the real
services — claim, lease, reservation, attempts, settlement, the reaper, finalisation — and
records every check it made. The results are one ``chaos``-lane run with one execution per
scenario (``Execution.chaos`` holds the checks; ``completed`` when every invariant held,
``infrastructure_failure`` / ``chaos_invariant_violated`` otherwise); the scratch runs are deleted.
Chaos runs are never reported, so they never enter live history, comparisons or alerts.

What each fault is:

==================== =====================================================================================
restart              the worker dies mid-attempt: its execution is left running, its attempt open, its lease
                     running out (what ``kill -9`` leaves; the multi-process tests kill real workers)
duplicate_delivery   the execution's task is delivered again while the first delivery runs, and once more after
trace_interruption   trace storage fails: the attempt's trace artifact cannot be read
trace_truncation     the trace hits its size cap: the recorder keeps counting frames it no longer stores
stale_checkpoint     the lease expires and the reaper takes the execution back while the runtime reports a
                     terminal turn; the old worker's late result arrives afterwards
retry_exhaustion     a lost worker, then retryable provider failures until the budget's maxAttempts are spent
interaction_timeout  the human side never answers an interaction: the execution waits, then gives up
wake_race            the run's finalisation is woken several times at once (the last two settlements, the
                     reaper)
==================== =====================================================================================
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from runs.creation import claim_run
from runs.execution import FAULT_INJECTION, execute_execution, heartbeat
from runs.executors.base import ExecutionRequest, Executor, InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.leases import owner_id
from runs.models import Attempt, AttemptOutcome, Execution, ExecutionStatus, Run, RunLane, RunStatus, TraceArtifact, Trigger
from runs.recovery import finalise_run, reap
from runs.settlement import begin_attempt
from runs.snapshots import max_attempts, reservation_usd
from schedules.models import ChaosScenario, ScheduleEntry
from schedules.services import schedule_for_night


class ChaosError(Exception):
    """The chaos lane cannot run (no catalog, an unknown scenario); the message says what to fix."""


@dataclass
class Checks:
    """The invariant checks of one scenario: each names what was checked, what was expected and
    what was found."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def expect(self, check: str, actual: Any, expected: Any) -> None:
        self.items.append({"check": check, "expected": _plain(expected), "actual": _plain(actual), "held": actual == expected})

    def expect_usd(self, check: str, actual: Decimal | None, expected: Decimal) -> None:
        """As :meth:`expect`, for amounts in USD: both shown as dollars (``$0.21``, every stored
        decimal kept), so a held check never shows ``0.210000000000000`` against ``0.210000``."""
        self.items.append({"check": check, "expected": _usd(expected), "actual": _usd(actual), "held": actual == expected})

    def expect_true(self, check: str, condition: bool, actual: Any) -> None:
        self.items.append({"check": check, "expected": True, "actual": _plain(actual), "held": bool(condition)})

    @property
    def held(self) -> bool:
        return all(item["held"] for item in self.items)


def _usd(amount: Decimal | None) -> Any:
    """``$0.21``, ``$0.00``, ``$0.000123``: at least cents, and never fewer places than the amount
    has, so two different amounts are never shown alike. Anything else (a missing cost) as is,
    so a violated check still shows what was found."""
    if not isinstance(amount, Decimal) or not amount.is_finite():
        return _plain(amount)
    exact = amount.normalize()
    places = max(2, -exact.as_tuple().exponent)
    return f"${amount.quantize(Decimal(1).scaleb(-places)):f}"


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


class _Scripted(Executor):
    """Returns or raises what its script says, one item per call; callables are called with the request."""

    runtime_name = "chaos"

    def __init__(self, script: Sequence[Any]) -> None:
        self.script = list(script)
        self.calls: list[int] = []

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        self.calls.append(request.attempt)
        step = (
            self.script.pop(0)
            if self.script
            else InfrastructureError("chaos_script_empty", False, "the scenario made more calls than scripted")
        )
        if callable(step) and not isinstance(step, BaseException):
            step = step(request)
        if isinstance(step, BaseException):
            raise step
        return step


@dataclass
class _Scratch:
    run: Run
    execution: Execution
    executor: _Scripted
    environ: dict[str, str]


def _observation(entry: ScheduleEntry, cost: float = 0.01) -> dict[str, Any]:
    """A valid completed observation for ``entry`` (the reference's trace-lineage vector shape)."""
    from runs.evaluation.observations import unavailable_observation

    document = unavailable_observation(
        case={"id": entry.case_key, "assertions": {}},
        candidate=entry.candidate,
        classification="infrastructure_failure",
        code="chaos",
        category="orchestration",
        retryable=False,
        message="a chaos-lane stand-in for a runtime's evidence",
    )
    document["classification"] = "completed"
    document.pop("failure", None)
    document["metrics"] = {**document.get("metrics", {}), "costUsd": cost, "attempts": 1}
    return document


def _scratch(entry: ScheduleEntry, script: Sequence[Any], *, executions: int = 1) -> _Scratch:
    """A claimed chaos-lane scratch run over ``entry`` (and the next entries, for ``executions`` > 1)
    whose executor plays ``script``."""
    entries = list(entry.schedule.entries.filter(position__gte=entry.position).order_by("position")[:executions])
    limit = CandidateSpec.from_snapshot(entry.candidate).budget.max_cost_usd
    ceiling = Decimal(str(limit or 1)) * 10 * executions
    with transaction.atomic():
        run = Run.objects.create(schedule=entry.schedule, trigger=Trigger.MANUAL, lane=RunLane.CHAOS, cost_ceiling_usd=ceiling)
        for position, item in enumerate(entries):
            Execution.for_entry(run, item, position).save()
    claim_run(run)
    executor = _Scripted(script)
    FAULT_INJECTION[run.pk] = executor
    names = {name for item in entries for name in CandidateSpec.from_snapshot(item.candidate).required_environment}
    environ = dict.fromkeys(names, "chaos-lane-placeholder-value")
    return _Scratch(run, run.executions.order_by("position").first(), executor, environ)


def _money(checks: Checks, run: Run) -> None:
    """The money invariants every scenario ends with: nothing reserved, spend = what the attempts
    counted, within the ceiling, and no attempt left open."""
    run.refresh_from_db()
    counted = Attempt.objects.filter(execution__run=run).aggregate(total=Sum("counted_usd"))["total"] or Decimal(0)
    checks.expect_usd("nothing is left reserved", run.reserved_usd, Decimal(0))
    checks.expect_usd("the run's spend is what its attempts counted", run.spent_usd, counted)
    checks.expect_true(
        "spend is within the ceiling", run.spent_usd <= run.cost_ceiling_usd, f"{_usd(run.spent_usd)} of {_usd(run.cost_ceiling_usd)}"
    )
    checks.expect("no attempt is left running", Attempt.objects.filter(execution__run=run, outcome=AttemptOutcome.RUNNING).count(), 0)


def _attempts(execution: Execution) -> list[list[Any]]:
    return [list(row) for row in execution.attempts.order_by("number").values_list("number", "outcome", "error_code")]


def _leave_dead_attempt(scratch: _Scratch) -> None:
    """What ``kill -9`` leaves: the execution claimed by a worker that is gone, its attempt open and
    reserved, the lease about to run out (here: already run out)."""
    execution, run = scratch.execution, scratch.run
    dead = "chaos-dead-worker:1"
    Execution.objects.filter(pk=execution.pk).update(
        status=ExecutionStatus.RUNNING, owner=dead, lease_expires_at=timezone.now() - dt.timedelta(seconds=1), started_at=timezone.now()
    )
    reserve = reservation_usd(CandidateSpec.from_snapshot(execution.entry.candidate))
    begin_attempt(run, execution, execution.attempts.count() + 1, reserve, dead)


# --- the eight scenarios ---------------------------------------------------------------------------------


def scenario_restart(entry: ScheduleEntry) -> Checks:
    checks = Checks()
    scratch = _scratch(entry, [_observation(entry)])
    _leave_dead_attempt(scratch)
    reaped = reap(dispatch=False)
    checks.expect("the reaper takes the dead worker's execution back", reaped.taken_back, 1)
    result = execute_execution(scratch.execution.pk, environ=scratch.environ)
    execution = Execution.objects.get(pk=scratch.execution.pk)
    checks.expect("another worker resumes and settles it", result, "settled")
    checks.expect("the execution is settled once, completed", [execution.status, execution.classification], ["finished", "completed"])
    checks.expect(
        "the dead attempt is closed as worker_lost, the resumed one observed",
        _attempts(execution),
        [[1, "worker_lost", "worker_lost"], [2, "observation", ""]],
    )
    # "2 of 3", as retry_exhaustion's "never more than maxAttempts" shows it: a bare 2 under
    # "expected True" did not say what the bound was.
    allowed = max_attempts(CandidateSpec.from_snapshot(entry.candidate))
    checks.expect_true(
        "attempts stay within maxAttempts", execution.attempts.count() <= allowed, f"{execution.attempts.count()} of {allowed}"
    )
    checks.expect("one execution owns finalisation: a second finalise does nothing", finalise_run(scratch.run.pk), False)
    checks.expect("the run is finished", Run.objects.get(pk=scratch.run.pk).status, RunStatus.FINISHED)
    _money(checks, scratch.run)
    return _done(checks, scratch)


def scenario_duplicate_delivery(entry: ScheduleEntry) -> Checks:
    checks = Checks()
    nested: list[str] = []
    scratch: _Scratch

    def while_running(request: ExecutionRequest) -> dict[str, Any]:
        # The same task delivered again while the first delivery is running it.
        nested.append(execute_execution(scratch.execution.pk, environ=scratch.environ, owner="chaos-second-delivery:2"))
        return _observation(entry, cost=0.02)

    scratch = _scratch(entry, [while_running])
    first = execute_execution(scratch.execution.pk, environ=scratch.environ)
    again = execute_execution(scratch.execution.pk, environ=scratch.environ, owner="chaos-third-delivery:3")
    execution = Execution.objects.get(pk=scratch.execution.pk)
    checks.expect("the first delivery settles it", first, "settled")
    checks.expect("a delivery during the run does nothing", nested, [f"running elsewhere ({owner_id()})"])
    checks.expect("a delivery after the run does nothing", again, "already settled")
    checks.expect("the executor is called once", scratch.executor.calls, [1])
    checks.expect("one attempt", _attempts(execution), [[1, "observation", ""]])
    checks.expect_usd("the cost is counted once", execution.cost_usd, Decimal("0.02"))
    _money(checks, scratch.run)
    return _done(checks, scratch)


class _BrokenTrace:
    """A trace artifact whose storage fails: reading its bytes raises."""

    raw_bytes = 10
    frame_count = 1
    digest = "sha256:" + "0" * 64
    truncated = False

    @property
    def data(self) -> bytes:
        raise OSError("trace storage unavailable (chaos: trace_interruption)")


def scenario_trace_interruption(entry: ScheduleEntry) -> Checks:
    checks = Checks()

    def with_broken_trace(request: ExecutionRequest) -> dict[str, Any]:
        request.artifacts.store_trace(_BrokenTrace())
        return _observation(entry)

    scratch = _scratch(entry, [with_broken_trace])
    result = execute_execution(scratch.execution.pk, environ=scratch.environ)
    execution = Execution.objects.get(pk=scratch.execution.pk)
    checks.expect("the execution settles", result, "settled")
    checks.expect("it completes without its trace", execution.classification, "completed")
    checks.expect("the observation is stored", execution.observation is not None, True)
    checks.expect("no trace row is stored", TraceArtifact.objects.filter(execution=execution).count(), 0)
    checks.expect("the attempt is recorded", _attempts(execution), [[1, "observation", ""]])
    checks.expect("the run finishes", Run.objects.get(pk=scratch.run.pk).status, RunStatus.FINISHED)
    _money(checks, scratch.run)
    return _done(checks, scratch)


def scenario_trace_truncation(entry: ScheduleEntry) -> Checks:
    from runs.executors.trace import TraceRecorder, read_artifact

    checks = Checks()
    frames = 200
    cap = 2048

    def with_full_trace(request: ExecutionRequest) -> dict[str, Any]:
        recorder = TraceRecorder(scrub=lambda text: text, cap_bytes=cap)
        for number in range(frames):
            frame = {"jsonrpc": "2.0", "method": "item/delta", "params": {"n": number, "pad": "x" * 40}}
            recorder.frame("in", json.dumps(frame, separators=(",", ":")).encode())
        request.artifacts.store_trace(recorder.artifact())
        return _observation(entry)

    scratch = _scratch(entry, [with_full_trace])
    execute_execution(scratch.execution.pk, environ=scratch.environ)
    execution = Execution.objects.get(pk=scratch.execution.pk)
    trace = TraceArtifact.objects.filter(execution=execution).first()
    checks.expect("the execution completes", execution.classification, "completed")
    checks.expect("the trace is stored", trace is not None, True)
    if trace is not None:
        checks.expect("the trace is marked truncated", trace.truncated, True)
        checks.expect("every frame is counted", trace.frame_count, frames)
        checks.expect_true("the stored bytes stay near the cap", trace.raw_bytes <= cap + 1024, trace.raw_bytes)
        try:
            read_artifact(bytes(trace.data), trace.digest)
            verified = True
        except Exception as exc:  # reported as a failed check
            verified = f"{type(exc).__name__}: {exc}"
        checks.expect("the stored trace still verifies", verified, True)
    _money(checks, scratch.run)
    return _done(checks, scratch)


def scenario_stale_checkpoint(entry: ScheduleEntry) -> Checks:
    checks = Checks()
    scratch: _Scratch
    reaped: list[int] = []

    def lease_expires_during_terminal_turn(request: ExecutionRequest) -> dict[str, Any]:
        # The runtime is reporting its terminal turn; meanwhile the lease runs out and the reaper,
        # elsewhere, takes the execution back.
        Execution.objects.filter(pk=scratch.execution.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
        reaped.append(reap(dispatch=False).taken_back)
        return _observation(entry, cost=0.05)

    scratch = _scratch(entry, [lease_expires_during_terminal_turn, _observation(entry, cost=0.03)])
    late = execute_execution(scratch.execution.pk, environ=scratch.environ)
    resumed = execute_execution(scratch.execution.pk, environ=scratch.environ, owner="chaos-second-worker:2")
    execution = Execution.objects.get(pk=scratch.execution.pk)
    first = execution.attempts.get(number=1)
    checks.expect("the reaper took the execution back", reaped, [1])
    checks.expect("the stale worker's terminal result does not settle it", late, "lost")
    checks.expect("the next worker settles it", resumed, "settled")
    checks.expect(
        "terminal turns cannot remain active: attempt 1 closed, attempt 2 observed",
        _attempts(execution),
        [[1, "worker_lost", "worker_lost"], [2, "observation", ""]],
    )
    checks.expect_true("the late result is noted on attempt 1", "late result arrived" in first.message, first.message)
    checks.expect_usd("attempt 1 counts its known cost, not its reservation", first.counted_usd, Decimal("0.05"))
    checks.expect("the execution is settled once", [execution.status, execution.owner], ["finished", "chaos-second-worker:2"])
    checks.expect_usd("the execution's cost is both calls'", execution.cost_usd, Decimal("0.08"))
    _money(checks, scratch.run)
    return _done(checks, scratch)


def scenario_retry_exhaustion(entry: ScheduleEntry) -> Checks:
    checks = Checks()
    allowed = max_attempts(CandidateSpec.from_snapshot(entry.candidate))
    error = InfrastructureError("provider_http_503", True, "HTTP 503 (chaos: retry_exhaustion)", cost_usd=0.01)
    scratch = _scratch(entry, [error] * (allowed + 2))
    _leave_dead_attempt(scratch)
    reap(dispatch=False)
    execute_execution(scratch.execution.pk, environ=scratch.environ)
    after = execute_execution(scratch.execution.pk, environ=scratch.environ, owner="chaos-late-delivery:9")
    reap(dispatch=False)
    execution = Execution.objects.get(pk=scratch.execution.pk)
    checks.expect(
        "the bounded terminal: an infrastructure failure, retryable",
        [execution.classification, execution.failure_code, execution.failure_retryable],
        ["infrastructure_failure", "provider_http_503", True],
    )
    checks.expect(
        "attempts: the lost one, the call and its one retry",
        [row[1] for row in _attempts(execution)],
        ["worker_lost", "infrastructure_error", "infrastructure_error"][:allowed],
    )
    checks.expect_true("never more than maxAttempts", execution.attempts.count() <= allowed, f"{execution.attempts.count()} of {allowed}")
    checks.expect("no call after the terminal", len(scratch.executor.calls), min(2, allowed - 1))
    checks.expect("a later delivery does nothing", after, "already settled")
    _money(checks, scratch.run)
    return _done(checks, scratch)


def scenario_interaction_timeout(entry: ScheduleEntry) -> Checks:
    checks = Checks()
    scratch: _Scratch
    seen: dict[str, Any] = {}
    never_answered = threading.Event()

    def waits_for_a_human(request: ExecutionRequest) -> dict[str, Any]:
        before = Execution.objects.get(pk=scratch.execution.pk).lease_expires_at
        never_answered.wait(0.2)  # the human side never answers
        # One heartbeat while it waits (the heartbeat thread beats every HEARTBEAT_SECONDS).
        seen["beat"] = heartbeat(scratch.execution.pk, scratch.run.pk, owner_id())
        row = Execution.objects.get(pk=scratch.execution.pk)
        seen["status"], seen["owner"] = row.status, row.owner
        seen["extended"] = row.lease_expires_at > before
        seen["attempt"] = list(row.attempts.values_list("outcome", flat=True))
        raise InfrastructureError(
            "interaction_timeout", False, "the human side never answered the interaction (chaos: interaction_timeout)"
        )

    scratch = _scratch(entry, [waits_for_a_human])
    execute_execution(scratch.execution.pk, environ=scratch.environ)
    execution = Execution.objects.get(pk=scratch.execution.pk)
    checks.expect(
        "while it waits the execution is running and owned by its worker", [seen.get("status"), seen.get("owner")], ["running", owner_id()]
    )
    checks.expect("while it waits the heartbeat keeps its lease", [seen.get("beat"), seen.get("extended")], [None, True])
    checks.expect("while it waits its attempt is visible as running", seen.get("attempt"), ["running"])
    checks.expect(
        "then it settles as an infrastructure failure, not retried",
        [execution.classification, execution.failure_code, execution.attempts.count()],
        ["infrastructure_failure", "interaction_timeout", 1],
    )
    checks.expect("its lease is released", execution.lease_expires_at, None)
    _money(checks, scratch.run)
    return _done(checks, scratch)


def scenario_wake_race(entry: ScheduleEntry) -> Checks:
    checks = Checks()
    scratch = _scratch(entry, [_observation(entry), _observation(entry)], executions=2)
    pks = list(scratch.run.executions.order_by("position").values_list("pk", flat=True))
    for pk in pks:
        execute_execution(pk, environ=scratch.environ, finalise=False)
    # Every waker at once: the last two settlements, the reaper and a redelivered finaliser.
    wakes = [
        finalise_run(scratch.run.pk),
        finalise_run(scratch.run.pk),
        reap(dispatch=False).finalised,
        finalise_run(scratch.run.pk),
    ]
    run = Run.objects.get(pk=scratch.run.pk)
    checks.expect("exactly one wake finalises the run", [int(wake) for wake in wakes], [1, 0, 0, 0])
    checks.expect("the run is finished", run.status, RunStatus.FINISHED)
    checks.expect("both executions settled", list(run.executions.values_list("status", flat=True)), ["finished", "finished"])
    _money(checks, scratch.run)
    return _done(checks, scratch)


def _done(checks: Checks, scratch: _Scratch) -> Checks:
    checks.scratch_run = scratch.run.pk  # type: ignore[attr-defined]
    return checks


SCENARIOS: dict[str, Callable[[ScheduleEntry], Checks]] = {
    "restart": scenario_restart,
    "duplicate_delivery": scenario_duplicate_delivery,
    "trace_interruption": scenario_trace_interruption,
    "trace_truncation": scenario_trace_truncation,
    "stale_checkpoint": scenario_stale_checkpoint,
    "retry_exhaustion": scenario_retry_exhaustion,
    "interaction_timeout": scenario_interaction_timeout,
    "wake_race": scenario_wake_race,
}


def run_chaos_lane(*, keys: Sequence[str] = (), now: dt.datetime | None = None, seed: str | None = None) -> Run:
    """Run the chaos scenarios named by ``keys`` (scenario ids such as ``chaos-restart``, or their
    faults such as ``restart``; all eight when empty) and return the chaos-lane run holding one
    finished execution per scenario with its checks (``Execution.chaos``).

    Raises :class:`ChaosError` when the catalog has no chaos scenarios or tonight's schedule cannot
    be built, or a key names no scenario.
    """
    from evalhub.conf import evalhub_setting

    scenarios = list(ChaosScenario.objects.order_by("position", "id"))
    if not scenarios:
        raise ChaosError("the catalog has no chaos scenarios: run `manage.py load_reference` first")
    if keys:
        wanted = set(keys)
        unknown = sorted(wanted - {scenario.key for scenario in scenarios} - {scenario.fault for scenario in scenarios})
        if unknown:
            known = ", ".join(scenario.key for scenario in scenarios)
            if any(not key.strip() for key in unknown):
                raise ChaosError(f"a chaos scenario name is empty: use one of {known} (or their faults)")
            raise ChaosError(f"unknown chaos scenario {', '.join(unknown)}: use one of {known} (or their faults)")
        # A name that is a scenario's id selects that scenario alone, even when it is spelt like a
        # fault too (a scenario with the id "restart"): the admin action passes ids.
        ids = {scenario.key for scenario in scenarios}
        faults = wanted - ids
        scenarios = [scenario for scenario in scenarios if scenario.key in wanted or scenario.fault in faults]
    try:
        schedule, _ = schedule_for_night(seed=seed or evalhub_setting("SCHEDULE_SEED"), now=now or timezone.now())
    except Exception as exc:
        raise ChaosError(f"tonight's schedule cannot be built for the chaos lane: {exc}") from None
    entry = schedule.entries.order_by("position").first()
    if entry is None:
        raise ChaosError("tonight's schedule has no entries to run the chaos lane on")
    # Pending while the scenarios run (the reaper leaves pending runs alone, so it cannot finish
    # this one between two scenarios); finished with the last one.
    chaos_run = Run.objects.create(
        schedule=schedule,
        trigger=Trigger.MANUAL,
        lane=RunLane.CHAOS,
        cost_ceiling_usd=Decimal(1),
        status=RunStatus.PENDING,
        started_at=timezone.now(),
    )
    execution_ids: set[str] = set()
    for position, scenario in enumerate(scenarios):
        started = timezone.now()
        # One execution per scenario, named as its scenario (its case): two keys the column's 32
        # characters cut alike get the position in the second's id (a unique key per run).
        execution_id = scenario.key[:32]
        if execution_id in execution_ids:
            execution_id = scenario.key[: 32 - len(f"-{position}")] + f"-{position}"
        execution_ids.add(execution_id)
        try:
            checks = SCENARIOS[scenario.fault](entry)
            error = ""
        except Exception as exc:  # a scenario that breaks is a failed invariant, never a lost lane
            checks = Checks()
            checks.items.append({"check": "the scenario runs", "expected": True, "actual": f"{type(exc).__name__}: {exc}", "held": False})
            error = f"{type(exc).__name__}: {exc}"
        finally:
            for run_pk in list(FAULT_INJECTION):
                FAULT_INJECTION.pop(run_pk, None)
        scratch = getattr(checks, "scratch_run", None)
        if scratch is not None:
            Run.objects.filter(pk=scratch).delete()
        Run.objects.filter(lane=RunLane.CHAOS, executions__isnull=True).exclude(pk=chaos_run.pk).delete()
        held = checks.held
        failed = [item["check"] for item in checks.items if not item["held"]]
        Execution.objects.create(
            run=chaos_run,
            entry=entry,
            position=position,
            execution_id=execution_id,
            case_key=scenario.key,
            candidate_key=entry.candidate_key,
            slot_key=entry.slot_key,
            repetition=1,
            status=ExecutionStatus.FINISHED,
            classification="completed" if held else "infrastructure_failure",
            failure_code="" if held else "chaos_invariant_violated",
            failure_category="" if held else "orchestration",
            failure_retryable=None if held else False,
            failure_message="" if held else (error or "invariant violated: " + "; ".join(failed))[:2000],
            cost_usd=Decimal(0),
            started_at=started,
            finished_at=timezone.now(),
            chaos={
                "scenario": scenario.key,
                "fault": scenario.fault,
                "expectedInvariant": scenario.expected_invariant,
                "held": held,
                "checks": checks.items,
            },
        )
    Run.objects.filter(pk=chaos_run.pk).update(status=RunStatus.FINISHED, finished_at=timezone.now())
    chaos_run.refresh_from_db()
    return chaos_run
