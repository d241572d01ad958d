"""A command that executes in its own process first recovers what a killed one left: expired
leases are taken back (the run no longer stays ``running`` until a worker starts), and the
execution folders of processes that no longer run are removed from the temporary folder."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from runs import creation, settlement
from runs.executors.base import InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.executors.live.session import remove_abandoned_workdirs, run_live_execution
from runs.executors.providers import ProviderConfig
from runs.executors.replay import REPLAY_STORE
from runs.models import AttemptOutcome, Execution, ExecutionStatus
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)


def dead_pid() -> int:
    """The pid of a process that has ended (reaped, so it does not exist any more)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_the_folders_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / f"evalhub-live-{dead_pid()}-abc123"
    mine = tmp_path / f"evalhub-live-{os.getpid()}-def456"
    older = tmp_path / "evalhub-live-q1w2e3"  # no owner pid: cannot be known, left alone
    other = tmp_path / f"someone-else-{dead_pid()}-x"
    for folder in (dead, mine, older, other):
        (folder / "home").mkdir(parents=True)
    assert remove_abandoned_workdirs(tmp_path) == [dead]
    assert not dead.exists() and mine.exists() and older.exists() and other.exists()


def test_an_execution_s_folder_names_the_process_that_owns_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    seen: dict[str, Any] = {}

    def driver_factory(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise InfrastructureError("runtime_start_failed", False, "stopped by the test")

    with pytest.raises(InfrastructureError):
        run_live_execution(
            execution_id="rwe-0000000000000000",
            case={"id": "final-response", "title": "Final response", "steps": [{"kind": "turn"}], "assertions": {}},
            candidate=CandidateSpec.from_snapshot(
                {"id": "codex-luna", "model": "gpt-5.6-luna", "budget": {"maxLatencyMs": 1000, "maxAttempts": 1, "maxCostUsd": 0.1}}
            ),
            prompt="Say done.",
            provider=ProviderConfig(profile="openai", base_url="http://127.0.0.1:9/v1", env_key="OPENAI_API_KEY"),
            driver_factory=driver_factory,
            required_environment={"OPENAI_API_KEY": "x-value"},
            host_environment={"PATH": "/usr/bin"},
        )
    assert Path(seen["workdir"]).name.startswith(f"evalhub-live-{os.getpid()}-")
    assert list(tmp_path.iterdir()) == []  # a process that ends normally removes its own


@pytest.mark.django_db
def test_nightly_execute_takes_back_what_a_killed_inline_run_held(reference_catalog, replay_executors, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    left = tmp_path / f"evalhub-live-{dead_pid()}-killed"
    (left / "home").mkdir(parents=True)
    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    killed, _ = creation.create_run(
        schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(candidate_ids=("codex-luna",), limit=1)
    )
    (execution,) = killed.executions.all()
    creation.claim_run(killed)
    Execution.objects.filter(pk=execution.pk).update(
        status=ExecutionStatus.RUNNING, owner="host:4242", lease_expires_at=timezone.now() - dt.timedelta(seconds=5)
    )
    settlement.begin_attempt(killed, execution, 1, Decimal("1.5"), "host:4242")
    for entry in schedule.entries.all():
        REPLAY_STORE[entry.execution_id] = completed_observation(entry.to_document(), cost_usd=0.01)

    # Another selection: this command's own run is not the killed one, yet it recovers it first.
    call_command("nightly", "--execute", "--no-progress", "--candidate", "acpx-claude-sonnet", "--limit", "1", stdout=StringIO())

    execution.refresh_from_db()
    assert (execution.status, execution.owner, execution.dispatched_at) == (ExecutionStatus.PENDING, "", None)
    assert list(execution.attempts.values_list("outcome", flat=True)) == [AttemptOutcome.WORKER_LOST]
    assert not left.exists()
