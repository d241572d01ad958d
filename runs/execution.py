"""Running one execution, as a worker's task does: claim it under a lease (a heartbeat extends it),
decide whether it runs (cancellation, an unsafe candidate snapshot, qualification), then make up
to its budget's ``maxAttempts`` executor calls — each reserved against the run's ceiling first, a
retryable infrastructure error retried once — and settle it (``runs.settlement`` writes it all).

The orchestration follows the reference ``executeRunnerLiveSchedule`` and nightly script
(its execution loop and retry wrapper), with evalhub's decisions:

* qualification first: a missing or empty required variable → ``skipped`` /
  ``qualification_environment_missing`` naming the variables (never their values);
* then the campaign ceiling: an attempt whose worst case does not fit → ``skipped`` /
  ``campaign_cost_ceiling_reached``;
* otherwise the adapter's executor runs; a retryable :class:`InfrastructureError` is retried
  once, after the provider's ``Retry-After`` up to ``MAX_RETRY_AFTER_S`` (asked to wait longer,
  it is not retried); a final infrastructure error becomes an ``infrastructure_failure``
  observation with a redacted message; any other exception is recorded as an
  ``executor_crashed`` infrastructure failure and the run goes on (one broken entry must not
  lose the night); an observation the reference schema refuses is an ``invalid_observation``
  infrastructure failure (``runs.stored_observations``);
* costs: failed attempts' billed costs count; an unknown cost (absent, NaN, infinite, negative,
  unbelievable) is counted at the candidate's ``maxCostUsd`` and flags the run ``has_unpriced``;
* every text an execution stores or logs is redacted: secret shapes, and the values of every
  candidate's required variables and every credential-named variable (docs/failure-modes.md B12);
* each attempt gets an :class:`ArtifactSink`; the raw trace an executor leaves there is stored
  with the attempt's row, whether the attempt returned an observation, raised an infrastructure
  error or crashed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django_q.exceptions import TimeoutException

from evalhub.conf import evalhub_setting
from evalhub.fields import EncodedDocument
from evalhub.logging import RedactingStream
from evalhub.secrets import redact
from runs import recovery
from runs.evaluation.observations import missing_environment_message
from runs.executors import ExecutionRequest, InfrastructureError, executor_for
from runs.executors.base import ArtifactSink
from runs.executors.candidate import CandidateSpec, CandidateSpecError
from runs.leases import (
    CANCELLED,
    LEASE_LOST,
    ExecutionInterrupted,
    Guard,
    db_retry,
    heartbeat_seconds,
    lease_until,
    owner_id,
)
from runs.models import Attempt, AttemptOutcome, Execution, ExecutionStatus, ProviderSlot, Run, RunStatus
from runs.queueing import dispatch_execution
from runs.recovery import finalise_run
from runs.settlement import (
    Call,
    NoMeasurement,
    NotClaimed,
    Stale,
    begin_attempt,
    finish_attempt,
    record_late,
    settle,
    unavailable_document,
)
from runs.snapshots import finite_cost, max_attempts, provider_key, reservation_usd, run_providers, secret_values
from runs.stored_observations import checked_stored_form
from schedules.models import WorkflowCase
from schedules.services import unsafe_candidate_problem

logger = logging.getLogger(__name__)

#: The longest ``Retry-After`` a worker waits before its one retry; a provider asking for more
#: (an hour-long rate-limit window) gets no retry at all (docs/failure-modes.md B4).
MAX_RETRY_AFTER_S = 30.0
#: How the orchestration waits before a retry or for a provider slot (tests replace it).
sleep = time.sleep
#: The chaos lane's injection point: run id → the fault-injecting executor its scratch runs use
#: instead of the adapter's (``runs.chaos``). Empty outside a chaos scenario.
FAULT_INJECTION: dict[int, Any] = {}


class Outcome(StrEnum):
    """What running one execution did; its text is what the task row says."""

    SETTLED = "settled"
    #: The worker is shutting down: the execution is pending again and queued for another one.
    HANDED_BACK = "handed back"
    #: The reaper took the execution over while this process ran it.
    LOST = "lost"
    ALREADY_SETTLED = "already settled"
    RUNNING_ELSEWHERE = "running elsewhere"
    RUN_NOT_RUNNING = "run not running"
    #: Re-queued when the caller asked for it.
    WAITING_FOR_SLOT = "waiting for a provider slot"
    NO_SUCH_EXECUTION = "no such execution"


class ExecutionResult(str):
    """The task row's text for an execution (``settled``, ``running elsewhere (host:pid)``, ``run
    not running (finished)``…), with its typed :attr:`outcome` and the ``detail`` in brackets."""

    outcome: Outcome
    detail: str

    def __new__(cls, outcome: Outcome, detail: str = "") -> ExecutionResult:
        result = super().__new__(cls, f"{outcome} ({detail})" if detail else str(outcome))
        result.outcome, result.detail = outcome, detail
        return result


@dataclass(frozen=True)
class EarlierAttempt:
    """An attempt an earlier worker (or an earlier call of this one) made for the execution."""

    outcome: str
    error_code: str
    message: str
    retryable: bool | None
    cost_usd: Decimal | None
    counted_usd: Decimal

    #: The columns read, in this order (``values_list``).
    COLUMNS = ("outcome", "error_code", "message", "retryable", "cost_usd", "counted_usd")

    @property
    def unpriced(self) -> bool:
        """It counted a reservation for an unknown cost."""
        return self.cost_usd is None and self.counted_usd > 0

    @property
    def failure(self) -> Failure:
        return Failure(self.error_code, self.message, bool(self.retryable))


@dataclass(frozen=True)
class Failure:
    """The last failed attempt's error, which a settlement without a further attempt reports."""

    code: str
    message: str
    retryable: bool


