"""Fixtures shared by the whole suite."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_replay_store():
    from runs.executors.replay import reset_replay

    reset_replay()
    yield
    reset_replay()


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
