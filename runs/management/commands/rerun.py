"""``manage.py rerun RUN_ID [--infrastructure-only | --skipped] [--queue]``: re-run a run's failed
(or only its infrastructure-failed, or its skipped) executions as a new run."""

from __future__ import annotations

import os

from django.core.management.base import CommandError
from django.db import transaction

from evalhub.commands import DatabaseCommand
from runs.actions import RunActionError, rerun_run
from runs.dispatch import dispatch_run, execute_run
from runs.models import RerunScope, Run
from runs.nightly import missing_credentials_hint, missing_variables, run_candidates
from runs.recovery import recover_before_executing


class Command(DatabaseCommand):
    help = (
        "Re-run the failed executions of an ended run (or with --infrastructure-only only its infrastructure "
        "failures, or with --skipped its skipped executions: after adding credentials, or a cancel) as a new run "
        "that points at it; the original keeps its history. Runs here, or with --queue "
        "on the workers."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", type=int, help="The id of the run to repeat.")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--infrastructure-only", action="store_true", help="Only the infrastructure-failed executions.")
        scope.add_argument(
            "--skipped", action="store_true", help="The skipped executions instead (missing credentials, the ceiling, a cancel)."
        )
        parser.add_argument("--queue", action="store_true", help="Queue the new run for the django-q2 workers instead of running it here.")

    def handle(self, *args, **options) -> None:
        run = Run.objects.filter(pk=options["run_id"]).select_related("schedule").first()
        if run is None:
            raise CommandError(f"there is no run {options['run_id']}")
        scope = (
            RerunScope.INFRASTRUCTURE if options["infrastructure_only"] else RerunScope.SKIPPED if options["skipped"] else RerunScope.FAILED
        )
        if not options["queue"]:
            recover_before_executing(environ=os.environ)  # what a killed inline run left
        try:
            with transaction.atomic():
                rerun = rerun_run(run, scope=scope)
                if not options["queue"]:
                    # Refused (the new run rolled back) rather than made only to be skipped again.
                    missing = still_missing(rerun, os.environ)
                    if missing:
                        raise CommandError(
                            f"the {rerun.executions.count()} {RerunScope(scope).label} of run {run.pk} would all be skipped again: "
                            f"set {', '.join(missing)} in the environment first (only names are configured; values are never "
                            "stored), or queue them for workers that have them (--queue)"
                        )
                queued = dispatch_run(rerun) if options["queue"] else None
        except RunActionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"run {rerun.pk} re-runs {rerun.executions.count()} {RerunScope(scope).label} of run {run.pk}")
        if queued is not None:
            # As `nightly --queue` says it: with no worker running, a queued run only waits.
            self.stdout.write(f"{queued} execution(s) queued for the workers (start one with `manage.py worker`)")
            return
        summary = execute_run(rerun, environ=os.environ)
        if summary.by_failure_code.get("qualification_environment_missing"):
            _, hint = missing_credentials_hint(rerun, rerun.schedule.candidates, os.environ)
            if hint:
                self.stdout.write(hint)
        self.stdout.write(summary.line())


def still_missing(rerun: Run, environ) -> list[str]:
    """The required variables unset in ``environ`` when every candidate of ``rerun`` lacks one,
    so that running it here would skip each of its executions again; ``[]`` when any would run."""
    per_candidate = [missing_variables([candidate], environ) for candidate in run_candidates(rerun, rerun.schedule.candidates)]
    if not per_candidate or not all(per_candidate):
        return []
    return sorted({name for names in per_candidate for name in names})