@dataclass
class Prefetched:
    """What the executions of one run read alike, read once for a run executed in this process:
    workflow case rows by key, and the secret values by candidate id (filled as they are met)."""

    cases: dict[str, WorkflowCase]
    secrets: dict[str, list[str]] = field(default_factory=dict)
    #: Executions the run's loop has just found to run (:func:`skip_before_running` said None for
    #: the same run, candidate and environment), so running them does not ask again.
    qualified: set[int] = field(default_factory=set)

    def secrets_for(self, run: Run, execution: Execution, environ: Mapping[str, str]) -> list[str]:
        """The values every text of ``execution`` is scrubbed of, found once per candidate."""
        found = self.secrets.get(execution.candidate_key)
        if found is None:
            candidates = [execution.entry.candidate or {}, *(run.schedule.candidates or [])]
            found = self.secrets[execution.candidate_key] = secret_values(environ, candidates)
        return found


def case_document(row: WorkflowCase | None, execution: Execution) -> dict[str, Any]:
    """The reference case document plus evalhub's task prompt, which live executors give the agent
    (the case's id alone when its row is gone)."""
    return {**row.to_document(), "prompt": row.prompt} if row else {"id": execution.case_key, "assertions": {}}


# --- claiming and running ----------------------------------------------------------------------------


def execute_execution(
    execution_pk: int,
    *,
    environ: Mapping[str, str],
    owner: str | None = None,
    finalise: bool = True,
    slot_wait_s: float | None = None,
    requeue: bool = False,
    loaded: Execution | None = None,
    prefetched: Prefetched | None = None,
) -> ExecutionResult:
    """Run one execution of a running run, as a worker's task does: claim it under a lease, run
    it (qualification, the reservation against the ceiling, attempts), settle it, and with
    ``finalise`` finish and report the run when it was its last execution.

    Returns what happened, for the task row (:class:`ExecutionResult`, its :class:`Outcome`):
    ``settled``, ``handed back`` (the worker is shutting down; the execution is queued again),
    ``lost`` (the reaper took it over), ``already settled``, ``running elsewhere (host:pid)``,
    ``run not running (status)`` or ``waiting for a provider slot`` (re-queued when ``requeue``).
    An execution held under an expired lease is taken back first, so a redelivered task recovers
    what a dead worker left.

    ``loaded``: the execution as the caller read it (as :func:`_claimable` reads it: its entry, its
    run with the schedule, ``has_attempts``), not read again; ``prefetched``: what the executions
    of its run read alike (an in-process run reads them once, ``runs.dispatch``).
    """
    owner = owner or owner_id()
    execution = loaded if loaded is not None else _claimable(execution_pk)
    if execution is None:
        return ExecutionResult(Outcome.NO_SUCH_EXECUTION)
    if not evalhub_setting("PROVIDER_CONCURRENCY") and _looks_claimable(execution):
        # The common case — no provider slot to wait for: the execution is claimed by the first
        # write its running makes (``claim``), conditional on it being pending and its run running
        # and not cancelled: the skip that settles it, or the transaction that reserves and opens
        # its first attempt. A claim that does not take (another worker, a cancel, an attempt made
        # since the read) writes nothing, and the execution is read again and looked at below.
        try:
            outcome = _run_claimed(execution, environ=environ, owner=owner, slot=None, finalise=finalise, claim=True, prefetched=prefetched)
            return ExecutionResult(outcome)
        except NotClaimed:
            execution = _claimable(execution_pk)
            if execution is None:
                return ExecutionResult(Outcome.NO_SUCH_EXECUTION)
    not_runnable = _not_runnable(execution)
    if not_runnable is not None:
        return not_runnable
    return _claim_with_slot(execution, environ=environ, owner=owner, finalise=finalise, slot_wait_s=slot_wait_s, requeue=requeue)


