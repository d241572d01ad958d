"""django-q2 tasks of the runs app. They take no configuration in their arguments (task rows are
stored and shown in the admin), only look things up and call one service (docs/STYLE.md §4)."""

from __future__ import annotations

import os

from django.utils import timezone

from evalhub.conf import evalhub_setting
from evalhub.secrets import redact
from runs import alerting, leases, reporting
from runs.execution import execute_execution
from runs.nightly import start_nightly
from runs.recovery import reap as reap_runs
from runs.recovery import reap_if_needed
from runs.snapshots import secret_values
from schedules.building import parse_campaign_cost_limit


class NightlyFailed(Exception):
    """The nightly task failed; the message is the redacted cause (django-q2 stores it in the task row)."""


def run_nightly() -> str:
    """Build and save tonight's schedule and fan it out: one ``run_execution`` task per execution,
    shared by every worker; a second delivery the same night does nothing.

    Returns a one-line summary (stored by django-q2 as the task result, so it holds counts
    only, never configuration or secrets). Any failure is re-raised as :class:`NightlyFailed`
    with a redacted message and without its cause attached, because django-q2 stores the
    exception text and traceback of a failed task in its row (docs/failure-modes.md B12).
    """
    try:
        outcome = start_nightly(
            seed=evalhub_setting("SCHEDULE_SEED"),
            cost_ceiling_usd=parse_campaign_cost_limit(evalhub_setting("MAX_CAMPAIGN_COST_USD")),
            now=timezone.now(),
            environ=os.environ,
            execute=True,
            dispatch=True,
        )
    except Exception as exc:
        message = redact(f"{type(exc).__name__}: {exc}", extra_values=secret_values(os.environ, []))
        raise NightlyFailed(message) from None
    if not outcome.executed:
        return f"nightly for {outcome.schedule.night} already delivered as run {outcome.run.pk}; nothing done"
    return f"run {outcome.run.pk}: {outcome.summary.executions} executions queued for the workers (night {outcome.schedule.night})"


class ExecutionFailed(Exception):
    """An execution task failed outside its execution (the bookkeeping); the message is redacted."""


def run_execution(execution_pk: int) -> str:
    """Run one execution of a fanned-out run (``runs.execution.execute_execution``) and, when it was the
    run's last, finish and report the run. Returns what happened and where (``host:pid``), stored
    as the task result; a redelivered or duplicate task does nothing and says so. A worker asked to
    stop hands the execution back and then exits."""
    try:
        result = execute_execution(int(execution_pk), environ=os.environ, requeue=True)
        reap_if_needed(environ=os.environ)
    except Exception as exc:
        message = redact(f"{type(exc).__name__}: {exc}", extra_values=secret_values(os.environ, []))
        raise ExecutionFailed(message) from None
    line = f"execution {execution_pk}: {result} on {leases.owner_id()}"
    if leases.shutdown_requested():
        raise SystemExit(0)
    return line


def reap() -> str:
    """Take back executions whose worker died, finish runs that have settled, queue again what a
    broker lost (``runs.recovery.reap``); returns the counts (stored as the task result)."""
    try:
        return reap_runs(environ=os.environ).line()
    except Exception as exc:
        raise ExecutionFailed(redact(f"{type(exc).__name__}: {exc}", extra_values=secret_values(os.environ, []))) from None


def deliver_notifications() -> str:
    """Send the alert deliveries that are due (retries, and those whose sender died): returns
    ``"N notification(s) delivered"`` (stored as the task result)."""
    try:
        return f"{alerting.deliver_due(environ=os.environ)} notification(s) delivered"
    except Exception as exc:
        raise ExecutionFailed(redact(f"{type(exc).__name__}: {exc}", extra_values=secret_values(os.environ, []))) from None


def prune_history() -> str:
    """Delete runs older than ``EVALHUB["RETENTION_DAYS"]`` days (never the last seven reports of
    a bundle); returns ``"pruned N run(s) older than D days"`` (stored as the task result)."""
    days = int(evalhub_setting("RETENTION_DAYS"))
    pruned = reporting.prune_history(now=timezone.now(), retention_days=days)
    return f"pruned {pruned} run(s) older than {days} days"
