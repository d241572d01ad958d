"""Two writers at once: no "database is locked", nothing lost, nothing done twice (docs/failure-modes.md B1, docs/failure-modes.md B6).

The test database of the suite is in-memory SQLite (or PostgreSQL with ``DATABASE_URL``), so the
SQLite races run in a child process against a *file* database configured by the real settings
(WAL through ``init_command``, ``BEGIN IMMEDIATE``, a busy timeout): exactly what the qcluster
worker and the web process share in production. On PostgreSQL the same scenarios run in-process
with ``transaction=True``, each thread on its own connection.

The scenario functions below are module-level so the child process can import and run them; each
returns a JSON-able dict of what it observed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings

from runs.executors.base import ExecutionRequest, Executor

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".venv" / "bin" / "python"
if not PYTHON.exists():  # a virtualenv elsewhere: use the interpreter running the tests
    PYTHON = Path(sys.executable)
SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-value-1", "OPENROUTER_API_KEY": "x-value-2", "ANTHROPIC_API_KEY": "x-value-3"}
SLOW_EXECUTORS = dict.fromkeys(
    ("codex_app_server", "opencode_server", "acpx_runtime"), "tests.test_sqlite_concurrency.SlowCompletingExecutor"
)

# --- a slow executor at the edge ------------------------------------------------------------------

CALLS: list[str] = []
_CALLS_LOCK = threading.Lock()
DELAY_S = 0.02


class SlowCompletingExecutor(Executor):
    """Sleeps ``DELAY_S`` like a live runtime would, then returns a completed observation costing $0.01."""

    runtime_name = "slow replay"

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        from tests.builders import completed_observation

        with _CALLS_LOCK:
            CALLS.append(str(request.entry["executionId"]))
        time.sleep(DELAY_S)
        return completed_observation(dict(request.entry), cost_usd=0.01)


class CostlyExecutor(Executor):
    """Takes ``DELAY_S`` and costs exactly its budget's ``maxCostUsd``: the reservation is all spent."""

    runtime_name = "costly replay"

    def execute(self, request: ExecutionRequest) -> dict[str, Any]:
        from tests.builders import completed_observation

        with _CALLS_LOCK:
            CALLS.append(str(request.entry["executionId"]))
        time.sleep(DELAY_S * 5)
        return completed_observation(dict(request.entry), cost_usd=float(request.candidate.budget.max_cost_usd))


# --- scenarios (run in a child process on file SQLite, in-process on PostgreSQL) ------------------


def _threads(*targets: Any) -> list[str]:
    """Run each target in its own thread, started together; returns the errors they raised."""
    barrier = threading.Barrier(len(targets))
    errors: list[str] = []

    def wrap(target: Any) -> None:
        try:
            barrier.wait()
            target()
        except Exception as exc:  # reported, not raised: the test asserts there are none
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=wrap, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def _catalog() -> None:
    from tests.builders import load_reference_catalog

    load_reference_catalog()


def _pragmas() -> dict[str, Any]:
    if connection.vendor != "sqlite":
        return {}
    with connection.cursor() as cursor:
        return {
            "journal_mode": cursor.execute("PRAGMA journal_mode").fetchone()[0],
            "busy_timeout": cursor.execute("PRAGMA busy_timeout").fetchone()[0],
            "foreign_keys": cursor.execute("PRAGMA foreign_keys").fetchone()[0],
            "wal_autocheckpoint": cursor.execute("PRAGMA wal_autocheckpoint").fetchone()[0],
        }


def scenario_claim_race(trials: int = 5) -> dict[str, Any]:
    """Two threads call ``claim_run`` on the same pending run at the same moment, ``trials`` times."""
    from runs.creation import claim_run, create_run
    from runs.models import Run
    from runs.nightly import start_nightly
    from schedules.services import Selection

    _catalog()
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=False)
    claims: list[list[bool]] = []
    errors: list[str] = []
    for trial in range(trials):
        run, _ = create_run(schedule=outcome.schedule, cost_ceiling_usd=Decimal(12), selection=Selection(limit=trial + 1))
        results: list[bool] = []
        lock = threading.Lock()

        def claim(run: Run = run, lock: threading.Lock = lock, results: list[bool] = results) -> None:
            won = claim_run(Run.objects.get(pk=run.pk))
            with lock:
                results.append(won)

        errors += _threads(claim, claim)
        claims.append(sorted(results))
    return {"claims": claims, "errors": errors, "running": Run.objects.filter(status="running").count()}