def _claimable(execution_pk: int) -> Execution | None:
    """The execution with what running it reads (entry, run, schedule) and whether it has
    attempts already (``has_attempts``); None when there is no such execution."""
    return (
        Execution.objects.select_related("entry", "run", "run__schedule")
        .annotate(has_attempts=Exists(Attempt.objects.filter(execution_id=OuterRef("pk"))))
        .filter(pk=execution_pk)
        .first()
    )


def _looks_claimable(execution: Execution) -> bool:
    """Whether ``execution`` as read is pending in a running, uncancelled run (the claim decides)."""
    run = execution.run
    return execution.status == ExecutionStatus.PENDING and run.status == RunStatus.RUNNING and run.cancel_requested_at is None


def _not_runnable(execution: Execution) -> ExecutionResult | None:
    """Why ``execution`` is not run here (settled, running elsewhere, its run not running), or
    None; one held under an expired lease is taken back first."""
    if execution.status == ExecutionStatus.RUNNING and execution.lease_expires_at and execution.lease_expires_at < timezone.now():
        recovery.take_back(execution.pk, now=timezone.now(), dispatch=False)
        execution.refresh_from_db()
    if execution.status == ExecutionStatus.FINISHED:
        return ExecutionResult(Outcome.ALREADY_SETTLED)
    if execution.status == ExecutionStatus.RUNNING:
        return ExecutionResult(Outcome.RUNNING_ELSEWHERE, execution.owner)
    if execution.run.status != RunStatus.RUNNING:
        return ExecutionResult(Outcome.RUN_NOT_RUNNING, execution.run.status)
    return None


def _claim_with_slot(
    execution: Execution, *, environ: Mapping[str, str], owner: str, finalise: bool, slot_wait_s: float | None, requeue: bool
) -> ExecutionResult:
    """Take a provider slot (when its provider has a limit), claim the pending execution under a
    lease, and run it."""
    slot = _take_provider_slot(execution.entry.candidate or {}, execution.pk, wait_s=slot_wait_s)
    if slot is False:
        if requeue:
            dispatch_execution(execution.pk)
        return ExecutionResult(Outcome.WAITING_FOR_SLOT)
    now = timezone.now()
    claimed = db_retry(
        lambda: Execution.objects.filter(pk=execution.pk, status=ExecutionStatus.PENDING).update(
            status=ExecutionStatus.RUNNING,
            owner=owner,
            lease_expires_at=lease_until(now),
            heartbeat_at=now,
            started_at=Coalesce(F("started_at"), now),
        ),
        what=f"claiming {execution.execution_id}",
    )
    if not claimed:
        _release_provider_slot(execution.pk)
        execution.refresh_from_db(fields=["status", "owner"])
        if execution.status == ExecutionStatus.FINISHED:
            return ExecutionResult(Outcome.ALREADY_SETTLED)
        return ExecutionResult(Outcome.RUNNING_ELSEWHERE, execution.owner)
    # Read before the claim, so another worker may have made attempts since: look them up.
    execution.status, execution.owner, execution.has_attempts = ExecutionStatus.RUNNING, owner, True
    return ExecutionResult(_run_claimed(execution, environ=environ, owner=owner, slot=slot, finalise=finalise))


