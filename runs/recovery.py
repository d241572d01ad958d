"""Recovery: what a dead, hung or killed worker leaves behind, taken back, and a run finished once
its last execution settled.

* :func:`take_back`: an execution whose lease expired — its open attempts closed as
  ``worker_lost``, then queued again or settled;
* :func:`reap` (every minute, when a worker starts, :func:`reap_if_needed` after a task that sees
  an expired lease): every expired lease taken back, settled runs finished, lost tasks queued
  again, finished runs whose reporter died reported;
* :func:`recover_before_executing`: what a command that executes in its own process does first;
* :func:`take_over_abandoned_run`: a run whose in-process executor (``nightly --execute``) died;
* :func:`finalise_run`: finish and report a run once all its executions settled, exactly once.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Case, F, Max, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from evalhub.conf import evalhub_setting
from evalhub.secrets import redact_data
from runs.evaluation.observations import unavailable_observation
from runs.executors import remove_abandoned_work
from runs.executors.candidate import Budget, CandidateSpec, CandidateSpecError
from runs.leases import db_retry, lease_seconds, lease_until, owner_id
from runs.models import Attempt, AttemptOutcome, Execution, ExecutionStatus, ProviderSlot, Run, RunLane, RunStatus
from runs.queueing import dispatch_execution
from runs.reporting import finish_reporting
from runs.settlement import settle
from runs.snapshots import max_attempts, secret_values
from schedules.services import iso_timestamp

logger = logging.getLogger(__name__)


def take_back(execution_pk: int, *, now: dt.datetime, dispatch: bool = True) -> bool:
    """Take back an execution whose lease expired (its worker died, hung or was cut off): close
    its open attempts as ``worker_lost`` — an infrastructure failure whose unknown cost is counted
    at its reservation — and either put it back to pending (queued again with ``dispatch``) when
    its budget has attempts left and it was not lost before, or settle it as an
    ``infrastructure_failure`` / ``worker_lost`` (``skipped`` / ``run_cancelled`` when its run was
    cancelled). True when this call took it (a conditional update: two reapers never both do)."""
    row = (
        Execution.objects.filter(pk=execution_pk, status=ExecutionStatus.RUNNING, lease_expires_at__lt=now)
        .values_list("owner", "lease_expires_at")
        .first()
    )
    if row is None:
        return False
    previous_owner, expired = row
    reaper = f"reaper:{owner_id()}"
    with transaction.atomic():
        taken = Execution.objects.filter(
            pk=execution_pk, status=ExecutionStatus.RUNNING, owner=previous_owner, lease_expires_at=expired
        ).update(owner=reaper, lease_expires_at=lease_until(now))
        if not taken:
            return False
        execution = Execution.objects.select_related("entry", "run").get(pk=execution_pk)
        run = execution.run
        lost = Decimal(0)
        for attempt in Attempt.objects.filter(execution=execution, outcome=AttemptOutcome.RUNNING):
            Attempt.objects.filter(pk=attempt.pk).update(
                outcome=AttemptOutcome.WORKER_LOST,
                error_code="worker_lost",
                retryable=True,
                message=(
                    f"the worker {attempt.owner or previous_owner} stopped renewing its lease (expired {iso_timestamp(expired)}); "
                    f"the attempt's cost is unknown and counted at its reservation, ${attempt.reserved_usd:.2f}"
                ),
                counted_usd=attempt.reserved_usd,
                duration_ms=max(int((now - attempt.started_at).total_seconds() * 1000), 0),
                finished_at=now,
            )
            lost += attempt.reserved_usd
        updates: dict[str, Any] = {"spent_usd": F("spent_usd") + lost, "reserved_usd": F("reserved_usd") - lost}
        if lost > 0:
            updates["has_unpriced"] = True
        Run.objects.filter(pk=run.pk).update(**updates)
        Execution.objects.filter(pk=execution.pk).update(cost_usd=Coalesce(F("cost_usd"), Decimal(0)) + lost)
        ProviderSlot.objects.filter(execution_id=execution.pk).update(execution=None, expires_at=None)
        candidate = execution.entry.candidate or {}
        outcomes = list(execution.attempts.values_list("outcome", flat=True))
        try:
            allowed = max_attempts(CandidateSpec.from_snapshot(candidate))
        except CandidateSpecError:  # refused when it runs (candidate_configuration_invalid); a bound is all this needs
            allowed = Budget().max_attempts
        lost_count = outcomes.count(AttemptOutcome.WORKER_LOST)
        case = {"id": execution.case_key, "assertions": {}}
        if run.cancel_requested_at is not None:
            observation = unavailable_observation(
                case=case,
                candidate=candidate,
                classification="skipped",
                code="run_cancelled",
                category="orchestration",
                retryable=False,
                message="the run was cancelled while this execution's worker was lost",
                scripted=run.lane == RunLane.SCRIPTED,
            )
        elif len(outcomes) < allowed and lost_count <= 1 and run.status == RunStatus.RUNNING:
            Execution.objects.filter(pk=execution.pk).update(status=ExecutionStatus.PENDING, owner="", lease_expires_at=None)
            if dispatch:
                dispatch_execution(execution.pk)
            return True
        else:
            observation = unavailable_observation(
                case=case,
                candidate=candidate,
                classification="infrastructure_failure",
                code="worker_lost",
                category="orchestration",
                retryable=True,
                message=f"the worker running this execution was lost ({lost_count} time{'s' if lost_count != 1 else ''}); "
                f"{len(outcomes)} of {allowed} attempts used",
                scripted=run.lane == RunLane.SCRIPTED,
            )
        settle(execution, redact_data(observation), started=time.monotonic())
    return True


@dataclass
class ReapSummary:
    """What one pass of the reaper did (counts), for the task row."""

    taken_back: int = 0
    finalised: int = 0
    redispatched: int = 0
    reported: int = 0

    def line(self) -> str:
        return (
            f"reaper: {self.taken_back} execution(s) taken back, {self.finalised} run(s) finalised, "
            f"{self.redispatched} execution(s) queued again, {self.reported} report(s) written"
        )


def reap(*, now: dt.datetime | None = None, environ: Mapping[str, str] | None = None, dispatch: bool = True) -> ReapSummary:
    """Recover whatever died: take back every execution whose lease expired (:func:`take_back`);
    finalise every running run whose executions have all settled; queue again the pending
    executions of a running run nothing has touched for ``REDISPATCH_SECONDS`` (a broker that
    lost their tasks); and report a finished run whose finaliser died before reporting it.
    Runs as a periodic task and when a worker starts; safe to run anywhere, any number of times."""
    now = now or timezone.now()
    summary = ReapSummary()
    for pk in Execution.objects.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=now).values_list("pk", flat=True):
        summary.taken_back += db_retry(lambda pk=pk: take_back(pk, now=now, dispatch=dispatch), what="taking back an execution")
    open_runs = Run.objects.filter(status=RunStatus.RUNNING)
    for run_pk in open_runs.exclude(executions__status__in=[ExecutionStatus.PENDING, ExecutionStatus.RUNNING]).values_list("pk", flat=True):
        summary.finalised += finalise_run(run_pk, environ=environ)
    if dispatch:
        quiet = now - dt.timedelta(seconds=float(evalhub_setting("REDISPATCH_SECONDS")))
        for run in open_runs.filter(started_at__lt=quiet).exclude(executions__status=ExecutionStatus.RUNNING):
            touched = run.executions.aggregate(latest=Max("heartbeat_at"), dispatched=Max("dispatched_at"), finished=Max("finished_at"))
            if any(moment is not None and moment >= quiet for moment in touched.values()):
                continue
            for pk in run.executions.filter(status=ExecutionStatus.PENDING).values_list("pk", flat=True):
                dispatch_execution(pk)
                summary.redispatched += 1
    stale = now - dt.timedelta(seconds=float(evalhub_setting("LEASE_SECONDS")))
    unreported = Run.objects.filter(
        status__in=[RunStatus.FINISHED, RunStatus.CANCELLED], finished_at__lt=stale, report__isnull=True, error=""
    ).exclude(lane=RunLane.CHAOS)
    for run in unreported:
        summary.reported += (
            finish_reporting(
                run, generated_at=iso_timestamp(now), secrets=secret_values(environ or os.environ, list(run.schedule.candidates))
            )
            is not None
        )
    return summary


def recover_before_executing(*, environ: Mapping[str, str] | None = None) -> ReapSummary:
    """What a command that executes runs in its own process (``nightly --execute``, ``demo_live``,
    ``rerun``) does first, as a worker does when it starts (``runs.worker``): take back the
    executions whose lease expired — a ``kill -9`` of an earlier such command leaves its run
    ``running`` — without queueing them (this process, or the take-over of an abandoned run,
    executes them; a worker's reaper queues a worker's again after ``REDISPATCH_SECONDS``), and
    remove the execution folders that killed processes left behind
    (:func:`runs.executors.remove_abandoned_work`: the live executors' folders)."""
    summary = reap(environ=environ, dispatch=False)
    for folder in remove_abandoned_work():
        logger.warning("removed %s, left behind by a process that no longer runs", folder)
    if summary.taken_back or summary.finalised:
        logger.warning("%s", summary.line())
    return summary


#: When this process last looked for expired leases after a task (``time.monotonic()``).
_last_reap_check: float | None = None


def reap_if_needed(*, environ: Mapping[str, str] | None = None) -> ReapSummary | None:
    """Run the reaper when some execution's lease has expired (one indexed query otherwise), at
    most every ``REAP_CHECK_SECONDS`` per process (no query in between; 0: every call).

    Workers call it after each task, so a dead worker's execution is taken back within
    ``REAP_CHECK_SECONDS`` and one task of its lease expiring, not at the next periodic pass. A
    query after every task was a tenth of a no-op execution's own cost, for a lease measured in
    tens of seconds."""
    global _last_reap_check
    now = time.monotonic()
    every = float(evalhub_setting("REAP_CHECK_SECONDS"))
    if _last_reap_check is not None and every > 0 and now - _last_reap_check < every:
        return None
    _last_reap_check = now
    if not Execution.objects.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=timezone.now()).exists():
        return None
    return reap(environ=environ)


