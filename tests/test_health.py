"""``/health/`` reports each failure it names, each tested by causing it: the database, the cache,
the broker, a nightly older than its schedule allows, executions running past their leases, and a
live runtime missing; 200 with every check passing."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db.utils import ConnectionHandler
from django.urls import reverse
from django.utils import timezone
from health_check.checks import Cache, Database
from health_check.exceptions import HealthCheckException, ServiceUnavailable

from runs.creation import create_run
from runs.health import Broker, Leases, Nightly, Queue, Runtimes
from runs.models import ExecutionStatus, Run
from runs.periodic import NIGHTLY_TASK_NAME, declare_periodic_tasks
from schedules.services import Selection, schedule_for_night

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
CLOSED_REDIS = "redis://127.0.0.1:9/0"  # nothing listens on loopback port 9


def run_check(check: Any) -> None:
    import asyncio
    import inspect

    result = check.run()
    if inspect.iscoroutine(result):
        asyncio.run(result)


def nightly_run(*, started: dt.datetime) -> Run:
    schedule, _ = schedule_for_night(seed=SEED, now=NIGHT, generated_at="2026-08-19T04:00:00.000Z")
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=Selection(), trigger="nightly")
    Run.objects.filter(pk=run.pk).update(created_at=started)
    return run


# --- the library's checks, on evalhub's settings ------------------------------------------------------------


@pytest.mark.django_db
def test_an_unreachable_database_is_reported(tmp_path, monkeypatch) -> None:
    broken = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "missing" / "db.sqlite3")}})
    monkeypatch.setattr("health_check.checks.connections", broken)
    with pytest.raises(ServiceUnavailable, match="unable to open database file"):
        run_check(Database())


def test_an_unreachable_cache_is_reported(settings) -> None:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CLOSED_REDIS}}
    with pytest.raises(HealthCheckException, match="Connection Error"):
        run_check(Cache())


@pytest.mark.django_db(transaction=True)  # the library's async cache calls use a connection of their own
def test_the_shared_cache_works() -> None:
    from django.core.cache import caches

    assert caches["default"].__class__.__name__ in {"DatabaseCache", "RedisCache"}
    run_check(Cache())


def test_an_unreachable_redis_broker_is_reported(monkeypatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", CLOSED_REDIS)
    with pytest.raises(ServiceUnavailable, match=r"the task broker cannot be reached \(ConnectionError\): check REDIS_URL"):
        run_check(Broker())


@pytest.mark.django_db
def test_the_orm_broker_answers() -> None:
    run_check(Broker())


@pytest.mark.django_db
def test_an_orm_broker_whose_table_cannot_be_read_says_to_migrate(monkeypatch) -> None:
    # An unmigrated database was reported as "check REDIS_URL and that Redis runs" with no Redis in use.
    from django.db import OperationalError
    from django_q.brokers.orm import ORM

    def unmigrated(self):
        raise OperationalError("no such table: django_q_ormq")

    monkeypatch.setattr(ORM, "queue_size", unmigrated)
    with pytest.raises(
        ServiceUnavailable,
        match=r"^Unavailable: the task broker's table cannot be read \(OperationalError\): is the database migrated\? run `manage.py migrate`$",
    ):
        run_check(Broker())


# --- the nightly's age against its schedule ------------------------------------------------------------


@pytest.mark.django_db
def test_an_unscheduled_nightly_is_reported() -> None:
    with pytest.raises(ServiceUnavailable, match=r"the nightly is not scheduled: run `manage.py setup_schedules`"):
        run_check(Nightly())


@pytest.mark.django_db
def test_a_nightly_not_yet_due_is_healthy() -> None:
    declare_periodic_tasks(now=timezone.now())
    run_check(Nightly())


@pytest.mark.django_db
def test_a_first_nightly_that_never_ran_is_reported() -> None:
    from django_q.models import Schedule as QSchedule

    declare_periodic_tasks(now=timezone.now())
    QSchedule.objects.filter(name=NIGHTLY_TASK_NAME).update(next_run=timezone.now() - dt.timedelta(hours=3))
    with pytest.raises(ServiceUnavailable, match=r"the first nightly was due at .* UTC and has not run: is a worker running\?"):
        run_check(Nightly())


@pytest.mark.django_db
def test_a_nightly_older_than_its_schedule_is_reported(reference_catalog) -> None:
    declare_periodic_tasks(now=timezone.now())
    nightly_run(started=timezone.now() - dt.timedelta(hours=50))
    with pytest.raises(
        ServiceUnavailable, match=r"the last nightly started 50 h ago \(.* UTC\); one was due at .* UTC: is a worker running\?"
    ):
        run_check(Nightly())


@pytest.mark.django_db
def test_last_nights_nightly_is_healthy(reference_catalog, settings) -> None:
    now = timezone.now().astimezone(dt.UTC)
    # Scheduled three hours ago, started on time: healthy until tomorrow's is due.
    settings.EVALHUB = {**settings.EVALHUB, "NIGHTLY_TIME_UTC": f"{(now - dt.timedelta(hours=3)):%H:%M}"}
    declare_periodic_tasks(now=now)
    nightly_run(started=now - dt.timedelta(hours=3))
    run_check(Nightly())
    # The same run, when tonight's was due two hours ago (past the hour of grace), is stale.
    settings.EVALHUB = {**settings.EVALHUB, "NIGHTLY_TIME_UTC": f"{(now - dt.timedelta(hours=2)):%H:%M}"}
    with pytest.raises(ServiceUnavailable, match="the last nightly started 3 h ago"):
        run_check(Nightly())


# --- runs stuck past their leases, runtimes missing -------------------------------------------------------


@pytest.mark.django_db
def test_an_execution_running_past_its_lease_is_reported(reference_catalog) -> None:
    run = nightly_run(started=timezone.now())
    first, second = run.executions.order_by("position")[:2]
    expired = timezone.now() - dt.timedelta(minutes=10)
    type(first).objects.filter(pk=first.pk).update(status=ExecutionStatus.RUNNING, lease_expires_at=expired)
    # Just expired: within the reaper's grace, not yet a problem.
    type(first).objects.filter(pk=second.pk).update(
        status=ExecutionStatus.RUNNING, lease_expires_at=timezone.now() - dt.timedelta(seconds=30)
    )
    with pytest.raises(
        ServiceUnavailable,
        match=rf"1 execution\(s\) still running past their leases \(the oldest, of run {run.pk}, expired at .* UTC\): the reaper is not running",
    ):
        run_check(Leases())
    type(first).objects.filter(pk=first.pk).update(lease_expires_at=timezone.now() + dt.timedelta(minutes=1))
    run_check(Leases())


def test_a_queue_nobody_takes_is_reported(reference_catalog) -> None:
    """A night queued with no worker started: its executions wait, nothing runs."""
    run = nightly_run(started=timezone.now())
    first, second = run.executions.order_by("position")[:2]
    Execution = type(first)
    Execution.objects.filter(pk=first.pk).update(dispatched_at=timezone.now() - dt.timedelta(minutes=30))
    Execution.objects.filter(pk=second.pk).update(dispatched_at=timezone.now() - dt.timedelta(minutes=1))  # just queued
    with pytest.raises(
        ServiceUnavailable,
        match=rf"1 queued execution\(s\) waiting and none running \(the oldest, of run {run.pk}, queued at .* UTC\): no worker is taking tasks",
    ):
        run_check(Queue())
    # A worker busy with another execution: the queue behind it is normal.
    Execution.objects.filter(pk=second.pk).update(status=ExecutionStatus.RUNNING, lease_expires_at=timezone.now() + dt.timedelta(minutes=1))
    run_check(Queue())


def test_a_missing_runtime_is_reported(settings, tmp_path) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "RUNTIME_BINARIES": {"codex": str(tmp_path / "no-codex")}}
    with pytest.raises(ServiceUnavailable, match=r"live runtime missing: codex-cli: .* is not installed or not executable"):
        run_check(Runtimes())


# --- the page --------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_health_page_is_200_when_all_is_well_and_503_naming_each_failure(client, settings, tmp_path, django_user_model) -> None:
    declare_periodic_tasks(now=timezone.now())
    response = client.get(reverse("health"), HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "Database(alias='default')": "OK",
        "Cache(alias='default')": "OK",
        "Broker()": "OK",
        "Nightly()": "OK",
        "Leases()": "OK",
        "Queue()": "OK",
        "Runtimes()": "OK",
    }
    settings.EVALHUB = {**settings.EVALHUB, "RUNTIME_BINARIES": {"opencode": str(tmp_path / "no-opencode")}}
    # No sign-in needed (load balancers): the status and which check fails, never why.
    response = client.get(reverse("health"), HTTP_ACCEPT="application/json")
    assert response.status_code == 503
    body = response.json()
    assert body["Runtimes()"] == "Unavailable: failing (sign in to see why)"
    assert {key for key, value in body.items() if value != "OK"} == {"Runtimes()"}
    for accept in ("text/plain", "text/html", "application/atom+xml"):
        text = client.get(reverse("health"), HTTP_ACCEPT=accept).content.decode()
        assert "sign in to see why" in text and "no-opencode" not in text and "live runtime missing" not in text, accept
    # Signed in: why, in JSON and in plain text for humans.
    client.force_login(django_user_model.objects.create_user("reader", password="pw-reader-123"))
    response = client.get(reverse("health"), HTTP_ACCEPT="application/json")
    assert response.status_code == 503
    assert response.json()["Runtimes()"].startswith("Unavailable: live runtime missing: opencode")
    text = client.get(reverse("health"), HTTP_ACCEPT="text/plain").content.decode()
    assert "Runtimes(): Unavailable: live runtime missing" in text


@pytest.mark.django_db(transaction=True)
def test_a_failing_nightly_shows_its_run_and_times_only_to_a_signed_in_user(client, reference_catalog, django_user_model) -> None:
    declare_periodic_tasks(now=timezone.now())
    started = timezone.now() - dt.timedelta(days=3)
    nightly_run(started=started)
    anonymous = client.get(reverse("health"), HTTP_ACCEPT="application/json")
    assert anonymous.status_code == 503
    assert anonymous.json()["Nightly()"] == "Unavailable: failing (sign in to see why)"
    client.force_login(django_user_model.objects.create_user("reader", password="pw-reader-123"))
    signed_in = client.get(reverse("health"), HTTP_ACCEPT="application/json").json()["Nightly()"]
    assert (
        signed_in.startswith("Unavailable: the last nightly started 72 h ago (")
        and f"{started.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC" in signed_in
    )


@pytest.mark.django_db(transaction=True)
def test_the_checks_threads_close_their_database_connections(client, monkeypatch) -> None:
    """Each request's synchronous checks run in threads of their own: a thread's connection left
    open outlived the request (under runserver on PostgreSQL, every request's threads held theirs
    until the server had none left)."""
    import threading

    from django.db import connections

    used: list[str] = []
    closed: list[str] = []
    original_run, original_close = Database.run, type(connections["default"]).close

    def run(self) -> None:
        original_run(self)
        used.append(threading.current_thread().name)

    def close(self) -> None:
        closed.append(threading.current_thread().name)
        original_close(self)

    monkeypatch.setattr(Database, "run", run)
    # The class's own close: an in-memory test database ignores it, a file or a server's closes.
    monkeypatch.setattr(type(connections["default"]), "close", close)
    declare_periodic_tasks(now=timezone.now())
    for _ in range(3):
        assert client.get(reverse("health"), HTTP_ACCEPT="application/json").status_code == 200
    assert len(used) == 3 and all(name.startswith("evalhub-health") for name in used)
    assert set(used) <= set(closed), f"threads that left their connection open: {set(used) - set(closed)}"
