"""``manage.py refresh_run RUN_ID``: re-score a past run's stored observations (replay lane)."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.utils import timezone

from evalhub.commands import DatabaseCommand
from runs.models import Run
from runs.reporting import refresh_run
from schedules.services import iso_timestamp


class Command(DatabaseCommand):
    help = (
        "Re-score a finished run's stored observations under the current scoring rules, without calling any "
        "runtime or spending anything. The refresh is a new replay-lane run, labelled as such, and never counts "
        "in history, comparisons or alerts."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", type=int, help="The id of the run to refresh.")

    def handle(self, *args, **options) -> None:
        run = Run.objects.filter(pk=options["run_id"]).select_related("schedule").first()
        if run is None:
            raise CommandError(f"there is no run {options['run_id']}")
        try:
            refresh = refresh_run(run, generated_at=iso_timestamp(timezone.now()))
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        report = refresh.report
        self.stdout.write(
            f"run {refresh.pk} refreshes run {run.pk}: {report.passed}/{report.scoreable} scoreable passed "
            f"(bundle {report.bundle_id}, scoring {report.scoring_version})"
        )