def finalise_run(run_pk: int, *, environ: Mapping[str, str] | None = None) -> bool:
    """Finish and report a running run once its last execution settled: True only for the one
    caller whose conditional update finished it (it then scores and reports it; a chaos-lane run
    is never reported). A run with pending or running executions is left alone."""
    if Execution.objects.filter(run_id=run_pk, status__in=[ExecutionStatus.PENDING, ExecutionStatus.RUNNING]).exists():
        return False
    # Cancelled or finished, as the row says when it is updated (one statement, no race with a cancel).
    status = Case(When(cancel_requested_at__isnull=False, then=Value(RunStatus.CANCELLED)), default=Value(RunStatus.FINISHED))
    if not db_retry(
        lambda: Run.objects.filter(pk=run_pk, status=RunStatus.RUNNING).update(status=status, finished_at=timezone.now()),
        what=f"finishing run {run_pk}",
    ):
        return False
    run = Run.objects.select_related("schedule").get(pk=run_pk)
    if run.lane != RunLane.CHAOS:
        # Score and report the finished run; a failure is recorded in run.error, never undoing it.
        secrets = secret_values(environ if environ is not None else os.environ, list(run.schedule.candidates))
        finish_reporting(run, generated_at=iso_timestamp(timezone.now()), secrets=secrets)
    return True


