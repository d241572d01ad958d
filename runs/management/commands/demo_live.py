"""``manage.py demo_live``: tonight's entries of every runtime evalhub can drive, against a scripted model.

Starts evalhub's scripted model server on loopback (one well-behaved script per workflow case),
gives every candidate whose adapter has a live driver (``codex_app_server``, ``opencode_server``
and ``acpx_runtime``: all of them) its own scripted provider speaking the wire API its runtime needs
(codex and codex-acp: Responses; opencode: the Chat Completions of the candidates' OpenRouter
profile; claude-agent-acp: Anthropic Messages), and runs
tonight's entries of those candidates through the real runtimes as a run in the ``scripted``
lane: labelled as scripted on every page and in every export, never compared with, alerted on or
plotted beside measured (live) history. The key each runtime sees is a made-up value that is
scrubbed like a real one. The steps are ``runs.scripted_demo``'s.
"""

from __future__ import annotations

import sys

from django.core.management.base import CommandError
from django.utils import timezone
from tqdm import tqdm

from evalhub.commands import DatabaseCommand
from evalhub.secrets import redact
from runs.models import Execution
from runs.scripted_demo import ScriptedDemoError, plan_scripted_demo, run_scripted_demo
from schedules.building import ScheduleError
from schedules.cli import add_selector_arguments, cost_ceiling, schedule_error_message, seed_from_options, selection_from_options
from schedules.services import CoverageError


class ProgressBar:
    """A progress bar on standard error, drawn once the run's size is known."""

    def __init__(self) -> None:
        self.bar: tqdm | None = None

    def start(self, total: int) -> None:
        self.bar = tqdm(total=total, desc="scripted executions", unit="exec", file=sys.stderr, disable=None)

    def advance(self, execution: Execution) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"{execution.case_key} × {execution.candidate_key}", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Command(DatabaseCommand):
    help = (
        "Run tonight's entries of every runtime evalhub drives (codex app-server, opencode serve, the ACP agents) through the "
        "real runtimes against evalhub's scripted model (a run labelled scripted, never mixed with measured history)."
    )

    def add_arguments(self, parser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--no-progress", action="store_true", help="Do not draw a progress bar.")

    def handle(self, *args, **options) -> None:
        selection = selection_from_options(options)
        try:
            demo = plan_scripted_demo(
                seed=seed_from_options(options),
                now=timezone.now(),
                rotation_day=options["rotation_day"],
                generated_at=options["generated_at"],
                selection=selection,
            )
        except CoverageError as exc:
            raise CommandError(redact(str(exc))) from None
        except ScheduleError as exc:
            raise CommandError(schedule_error_message(exc)) from None
        except ScriptedDemoError as exc:
            raise CommandError(str(exc)) from None
        progress = None if options["no_progress"] else ProgressBar()
        result = run_scripted_demo(demo, selection=selection, cost_ceiling_usd=cost_ceiling(), progress=progress)
        self.stdout.write(
            f"scripted run {result.run.pk} of {', '.join(result.played) or 'no execution'} (lane scripted: the model is evalhub's "
            f"scripted server, not a measured model; never compared with live history)"
        )
        self.stdout.write(result.summary.line())
