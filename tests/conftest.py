"""Fixtures shared by the whole suite."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

#: pytest-django's fixtures that open the test database; a test using none of them cannot query it.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a ``database_free`` test that can reach the database through pytest-django: CI's
    PostgreSQL pass leaves those tests out (``.ci/run``), so the mark must not hide one that
    depends on the backend."""
    wrong = [
        item.nodeid
        for item in items
        if item.get_closest_marker("database_free") is not None
        and (item.get_closest_marker("django_db") is not None or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))
    ]
    if wrong:
        raise pytest.UsageError(
            "marked database_free but uses the database (drop the mark from its module, or the fixture): " + ", ".join(wrong[:5])
        )


@pytest.fixture(autouse=True)
def _isolated_replay_store():
    from runs.executors.replay import reset_replay

    reset_replay()
    yield
    reset_replay()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses every connection: bound, never listening, and held for the
    whole test. A probe that closes its socket before the test connects frees the port for any
    server a parallel test starts (a scripted model once took one and answered "unknown model")."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


@pytest.fixture
def reference_catalog(db):
    """The reference catalog loaded into the test database."""
    from tests.builders import load_reference_catalog

    load_reference_catalog()


@pytest.fixture
def replay_executors(settings):
    """Every adapter runs through the replay executor (fill ``REPLAY_STORE`` per execution id)."""
    settings.EVALHUB = {
        **settings.EVALHUB,
        "EXECUTORS": {
            "codex_app_server": "runs.executors.replay.ReplayExecutor",
            "opencode_server": "runs.executors.replay.ReplayExecutor",
            "acpx_runtime": "runs.executors.replay.ReplayExecutor",
        },
    }
    from runs.executors import replay

    return replay


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_user("staff", password="pw-staff-123", is_staff=True, is_superuser=True)
    client.force_login(user)
    return client


@pytest.fixture
def reader_client(client, django_user_model):
    user = django_user_model.objects.create_user("reader", password="pw-reader-123")
    client.force_login(user)
    return client


# --- the browser suite (tests/test_browser_*.py, marked `browser`) -----------------------------


@pytest.fixture(scope="module")
def browser():
    """One headless Debian Chromium per browser test module, driven by Playwright. Not per session:
    Playwright's sync API keeps an event loop running on the thread until it stops, and every later
    test in the same worker that calls ``asyncio.run`` (the MCP server, the health checks) would fail."""
    import os
    from pathlib import Path

    from playwright.sync_api import sync_playwright

    from tests.browser_support import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install -y chromium); .ci/run does")
    # Playwright's sync API keeps an event loop on this thread; Django's ORM refuses to run in a
    # thread with a running loop unless told the caller is synchronous, as these tests are (the
    # pages themselves are served by live_server's own thread).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def nights(transactional_db, replay_executors, settings):
    """The realistic nights of :mod:`tests.browser_night` (catalog, periodic tasks, runs)."""
    from tests.browser_night import build_nights

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_nights()


@pytest.fixture
def signed_in(browser, live_server, nights, django_user_model):
    """A fresh browser page signed in as a staff user through the sign-in form."""
    from tests.browser_support import sign_in

    django_user_model.objects.create_user("stakeholder", password="pw-stakeholder-123", is_staff=True, is_superuser=True)
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    sign_in(page, live_server.url, "stakeholder", "pw-stakeholder-123")
    yield page
    context.close()


@pytest.fixture
def dispatched_night(reference_catalog, replay_executors):
    """The reference seed's night of 2026-08-19 (40 executions) created and dispatched, each
    with a completed observation ($0.01) to replay; the tasks themselves are run by the tests."""
    import datetime as dt
    from decimal import Decimal

    from runs.creation import create_run
    from runs.dispatch import dispatch_run
    from runs.executors.replay import REPLAY_STORE
    from schedules.services import schedule_for_night
    from tests.builders import completed_observation

    schedule, _ = schedule_for_night(seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC))
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    dispatch_run(run)
    for execution in run.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document(), cost_usd=0.01)
    return run
