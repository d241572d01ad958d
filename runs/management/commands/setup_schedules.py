"""``manage.py setup_schedules``: declare evalhub's periodic django-q2 tasks (idempotent; run on every deploy)."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.utils import timezone

from evalhub.commands import DatabaseCommand
from runs.periodic import declare_periodic_tasks


class Command(DatabaseCommand):
    help = (
        "Declare the nightly django-q2 task at EVALHUB_NIGHTLY_TIME_UTC, the daily history pruning and the every-minute "
        "reaper and notification retries (safe to run any number of times)."
    )

    def handle(self, *args, **options) -> None:
        try:
            declared = declare_periodic_tasks(now=timezone.now())
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        now = timezone.now()
        for task in declared:
            every = "every minute" if task.schedule_type == task.MINUTES else "daily"
            # A task whose time has passed with no worker running waits for the next one to start.
            when = "due now (the next worker to start runs it)" if task.next_run <= now else f"next run {task.next_run:%Y-%m-%d %H:%M} UTC"
            self.stdout.write(f"{task.name}: {task.func} {every}, {when}")
