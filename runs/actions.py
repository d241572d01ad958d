"""What a person does to a run after it started: cancel it, or re-run what failed or was skipped
(a new run pointing at the original, which keeps its history)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from runs.creation import UNFINISHED
from runs.models import Execution, RerunScope, Run, RunLane, RunStatus, Trigger
from runs.recovery import finalise_run
from runs.settlement import skip_pending


class RunActionError(Exception):
    """A cancel or re-run that cannot be done; the message says why and what to do."""


def cancel_run(run: Run) -> int:
    """Cancel ``run``: its pending executions are settled as ``skipped`` / ``run_cancelled`` at once;
    its running ones are interrupted by their workers' heartbeats (their runtimes' process groups
    killed) and settled the same way; the run then ends ``cancelled`` and is reported.

    Returns how many pending executions were skipped. Raises :class:`RunActionError` for a run
    that already ended.
    """
    now = timezone.now()
    if run.status not in UNFINISHED:
        raise RunActionError(f"run {run.pk} is {run.status}: only a pending or running run can be cancelled")
    Run.objects.filter(pk=run.pk, cancel_requested_at__isnull=True).update(cancel_requested_at=now)
    Run.objects.filter(pk=run.pk, status=RunStatus.PENDING).update(status=RunStatus.RUNNING, started_at=now)
    skipped = skip_pending(run, code="run_cancelled", message="the run was cancelled before this execution started", owner="cancel")
    finalise_run(run.pk)
    run.refresh_from_db()
    return skipped


#: Which classifications each re-run scope repeats.
RERUN_CLASSIFICATIONS = {
    RerunScope.FAILED: ("candidate_failure", "infrastructure_failure"),
    RerunScope.INFRASTRUCTURE: ("infrastructure_failure",),
    RerunScope.SKIPPED: ("skipped",),
}


def rerun_run(run: Run, *, scope: str = RerunScope.FAILED, trigger: str = Trigger.MANUAL) -> Run:
    """A new pending run repeating the failed executions of ``run`` — ``scope`` ``failed``
    (candidate or infrastructure failures, and completed executions whose scorecard did not pass)
    or ``infrastructure`` (infrastructure failures only) — or its skipped executions (``scope``
    ``skipped``: missing credentials, the ceiling, a cancel, once the cause is fixed) — with the same schedule, lane, ceiling
    and execution ids, pointing at ``run`` (``repeat_of``). The original keeps its history.

    Raises :class:`RunActionError` when ``run`` has not ended, the scope is unknown, an earlier
    re-run of it is still pending or running (the ``run_one_unfinished_rerun_per_run`` constraint
    decides between two at once), or nothing in it failed in that scope.
    """
    if scope not in RERUN_CLASSIFICATIONS:
        raise RunActionError(f"unknown re-run scope {scope!r}: use one of {', '.join(RERUN_CLASSIFICATIONS)}")
    if run.status in UNFINISHED:
        raise RunActionError(f"run {run.pk} is still {run.status}: wait for it to end (or cancel it) before re-running it")
    if run.lane == RunLane.REPLAY:
        raise RunActionError(
            f"run {run.pk} is a refresh (replay lane) of run {run.refresh_of_id}: re-run run {run.refresh_of_id} instead "
            f"(`manage.py rerun {run.refresh_of_id}`), then refresh that re-run"
        )
    if run.lane == RunLane.CHAOS:
        raise RunActionError(f"run {run.pk} is a chaos-lane run: run the chaos lane again instead (`manage.py chaos`)")
    if run.lane == RunLane.SCRIPTED:
        # Its scripted model lived in the process that ran it (demo_live): elsewhere its address is dead, or someone else's.
        raise RunActionError(
            f"run {run.pk} is a scripted-lane run: its scripted model is gone with the process that ran it; run `manage.py demo_live` again"
        )
    earlier = _unfinished_rerun_problem(run)
    if earlier:
        raise RunActionError(earlier)
    failed = Q(classification__in=RERUN_CLASSIFICATIONS[scope])
    if scope == RerunScope.FAILED:
        failed |= Q(classification="completed", scorecard__passed=False)
    chosen = list(run.executions.filter(failed).order_by("position").values_list("execution_id", flat=True))
    if not chosen:
        skipped = run.executions.filter(classification="skipped").count() if scope != RerunScope.SKIPPED else 0
        hint = (
            f"; it has {skipped} skipped execution(s): re-run those with scope skipped (`manage.py rerun {run.pk} --skipped`)"
            if skipped
            else ""
        )
        raise RunActionError(f"run {run.pk} has no {RerunScope(scope).label} to re-run{hint}")
    selection = {**(run.selection or {"candidateIds": [], "caseIds": [], "limit": None}), "executionIds": chosen}
    try:
        rerun = _create_rerun(run, scope=scope, trigger=trigger, selection=selection, chosen=chosen)
    except IntegrityError:
        # Two re-runs at once (a double-click): the one-unfinished-re-run constraint let one in.
        problem = _unfinished_rerun_problem(run)
        if problem is None:
            raise
        raise RunActionError(problem) from None
    return rerun


def _unfinished_rerun_problem(run: Run) -> str | None:
    """Why ``run`` cannot be re-run now — an earlier re-run of it is still pending or running
    (the ``run_one_unfinished_rerun_per_run`` constraint) — or ``None``."""
    earlier = run.reruns.filter(status__in=UNFINISHED).order_by("pk").values_list("pk", "status").first()
    if earlier is None:
        return None
    return (
        f"run {run.pk} is already being re-run by run {earlier[0]}, which is still {earlier[1]}: wait for it to end "
        f"(or cancel it: `manage.py cancel_run {earlier[0]}`) before re-running run {run.pk} again"
    )


def _create_rerun(run: Run, *, scope: str, trigger: str, selection: dict[str, Any], chosen: list[str]) -> Run:
    """The re-run row and its pending executions, in one transaction (see :func:`rerun_run`)."""
    with transaction.atomic():
        rerun = Run(
            schedule=run.schedule,
            trigger=trigger,
            lane=run.lane,
            selection=selection,
            cost_ceiling_usd=run.cost_ceiling_usd,
            repeat_of=run,
            repeat_scope=scope,
            provider_overrides=run.provider_overrides,
        )
        rerun.full_clean(exclude=["schedule", "repeat_of"])
        rerun.save()
        entries = {entry.execution_id: entry for entry in run.schedule.entries.filter(execution_id__in=chosen)}
        Execution.objects.bulk_create(
            Execution(
                run=rerun,
                entry=entries[execution_id],
                position=position,
                execution_id=execution_id,
                case_key=entries[execution_id].case_key,
                candidate_key=entries[execution_id].candidate_key,
                slot_key=entries[execution_id].slot_key,
                repetition=entries[execution_id].repetition,
            )
            for position, execution_id in enumerate(chosen)
        )
    return rerun
