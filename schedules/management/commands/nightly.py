"""``manage.py nightly``: build tonight's schedule, check coverage, save it, and with --execute run it."""

from __future__ import annotations

import os
import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from tqdm import tqdm

from candidates.secrets import redact
from runs.services import start_nightly
from schedules.building import ScheduleError
from schedules.cli import add_selector_arguments, cost_ceiling, seed_from_options, selection_from_options
from schedules.services import CoverageError, select_schedule


def missing_variables(candidates, environ) -> list[str]:
    """The required variable names of these candidate documents that are unset or empty, sorted."""
    names = {
        name
        for candidate in candidates
        for name in candidate.get("qualification", {}).get("requiredEnvironment", [])
    }
    return sorted(name for name in names if not environ.get(name))


class Command(BaseCommand):
    help = (
        "Build tonight's schedule, refuse it when coverage fails, save it, and with --execute run every entry "
        "(a progress bar, then a one-line summary)."
    )

    def add_arguments(self, parser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--execute", action="store_true", help="Run the entries (without it, only build and save).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar (the summary is still printed).")

    def handle(self, *args, **options) -> None:
        selection = selection_from_options(options)
        ceiling = cost_ceiling()
        bar = None

        def progress(done: int, total: int, execution) -> None:
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                bar = tqdm(total=total, desc="executions", unit="exec", file=sys.stderr, leave=True)
            bar.set_postfix_str(f"{execution.case_key} × {execution.candidate_key}", refresh=False)
            bar.update(1)

        try:
            outcome = start_nightly(
                seed=seed_from_options(options),
                cost_ceiling_usd=ceiling,
                now=timezone.now(),
                environ=os.environ,
                execute=options["execute"],
                rotation_day=options["rotation_day"],
                generated_at=options["generated_at"],
                selection=selection,
                progress=progress,
            )
        except CoverageError as exc:
            raise CommandError(
                f"{exc}. The catalog's seven rotation days must meet all four invariants before a nightly may run; "
                "see the coverage page or `manage.py schedule` to find the gap."
            ) from None
        except ScheduleError as exc:
            raise CommandError(redact(str(exc))) from None
        finally:
            if bar is not None:
                bar.close()
        schedule = outcome.schedule
        verb = "saved" if outcome.schedule_created else "already saved"
        self.stdout.write(
            f"schedule {schedule.pk} {verb}: night {schedule.night}, rotation day {schedule.rotation_day}, "
            f"seed {schedule.seed}, {schedule.expected_executions} executions"
        )
        if outcome.run is None:
            if not selection.is_empty:
                selected = select_schedule(
                    schedule.to_document(),
                    candidate_ids=selection.candidate_ids,
                    case_ids=selection.case_ids,
                    limit=selection.limit,
                )
                self.stdout.write(
                    f"selection: {selected['expectedExecutions']} of {schedule.expected_executions} executions "
                    "(with --execute they run as a manual run beside the night's nightly)"
                )
            self.stdout.write("not executed (add --execute to run it)")
            return
        if not outcome.executed:
            self.stdout.write(f"tonight's nightly was already delivered as run {outcome.run.pk}: nothing executed, nothing spent")
        if outcome.summary.by_failure_code.get("qualification_environment_missing"):
            in_run = set(outcome.run.executions.values_list("candidate_key", flat=True))
            missing = missing_variables([c for c in schedule.candidates if c["id"] in in_run], os.environ)
            if missing:
                self.stdout.write(
                    "skipped executions need provider credentials: set " + ", ".join(missing)
                    + " in the environment (only names are configured; values are never stored)"
                )
        self.stdout.write(outcome.summary.line())
