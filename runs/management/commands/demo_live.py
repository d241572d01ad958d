"""``manage.py demo_live``: tonight's Codex entries through the real runtime, against a scripted model.

Starts evalhub's scripted model server on loopback (one well-behaved script per workflow case),
points every Codex candidate at it, and runs tonight's Codex entries through the real
``codex app-server`` as a run in the ``scripted`` lane: labelled as scripted on every page and in
every export, never compared with, alerted on or plotted beside measured (live) history. The
key the runtime sees is a made-up value that is scrubbed like a real one.
"""

from __future__ import annotations

import os
import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from tqdm import tqdm

from candidates.secrets import redact
from runs.harness.drivers.codex import codex_runtime_status
from runs.harness.providers import scripted_settings
from runs.models import RunLane
from runs.services import create_run, execute_run
from schedules.building import ScheduleError
from schedules.cli import cost_ceiling, seed_from_options
from schedules.services import CoverageError, Selection, schedule_for_night

#: The made-up key handed to the runtime (the scripted model ignores it; evalhub scrubs it).
DEMO_KEY = "evalhub-scripted-demo-key"


class Command(BaseCommand):
    help = (
        "Run tonight's Codex entries through the real codex app-server against evalhub's scripted model "
        "(a run labelled scripted, never mixed with measured history)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--seed", help="Schedule seed (default: EVALHUB_SCHEDULE_SEED).")
        parser.add_argument("--no-progress", action="store_true", help="Do not draw a progress bar.")

    def handle(self, *args, **options) -> None:
        from runs.harness.scripted_model import ScriptedModelServer
        from runs.harness.script_schema import load_scripts_dir
        from runs.harness.session import SCRIPTS_DIR

        ok, message = codex_runtime_status()
        if not ok:
            raise CommandError(f"the Codex runtime is not installed: {message}")
        try:
            schedule, _ = schedule_for_night(seed=seed_from_options(options), now=timezone.now())
        except (CoverageError, ScheduleError) as exc:
            raise CommandError(redact(str(exc))) from None
        codex = [candidate for candidate in schedule.candidates if candidate.get("adapter") == "codex_app_server"]
        if not codex:
            raise CommandError("tonight's line-up has no Codex candidate: nothing to demonstrate")
        server = ScriptedModelServer(load_scripts_dir(SCRIPTS_DIR))
        root = server.start()
        try:
            with scripted_settings(f"{root}/scripts/{{case_id}}/v1", providers=("codex",)):
                run, _ = create_run(
                    schedule=schedule,
                    cost_ceiling_usd=cost_ceiling(),
                    selection=Selection(candidate_ids=tuple(candidate["id"] for candidate in codex)),
                    lane=RunLane.SCRIPTED,
                )
                names = {name for c in codex for name in c.get("qualification", {}).get("requiredEnvironment", [])}
                environ = {**os.environ, **{name: DEMO_KEY for name in names}}
                bar = None
                if not options["no_progress"]:
                    bar = tqdm(total=run.executions.count(), desc="scripted executions", unit="exec", file=sys.stderr)

                def progress(done: int, total: int, execution) -> None:
                    if bar is not None:
                        bar.set_postfix_str(f"{execution.case_key} × {execution.candidate_key}", refresh=False)
                        bar.update(1)

                try:
                    summary = execute_run(run, environ=environ, progress=progress)
                finally:
                    if bar is not None:
                        bar.close()
        finally:
            server.stop()
        self.stdout.write(
            f"scripted run {run.pk} (lane scripted: the model is evalhub's scripted server, not a measured model; "
            f"never compared with live history)"
        )
        self.stdout.write(summary.line())