def _run_claimed(
    execution: Execution,
    *,
    environ: Mapping[str, str],
    owner: str,
    slot: bool | None,
    finalise: bool,
    claim: bool = False,
    prefetched: Prefetched | None = None,
) -> Outcome:
    """Run an execution under its lease's heartbeat, give its provider slot back, and with
    ``finalise`` finish the run when it was its last execution. ``claim``: the execution is still
    pending, and the first write of :func:`_execute_one` claims it (raising :class:`NotClaimed`,
    nothing written, when it does not take); the heartbeat beats only once it is claimed."""
    run = execution.run

    def beat() -> str | None:
        return heartbeat(execution.pk, run.pk, owner) if execution.status == ExecutionStatus.RUNNING else None

    guard = Guard(beat, interval=heartbeat_seconds())
    try:
        with guard.running():
            outcome = _execute_one(run, execution, environ=environ, owner=owner, guard=guard, claim=claim, prefetched=prefetched)
    finally:
        if slot is not False:
            _release_provider_slot(execution.pk, taken=slot)
    if finalise:
        finalise_run(run.pk, environ=environ)
    return outcome


def heartbeat(execution_pk: int, run_pk: int, owner: str) -> str | None:
    """Extend the lease; the reason to stop, if any (``lease_lost``, ``cancelled``). Two queries."""
    now = timezone.now()
    until = lease_until(now)
    kept = Execution.objects.filter(pk=execution_pk, owner=owner, status=ExecutionStatus.RUNNING).update(
        lease_expires_at=until, heartbeat_at=now
    )
    if not kept:
        return LEASE_LOST
    ProviderSlot.objects.filter(execution_id=execution_pk).update(expires_at=until)
    if Run.objects.filter(pk=run_pk, cancel_requested_at__isnull=False).exists():
        return CANCELLED
    return None


def _take_provider_slot(candidate: Mapping[str, Any], execution_pk: int, *, wait_s: float | None) -> bool | None:
    """Take one of the provider's ``PROVIDER_CONCURRENCY`` slots for the execution: True when
    taken, None when the provider has no limit, False when none came free within ``wait_s``
    (default ``SLOT_WAIT_SECONDS``). A slot is taken with a conditional update: free, or held past
    its holder's lease."""
    try:
        key = provider_key(CandidateSpec.from_snapshot(candidate))
    except CandidateSpecError:
        return None  # refused when it runs (candidate_configuration_invalid): it talks to no provider
    limit = (evalhub_setting("PROVIDER_CONCURRENCY") or {}).get(key)
    if not limit:
        return None
    for number in range(limit):
        ProviderSlot.objects.get_or_create(provider=key, number=number)
    deadline = time.monotonic() + (float(evalhub_setting("SLOT_WAIT_SECONDS")) if wait_s is None else wait_s)
    while True:
        now = timezone.now()
        free = Q(execution__isnull=True) | Q(expires_at__lt=now) | Q(execution_id=execution_pk)
        for pk in ProviderSlot.objects.filter(provider=key, number__lt=limit).filter(free).values_list("pk", flat=True):
            if ProviderSlot.objects.filter(pk=pk).filter(free).update(execution_id=execution_pk, expires_at=lease_until(now)):
                return True
        if time.monotonic() >= deadline:
            return False
        sleep(min(1.0, max(deadline - time.monotonic(), 0.01)))


def _release_provider_slot(execution_pk: int, *, taken: bool | None = True) -> None:
    """Free the provider slot ``execution_pk`` holds. ``taken`` None: the provider has no limit and
    no slot was taken, so there is nothing to free (no query)."""
    if taken is None:
        return
    with contextlib.suppress(Exception):
        ProviderSlot.objects.filter(execution_id=execution_pk).update(execution=None, expires_at=None)


# --- one execution: its attempts ---------------------------------------------------------------------


@dataclass
class _Running:
    """One execution being run by this process, and what its attempts read: its candidate and
    case documents, the run's secret values, when it started (``time.monotonic()``), whether an
    earlier attempt counted a reservation for an unknown cost (``unpriced``), and ``claim``: the
    execution is still pending, the first write claims it."""

    run: Run
    execution: Execution
    candidate: Mapping[str, Any]
    case: dict[str, Any]
    secrets: list[str]
    environ: Mapping[str, str]
    owner: str
    guard: Guard | None
    claim: bool
    unpriced: bool = False
    started: float = field(default_factory=time.monotonic)

    @property
    def claiming(self) -> bool:
        """Its next write claims it (it is still pending)."""
        return self.claim and self.execution.status == ExecutionStatus.PENDING

    def fallback(self, reason: NoMeasurement) -> dict[str, Any]:
        """An observation that says why the execution has no measurement."""
        return unavailable_document(self.run, self.case, self.candidate, self.secrets, reason)


