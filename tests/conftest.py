"""Fixtures shared by the whole suite."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

#: pytest-django's fixtures that open the test database; a test using none of them cannot query it.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"})


#: pytest-django's fixtures that open the test database (or the shared nights' access to it).
_OPENS_DATABASE = DATABASE_FIXTURES | {"_shared_nights_access"}


def _uses_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(_OPENS_DATABASE & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a ``database_free`` or ``runtime`` test that can reach the database through
    pytest-django: CI's PostgreSQL pass leaves those tests out (``.ci/run``), so neither mark may
    hide one that depends on the backend (a test that drives a runtime and records what it did, as
    tests/harness/test_live_nightly.py does, runs on both databases). Then put each browser
    module's ``shared_nights`` tests first (after pytest-django's own ordering: ``trylast``)."""
    for mark in ("database_free", "runtime"):
        wrong = [item.nodeid for item in items if item.get_closest_marker(mark) is not None and _uses_database(item)]
        if wrong:
            raise pytest.UsageError(
                f"marked {mark} but uses the database (drop the mark from its module, or the fixture): " + ", ".join(wrong[:5])
            )
    _shared_nights_first(items)


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
    """The reference catalog loaded into the test database (``load_reference``'s rows; after the
    first load in a process, inserted again without re-validating them: tests/catalog_rows.py)."""
    from tests.catalog_rows import load_catalog

    load_catalog()


#: Every adapter's executor the replay executor (``replay_executors``).
REPLAY_EXECUTORS = {
    "codex_app_server": "runs.executors.replay.ReplayExecutor",
    "opencode_server": "runs.executors.replay.ReplayExecutor",
    "acpx_runtime": "runs.executors.replay.ReplayExecutor",
}


@pytest.fixture
def replay_executors(settings):
    """Every adapter runs through the replay executor (fill ``REPLAY_STORE`` per execution id)."""
    settings.EVALHUB = {**settings.EVALHUB, "EXECUTORS": dict(REPLAY_EXECUTORS)}
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


#: The staff user the browser tests sign in as (``signed_in``).
STAKEHOLDER = {"username": "stakeholder", "password": "pw-stakeholder-123", "is_staff": True, "is_superuser": True}


def _reads_shared_nights(item: pytest.Item) -> bool:
    return item.get_closest_marker("shared_nights") is not None


def _shared_nights_first(items: list[pytest.Item]) -> None:
    """Within each browser module, the tests that read its shared nights (``shared_nights``) first:
    a test that writes flushes the database when it ends (it is transactional), and the shared
    nights would have to be built again after it. Only the places those tests held are reordered,
    so pytest-django's order (transactional tests after the others) stays as it was."""
    by_module: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        if "live_server" in getattr(item, "fixturenames", ()) and item.get_closest_marker("browser") is not None:
            by_module.setdefault(item.nodeid.split("::")[0], []).append(index)
    for places in by_module.values():
        module_items = sorted((items[place] for place in places), key=lambda item: not _reads_shared_nights(item))
        for place, item in zip(places, module_items, strict=True):
            items[place] = item


@pytest.fixture(autouse=True)
def _live_server_helper(request: pytest.FixtureRequest) -> Iterator[None]:
    """pytest-django's helper of the same name (the live server's settings for the test, and the
    transactional database a live server needs), except for a test marked ``shared_nights``: that
    one reads its module's nights, built once (``_module_nights``), with the database open and
    nothing flushed when it ends."""
    if "live_server" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("_shared_nights_access" if _reads_shared_nights(request.node) else "transactional_db")
    live_server = request.getfixturevalue("live_server")
    live_server._live_server_modified_settings.enable()
    yield
    live_server._live_server_modified_settings.disable()


@pytest.fixture
def _shared_nights_access(django_db_blocker) -> Iterator[None]:
    """The database open to a ``shared_nights`` test and to the live server's thread, without a
    transaction around the test and without a flush after it (the nights stay for the next test)."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture(scope="module")
def _module_nights(django_db_setup, django_db_blocker) -> Iterator[dict[str, Any]]:
    """The nights of :mod:`tests.browser_night` and the stakeholder, built once for the ``shared_nights``
    tests of a module (per xdist worker that runs some of them) and committed; the database is
    flushed when the module is done, as after any transactional test."""
    from django.core.management import call_command

    world: dict[str, Any] = {}
    yield world
    with django_db_blocker.unblock():
        call_command("flush", verbosity=0, interactive=False)


def _shared_nights(world: dict[str, Any]) -> Any:
    """The module's nights, built on first use, and again if a test that writes flushed them."""
    from runs.models import Run
    from tests.browser_night import build_nights

    if "nights" not in world or not Run.objects.filter(pk=world["nights"].tonight.pk).exists():
        from django.contrib.auth import get_user_model

        world["nights"] = build_nights()
        get_user_model().objects.create_user(**STAKEHOLDER)
    return world["nights"]


@pytest.fixture
def nights(request: pytest.FixtureRequest):
    """The realistic nights of :mod:`tests.browser_night` (catalog, periodic tasks, runs): built for
    the test in a transactional database, or, for a test marked ``shared_nights`` (one that changes
    nothing in the database), its module's nights, built once."""
    from tests.browser_night import build_nights

    request.getfixturevalue("replay_executors")
    if _reads_shared_nights(request.node):
        request.getfixturevalue("_shared_nights_access")
        return _shared_nights(request.getfixturevalue("_module_nights"))
    request.getfixturevalue("transactional_db")
    world = request.getfixturevalue("_module_nights")
    if world:
        # The module's shared nights (its shared_nights tests ran first) end here: this test builds its own.
        from django.core.management import call_command

        call_command("flush", verbosity=0, interactive=False)
        world.clear()
    return build_nights()


@pytest.fixture
def signed_in(request, browser, live_server, nights):
    """A fresh browser page signed in as a staff user through the sign-in form. (A
    ``shared_nights`` test's user is in its module's nights, and it must not ask for
    ``django_user_model``: through ``db`` and ``live_server`` that makes pytest-django flush the
    database after the test.)"""
    from tests.browser_support import sign_in

    if not _reads_shared_nights(request.node):
        request.getfixturevalue("django_user_model").objects.create_user(**STAKEHOLDER)
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    sign_in(page, live_server.url, STAKEHOLDER["username"], STAKEHOLDER["password"])
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
