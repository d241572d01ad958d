"""What a django-q2 worker process does when it starts (``runs.worker.on_worker_start``): it runs
the reaper once, even when the reaper fails it still starts, and what it then holds is left out
of the garbage collector's passes."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest

from runs import leases, recovery, worker


@pytest.fixture(autouse=True)
def _collections_as_before(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A worker's start freezes the objects the process holds: the test process's are thawed again."""
    monkeypatch.setattr(leases, "install_worker_signal_handlers", lambda: None)
    yield
    gc.unfreeze()


@pytest.mark.django_db
def test_a_started_worker_leaves_what_it_holds_out_of_the_collectors_passes() -> None:
    gc.unfreeze()
    held = ["made before the worker started"]
    assert any(found is held for found in gc.get_objects())
    worker.on_worker_start(proc_name="Process-1")
    assert gc.get_freeze_count() > 10_000
    assert not any(found is held for found in gc.get_objects())
    # What the process makes afterwards is collected as before.
    made = ["made by a task"]
    assert any(found is made for found in gc.get_objects())


@pytest.mark.django_db
def test_a_started_worker_reaps_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reaped: list[bool] = []
    monkeypatch.setattr(recovery, "reap", lambda: reaped.append(True) or recovery.ReapSummary())
    worker.on_worker_start(proc_name="Process-1")
    assert reaped == [True]


@pytest.mark.django_db
def test_a_worker_whose_reaper_fails_still_starts(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> recovery.ReapSummary:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(recovery, "reap", broken)
    with caplog.at_level(logging.WARNING, logger="runs.worker"):
        worker.on_worker_start(proc_name="Process-1")
    assert "worker Process-1 started; the reaper failed: RuntimeError: the database went away" in caplog.text
    assert gc.get_freeze_count() > 0