@dataclass
class _Verdict:
    """What an attempt's call leaves for its execution: the observation that settles it (None:
    another attempt follows, or it is handed back), that observation's JSON text when known,
    whether the call's cost is known, whether it is handed back to another worker, whether the
    lease was lost (nothing but a late record is written), and the seconds to wait before the
    retry (None: no retry)."""

    observation: dict[str, Any] | None = None
    text: EncodedDocument | None = None
    cost_known: bool = True
    hand_back: bool = False
    lease_lost: bool = False
    wait: float | None = 0.0


def _execute_one(
    run: Run,
    execution: Execution,
    *,
    environ: Mapping[str, str],
    owner: str,
    guard: Guard | None,
    claim: bool = False,
    prefetched: Prefetched | None = None,
) -> Outcome:
    """Execute one claimed execution: cancellation, qualification, then up to the budget's
    ``maxAttempts`` executor calls, each reserved against the ceiling first (a retryable
    infrastructure error is retried once), and settle it. Each call's ``Attempt`` row is written,
    with its reservation, before the executor is called; the call's outcome, its cost, its trace
    and — when it is the last — the execution's result are written in one transaction afterwards.
    ``claim``: the execution is still pending; the first write claims it — a skip settles it in
    the same conditional update, an attempt is opened in the transaction that claims it and
    reserves its cost — and :class:`NotClaimed` is raised (nothing written) when it does not take.
    ``prefetched``: the run's case rows and secret values, read once for the run."""
    if not claim:
        run.refresh_from_db(fields=["cancel_requested_at", "provider_overrides"])
    running = _start(run, execution, environ=environ, owner=owner, guard=guard, claim=claim, prefetched=prefetched)
    # Attempts an earlier worker made count: the budget bounds the execution, not one process.
    earlier: list[EarlierAttempt] = []
    if getattr(execution, "has_attempts", True):
        rows = execution.attempts.order_by("number").values_list(*EarlierAttempt.COLUMNS)
        earlier = [EarlierAttempt(*row) for row in rows]
    # Whether an attempt so far counted a reservation for an unknown cost (the settled cost is then
    # not known): kept here, so settling needs no query for it.
    running.unpriced = any(attempt.unpriced for attempt in earlier)
    qualified = prefetched is not None and execution.pk in prefetched.qualified
    # The snapshot is parsed here, once, and handed on typed (the run's loop qualified it already).
    checked = CandidateSpec.from_snapshot(running.candidate) if qualified else qualify(run, running.candidate, environ)
    if isinstance(checked, NoMeasurement):
        return _settle_unmeasured(running, checked)
    return _attempts(running, checked, earlier)


def _start(
    run: Run,
    execution: Execution,
    *,
    environ: Mapping[str, str],
    owner: str,
    guard: Guard | None,
    claim: bool,
    prefetched: Prefetched | None,
) -> _Running:
    """What the execution's attempts read: its case (from ``prefetched`` or one query) and the run's secret values."""
    candidate = execution.entry.candidate or {}
    if prefetched is not None:
        row = prefetched.cases.get(execution.case_key)
        secrets = prefetched.secrets_for(run, execution, environ)
    else:
        row = WorkflowCase.objects.filter(key=execution.case_key).first()
        secrets = secret_values(environ, [candidate, *(run.schedule.candidates or [])])
    return _Running(
        run=run,
        execution=execution,
        candidate=candidate,
        case=case_document(row, execution),
        secrets=secrets,
        environ=environ,
        owner=owner,
        guard=guard,
        claim=claim,
    )


def qualify(run: Run, candidate: Mapping[str, Any], environ: Mapping[str, str]) -> NoMeasurement | CandidateSpec:
    """The candidate snapshot parsed, or why an execution of it in ``run`` is skipped before any
    attempt: the run was cancelled, the snapshot is unsafe or cannot be read, or a required
    variable is missing or empty."""
    if run.cancel_requested_at is not None:
        return NoMeasurement("skipped", "run_cancelled", "orchestration", False, "the run was cancelled before this execution started")
    problem = unsafe_candidate_problem(candidate)
    if problem is None:
        try:
            spec = CandidateSpec.from_snapshot(candidate)
        except CandidateSpecError as exc:
            problem = f"the candidate's configuration cannot be read ({exc}); fix it in the catalog, then run it again"
        else:
            missing = [name for name in spec.required_environment if not environ.get(name)]
            if missing:
                return NoMeasurement(
                    "skipped", "qualification_environment_missing", "qualification", False, missing_environment_message(missing)
                )
            return spec
    # A row written around full_clean() (loaddata, a raw insert): refuse to run it (docs/failure-modes.md B8).
    return NoMeasurement("skipped", "candidate_configuration_invalid", "qualification", False, problem)


