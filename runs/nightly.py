"""The nightly: build tonight's schedule (coverage first), save it, and with ``execute`` run it —
in this process or fanned out to the workers — as the night's one ``nightly`` run (or a manual
run over a selection); and what ``manage.py nightly`` reports of it (:func:`nightly_command`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from redis.exceptions import RedisError

from evalhub.jsnum import json_number
from evalhub.secrets import redact
from runs.actions import RunActionError
from runs.creation import UNFINISHED, RunSummary, claim_run, create_run, summarize
from runs.dispatch import ProgressCallback, dispatch_run, execute_claimed
from runs.executors.candidate import environment_names
from runs.models import Run, RunLane, RunStatus, Trigger
from runs.recovery import recover_before_executing, take_over_abandoned_run
from schedules.building import ScheduleError, parse_timestamp, validate_rotation_day
from schedules.cli import schedule_error_message
from schedules.models import Schedule
from schedules.services import CoverageError, Selection, SelectionError, apply_selection, schedule_for_night


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


# --- what `manage.py nightly` reports ---------------------------------------------------------------

#: The night was refused: coverage fails or the schedule cannot be built; nothing ran.
EXIT_REFUSED = 3
#: ``--fail-on infrastructure``: some execution was an infrastructure failure.
EXIT_INFRASTRUCTURE = 4
#: ``--fail-on candidate``: some scoreable execution did not pass.
EXIT_CANDIDATE = 5
#: ``--fail-on alerts``: the run's report raised alerts.
EXIT_ALERTS = 6
#: The run ended without finishing (failed, cancelled): its counts are not a night's.
EXIT_UNFINISHED = 7
#: ``--fail-on unmeasured``: the run finished with nothing scoreable (every execution skipped):
#: a 0/0 night measured nothing, and CI must not read it as green.
EXIT_UNMEASURED = 8
#: Tonight's nightly is being executed by another process (another delivery, another machine):
#: nothing ran here and its counts are not final — not a failure of the run.
EXIT_IN_PROGRESS = 9
#: The oldest night ``--execute`` or ``--queue`` runs (README "nightly"): a run of an older one
#: would enter the history and the leaderboard as a measurement of that night, made with
#: today's runtimes and models. Building and saving (previewing) an older night stays allowed.
OLDEST_EXECUTED_NIGHT = dt.timedelta(days=366)
#: What ``--fail-on`` accepts, in the order they are checked.
FAIL_ON = {"infrastructure": EXIT_INFRASTRUCTURE, "candidate": EXIT_CANDIDATE, "alerts": EXIT_ALERTS, "unmeasured": EXIT_UNMEASURED}


class NightlyStopped(Exception):
    """The nightly stopped before it had a run to report: ``status`` is the exit status (1: a flag
    is at fault or the task broker is down; :data:`EXIT_REFUSED`: the catalog refuses the night)
    and :meth:`document` the JSON document that says so (``{"error" | "refused": message, "exitStatus"}``)."""

    def __init__(self, message: str, *, status: int = 1, key: str = "error") -> None:
        super().__init__(message)
        self.message, self.status, self.key = message, status, key

    def document(self) -> dict[str, Any]:
        return {self.key: self.message, "exitStatus": self.status}


@dataclass
class NightlyReport:
    """What ``manage.py nightly`` says: its lines (for a terminal), the JSON document (``--json``)
    and the exit status (0, or one of the ``EXIT_*`` statuses with :meth:`reason`)."""

    lines: list[str]
    document: dict[str, Any]
    status: int

    def reason(self) -> str:
        """Why the exit status is not 0 (the command's error line)."""
        run = self.document["run"] or {}
        return {
            EXIT_INFRASTRUCTURE: "--fail-on infrastructure: some executions are infrastructure failures",
            EXIT_CANDIDATE: "--fail-on candidate: some scoreable executions did not pass",
            EXIT_ALERTS: "--fail-on alerts: the run's report raised alerts",
            EXIT_UNMEASURED: "--fail-on unmeasured: no execution was scoreable (all skipped): the night measured nothing",
            EXIT_UNFINISHED: f"run {run.get('id')} ended {run.get('status')}, not finished: see its page for why",
            EXIT_IN_PROGRESS: f"run {run.get('id')} is still {run.get('status')} in another process: "
            "nothing ran here; its counts are not final (see its page, or wait and run this again)",
        }[self.status]


def exit_status(summary: RunSummary, fail_on: set[str]) -> int:
    """The exit status a finished run's ``summary`` gives under ``fail_on``: :data:`EXIT_UNFINISHED`
    for a run that did not finish, else the first :data:`FAIL_ON` status that applies, else 0."""
    if summary.status != RunStatus.FINISHED:
        return EXIT_UNFINISHED
    counts = summary.by_classification
    failing = {
        "infrastructure": counts.get("infrastructure_failure", 0) > 0,
        "candidate": (summary.scoreable or 0) > (summary.passed or 0)
        if summary.scoreable is not None
        else counts.get("candidate_failure", 0) > 0,
        "alerts": bool(summary.alerts),
        "unmeasured": not summary.scoreable,
    }
    for name, status in FAIL_ON.items():
        if name in fail_on and failing[name]:
            return status
    return 0


def summary_document(summary: RunSummary) -> dict[str, Any]:
    """A run's summary as JSON (``--json``): counts, USD as numbers, and the report's figures
    (``null`` until the run is reported)."""
    return {
        "id": summary.run_id,
        "status": summary.status,
        "executions": summary.executions,
        "byClassification": dict(sorted(summary.by_classification.items())),
        "byFailureCode": dict(sorted(summary.by_failure_code.items())),
        "spentUsd": json_number(summary.spent_usd),
        "costCeilingUsd": json_number(summary.cost_ceiling_usd),
        "hasUnpriced": summary.has_unpriced,
        "stoppedAtCeiling": summary.stopped_at_ceiling,
        "scoreable": summary.scoreable,
        "passed": summary.passed,
        "alerts": summary.alerts,
    }


def missing_variables(candidates: Sequence[Mapping[str, Any]], environ: Mapping[str, str]) -> list[str]:
    """The required variable names of these candidate documents that are unset or empty, sorted."""
    names = {name for candidate in candidates for name in environment_names(candidate)}
    return sorted(name for name in names if not environ.get(name))


def run_candidates(run: Run, candidates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The candidate documents among ``candidates`` (a schedule's) that ``run`` executes."""
    in_run = set(run.executions.values_list("candidate_key", flat=True))
    return [candidate for candidate in candidates if candidate["id"] in in_run]


def missing_credentials_hint(run: Run, candidates: Sequence[Mapping[str, Any]], environ: Mapping[str, str]) -> tuple[list[str], str]:
    """The required variables of ``run``'s candidates (among the schedule's ``candidates``) unset
    in ``environ``, and the line that says to set them (``""`` when none is missing)."""
    missing = missing_variables(run_candidates(run, candidates), environ)
    if not missing:
        return missing, ""
    return missing, (
        "skipped executions need provider credentials: set "
        + ", ".join(missing)
        + " in the environment (only names are configured; values are never stored)"
    )


def check_executed_night(*, generated_at: str | None, executes: bool, now: dt.datetime) -> None:
    """Refuse (:class:`ScheduleError`) executing or queueing a night that has not begun (it has
    nothing to measure yet, and would enter the history ahead of the nights before it) or one
    older than :data:`OLDEST_EXECUTED_NIGHT`; ``generated_at`` must parse either way."""
    if generated_at is None:
        return
    night = parse_timestamp(generated_at)
    if executes and night > now:
        raise ScheduleError(
            f"--generated-at {generated_at} is in the future: only a night that has begun can be "
            "executed or queued; preview a later night without --execute or --queue"
        )
    if executes and night < now - OLDEST_EXECUTED_NIGHT:
        raise ScheduleError(
            f"--generated-at {generated_at} is more than {OLDEST_EXECUTED_NIGHT.days} days ago: a night "
            "that old is not executed or queued (its run would count as that night's measurement, made with "
            "today's runtimes); preview it without --execute or --queue"
        )


def nightly_command(
    *,
    seed: str,
    cost_ceiling_usd: Decimal,
    now: dt.datetime,
    environ: Mapping[str, str],
    execute: bool,
    queue: bool,
    rotation_day: Any,
    generated_at: str | None,
    selection: Selection,
    fail_on: set[str],
    progress: ProgressCallback | None = None,
) -> NightlyReport:
    """``manage.py nightly``: check the flags that name the night, recover what a killed in-process
    night left (with ``execute`` and not ``queue``), :func:`start_nightly`, and say what it did.

    Raises :class:`NightlyStopped` when a flag is at fault, the catalog refuses the night
    (coverage, a schedule that cannot be built, the same selection already executing), or — with
    ``queue`` — the task broker cannot be reached (the run is saved, its executions pending)."""
    try:
        if rotation_day is not None:
            validate_rotation_day(rotation_day)
        check_executed_night(generated_at=generated_at, executes=execute or queue, now=now)
    except ScheduleError as exc:
        raise NightlyStopped(redact(str(exc))) from None
    if execute and not queue:
        recover_before_executing(environ=environ)  # what a killed `nightly --execute` left
    try:
        outcome = start_nightly(
            seed=seed,
            cost_ceiling_usd=cost_ceiling_usd,
            now=now,
            environ=environ,
            execute=execute,
            rotation_day=rotation_day,
            generated_at=generated_at,
            selection=selection,
            progress=progress,
            dispatch=queue,
        )
    except CoverageError as exc:
        raise NightlyStopped(
            f"{exc}. The catalog's seven rotation days must meet all four invariants before a nightly may run; "
            "see the coverage page or `manage.py schedule` to find the gap.",
            status=EXIT_REFUSED,
            key="refused",
        ) from None
    except SelectionError as exc:
        raise NightlyStopped(schedule_error_message(exc)) from None
    except RunActionError as exc:  # the same selection is already being executed
        raise NightlyStopped(str(exc), status=EXIT_REFUSED, key="refused") from None
    except ScheduleError as exc:
        raise NightlyStopped(schedule_error_message(exc), status=EXIT_REFUSED, key="refused") from None
    except RedisError as exc:  # --queue with Redis down: the run is saved, its executions pending
        raise NightlyStopped(
            redact(
                f"the task broker (REDIS_URL) cannot be reached ({type(exc).__name__}: {exc}): tonight's run is saved with its "
                "executions pending; once Redis answers, a worker's reaper queues them again (`manage.py worker`)"
            )
        ) from None
    return _report(outcome, queue=queue, selection=selection, fail_on=fail_on, environ=environ)


def _report(outcome: NightlyOutcome, *, queue: bool, selection: Selection, fail_on: set[str], environ: Mapping[str, str]) -> NightlyReport:
    """What the command says of ``outcome``: the schedule saved, then the run (not executed, queued,
    or its summary with the credentials it lacked), and the exit status its summary gives."""
    schedule = outcome.schedule
    document: dict[str, Any] = {
        "schedule": {
            "id": schedule.pk,
            "night": schedule.night.isoformat(),
            "rotationDay": schedule.rotation_day,
            "seed": schedule.seed,
            "expectedExecutions": schedule.expected_executions,
            "created": outcome.schedule_created,
        },
        "run": None,
        "executed": outcome.executed,
        "queued": bool(queue and outcome.executed),
        "missingEnvironment": [],
    }
    verb = "saved" if outcome.schedule_created else "already saved"
    lines = [
        f"schedule {schedule.pk} {verb}: night {schedule.night}, rotation day {schedule.rotation_day}, "
        f"seed {schedule.seed}, {schedule.expected_executions} executions"
    ]
    status = 0
    if outcome.run is None:
        if not selection.is_empty:
            selected = apply_selection(schedule.to_document(), selection)
            lines.append(
                f"selection: {selected['expectedExecutions']} of {schedule.expected_executions} executions "
                "(with --execute they run as a manual run beside the night's nightly)"
            )
        lines.append("not executed (add --execute to run it)")
    elif queue and outcome.executed:
        document["run"] = summary_document(outcome.summary)
        lines.append(
            f"run {outcome.run.pk}: {outcome.summary.executions} execution(s) queued for the workers (start one with `manage.py worker`)"
        )
    else:
        if not outcome.executed:
            lines.append(f"tonight's nightly was already delivered as run {outcome.run.pk}: nothing executed, nothing spent")
        if outcome.summary.by_failure_code.get("qualification_environment_missing"):
            missing, hint = missing_credentials_hint(outcome.run, schedule.candidates, environ)
            document["missingEnvironment"] = missing
            if hint:
                lines.append(hint)
        lines.append(outcome.summary.line())
        document["run"] = summary_document(outcome.summary)
        status = exit_status(outcome.summary, fail_on)
        if not outcome.executed and outcome.summary.status in UNFINISHED:
            status = EXIT_IN_PROGRESS
    document["exitStatus"] = status
    return NightlyReport(lines, document, status)
