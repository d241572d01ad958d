"""``manage.py nightly``: build tonight's schedule, check coverage, save it, and with --execute run it.

Parses its flags, calls ``runs.nightly.nightly_command`` and reports. Exit statuses, for CI (README
"Exit statuses"; the ``EXIT_*`` of ``runs.nightly``): 0 when the schedule was saved and the run (if any)
finished; :data:`EXIT_REFUSED` when the night was refused (coverage fails, the schedule cannot be
built); with ``--fail-on``, :data:`EXIT_INFRASTRUCTURE`, :data:`EXIT_CANDIDATE` or
:data:`EXIT_ALERTS` or :data:`EXIT_UNMEASURED` — the first that applies, in that order; :data:`EXIT_UNFINISHED` when the run
ended without finishing (failed or cancelled); :data:`EXIT_IN_PROGRESS` when another process is
executing tonight's nightly; 1 for bad flags or configuration; 130 when
interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone
from tqdm import tqdm

from evalhub.commands import DatabaseCommand
from runs.models import Execution
from runs.nightly import FAIL_ON, NightlyStopped, nightly_command
from schedules.cli import add_selector_arguments, cost_ceiling, seed_from_options, selection_from_options


def fail_on_choices(value: str) -> set[str]:
    """``--fail-on`` values: a comma list of :data:`runs.nightly.FAIL_ON` names, or ``any`` for all of them."""
    names = {part.strip() for part in value.split(",") if part.strip()}
    unknown = sorted(names - set(FAIL_ON) - {"any"})
    if unknown or not names:
        raise CommandError(f"--fail-on takes {', '.join(FAIL_ON)} or any (a comma list), not {value!r}")
    return set(FAIL_ON) if "any" in names else names


class Command(DatabaseCommand):
    help = (
        "Build tonight's schedule, refuse it when coverage fails, save it, and with --execute run every entry "
        "(a progress bar, then a one-line summary)."
    )

    def add_arguments(self, parser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--execute", action="store_true", help="Run the entries (without it, only build and save).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar (the summary is still printed).")
        parser.add_argument(
            "--queue",
            action="store_true",
            help="With --execute: queue one task per execution for the django-q2 workers instead of running them here.",
        )
        parser.add_argument("--json", action="store_true", help="Print the outcome as one JSON document on stdout (for CI).")
        parser.add_argument(
            "--fail-on",
            default=None,
            metavar="WHAT",
            help="Exit non-zero when the run has infrastructure failures (4), candidate failures (5) or alerts (6): "
            "a comma list of infrastructure, candidate, alerts, unmeasured, or any.",
        )

    def handle(self, *args, **options) -> None:
        fail_on = fail_on_choices(options["fail_on"]) if options["fail_on"] is not None else set()
        selection = selection_from_options(options)
        ceiling = cost_ceiling()
        seed = seed_from_options(options)
        as_json = options["json"]
        progress = _ProgressBar(shown=not options["no_progress"])
        try:
            report = nightly_command(
                seed=seed,
                cost_ceiling_usd=ceiling,
                now=timezone.now(),
                environ=os.environ,
                execute=options["execute"],
                queue=options["queue"],
                rotation_day=options["rotation_day"],
                generated_at=options["generated_at"],
                selection=selection,
                fail_on=fail_on,
                progress=progress,
            )
        except NightlyStopped as stopped:
            if as_json:
                self.stdout.write(json.dumps(stopped.document()))
            raise CommandError(stopped.message, returncode=stopped.status) from None
        finally:
            progress.close()
        if as_json:
            self.stdout.write(json.dumps(report.document))
        else:
            for line in report.lines:
                self.stdout.write(line)
        if report.status:
            raise CommandError(report.reason(), returncode=report.status)


class _ProgressBar:
    """The executions' progress on stderr, started at the first execution; none when not
    ``shown`` or when stderr is not a terminal (a CI log, a pipe)."""

    def __init__(self, *, shown: bool) -> None:
        self.shown = shown
        self.bar: Any = None

    def __call__(self, done: int, total: int, execution: Execution) -> None:
        if not self.shown:
            return
        if self.bar is None:
            # disable=None: no bar when stderr is not a terminal.
            self.bar = tqdm(total=total, desc="executions", unit="exec", file=sys.stderr, leave=True, disable=None)
        self.bar.set_postfix_str(f"{execution.case_key} × {execution.candidate_key}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