def _settle_unmeasured(running: _Running, reason: NoMeasurement) -> Outcome:
    """Settle the execution without calling its executor (again); one still to claim is claimed
    and settled by the same conditional update (no executor runs between the two)."""
    observation = running.fallback(reason)
    claiming = running.claiming
    execution = running.execution

    def write() -> None:
        if claiming:
            settle(execution, observation, started=running.started, owner=running.owner, cost_known=not running.unpriced, claim=True)
            return
        with transaction.atomic():
            settle(execution, observation, started=running.started, owner=running.owner, cost_known=not running.unpriced)

    try:
        db_retry(write, what=f"settling {execution.execution_id}")
    except Stale:
        if claiming:
            raise NotClaimed from None
        return Outcome.LOST
    return Outcome.SETTLED


def _attempts(running: _Running, spec: CandidateSpec, earlier: Sequence[EarlierAttempt]) -> Outcome:
    """Make the execution's attempts of candidate ``spec``, after the ``earlier`` ones, until one
    settles it, the budget's ``maxAttempts`` or the run's ceiling stops it, or the execution is
    lost or handed back."""
    allowed = max_attempts(spec)
    reserve = reservation_usd(spec)
    retried = any(attempt.outcome == AttemptOutcome.INFRASTRUCTURE_ERROR and attempt.retryable for attempt in earlier)
    last = earlier[-1].failure if earlier else None
    number = len(earlier)
    while True:
        number += 1
        if number > allowed:
            return _settle_unmeasured(running, _attempts_exhausted(last, allowed))
        attempt = _open_attempt(running, number, reserve)
        if attempt is None:
            return _settle_unmeasured(running, _ceiling_reached(running.run, reserve, last))
        call, verdict, artifacts = _attempt(running, spec, number=number, allowed=allowed, retried=retried)
        outcome = _record(running, attempt, call, verdict, artifacts)
        if outcome is not None:
            return outcome
        retried = True
        last = Failure(call.code, call.message, bool(call.retryable))
        sleep(verdict.wait)


def _attempts_exhausted(last: Failure | None, allowed: int) -> NoMeasurement:
    """The budget's ``maxAttempts`` are used up: the last attempt's error, saying so."""
    code, message = (last.code, last.message) if last else ("attempts_exhausted", "")
    return NoMeasurement(
        "infrastructure_failure", code, "provider", False, f"{message} (not retried: the budget allows {allowed} attempts)".strip()
    )


def _open_attempt(running: _Running, number: int, reserve: Decimal) -> Attempt | None:
    """Reserve the attempt's worst case and open its row (claiming the execution with the first);
    None when the reservation does not fit under the run's ceiling."""
    claiming = running.claiming
    attempt = db_retry(
        lambda: begin_attempt(running.run, running.execution, number, reserve, running.owner, claim=claiming),
        what=f"starting {running.execution.execution_id}",
    )
    if claiming:
        running.execution.status, running.execution.owner = ExecutionStatus.RUNNING, running.owner
    return attempt


def _ceiling_reached(run: Run, reserve: Decimal, last: Failure | None) -> NoMeasurement:
    """The run's ceiling has no room for another attempt: flagged on the run; the execution is
    skipped, or — after a failed attempt — that failure, not retried."""
    Run.objects.filter(pk=run.pk).update(stopped_at_ceiling=True)
    run.refresh_from_db(fields=["spent_usd", "reserved_usd", "cost_ceiling_usd"])
    ceiling = (
        f"campaign cost ceiling reached: spent ${run.spent_usd:.2f} and ${run.reserved_usd:.2f} reserved of "
        f"${run.cost_ceiling_usd:.2f}; an attempt may cost up to ${reserve:.2f}"
    )
    if last is None:
        return NoMeasurement("skipped", "campaign_cost_ceiling_reached", "orchestration", False, ceiling)
    return NoMeasurement("infrastructure_failure", last.code, "provider", last.retryable, f"{last.message} (not retried: {ceiling})")


