"""What a night's bookkeeping costs in statements, pinned: a worker's task for a skipped and for a
completed execution, a whole night executed in-process (skipped, completed), and the reaper's
lease scan after a task, throttled per process (``REAP_CHECK_SECONDS``).

The counts are exact, so a statement added anywhere on these paths fails a test; lower them
when a change saves one (docs/benchmarks.md, "A night with the public ORM"). In a test the
transactions are savepoints (``SAVEPOINT`` / ``RELEASE SAVEPOINT`` are counted like the
``BEGIN`` / ``COMMIT`` they stand for), so the counts are the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from typing import Any

import pytest

from runs import dispatch, recovery
from runs.creation import create_run
from runs.execution import execute_execution
from runs.executors.replay import REPLAY_STORE
from runs.models import Attempt, Execution, Run, RunStatus
from runs.nightly import start_nightly
from runs.tasks import run_execution
from schedules.services import preview_schedule, schedule_for_night
from tests.builders import completed_observation

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-bk-0a9Qz", "OPENROUTER_API_KEY": "x-bk-1b8Wy", "ANTHROPIC_API_KEY": "x-bk-2c7Ex"}


@pytest.fixture
def night(dispatched_night: Run) -> Run:
    """Tonight's 40 executions dispatched (``tests.conftest.dispatched_night``)."""
    return dispatched_night


def pending_pks(run: Run) -> list[int]:
    return list(run.executions.order_by("position").values_list("pk", flat=True))


@pytest.fixture
def recent_reap_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process looked for expired leases a moment ago: a task makes no lease query."""
    monkeypatch.setattr(recovery, "_last_reap_check", time.monotonic())


@pytest.mark.django_db
def test_a_skipped_executions_task_costs_four_statements(night, recent_reap_check, django_assert_num_queries) -> None:
    """Read it (with its entry, run and schedule), read its case, claim and settle it in one
    conditional update, look whether the run has settled."""
    first, *_ = pending_pks(night)
    with django_assert_num_queries(4):
        line = run_execution(first)
    assert line.startswith(f"execution {first}: settled")
    row = Execution.objects.get(pk=first)
    assert (row.status, row.classification, row.failure_code) == ("finished", "skipped", "qualification_environment_missing")


@pytest.mark.django_db
def test_a_completed_executions_task_costs_thirteen_statements(
    night, recent_reap_check, monkeypatch: pytest.MonkeyPatch, django_assert_num_queries
) -> None:
    """Read it, read its case; one transaction claims it, reserves its cost and opens its attempt
    (savepoint, 3 statements, release); one finishes the attempt, counts its cost and settles it
    (savepoint, 3, release); look whether the run has settled."""
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    first, *_ = pending_pks(night)
    with django_assert_num_queries(13):
        line = run_execution(first)
    assert line.startswith(f"execution {first}: settled")
    attempt = Attempt.objects.get(execution_id=first)
    assert (attempt.number, attempt.outcome, attempt.counted_usd) == (1, "observation", Decimal("0.01"))
    run = Run.objects.get(pk=night.pk)
    assert (run.spent_usd, run.reserved_usd) == (Decimal("0.01"), Decimal(0))


@pytest.mark.django_db
def test_the_reapers_lease_scan_runs_at_most_every_reap_check_seconds(night, settings, django_assert_num_queries) -> None:
    """The first task of a process looks for expired leases; the next, within
    ``REAP_CHECK_SECONDS``, does not (one statement fewer); with 0 every task looks."""
    first, second, third, *_ = pending_pks(night)
    recovery._last_reap_check = None
    with django_assert_num_queries(5):
        run_execution(first)
    with django_assert_num_queries(4):
        run_execution(second)
    settings.EVALHUB = {**settings.EVALHUB, "REAP_CHECK_SECONDS": 0}
    with django_assert_num_queries(5):
        run_execution(third)


def _fill_replay(now: dt.datetime) -> None:
    for entry in preview_schedule(seed=SEED, now=now)["entries"]:
        REPLAY_STORE[entry["executionId"]] = completed_observation(entry, cost_usd=0.01)


@pytest.mark.django_db
def test_a_skipped_night_in_process_costs_a_fixed_number_of_statements(
    reference_catalog, replay_executors, django_assert_num_queries
) -> None:
    """Coverage, the schedule and its 40 entries, the run and its executions, 40 skipped
    executions settled by one update, the run finished, scored and reported: 1.1 statements per
    execution, the whole night included (8.3 before the executions were read once and settled
    together, 1.3 before the catalog was read once for the coverage, the build and the entries,
    the report read the executions once, the run was finished by one update and summarised by
    one query; in a test the run's transactions are savepoints, so a few fewer than the
    benchmark's count). The entries, the executions and the scorecards are one statement each on
    every database (a compiled insert executed for all the rows; SQLite's limit on a statement's
    parameters split ``bulk_create``'s insert of the executions in two; with no notification
    channel, the report's alerts are not read for delivery)."""
    with django_assert_num_queries(41):
        outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=True)
    assert outcome.summary.by_classification == {"skipped": 40}
    assert Run.objects.get(pk=outcome.run.pk).status == RunStatus.FINISHED


@pytest.mark.django_db
def test_a_completed_night_in_process_costs_a_fixed_number_of_statements(
    reference_catalog, replay_executors, django_assert_num_queries
) -> None:
    """The same night with every execution completed by the replay executor: per execution, its
    two transactions (claim, reservation and attempt; the attempt finished and the execution
    settled), 10 statements; the night around them as above: 11.0 per execution (14.3, then 11.3
    and 11.1 before)."""
    _fill_replay(NOW)
    with django_assert_num_queries(440):
        outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ=ENVIRON, execute=True)
    assert outcome.summary.by_classification == {"completed": 40}
    assert Attempt.objects.filter(execution__run=outcome.run, outcome="observation").count() == 40


@pytest.mark.django_db
def test_executing_a_single_execution_still_reads_what_it_needs(night, recent_reap_check, django_assert_num_queries) -> None:
    """``execute_execution`` outside a task (no finalisation): read, case, claim-and-settle."""
    first, *_ = pending_pks(night)
    with django_assert_num_queries(3):
        assert execute_execution(first, environ={}, finalise=False) == "settled"


@pytest.mark.django_db
def test_skips_settled_together_leave_an_execution_another_worker_took(
    reference_catalog, replay_executors, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of the skipped executions is claimed by another worker between the read and the
    update that settles them together: it is left to that worker, every other one is settled."""
    from django.utils import timezone

    from runs.models import ExecutionStatus

    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12))
    taken = run.executions.order_by("position")[1]
    original = dispatch.prefetched_unavailable

    def meanwhile(run, execution, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if execution.pk == taken.pk:
            Execution.objects.filter(pk=taken.pk).update(
                status=ExecutionStatus.RUNNING, owner="other-host:7", lease_expires_at=timezone.now() + dt.timedelta(minutes=5)
            )
        return original(run, execution, *args, **kwargs)

    monkeypatch.setattr(dispatch, "prefetched_unavailable", meanwhile)
    summary = dispatch.execute_run(run, environ={})
    rows = dict(run.executions.values_list("pk", "status"))
    assert rows.pop(taken.pk) == ExecutionStatus.RUNNING
    assert set(rows.values()) == {ExecutionStatus.FINISHED}
    assert Execution.objects.get(pk=taken.pk).owner == "other-host:7"
    assert summary.by_classification == {"skipped": 39}
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