def scenario_nightly_race() -> dict[str, Any]:
    """Two deliveries of tonight's nightly at the same moment, with a runtime that takes time."""
    from runs.models import Attempt, Execution, Run
    from runs.nightly import start_nightly
    from schedules.models import Schedule

    _catalog()
    CALLS.clear()
    outcomes: list[tuple[bool, bool]] = []

    def deliver() -> None:
        outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ=ENVIRON, execute=True)
        outcomes.append((outcome.run_created, outcome.executed))

    with override_settings(EVALHUB={"EXECUTORS": SLOW_EXECUTORS}):
        errors = _threads(deliver, deliver)
    runs = list(Run.objects.values_list("trigger", "status", "spent_usd"))
    return {
        "errors": errors,
        "outcomes": sorted(outcomes),
        "schedules": Schedule.objects.count(),
        "runs": [[trigger, status, str(spent)] for trigger, status, spent in runs],
        "calls": len(CALLS),
        "distinct_calls": len(set(CALLS)),
        "executions": Execution.objects.count(),
        "finished": Execution.objects.filter(status="finished", classification="completed").count(),
        "attempts": Attempt.objects.count(),
    }


def scenario_record_while_admin_saves(saves: int = 8, pause_s: float = 0.05) -> dict[str, Any]:
    """One thread executes a run (recording executions) while another saves a candidate the way the
    admin does: in one transaction, read (full_clean's uniqueness queries), pause, write."""
    from candidates.models import Candidate
    from runs.creation import create_run
    from runs.dispatch import execute_run
    from runs.models import Execution
    from runs.nightly import start_nightly
    from schedules.services import Selection

    _catalog()
    CALLS.clear()
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=False)
    run, _ = create_run(schedule=outcome.schedule, cost_ceiling_usd=Decimal(12), selection=Selection(limit=30))
    saved: list[str] = []

    def record() -> None:
        execute_run(run, environ=ENVIRON)

    def admin_saves() -> None:
        for number in range(saves):
            with transaction.atomic():
                candidate = Candidate.objects.get(key="opencode-glm")
                candidate.model = f"openrouter/z-ai/glm-4.{number}"
                candidate.full_clean()
                time.sleep(pause_s)
                candidate.save()
            saved.append(candidate.model)

    with override_settings(EVALHUB={"EXECUTORS": SLOW_EXECUTORS}):
        errors = _threads(record, admin_saves)
    return {
        "errors": errors,
        "pragmas": _pragmas(),
        "saved": len(saved),
        "model": Candidate.objects.get(key="opencode-glm").model,
        "calls": len(CALLS),
        "completed": Execution.objects.filter(run=run, classification="completed").count(),
        "executions": Execution.objects.filter(run=run).count(),
    }


def scenario_reservation_race(workers: int = 8, fits: int = 3) -> dict[str, Any]:
    """``workers`` threads each run one execution of the same run at the same moment, under a
    ceiling that fits ``fits`` worst cases ($1.50 each for codex-luna)."""
    from runs.creation import claim_run, create_run
    from runs.execution import execute_execution
    from runs.models import Execution, Run
    from runs.nightly import start_nightly
    from schedules.services import Selection

    _catalog()
    CALLS.clear()
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=False)
    run, _ = create_run(
        schedule=outcome.schedule, cost_ceiling_usd=Decimal("1.5") * fits, selection=Selection(candidate_ids=("codex-luna",), limit=workers)
    )
    claim_run(run)
    pks = list(run.executions.values_list("pk", flat=True))
    costly = dict.fromkeys(("codex_app_server", "opencode_server", "acpx_runtime"), "tests.test_sqlite_concurrency.CostlyExecutor")
    with override_settings(EVALHUB={"EXECUTORS": costly}):
        errors = _threads(*[lambda pk=pk: execute_execution(pk, environ=ENVIRON) for pk in pks])
    run = Run.objects.get(pk=run.pk)
    rows = Execution.objects.filter(run=run)
    return {
        "errors": errors,
        "executions": len(pks),
        "calls": len(CALLS),
        "completed": rows.filter(classification="completed").count(),
        "ceiling_skips": rows.filter(failure_code="campaign_cost_ceiling_reached").count(),
        "spent": str(run.spent_usd),
        "reserved": str(run.reserved_usd),
        "ceiling": str(run.cost_ceiling_usd),
        "status": run.status,
    }