def _attempt(running: _Running, spec: CandidateSpec, *, number: int, allowed: int, retried: bool) -> tuple[Call, _Verdict, ArtifactSink]:
    """Call the executor of candidate ``spec`` once for attempt ``number`` and judge what it
    produced; the sink its executor left its trace in."""
    artifacts = ArtifactSink()
    request = ExecutionRequest(
        run_id=running.run.pk,
        entry=running.execution.entry.to_document(),
        candidate=spec,
        case=running.case,
        environment={name: running.environ[name] for name in spec.required_environment},
        attempt=number,
        artifacts=artifacts,
        provider=run_providers(running.run).get(running.execution.candidate_key),
    )
    call = _call_executor(request, spec.adapter, running.secrets, running.guard)
    return (*_judge(running, call, number=number, allowed=allowed, retried=retried), artifacts)


def _record(running: _Running, attempt: Attempt, call: Call, verdict: _Verdict, artifacts: ArtifactSink) -> Outcome | None:
    """Write what the attempt's call produced (its trace from ``artifacts``); the execution's
    outcome, or None when a retry follows."""
    if verdict.lease_lost:
        record_late(attempt, call, artifacts=artifacts, secrets=running.secrets)
        return Outcome.LOST
    try:
        running.unpriced = db_retry(
            lambda: finish_attempt(
                attempt,
                call,
                artifacts=artifacts,
                secrets=running.secrets,
                observation=verdict.observation,
                text=verdict.text,
                cost_known=verdict.cost_known,
                started=running.started,
                owner=running.owner,
                hand_back=verdict.hand_back,
                unpriced_before=running.unpriced,
            ),
            what=f"recording {running.execution.execution_id} attempt {attempt.number}",
        )
    except Stale:
        record_late(attempt, call, artifacts=artifacts, secrets=running.secrets)
        return Outcome.LOST
    if verdict.hand_back:
        dispatch_execution(running.execution.pk)
        return Outcome.HANDED_BACK
    if call.interrupt is not None:
        raise call.interrupt
    return Outcome.SETTLED if verdict.observation is not None else None


# --- judging one call --------------------------------------------------------------------------------


def _judge(running: _Running, call: Call, *, number: int, allowed: int, retried: bool) -> tuple[Call, _Verdict]:
    """What ``call`` leaves for the execution (an observation the schema refuses is judged as the
    ``invalid_observation`` crash it is), by its outcome."""
    if call.outcome == AttemptOutcome.OBSERVATION:
        stored, problems, text = checked_stored_form(call.observation, running.secrets, case_ids=(running.execution.case_key,))
        if not problems:
            # Unknown price: count the attempt's whole reservation (its budget) rather than $0 (docs/failure-modes.md B5).
            call.cost = finite_cost(stored["metrics"].get("costUsd"))
            return call, _Verdict(observation=stored, text=text, cost_known=call.cost is not None)
        message = redact("the executor returned an invalid observation: " + "; ".join(problems), extra_values=running.secrets)
        call = Call(AttemptOutcome.CRASH, code="invalid_observation", message=message, retryable=False)
    if call.outcome == AttemptOutcome.CRASH:
        if call.code == "executor_crashed":
            logger.warning("execution %s: %s", running.execution.execution_id, call.message)
        return call, _Verdict(
            observation=running.fallback(NoMeasurement("infrastructure_failure", call.code, "orchestration", False, call.message))
        )
    if call.outcome == AttemptOutcome.CANCELLED:
        return call, _Verdict(
            observation=running.fallback(NoMeasurement("skipped", "run_cancelled", "orchestration", False, call.message)), cost_known=False
        )
    if call.outcome == AttemptOutcome.WORKER_LOST:
        return call, _worker_lost(running, call, handed_back=call.code == "worker_shutdown" and number < allowed)
    return call, _infrastructure_error(running, call, retried=retried, number=number, allowed=allowed)


def _worker_lost(running: _Running, call: Call, *, handed_back: bool) -> _Verdict:
    """The lease was lost (another worker owns the execution now), or this worker stopped: the
    execution is handed back when its budget has attempts left, else settled as lost."""
    if call.code == "lease_lost":
        return _Verdict(cost_known=False, lease_lost=True)
    if handed_back:
        return _Verdict(cost_known=False, hand_back=True)
    reason = NoMeasurement("infrastructure_failure", call.code, "orchestration", bool(call.retryable), call.message)
    return _Verdict(observation=running.fallback(reason), cost_known=False)


