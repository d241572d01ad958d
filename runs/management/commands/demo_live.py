"""``manage.py demo_live``: tonight's entries of every runtime evalhub can drive, against a scripted model.

Starts evalhub's scripted model server on loopback (one well-behaved script per workflow case),
gives every candidate whose adapter has a live driver (``codex_app_server``, ``opencode_server``
and ``acpx_runtime``: all of them) its own scripted provider speaking the wire API its runtime needs
(codex and codex-acp: Responses; opencode: the Chat Completions of the candidates' OpenRouter
profile; claude-agent-acp: Anthropic Messages), and runs
tonight's entries of those candidates through the real runtimes as a run in the ``scripted``
lane: labelled as scripted on every page and in every export, never compared with, alerted on or
plotted beside measured (live) history. The key each runtime sees is a made-up value that is
scrubbed like a real one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.module_loading import import_string
from tqdm import tqdm

from evalhub.commands import DatabaseCommand
from evalhub.secrets import redact
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.executors import InfrastructureError, executor_paths
from runs.executors.live.executor import SCRIPTED_MODEL_KEY, LiveExecutor, configured_binary, scripted_provider_for
from runs.executors.live.runtimes import RUNTIMES
from runs.models import RunLane
from runs.recovery import recover_before_executing
from schedules.building import ScheduleError
from schedules.cli import add_selector_arguments, cost_ceiling, schedule_error_message, seed_from_options, selection_from_options
from schedules.services import CoverageError, Selection, apply_selection, schedule_for_night


def driver_classes(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """``{candidate id: driver class}`` of the candidates whose adapter runs through a live
    executor with a driver (an ACP candidate with no known agent profile is left out)."""
    drivers: dict[str, Any] = {}
    paths = executor_paths()
    for candidate in candidates:
        path = paths.get(str(candidate.get("adapter")))
        try:
            executor_class = import_string(path) if path else None
        except ImportError:
            continue
        if isinstance(executor_class, type) and issubclass(executor_class, LiveExecutor) and executor_class.driver_path:
            try:
                drivers[str(candidate["id"])] = executor_class().driver_factory(candidate)
            except InfrastructureError:
                continue  # an ACP candidate without a known agent profile: nothing drives it
    return drivers


class Command(DatabaseCommand):
    help = (
        "Run tonight's entries of every runtime evalhub drives (codex app-server, opencode serve, the ACP agents) through the "
        "real runtimes against evalhub's scripted model (a run labelled scripted, never mixed with measured history)."
    )

    def add_arguments(self, parser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--no-progress", action="store_true", help="Do not draw a progress bar.")

    def handle(self, *args, **options) -> None:
        from runs.executors.live.script_schema import load_scripts_dir
        from runs.executors.live.scripted_model import ScriptedModelServer
        from runs.executors.live.session import SCRIPTS_DIR

        selection = selection_from_options(options)
        try:
            schedule, _ = schedule_for_night(
                seed=seed_from_options(options),
                now=timezone.now(),
                rotation_day=options["rotation_day"],
                generated_at=options["generated_at"],
            )
            # A typo or a candidate resting this week is told so (as `nightly` tells it), before the
            # drivers are asked: "no live runtime drives X" would blame the runtime.
            if selection.candidate_ids:
                apply_selection(schedule.to_document(), Selection(candidate_ids=selection.candidate_ids))
        except CoverageError as exc:
            raise CommandError(redact(str(exc))) from None
        except ScheduleError as exc:
            raise CommandError(schedule_error_message(exc)) from None
        drivers = driver_classes(list(schedule.candidates))
        wanted = selection.candidate_ids or tuple(drivers)
        undriven = [candidate for candidate in wanted if candidate not in drivers]
        if undriven:
            raise CommandError(
                f"no live runtime drives {', '.join(undriven)} tonight; the scripted lane runs "
                f"{', '.join(drivers) or 'no candidate'} (candidates of adapters with a driver in tonight's line-up)"
            )
        if not wanted:
            raise CommandError("tonight's line-up has no candidate whose runtime evalhub drives: nothing to demonstrate")
        keys = {key for candidate in wanted for key in (drivers[candidate].runtime_key, *getattr(drivers[candidate], "extra_runtimes", ()))}
        for runtime_key in sorted(keys):
            ok, message = RUNTIMES[runtime_key].status(configured_binary(runtime_key))
            if not ok:
                raise CommandError(f"the {RUNTIMES[runtime_key].label} runtime is not installed: {message}")
        candidates = [c for c in schedule.candidates if c["id"] in wanted]
        server = ScriptedModelServer(load_scripts_dir(SCRIPTS_DIR))
        root = server.start()
        try:
            url = f"{root}/scripts/{{case_id}}/v1"
            providers = {c["id"]: scripted_provider_for(c, drivers[c["id"]], url) for c in candidates}
            recover_before_executing(environ=os.environ)  # what a killed demo_live or nightly left
            run, _ = create_run(
                schedule=schedule,
                cost_ceiling_usd=cost_ceiling(),
                selection=Selection(candidate_ids=tuple(wanted), case_ids=selection.case_ids, limit=selection.limit),
                lane=RunLane.SCRIPTED,
            )
            names = {name for c in candidates for name in c.get("qualification", {}).get("requiredEnvironment", [])}
            environ = {**os.environ, **dict.fromkeys(names, SCRIPTED_MODEL_KEY)}
            bar = None
            if not options["no_progress"]:
                bar = tqdm(total=run.executions.count(), desc="scripted executions", unit="exec", file=sys.stderr, disable=None)

            def progress(done: int, total: int, execution) -> None:
                if bar is not None:
                    bar.set_postfix_str(f"{execution.case_key} × {execution.candidate_key}", refresh=False)
                    bar.update(1)

            try:
                summary = execute_run(run, environ=environ, progress=progress, providers=providers)
            finally:
                if bar is not None:
                    bar.close()
        finally:
            server.stop()
        # The candidates that played: a --case or --limit leaves some of the wanted ones out.
        played = set(run.executions.values_list("candidate_key", flat=True))
        self.stdout.write(
            f"scripted run {run.pk} of {', '.join(c for c in wanted if c in played) or 'no execution'} (lane scripted: the model is evalhub's scripted server, "
            f"not a measured model; never compared with live history)"
        )
        self.stdout.write(summary.line())
