"""The one place periodic jobs are declared (docs/STYLE.md §9): ``update_or_create`` by name."""

from __future__ import annotations

import datetime as dt
import re

from django_q.models import Schedule as QSchedule

from evalhub.conf import evalhub_setting

NIGHTLY_TASK_NAME = "evalhub-nightly"
NIGHTLY_TASK_FUNC = "runs.tasks.run_nightly"
PRUNE_TASK_NAME = "evalhub-prune-history"
PRUNE_TASK_FUNC = "runs.tasks.prune_history"
REAPER_TASK_NAME = "evalhub-reaper"
REAPER_TASK_FUNC = "runs.tasks.reap"
NOTIFY_TASK_NAME = "evalhub-deliver-notifications"
NOTIFY_TASK_FUNC = "runs.tasks.deliver_notifications"
#: Every function a declared periodic task runs (the admin's scheduled tasks run only these).
PERIODIC_TASK_FUNCS = (NIGHTLY_TASK_FUNC, PRUNE_TASK_FUNC, REAPER_TASK_FUNC, NOTIFY_TASK_FUNC)
#: The daily history pruning runs at this UTC time, away from the nightly.
PRUNE_TIME_UTC = dt.time(12, 0, tzinfo=dt.UTC)
_HH_MM = re.compile(r"(?P<hours>[01][0-9]|2[0-3]):(?P<minutes>[0-5][0-9])")


def parse_nightly_time(value: str) -> dt.time:
    """``"HH:MM"`` (UTC, 00:00 to 23:59, surrounding spaces allowed) as an aware time; ValueError
    saying what to fix otherwise."""
    match = _HH_MM.fullmatch(str(value).strip())
    if match is None:
        raise ValueError(f"EVALHUB_NIGHTLY_TIME_UTC must be a UTC time of day as HH:MM such as 04:00, not {value!r}")
    return dt.time(int(match["hours"]), int(match["minutes"]), tzinfo=dt.UTC)


def next_occurrence(at: dt.time, *, now: dt.datetime) -> dt.datetime:
    """The first instant at or after ``now`` whose UTC wall time is ``at`` (UTC has no DST)."""
    now_utc = now.astimezone(dt.UTC)
    candidate = dt.datetime.combine(now_utc.date(), at)
    return candidate if candidate >= now_utc else candidate + dt.timedelta(days=1)


def declare_periodic_tasks(*, now: dt.datetime) -> list[QSchedule]:
    """Create or update the nightly, the daily history-pruning, the every-minute reaper and the
    every-minute notification retries django-q2 schedules; returns the declared rows (nightly,
    pruning, reaper, notifications).

    The task runs daily at ``EVALHUB_NIGHTLY_TIME_UTC``; the nightly itself is idempotent per
    night, so a late, repeated or caught-up delivery spends nothing. ``next_run`` is only moved
    when the configured time changed, so re-running this command never skips or repeats a night.
    """
    at = parse_nightly_time(evalhub_setting("NIGHTLY_TIME_UTC"))
    task, created = QSchedule.objects.get_or_create(
        name=NIGHTLY_TASK_NAME,
        defaults={
            "func": NIGHTLY_TASK_FUNC,
            "schedule_type": QSchedule.DAILY,
            "repeats": -1,
            "next_run": next_occurrence(at, now=now),
        },
    )
    if not created:
        current = task.next_run.astimezone(dt.UTC) if task.next_run else None
        moved = current is None or (current.hour, current.minute) != (at.hour, at.minute)
        if moved:
            task.next_run = next_occurrence(at, now=now)
        _restore(task, {"func": NIGHTLY_TASK_FUNC, "schedule_type": QSchedule.DAILY}, also=["next_run"] if moved else [])
    return [
        task,
        _declare_daily(PRUNE_TASK_NAME, PRUNE_TASK_FUNC, PRUNE_TIME_UTC, now=now),
        _declare_every_minute(REAPER_TASK_NAME, REAPER_TASK_FUNC, now=now),
        _declare_every_minute(NOTIFY_TASK_NAME, NOTIFY_TASK_FUNC, now=now),
    ]


def _declare_every_minute(name: str, func: str, *, now: dt.datetime) -> QSchedule:
    """A task every minute: the reaper (executions whose worker died are taken back within a
    minute of their lease expiring) and the notification retries."""
    task, created = QSchedule.objects.get_or_create(
        name=name,
        defaults={"func": func, "schedule_type": QSchedule.MINUTES, "minutes": 1, "repeats": -1, "next_run": now},
    )
    if not created:
        _restore(task, {"func": func, "schedule_type": QSchedule.MINUTES, "minutes": 1})
    return task


def _declare_daily(name: str, func: str, at: dt.time, *, now: dt.datetime) -> QSchedule:
    """A daily task by name, created at its next ``at``; an existing row keeps its next run."""
    task, created = QSchedule.objects.get_or_create(
        name=name,
        defaults={"func": func, "schedule_type": QSchedule.DAILY, "repeats": -1, "next_run": next_occurrence(at, now=now)},
    )
    if not created:
        _restore(task, {"func": func, "schedule_type": QSchedule.DAILY})
    return task


#: What every declared task has besides its function and timing: no arguments, hook, cron or
#: cluster of its own (``runs.tasks`` take none; a cluster name would leave the task to one
#: cluster). The admin can edit a row; declaring it again puts these back.
_UNCONFIGURED = {"args": None, "kwargs": None, "hook": None, "cron": None, "cluster": None, "intended_date_kwarg": None, "repeats": -1}


def _restore(task: QSchedule, declared: dict[str, object], *, also: list[str] = ()) -> None:
    """Put back what ``declared`` and ``_UNCONFIGURED`` say of an existing row (edited in the
    admin, or by an older release), saving only the fields that changed and those in ``also``."""
    changed = list(also)
    for attribute, value in {**_UNCONFIGURED, **declared}.items():
        if getattr(task, attribute) != value:
            setattr(task, attribute, value)
            changed.append(attribute)
    if changed:
        task.save(update_fields=changed)
