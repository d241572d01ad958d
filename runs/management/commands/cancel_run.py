"""``manage.py cancel_run RUN_ID``: cancel a pending or running run."""

from __future__ import annotations

from django.core.management.base import CommandError

from evalhub.commands import DatabaseCommand
from runs.actions import RunActionError, cancel_run
from runs.models import Run


class Command(DatabaseCommand):
    help = (
        "Cancel a pending or running run: its pending executions become skipped (run_cancelled), its running "
        "ones are interrupted by their workers and their runtimes stopped; the run then ends cancelled."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", type=int, help="The id of the run to cancel.")

    def handle(self, *args, **options) -> None:
        run = Run.objects.filter(pk=options["run_id"]).first()
        if run is None:
            raise CommandError(f"there is no run {options['run_id']}")
        try:
            skipped = cancel_run(run)
        except RunActionError as exc:
            raise CommandError(str(exc)) from None
        running = run.executions.filter(status="running").count()
        self.stdout.write(
            f"run {run.pk} cancelled: {skipped} pending execution(s) skipped"
            + (f", {running} running execution(s) being interrupted" if running else "")
            + f"; status {run.status}"
        )