def take_over_abandoned_run(run: Run, *, now: dt.datetime | None = None) -> bool:
    """Take over ``run`` when the process executing it in-process died (``kill -9`` of
    ``nightly --execute``): it is running, none of its executions was ever queued for the
    workers (their reaper recovers queued runs), none holds a live lease, and nothing of it was
    touched for a lease's length. Expired leases are taken back first (their attempts closed as
    ``worker_lost``). True for the one caller whose conditional update took it; the caller then
    executes its pending executions."""
    now = now or timezone.now()
    quiet = now - dt.timedelta(seconds=lease_seconds())
    row = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).values_list("started_at", flat=True).first()
    if row is None or row >= quiet:
        return False
    executions = run.executions
    if (
        executions.filter(dispatched_at__isnull=False).exists()
        or executions.filter(status=ExecutionStatus.RUNNING, lease_expires_at__gte=now).exists()
    ):
        return False
    touched = executions.aggregate(heartbeat=Max("heartbeat_at"), finished=Max("finished_at"), started=Max("started_at"))
    if any(moment is not None and moment >= quiet for moment in touched.values()):
        return False
    if not Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING, started_at=row).update(started_at=now):
        return False  # another caller took it over first
    for pk in executions.filter(status=ExecutionStatus.RUNNING, lease_expires_at__lt=now).values_list("pk", flat=True):
        take_back(pk, now=now, dispatch=False)
    run.refresh_from_db()
    logger.warning("run %s was abandoned by the process executing it: taken over by %s", run.pk, owner_id())
    return True