def scenario_pragmas() -> dict[str, Any]:
    """The pragmas of a fresh connection opened by the real settings."""
    return _pragmas()


# --- running a scenario on file SQLite ------------------------------------------------------------

_CHILD = """
import json, os, sys
mode = os.environ.get("EVALHUB_TEST_TRANSACTION_MODE")
if mode:  # only for the control test: the settings as they were before B6 was fixed
    import evalhub.settings as project_settings
    project_settings.DATABASES["default"]["OPTIONS"]["transaction_mode"] = mode
import django
django.setup()
from tests import test_sqlite_concurrency as scenarios
print(json.dumps(getattr(scenarios, sys.argv[1])(**json.loads(sys.argv[2]))))
"""


def child_environment(database: Path, **extra: str) -> dict[str, str]:
    """The environment of a child ``manage.py`` or scenario process using ``database`` (file SQLite)."""
    environment = {
        key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"} and not key.startswith("EVALHUB_")
    }
    environment.update({"DJANGO_SETTINGS_MODULE": "evalhub.settings", "EVALHUB_SQLITE_PATH": str(database), "PYTHONPATH": str(REPO)})
    environment.update(extra)
    return environment


def migrated_sqlite_file(directory: Path) -> Path:
    """A file SQLite database under ``directory`` with every migration applied."""
    database = directory / "evalhub.sqlite3"
    subprocess.run(
        [str(PYTHON), "manage.py", "migrate", "--verbosity", "0"],
        cwd=REPO,
        env=child_environment(database),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return database


def run_scenario(database: Path, name: str, *, environment: dict[str, str] | None = None, **kwargs: Any) -> dict:
    """Run scenario ``name`` in a child process on ``database``; its returned dict."""
    done = subprocess.run(
        [str(PYTHON), "-c", _CHILD, name, json.dumps(kwargs)],
        cwd=REPO,
        env=child_environment(database, **(environment or {})),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_sqlite_file(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture
def sqlite_file(sqlite_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the migrated file database for one test."""
    database = tmp_path / "evalhub.sqlite3"
    shutil.copyfile(sqlite_template, database)
    return database


def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("file SQLite behaviour; the PostgreSQL run covers the same scenario in-process")


def postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("runs in-process on PostgreSQL; the SQLite run uses a file database in a child process")


# --- B6 on file SQLite ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_file_database_runs_in_wal_mode_with_a_busy_timeout(sqlite_file: Path) -> None:
    sqlite_only()
    assert run_scenario(sqlite_file, "scenario_pragmas") == {
        "journal_mode": "wal",
        "busy_timeout": 20000,
        "foreign_keys": 1,
        "wal_autocheckpoint": 4000,
    }


@pytest.mark.django_db
def test_recording_executions_while_the_admin_saves_a_candidate_never_locks(sqlite_file: Path) -> None:
    sqlite_only()
    result = run_scenario(sqlite_file, "scenario_record_while_admin_saves")
    assert result["errors"] == []
    assert result["pragmas"]["journal_mode"] == "wal"
    assert result["pragmas"]["busy_timeout"] > 0
    assert result["saved"] == 8
    assert result["model"] == "openrouter/z-ai/glm-4.7"
    # No execution lost, none recorded twice.
    assert result["executions"] == 30
    assert result["calls"] == result["completed"] == 30


@pytest.mark.django_db
def test_the_same_contention_fails_with_deferred_transactions(sqlite_file: Path) -> None:
    """Control: the scenario above does catch B6 — with SQLite's default DEFERRED mode the admin
    save's read-then-write transaction fails at once with "database is locked"."""
    sqlite_only()
    result = run_scenario(
        sqlite_file,
        "scenario_record_while_admin_saves",
        environment={"EVALHUB_TEST_TRANSACTION_MODE": "DEFERRED"},
        pause_s=0.2,
    )
    assert any("database is locked" in error for error in result["errors"]), result


# --- B1: claims and deliveries racing ---------------------------------------------------------------------


@pytest.mark.django_db
def test_only_one_of_two_simultaneous_claims_wins_on_file_sqlite(sqlite_file: Path) -> None:
    sqlite_only()
    result = run_scenario(sqlite_file, "scenario_claim_race")
    assert result == {"claims": [[False, True]] * 5, "errors": [], "running": 5}


@pytest.mark.django_db
def test_two_simultaneous_nightly_deliveries_execute_once_on_file_sqlite(sqlite_file: Path) -> None:
    sqlite_only()
    result = run_scenario(sqlite_file, "scenario_nightly_race")
    assert result["errors"] == []
    assert result["schedules"] == 1
    assert result["runs"] == [["nightly", "finished", "0.400000"]]
    assert result["calls"] == result["distinct_calls"] == 40
    assert (result["executions"], result["finished"], result["attempts"]) == (40, 40, 40)
    # Exactly one delivery created the run and exactly one executed it (not always the same one).
    assert sorted(created for created, _ in result["outcomes"]) == [False, True]
    assert sorted(executed for _, executed in result["outcomes"]) == [False, True]


@pytest.mark.django_db(transaction=True)
def test_only_one_of_two_simultaneous_claims_wins_on_postgresql() -> None:
    postgresql_only()
    result = scenario_claim_race()
    assert result == {"claims": [[False, True]] * 5, "errors": [], "running": 5}


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_nightly_deliveries_execute_once_on_postgresql() -> None:
    postgresql_only()
    result = scenario_nightly_race()
    assert result["errors"] == []
    assert result["schedules"] == 1
    assert result["runs"] == [["nightly", "finished", "0.400000"]]
    assert result["calls"] == result["distinct_calls"] == 40
    assert (result["executions"], result["finished"], result["attempts"]) == (40, 40, 40)
    assert sorted(executed for _, executed in result["outcomes"]) == [False, True]


@pytest.mark.django_db(transaction=True)
def test_recording_executions_while_the_admin_saves_a_candidate_on_postgresql() -> None:
    postgresql_only()
    result = scenario_record_while_admin_saves()
    assert result["errors"] == []
    assert (result["saved"], result["executions"], result["completed"], result["calls"]) == (8, 30, 30, 30)


# --- the ceiling is a reservation: many workers, exactly what fits runs -------------------------------------

RESERVATION_RESULT = {
    "errors": [],
    "executions": 7,  # codex-luna's entries tonight, one thread each
    "calls": 3,
    "completed": 3,
    "ceiling_skips": 4,
    "spent": "4.500000",
    "reserved": "0.000000",
    "ceiling": "4.500000",
    "status": "finished",
}


@pytest.mark.django_db
def test_seven_workers_racing_for_a_ceiling_that_fits_three_run_exactly_three_on_file_sqlite(sqlite_file: Path) -> None:
    sqlite_only()
    assert run_scenario(sqlite_file, "scenario_reservation_race") == RESERVATION_RESULT


@pytest.mark.django_db(transaction=True)
def test_seven_workers_racing_for_a_ceiling_that_fits_three_run_exactly_three_on_postgresql() -> None:
    postgresql_only()
    result = scenario_reservation_race()
    assert {
        **result,
        "spent": str(Decimal(result["spent"])),
        "reserved": str(Decimal(result["reserved"])),
        "ceiling": str(Decimal(result["ceiling"])),
    } == {
        **RESERVATION_RESULT,
        "spent": "4.500000",
        "reserved": "0.000000",
        "ceiling": "4.500000",
    }
