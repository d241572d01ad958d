"""A worker compiles its executions' statements when it starts (``runs.services.
prepare_worker_statements``, called by ``runs.worker.on_worker_start``): a night it then serves —
a skipped execution, completed ones, the run's report — compiles nothing more."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from evalhub.statements import Read, Write
from runs import leases, reporting, services, worker
from runs.models import Execution, Report, Run, RunStatus
from runs.services import prepare_worker_statements
from runs.tasks import run_execution

ENVIRON = {"OPENAI_API_KEY": "x-ws-0a9Qz", "OPENROUTER_API_KEY": "x-ws-1b8Wy", "ANTHROPIC_API_KEY": "x-ws-2c7Ex"}


def worker_statements() -> list[Write]:
    """Every compiled statement of the modules a worker's task runs through."""
    return [value for module in (services, reporting) for value in vars(module).values() if isinstance(value, Write)]


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement as a new process has it (nothing compiled), and the names of those
    compiled from now on, in order."""
    for statement in worker_statements():
        monkeypatch.setattr(statement, "_compiled", {})
        if isinstance(statement, Read):
            monkeypatch.setattr(statement, "_readers", {})
    compiled: list[str] = []
    compile_shape, build_reader = Write._compile, Read._reader_for

    def recording_compile(self: Write, variant: Any, nulls: frozenset[str]) -> Any:
        compiled.append(f"{self.name} {variant!r} {sorted(nulls)}")
        return compile_shape(self, variant, nulls)

    def recording_reader(self: Read, database: Any, variant: Any, values: Any) -> Any:
        compiled.append(f"{self.name} {variant!r}: reader")
        return build_reader(self, database, variant, values)

    monkeypatch.setattr(Write, "_compile", recording_compile)
    monkeypatch.setattr(Read, "_reader_for", recording_reader)
    # The reaper's lease scan is a query of the ORM's, not a compiled statement; keep it out of the way.
    monkeypatch.setattr(services, "_last_reap_check", None)
    return compiled


@pytest.mark.django_db
def test_a_night_served_after_the_statements_are_prepared_compiles_nothing(
    dispatched_night: Run, fresh_process: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare_worker_statements()
    prepared = list(fresh_process)
    assert prepared, "preparing compiled nothing"
    fresh_process.clear()
    first, *rest = dispatched_night.executions.order_by("position").values_list("pk", flat=True)
    # Without its credentials the first execution is skipped; with them the others complete.
    assert run_execution(first).startswith(f"execution {first}: settled")
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    for pk in rest:
        assert run_execution(pk).startswith(f"execution {pk}: settled")
    assert fresh_process == []
    dispatched_night.refresh_from_db()
    assert dispatched_night.status == RunStatus.FINISHED
    assert Report.objects.filter(run=dispatched_night).exists()
    classifications = list(Execution.objects.filter(run=dispatched_night).order_by("position").values_list("classification", flat=True))
    assert classifications[0] == "skipped" and set(classifications[1:]) == {"completed"}


@pytest.mark.django_db
def test_without_preparing_the_same_night_compiles_them_in_its_first_executions(
    dispatched_night: Run, fresh_process: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above would pass with nothing compiled at all: this one shows what the night compiles by itself."""
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    for pk in dispatched_night.executions.order_by("position").values_list("pk", flat=True):
        run_execution(pk)
    assert len(fresh_process) >= 10
    assert any(name.startswith("insert scorecards") for name in fresh_process)


@pytest.fixture(autouse=True)
def _collections_as_before() -> Iterator[None]:
    """A worker's start freezes the objects the process holds: the test process's are thawed again."""
    yield
    gc.unfreeze()


@pytest.mark.django_db
def test_a_worker_prepares_its_statements_when_it_starts(fresh_process: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "install_worker_signal_handlers", lambda: None)
    worker.on_worker_start(proc_name="Process-1")
    assert any(name.startswith("claim an execution") for name in fresh_process)
    assert any(name.startswith("read an execution to run") and name.endswith("reader") for name in fresh_process)


@pytest.mark.django_db
def test_a_started_worker_leaves_what_it_holds_out_of_the_collectors_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "install_worker_signal_handlers", lambda: None)
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
def test_a_worker_whose_statements_fail_to_prepare_still_starts_and_reaps(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reaped: list[bool] = []

    def broken() -> None:
        raise RuntimeError("claim an execution: a slot's field does not prepare its value as the ORM does")

    monkeypatch.setattr(leases, "install_worker_signal_handlers", lambda: None)
    monkeypatch.setattr(services, "prepare_worker_statements", broken)
    monkeypatch.setattr(services, "reap", lambda: reaped.append(True) or services.ReapSummary())
    with caplog.at_level(logging.WARNING, logger="runs.worker"):
        worker.on_worker_start(proc_name="Process-1")
    assert reaped == [True]
    assert "preparing its statements failed: RuntimeError: claim an execution" in caplog.text


@pytest.mark.django_db
def test_a_shape_names_only_slots_the_statement_has() -> None:
    with pytest.raises(TypeError, match=r"settle an execution: no slots \['failure_retryabel'\]"):
        services._SETTLE.prepare(False, ("failure_retryabel",))
