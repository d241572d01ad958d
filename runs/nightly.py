"""The nightly: build tonight's schedule (coverage first), save it, and with ``execute`` run it —
in this process or fanned out to the workers — as the night's one ``nightly`` run (or a manual
run over a selection); and what ``manage.py nightly`` reports of it (:func:`nightly_command`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction

from runs.actions import RunActionError
from runs.creation import UNFINISHED, RunSummary, claim_run, create_run, summarize
from runs.dispatch import ProgressCallback, dispatch_run, execute_claimed
from runs.models import Run, RunLane, Trigger
from runs.recovery import take_over_abandoned_run
from schedules.models import Schedule
from schedules.services import Selection, apply_selection, schedule_for_night


@dataclass
class NightlyOutcome:
    """What one nightly delivery did: the schedule, the run, whether this call created them, and
    whether this call executed the run (False for a second delivery, which spends nothing)."""

    schedule: Schedule
    schedule_created: bool
    run: Run | None
    run_created: bool
    summary: RunSummary | None
    executed: bool = False


def start_nightly(
    *,
    seed: str,
    cost_ceiling_usd: Decimal,
    now: Any,
    environ: Mapping[str, str],
    execute: bool,
    rotation_day: Any = None,
    generated_at: str | None = None,
    selection: Selection = Selection(),
    progress: ProgressCallback | None = None,
    dispatch: bool = False,
) -> NightlyOutcome:
    """Build tonight's schedule (coverage first), save it, and with ``execute`` run it.

    The whole schedule is always built, coverage-checked and saved; ``selection`` narrows only
    the run. Without a selection the run is the night's one ``nightly`` run: a second delivery
    returns it untouched (nothing executed, nothing spent), unless the first delivery died before
    claiming it, in which case the run is still pending and this delivery claims and executes it.
    The claim is a conditional update, so two deliveries never both execute. A selection, or a
    ``rotation_day`` given (another day's schedule for this night), makes a ``manual`` run. With ``dispatch`` the run is not executed here but fanned out: one django-q2
    task per execution (:func:`dispatch_run`), shared by every worker; the summary is then the
    run's counts so far.
    Raises ``CoverageError`` (naming the failed invariants) or ``ScheduleError`` for bad input.
    """
    schedule, schedule_created = schedule_for_night(seed=seed, now=now, rotation_day=rotation_day, generated_at=generated_at)
    if not execute:
        if not selection.is_empty:
            apply_selection(schedule.to_document(), selection)
        return NightlyOutcome(schedule, schedule_created, None, False, None)
    # Only the night's own rotation day makes its nightly run: another day's schedule, asked for by
    # hand (``--rotation-day``), is a manual run, never a second nightly of the same night in the
    # leaderboard and the candidates' histories.
    if selection.is_empty and rotation_day is None:
        run, run_created = create_run(schedule=schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection, trigger=Trigger.NIGHTLY)
    else:
        run, run_created = _selection_run(schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection)
    if dispatch:
        with transaction.atomic():
            queued = dispatch_run(run)
        run.refresh_from_db()
        return NightlyOutcome(
            schedule, schedule_created, run, run_created, summarize(run, with_report=True), executed=queued > 0 or run_created
        )
    if not claim_run(run) and not take_over_abandoned_run(run):
        if not selection.is_empty and run.status in UNFINISHED:
            raise RunActionError(
                f"run {run.pk} over the same selection of this night's schedule is still {run.status} (another "
                "`nightly --execute` is executing it): wait for it to end, or cancel it "
                f"(`manage.py cancel_run {run.pk}`), before running this selection again"
            )
        return NightlyOutcome(schedule, schedule_created, run, run_created, summarize(run, with_report=True), executed=False)
    summary = execute_claimed(run, environ=environ, progress=progress)
    return NightlyOutcome(schedule, schedule_created, run, run_created, summary, executed=True)


def _selection_run(schedule: Schedule, *, cost_ceiling_usd: Decimal, selection: Selection) -> tuple[Run, bool]:
    """The manual live run of ``schedule`` over ``selection``: the unfinished one already there
    (``created=False``; the caller claims it, takes it over if abandoned, or refuses), else a new one.

    The schedule row is locked while looking and creating (on SQLite every transaction takes the
    write lock at BEGIN, ``evalhub/settings.py``), so two ``nightly --execute`` with the same
    selection never both create a run over the same entries. Raises ``ScheduleError`` for a bad selection.
    """
    wanted = selection.to_document()
    with transaction.atomic():
        Schedule.objects.select_for_update().filter(pk=schedule.pk).values_list("pk", flat=True).first()
        unfinished = Run.objects.filter(
            schedule=schedule, trigger=Trigger.MANUAL, lane=RunLane.LIVE, repeat_of__isnull=True, status__in=UNFINISHED
        ).order_by("pk")
        for run in unfinished:
            if run.selection == wanted:
                return run, False
        return create_run(schedule=schedule, cost_ceiling_usd=cost_ceiling_usd, selection=selection, trigger=Trigger.MANUAL)
