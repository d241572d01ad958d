"""``manage.py prune_history [--days N]``: delete runs older than the retention period."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.utils import timezone

from evalhub.commands import DatabaseCommand
from evalhub.conf import evalhub_setting
from runs.reporting import prune_history

MAX_RETENTION_DAYS = 36_500


class Command(DatabaseCommand):
    help = (
        "Delete runs (with their executions, scorecards, reports and alerts) older than EVALHUB_RETENTION_DAYS "
        "days (default 120), never the last seven reports of any bundle."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=int, help="Retention in days (default: EVALHUB_RETENTION_DAYS).")

    def handle(self, *args, **options) -> None:
        days = options["days"] if options["days"] is not None else int(evalhub_setting("RETENTION_DAYS"))
        if not 1 <= days <= MAX_RETENTION_DAYS:
            raise CommandError(f"--days must be from 1 to {MAX_RETENTION_DAYS} (100 years), not {days}")
        try:
            pruned = prune_history(now=timezone.now(), retention_days=days)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"pruned {pruned} run(s) older than {days} days")
