"""Two real qcluster workers share a night, and one is killed with ``kill -9`` mid-night.

On the embedded SQLite file with the ORM broker (the SQLite pass) and on PostgreSQL with Redis
(the PostgreSQL pass, when Redis answers): forty executions with a slow fake executor
(``tests.cluster_support.SlowExecutor``), two ``manage.py qcluster`` processes, the first one's
whole process group killed once it holds an execution. The run must finish with every execution
settled exactly once, spend within the ceiling and attempts within ``maxAttempts``.

Marked ``cluster``: a few dozen seconds each. Each test has its own database and its own queue
name, so they are safe beside other tests and other users of the Redis database.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.cluster_support import ENVIRON
from tests.test_sqlite_concurrency import PYTHON, REPO, child_environment, sqlite_file, sqlite_template  # noqa: F401

pytestmark = pytest.mark.cluster

DRIVER = "from tests.cluster_support import main; main()"


def redis_url() -> str:
    return os.environ.get("EVALHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/6")


def redis_answers(url: str) -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:
        return False


class Cluster:
    """One ``manage.py qcluster`` in its own process group."""

    def __init__(self, environment: dict[str, str], log: Path) -> None:
        self.log = log.open("w")
        self.process = subprocess.Popen(
            [str(PYTHON), "manage.py", "qcluster"],
            cwd=REPO,
            env=environment,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def pids(self) -> set[int]:
        """The cluster's processes (its group): main, sentinel, pusher, monitor, worker."""
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getpgid(int(entry.name)) == self.process.pid:
                        found.add(int(entry.name))
                except (ProcessLookupError, PermissionError):
                    continue
        return found

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)

    def stop(self) -> float | None:
        """SIGTERM to the cluster's main process; seconds until it exited (None if it was gone)."""
        took = None
        if self.process.poll() is None:
            started = time.monotonic()
            try:
                self.process.send_signal(signal.SIGTERM)
                self.process.wait(timeout=60)
                took = time.monotonic() - started
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()
        return took


def driver(environment: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([str(PYTHON), "-c", DRIVER, *args], cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def kill_one_worker_mid_night(environment: dict[str, str], tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """Queue a night, start two clusters, ``kill -9`` the first once it runs an execution, wait for
    the run to finish; the final status and the executor's call log."""
    calls = tmp_path / "calls.log"
    calls.touch()
    environment = {
        **environment,
        **ENVIRON,  # the candidates' keys, as a worker's environment has them
        "EVALHUB_TEST_CALLS": str(calls),
        "EVALHUB_TEST_DELAY_S": "0.4",
        "EVALHUB_TEST_Q_NAME": f"evalhub-test-{uuid.uuid4().hex[:12]}",
    }
    prepared = driver(environment, "prepare")
    run_id = prepared["run"]
    assert prepared["executions"] == 40
    # The first worker's executions are slow, so that it is surely mid-execution when it is killed.
    first = Cluster({**environment, "EVALHUB_TEST_DELAY_S": "4"}, tmp_path / "first.log")
    second = Cluster(environment, tmp_path / "second.log")
    try:
        deadline = time.monotonic() + 120
        killed = False
        while time.monotonic() < deadline and not killed:
            time.sleep(0.3)
            state = driver(environment, "status", str(run_id))
            victims = {int(owner.rsplit(":", 1)[1]) for owner in state["running_owners"] if ":" in owner}
            if state["finished"] >= 6 and victims & first.pids():
                first.kill()  # kill -9, mid-execution: its attempt stays open, its lease runs out
                killed = True
        assert killed, "the first worker never ran an execution"
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            state = driver(environment, "status", str(run_id))
            # The run is marked finished by its finaliser's conditional update, and reported just
            # after it (runs/recovery.py: finalise_run): wait for both, not the status alone.
            if state["status"] != "running" and state["reports"]:
                break
            time.sleep(1)
    finally:
        first.stop()
        stopped_in = second.stop()
    # SIGTERM: the cluster stops within its grace (10 s) and a margin, never after the night.
    assert stopped_in is not None and stopped_in < 30, stopped_in
    logs = (tmp_path / "first.log").read_text() + (tmp_path / "second.log").read_text()
    assert "Traceback" not in logs.replace("TimeoutException", ""), logs[-3000:]
    return state, calls.read_text().splitlines()


def assert_the_night_survived(state: dict[str, Any], calls: list[str]) -> None:
    assert state["status"] == "finished", state
    assert (state["executions"], state["finished"], state["completed"]) == (40, 40, 40)
    # Every execution settled exactly once: one observed attempt each, however many deliveries.
    assert state["observed_once"] == 40
    assert state["open_attempts"] == 0
    assert state["worker_lost"] >= 1  # the killed worker's execution was taken back
    assert 1 <= state["max_attempts_used"] <= 3  # maxAttempts of the reference budgets
    assert Decimal(state["reserved"]) == 0
    assert Decimal(state["spent"]) == Decimal(state["counted"]) <= Decimal(state["ceiling"])
    assert state["reports"] == 1
    assert len({line.split()[0] for line in calls}) == 40
    assert len({line.split()[2] for line in calls}) >= 2  # both clusters ran executions


@pytest.mark.django_db
def test_kill_9_of_one_worker_on_sqlite_and_the_orm_broker(sqlite_file: Path, tmp_path: Path) -> None:  # noqa: F811
    if connection.vendor != "sqlite":
        pytest.skip("the embedded SQLite + ORM broker runs in the SQLite pass")
    environment = child_environment(sqlite_file, DJANGO_SETTINGS_MODULE="tests.cluster_settings")
    state, calls = kill_one_worker_mid_night(environment, tmp_path)
    assert_the_night_survived(state, calls)


@pytest.mark.django_db(transaction=True)
def test_kill_9_of_one_worker_on_postgresql_and_redis(tmp_path: Path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL + Redis runs in the PostgreSQL pass")
    url = redis_url()
    if not redis_answers(url):
        pytest.skip(f"no Redis at {url} (set EVALHUB_TEST_REDIS_URL)")
    settings = connection.settings_dict
    database = f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("EVALHUB_")}
    environment.update(
        {"DJANGO_SETTINGS_MODULE": "tests.cluster_settings", "DATABASE_URL": database, "REDIS_URL": url, "PYTHONPATH": str(REPO)}
    )
    state, calls = kill_one_worker_mid_night(environment, tmp_path)
    assert_the_night_survived(state, calls)
