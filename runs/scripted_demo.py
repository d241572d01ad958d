"""The scripted demonstration: tonight's entries of every runtime evalhub drives, against its scripted model.

Two steps, for ``manage.py demo_live``: :func:`plan_scripted_demo` finds tonight's line-up, the
candidates whose adapter has a live driver and checks their runtimes are installed;
:func:`run_scripted_demo` starts the scripted model server on loopback (one well-behaved script
per workflow case), gives every such candidate its own scripted provider speaking the wire API its
runtime needs, and runs their entries through the real runtimes as a run in the ``scripted`` lane
(labelled as scripted everywhere, never compared with, alerted on or plotted beside measured
history). The key each runtime sees is a made-up value that is scrubbed like a real one.

The scripted lane's own module, and the one outside ``runs.executors`` that imports the live
plugin (``pyproject.toml`` names it in the contract that keeps everything else out): it starts the
plugin's scripted model server and asks each live executor class for its driver, which no other
executor has and the registry has no reason to know.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.utils.module_loading import import_string

from runs.creation import RunSummary, create_run
from runs.dispatch import execute_run
from runs.executors import InfrastructureError, executor_paths
from runs.executors.candidate import CandidateSpec
from runs.executors.live.executor import SCRIPTED_MODEL_KEY, LiveExecutor, runtime_statuses, scripted_provider_for
from runs.models import Execution, Run, RunLane
from runs.recovery import recover_before_executing
from schedules.models import Schedule
from schedules.services import Selection, apply_selection, schedule_for_night


class ScriptedDemoError(Exception):
    """Nothing to demonstrate, or a runtime is missing; the message says which and what to do."""


def driver_classes(candidates: list[CandidateSpec]) -> dict[str, Any]:
    """``{candidate id: driver class}`` of the candidates whose adapter runs through a live
    executor with a driver (an ACP candidate with no known agent profile is left out)."""
    drivers: dict[str, Any] = {}
    paths = executor_paths()
    for candidate in candidates:
        path = paths.get(candidate.adapter)
        try:
            executor_class = import_string(path) if path else None
        except ImportError:
            continue
        if isinstance(executor_class, type) and issubclass(executor_class, LiveExecutor) and executor_class.driver_path:
            try:
                drivers[candidate.id] = executor_class().driver_factory(candidate)
            except InfrastructureError:
                continue  # an ACP candidate without a known agent profile: nothing drives it
    return drivers


@dataclass(frozen=True)
class ScriptedDemo:
    """What a scripted demonstration will run: tonight's ``schedule``, the ``wanted`` candidate ids
    (in line-up order) and the driver class of each candidate that has one (``drivers``)."""

    schedule: Schedule
    wanted: tuple[str, ...]
    drivers: Mapping[str, Any]

    @property
    def candidates(self) -> list[CandidateSpec]:
        """The wanted candidates, in line-up order."""
        return [c for c in (CandidateSpec.from_snapshot(candidate) for candidate in self.schedule.candidates) if c.id in self.wanted]


def plan_scripted_demo(*, seed: str, now: dt.datetime, rotation_day: Any, generated_at: Any, selection: Selection) -> ScriptedDemo:
    """Tonight's scripted demonstration of ``selection``'s candidates (all those a live runtime drives
    when it names none).

    Raises ``CoverageError``/``ScheduleError`` as ``schedule_for_night`` does, and for a selected
    candidate that is unknown or resting this week (as ``nightly`` tells it); :class:`ScriptedDemoError`
    when a selected candidate has no live driver, when none has, or when a runtime is not installed.
    """
    schedule, _ = schedule_for_night(seed=seed, now=now, rotation_day=rotation_day, generated_at=generated_at)
    # A typo or a candidate resting this week is told so before the drivers are asked: "no live
    # runtime drives X" would blame the runtime.
    if selection.candidate_ids:
        apply_selection(schedule.to_document(), Selection(candidate_ids=selection.candidate_ids))
    drivers = driver_classes([CandidateSpec.from_snapshot(candidate) for candidate in schedule.candidates])
    wanted = selection.candidate_ids or tuple(drivers)
    undriven = [candidate for candidate in wanted if candidate not in drivers]
    if undriven:
        raise ScriptedDemoError(
            f"no live runtime drives {', '.join(undriven)} tonight; the scripted lane runs "
            f"{', '.join(drivers) or 'no candidate'} (candidates of adapters with a driver in tonight's line-up)"
        )
    if not wanted:
        raise ScriptedDemoError("tonight's line-up has no candidate whose runtime evalhub drives: nothing to demonstrate")
    keys = {key for candidate in wanted for key in (drivers[candidate].runtime_key, *getattr(drivers[candidate], "extra_runtimes", ()))}
    for label, ok, message in runtime_statuses(sorted(keys)):
        if not ok:
            raise ScriptedDemoError(f"the {label} runtime is not installed: {message}")
    return ScriptedDemo(schedule=schedule, wanted=tuple(wanted), drivers=drivers)


class DemoProgress(Protocol):
    """Where :func:`run_scripted_demo` reports its progress (a progress bar)."""

    def start(self, total: int) -> None:
        """The run was made with ``total`` executions."""

    def advance(self, execution: Execution) -> None:
        """``execution`` ended."""

    def close(self) -> None:
        """The run ended (or stopped)."""


@dataclass(frozen=True)
class ScriptedDemoResult:
    """The scripted ``run``, its ``summary`` and the candidate ids that ``played`` (a case or limit
    selection may leave some wanted ones out), in line-up order."""

    run: Run
    summary: RunSummary
    played: list[str]


def run_scripted_demo(
    demo: ScriptedDemo, *, selection: Selection, cost_ceiling_usd: Any, progress: DemoProgress | None = None
) -> ScriptedDemoResult:
    """Run ``demo`` as a scripted-lane run (``selection``'s cases and limit) against a scripted model
    server started for it and stopped afterwards, first recovering what a killed ``demo_live`` or
    ``nightly`` left. Each candidate's required variables hold the made-up scripted key."""
    from runs.executors.live.script_schema import load_scripts_dir
    from runs.executors.live.scripted_model import ScriptedModelServer
    from runs.executors.live.session import SCRIPTS_DIR

    candidates = demo.candidates
    server = ScriptedModelServer(load_scripts_dir(SCRIPTS_DIR))
    root = server.start()
    try:
        url = f"{root}/scripts/{{case_id}}/v1"
        providers = {c.id: scripted_provider_for(c, demo.drivers[c.id], url) for c in candidates}
        recover_before_executing(environ=os.environ)  # what a killed demo_live or nightly left
        run, _ = create_run(
            schedule=demo.schedule,
            cost_ceiling_usd=cost_ceiling_usd,
            selection=Selection(candidate_ids=demo.wanted, case_ids=selection.case_ids, limit=selection.limit),
            lane=RunLane.SCRIPTED,
        )
        names = {name for c in candidates for name in c.required_environment}
        environ = {**os.environ, **dict.fromkeys(names, SCRIPTED_MODEL_KEY)}
        if progress is not None:
            progress.start(run.executions.count())

        def advance(done: int, total: int, execution: Execution) -> None:
            if progress is not None:
                progress.advance(execution)

        try:
            summary = execute_run(run, environ=environ, progress=advance, providers=providers)
        finally:
            if progress is not None:
                progress.close()
    finally:
        server.stop()
    played = set(run.executions.values_list("candidate_key", flat=True))
    return ScriptedDemoResult(run=run, summary=summary, played=[c for c in demo.wanted if c in played])
