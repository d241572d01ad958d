"""The production profile for real: gunicorn (two web workers, static files through WhiteNoise)
and two ``manage.py worker`` clusters on PostgreSQL and Redis run a night of forty executions
(``tests.cluster_support.SlowExecutor``), read back over HTTP: the API, ``/health/``, HTTPS-only
headers and collected static files. ``check --deploy`` is clean in the same environment.

Marked ``production``; runs in the PostgreSQL pass when Redis answers (``EVALHUB_TEST_REDIS_URL``).
A TLS-terminating proxy is stood in for by the ``X-Forwarded-Proto: https`` header it would set.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from django.db import connection

from tests.cluster_support import ENVIRON
from tests.test_cluster import driver, redis_answers, redis_url
from tests.test_sqlite_concurrency import PYTHON, REPO

pytestmark = pytest.mark.production

HOST = "evalhub.test"
HTTPS = {"X-Forwarded-Proto": "https", "Host": HOST}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Process:
    """A child process in its own process group, its output in ``log``."""

    def __init__(self, command: list[str], environment: dict[str, str], log: Path) -> None:
        self.log_path = log
        self.log = log.open("w")
        self.process = subprocess.Popen(
            command, cwd=REPO, env=environment, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        self.log.close()


def wait_for(url: str, *, process: Process, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.process.poll() is None, process.log_path.read_text()[-3000:]
        try:
            httpx.get(url, headers=HTTPS, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    raise AssertionError(f"{url} never answered: {process.log_path.read_text()[-3000:]}")


@pytest.mark.django_db(transaction=True)
def test_gunicorn_and_two_workers_on_postgresql_and_redis_run_a_night_read_back_over_http(tmp_path: Path, django_user_model) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the production profile runs in the PostgreSQL pass")
    url = redis_url()
    if not redis_answers(url):
        pytest.skip(f"no Redis at {url} (set EVALHUB_TEST_REDIS_URL)")
    db = connection.settings_dict
    database = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    calls = tmp_path / "calls.log"
    calls.touch()
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("EVALHUB_", "DJANGO_"))}
    environment.update(
        {
            **ENVIRON,
            "PYTHONPATH": str(REPO),
            "DJANGO_SETTINGS_MODULE": "evalhub.settings",
            "EVALHUB_ENV": "production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "EVALHUB_ALLOWED_HOSTS": f"{HOST},127.0.0.1",
            "EVALHUB_STATIC_ROOT": str(tmp_path / "static"),
            "DATABASE_URL": database,
            "REDIS_URL": url,
        }
    )
    manage = [str(PYTHON), "manage.py"]
    done = subprocess.run(
        [*manage, "check", "--deploy", "--fail-level", "WARNING"], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "System check identified no issues (0 silenced)."), done.stderr[-3000:]
    done = subprocess.run(
        [*manage, "collectstatic", "--no-input", "--verbosity", "0"], cwd=REPO, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]

    # The workers and the web share the test's settings: the slow fake executor, a queue of its own.
    cluster = {
        **environment,
        "DJANGO_SETTINGS_MODULE": "tests.cluster_settings",
        "EVALHUB_TEST_CALLS": str(calls),
        "EVALHUB_TEST_DELAY_S": "0.3",
        "EVALHUB_TEST_Q_NAME": f"evalhub-prod-{uuid.uuid4().hex[:12]}",
    }
    user = django_user_model.objects.create_user("ci", password=secrets.token_urlsafe(16))
    from knox.models import AuthToken

    token = AuthToken.objects.create(user=user)[1]
    run_id = driver(cluster, "prepare")["run"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    processes: list[Process] = []
    try:
        web = Process(
            [str(PYTHON), "-m", "gunicorn", "evalhub.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "2"],
            cluster,
            tmp_path / "gunicorn.log",
        )
        processes.append(web)
        for name in ("first", "second"):
            processes.append(Process([*manage, "worker"], cluster, tmp_path / f"{name}.log"))
        wait_for(f"{base}/health/", process=web)
        deadline = time.monotonic() + 120
        state: dict = {}
        while time.monotonic() < deadline:
            state = driver(cluster, "status", str(run_id))
            if state["status"] != "running" and state["reports"]:
                break
            time.sleep(1)
        assert (state["status"], state["finished"], state["completed"], state["reports"]) == ("finished", 40, 40, 1), state

        with httpx.Client(base_url=base, headers=HTTPS, timeout=10) as http:
            api = http.get(f"/api/runs/{run_id}/", headers={"Authorization": f"Token {token}"})
            assert api.status_code == 200, api.text
            assert (api.json()["status"], api.json()["executions"], api.json()["trigger"]) == ("finished", 40, "nightly")
            assert api.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
            assert http.get(f"/api/runs/{run_id}/").status_code in (401, 403)  # no token, no run
            health = http.get("/health/", headers={"Accept": "application/json"})
            assert health.status_code == 200 and set(health.json().values()) == {"OK"}, health.text
            login = http.get("/admin/login/")
            assert login.status_code == 200
            assert "Secure" in login.headers["set-cookie"]
            stylesheet = re.search(r'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', login.text)
            assert stylesheet, "the admin's stylesheet is not the hashed, collected one"
            css = http.get(stylesheet.group(1))
            assert css.status_code == 200 and "max-age=315360000" in css.headers["cache-control"]
        # Plain HTTP is sent to HTTPS; /health/ answers a load balancer's plain probe.
        plain = httpx.get(f"{base}/api/runs/", headers={"Host": HOST}, timeout=10)
        assert plain.status_code == 301 and plain.headers["location"] == f"https://{HOST}/api/runs/"
        assert httpx.get(f"{base}/health/", headers={"Host": HOST, "Accept": "application/json"}, timeout=10).status_code == 200
    finally:
        for process in reversed(processes):
            process.stop()
    owners = {line.split()[2] for line in calls.read_text().splitlines()}
    assert len(owners) >= 2, "both workers ran executions"
    logs = "".join(p.log_path.read_text() for p in processes)
    assert "Traceback" not in logs, logs[-3000:]
