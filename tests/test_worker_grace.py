"""``manage.py worker --grace`` takes a finite number of seconds from 1 to 3600, and refuses
anything else before a cluster starts: a clear error and exit status 1, never an
``OverflowError`` after SIGTERM with the main process hung, nor a silent 1 s for 0, -1 or nan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.management.commands import worker

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_cluster(monkeypatch) -> None:
    def refuse() -> None:
        pytest.fail("a cluster was started with a bad --grace")

    monkeypatch.setattr(worker, "Cluster", refuse)


@pytest.mark.parametrize("value", ["99999999999999999999", "3601", "-1", "0", "0.5", "nan", "inf", "-inf", "thirty", ""])
def test_a_grace_that_is_not_a_sane_number_of_seconds_is_refused(no_cluster, value: str) -> None:
    with pytest.raises(CommandError) as caught:
        call_command("worker", f"--grace={value}")
    assert str(caught.value) == f"--grace must be a number of seconds from 1 to 3600 (for example 30), not {value!r}"


@pytest.mark.parametrize(("value", "seconds"), [("1", 1.0), ("30", 30.0), ("2.5", 2.5), ("3600", 3600.0)])
def test_a_grace_in_range_is_taken_as_seconds(value: str, seconds: float) -> None:
    assert worker.grace_seconds(value) == seconds


def test_the_command_line_exits_1_with_the_message(tmp_path: Path) -> None:
    environment = {**os.environ, "EVALHUB_SQLITE_PATH": str(tmp_path / "db.sqlite3")}
    environment.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "worker", "--grace", "nan"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "--grace must be a number of seconds from 1 to 3600 (for example 30), not 'nan'" in done.stderr
    assert "Traceback" not in done.stderr


class _StartedCluster:
    """Stands in for django-q2's cluster: starts at once, records being started."""

    started = 0

    def start(self) -> int:
        type(self).started += 1
        return 0

    def stop(self) -> bool:
        return True


@pytest.mark.django_db  # the worker looks for unapplied migrations before it starts its cluster
def test_the_worker_says_it_runs_once_its_cluster_started(monkeypatch, settings) -> None:
    """Without it `make worker` printed nothing at all (django-q2 logs its start at INFO)."""
    import io
    import signal

    monkeypatch.setattr(worker, "Cluster", _StartedCluster)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # keep the test process's own handlers
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "workers": 2, "orm": "default"}
    settings.Q_CLUSTER.pop("redis", None)
    out = io.StringIO()
    call_command("worker", "--grace=12", stdout=out)
    assert _StartedCluster.started == 1
    assert out.getvalue() == (
        "worker running: 2 worker processes taking executions from the database (django-q2's ORM broker); "
        "Ctrl-C or SIGTERM stops it within 12 s\n"
    )
    settings.Q_CLUSTER = {"workers": 1, "redis": "redis://:secret-password@127.0.0.1:6379/13"}
    assert worker.running_line(settings.Q_CLUSTER, 30) == (
        "worker running: 1 worker process taking executions from Redis (REDIS_URL); Ctrl-C or SIGTERM stops it within 30 s"
    )


def test_a_key_pasted_as_the_grace_is_not_quoted(no_cluster) -> None:
    key = "sk-proj-" + "Abcdefghijklmnopqrstuvwxyz0123456789ABCDxyz"
    with pytest.raises(CommandError) as caught:
        call_command("worker", f"--grace={key}")
    assert key not in str(caught.value)
    assert str(caught.value).endswith("not a value that looks like a secret (not shown)")