def _infrastructure_error(running: _Running, call: Call, *, retried: bool, number: int, allowed: int) -> _Verdict:
    """An infrastructure error: retried once when it says it may pass (after the provider's
    ``Retry-After``, up to ``MAX_RETRY_AFTER_S``) within ``maxAttempts``; else the execution's
    failure, its message saying why a retryable error was not retried."""
    error = call.error
    wait = _retry_wait(error)
    if call.retryable and not retried:
        if number < allowed and wait is not None:
            return _Verdict(wait=wait)
        if wait is None:
            call.message += f" (not retried: the provider asked to wait {error.retry_after_s:g} s, more than {MAX_RETRY_AFTER_S:g} s)"
        else:
            call.message += f" (not retried: the budget allows {allowed} attempt{'s' if allowed != 1 else ''})"
    reason = NoMeasurement("infrastructure_failure", call.code, "provider", bool(call.retryable), call.message)
    return _Verdict(observation=running.fallback(reason), wait=None)


def _retry_wait(error: InfrastructureError | None) -> float | None:
    """Seconds to wait before retrying ``error`` (0 when the provider did not say), or ``None``
    when it asked for longer than ``MAX_RETRY_AFTER_S``."""
    asked = _finite_float(error.retry_after_s) if error is not None else None
    if asked is None or asked <= 0:
        return 0.0
    return asked if asked <= MAX_RETRY_AFTER_S else None


def _finite_float(value: Any) -> float | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float(value) if math.isfinite(value) else None


# --- calling the executor -----------------------------------------------------------------------------


def _call_executor(request: ExecutionRequest, adapter: str, secrets: list[str], guard: Guard | None = None) -> Call:
    """Call the adapter's executor once, with stderr redacted, and classify what happened.

    Never raises, except ``KeyboardInterrupt`` (a person stopping the command), which is returned
    in ``interrupt`` after being recorded like a crash so the caller can re-raise it. Any other
    ``BaseException`` an executor lets out (``asyncio.CancelledError``, ``SystemExit``) is that
    execution's crash: one execution never kills the worker. An interruption by the lease's
    guard (cancel, shutdown, lease lost) and django-q2's task timeout are their own outcomes.
    """
    try:
        with redacted_stderr(secrets), guard.call() if guard is not None else contextlib.nullcontext():
            executor = FAULT_INJECTION.get(request.run_id) or executor_for(adapter)
            observation = executor.execute(request)
    except InfrastructureError as error:
        return Call(
            AttemptOutcome.INFRASTRUCTURE_ERROR,
            error=error,
            code=redact(str(error.code), extra_values=secrets)[:100] or "infrastructure_error",
            message=redact(str(error.message), extra_values=secrets),
            retryable=error.retryable is True,
            cost=finite_cost(error.cost_usd),
        )
    except ExecutionInterrupted as interrupted:
        if interrupted.reason == CANCELLED:
            return Call(
                AttemptOutcome.CANCELLED,
                code="run_cancelled",
                message="the run was cancelled while this attempt ran; its runtime was stopped",
                retryable=False,
            )
        if interrupted.reason == LEASE_LOST:
            return Call(
                AttemptOutcome.WORKER_LOST,
                code="lease_lost",
                message="this worker lost the execution's lease; another one took it over",
                retryable=True,
            )
        return Call(
            AttemptOutcome.WORKER_LOST,
            code="worker_shutdown",
            message=f"the worker {owner_id()} was asked to stop while this attempt ran; its runtime was stopped and the execution handed back",
            retryable=True,
        )
    except TimeoutException as exc:
        return Call(
            AttemptOutcome.WORKER_LOST,
            code="worker_timeout",
            message=redact(f"the attempt ran past the worker's task timeout: {exc}", extra_values=secrets),
            retryable=False,
        )
    except BaseException as exc:  # one broken entry must not lose the night, nor the worker
        message = redact(f"the executor crashed: {type(exc).__name__}: {exc}", extra_values=secrets)
        interrupt = exc if isinstance(exc, KeyboardInterrupt) else None
        return Call(AttemptOutcome.CRASH, code="executor_crashed", message=message, retryable=False, interrupt=interrupt)
    return Call(AttemptOutcome.OBSERVATION, observation=observation)


@contextlib.contextmanager
def redacted_stderr(secrets: Sequence[str]) -> Iterator[None]:
    """While the block runs, ``sys.stderr`` scrubs secret shapes, ``secrets`` and the process's
    credential values from every line written to it (an executor printing its environment or a
    traceback). Nested uses keep the outermost stream."""
    original = sys.stderr
    if isinstance(original, RedactingStream) or original is None:
        yield
        return
    stream = RedactingStream(original, secrets)
    sys.stderr = stream
    try:
        yield
    finally:
        if sys.stderr is stream:
            sys.stderr = original
        stream.flush()
