"""A nightly delivered twice, late, or caught up does each night once and spends once (docs/failure-modes.md B1, docs/failure-modes.md B12).

Simultaneous deliveries and claims (threads on file SQLite and on PostgreSQL) are in
``test_sqlite_concurrency.py``; this file covers repeated deliveries one after another and the
django-q2 task path. Secrets are synthetic and assembled by concatenation.
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from runs.creation import create_run
from runs.executors import InfrastructureError
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Attempt, Execution, Run, RunStatus
from runs.nightly import NightlyOutcome, start_nightly
from runs.tasks import NightlyFailed, run_nightly
from schedules.models import Schedule
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
OPENAI_VALUE = "x-very-secret-value-123"
ENVIRON = {"OPENAI_API_KEY": OPENAI_VALUE, "OPENROUTER_API_KEY": "or-value-456789", "ANTHROPIC_API_KEY": "an-value-987654"}
B12_OPENAI = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
B12_JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiJ4In0" + "." + "c2lnbmF0dXJl"
B12_AWS = "AKIA" + "IOSFODNN7EXAMPLE"
SECRETS = (B12_OPENAI, B12_JWT, B12_AWS, *ENVIRON.values())


@pytest.fixture
def catalog(reference_catalog: None, replay_executors: Any) -> None:
    """The reference catalog, every adapter on the replay executor."""


def script_night(now: dt.datetime, outcome: Any = None) -> Schedule:
    """Save ``now``'s schedule and script every entry: a $0.01 completion unless ``outcome`` is given."""
    schedule = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=now, environ={}, execute=False).schedule
    for entry in schedule.entries.all():
        REPLAY_STORE[entry.execution_id] = outcome or completed_observation(entry.to_document(), cost_usd=0.01)
    return schedule


def deliver(now: dt.datetime = NIGHT) -> NightlyOutcome:
    return start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=now, environ=ENVIRON, execute=True)


def test_second_delivery_spends_nothing(catalog: None) -> None:
    script_night(NIGHT)
    first = deliver()
    second = deliver()
    assert (first.run_created, first.executed) == (True, True)
    assert (second.schedule_created, second.run_created, second.executed) == (False, False, False)
    assert second.run.pk == first.run.pk
    assert Schedule.objects.count() == 1
    assert Run.objects.filter(trigger="nightly").count() == 1
    assert len(REPLAY_CALLS) == 40
    assert (Execution.objects.count(), Attempt.objects.count()) == (40, 40)
    run = Run.objects.get()
    assert run.spent_usd == Decimal("0.40")
    assert second.summary.line() == first.summary.line()


def test_building_the_same_night_twice_returns_the_same_schedule(catalog: None) -> None:
    first = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NIGHT, environ={}, execute=False)
    later_that_night = NIGHT + dt.timedelta(hours=3)
    second = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=later_that_night, environ={}, execute=False)
    assert (first.schedule_created, second.schedule_created) == (True, False)
    assert second.schedule.pk == first.schedule.pk
    assert second.schedule.generated_at == "2026-08-19T04:00:00.000Z"
    assert (first.run, second.run) == (None, None)


def test_distinct_nights_each_run_once(catalog: None) -> None:
    next_night = NIGHT + dt.timedelta(days=1)
    script_night(NIGHT)
    script_night(next_night)
    assert deliver(NIGHT).executed
    assert deliver(next_night).executed
    assert not deliver(NIGHT).executed
    assert list(Schedule.objects.order_by("night").values_list("night", "rotation_day")) == [
        (dt.date(2026, 8, 19), 0),
        (dt.date(2026, 8, 20), 1),
    ]
    assert Run.objects.filter(trigger="nightly").count() == 2
    assert len(REPLAY_CALLS) == 80
    assert len({request.entry["executionId"] for request in REPLAY_CALLS}) == 80


def test_catch_up_runs_each_missed_night_once(catalog: None) -> None:
    """Deliver nights N-3, N-2, N-1, then N-1 again (django-q's catch-up replay)."""
    nights = [NIGHT - dt.timedelta(days=days) for days in (3, 2, 1)]
    for night in nights:
        script_night(night)
    executed = [deliver(night).executed for night in [*nights, nights[-1]]]
    assert executed == [True, True, True, False]
    assert Schedule.objects.count() == 3
    assert Run.objects.filter(trigger="nightly").count() == 3
    assert len(REPLAY_CALLS) == 120
    assert sum(run.spent_usd for run in Run.objects.all()) == Decimal("1.20")


def test_a_nightly_left_pending_by_a_dead_delivery_is_executed_by_the_next(catalog: None) -> None:
    schedule = script_night(NIGHT)
    orphan, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    outcome = deliver()
    assert (outcome.run.pk, outcome.run_created, outcome.executed) == (orphan.pk, False, True)
    assert len(REPLAY_CALLS) == 40
    assert not deliver().executed
    assert len(REPLAY_CALLS) == 40


def test_a_nightly_another_worker_is_running_is_left_alone(catalog: None) -> None:
    schedule = script_night(NIGHT)
    running, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    Run.objects.filter(pk=running.pk).update(status=RunStatus.RUNNING)
    outcome = deliver()
    assert not outcome.executed
    assert REPLAY_CALLS == []
    assert Execution.objects.filter(status="pending").count() == 40


def test_a_manual_selection_is_a_separate_run(catalog: None) -> None:
    from schedules.services import Selection

    script_night(NIGHT)
    deliver()
    manual = start_nightly(
        seed=SEED,
        cost_ceiling_usd=Decimal(12),
        now=NIGHT,
        environ=ENVIRON,
        execute=True,
        selection=Selection(candidate_ids=("codex-luna",), limit=2),
    )
    assert (manual.run.trigger, manual.executed, manual.summary.executions) == ("manual", True, 2)
    assert Schedule.objects.count() == 1
    assert len(REPLAY_CALLS) == 42


# --- the django-q2 task -------------------------------------------------------------------------------


@pytest.fixture
def process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)


def task_rows_text() -> str:
    from django_q.models import Task

    return json.dumps(list(Task.objects.values()), default=str)


def run_queued_executions() -> list[str]:
    """What the workers do: run every queued ``run_execution`` task (synchronously, storing task rows)."""
    from django_q.models import OrmQ, Task
    from django_q.tasks import async_task

    queued = [row.task for row in OrmQ.objects.order_by("id")]
    OrmQ.objects.all().delete()
    ids = [async_task(task["func"], *task["args"], sync=True) for task in queued]
    return [Task.objects.get(id=task_id).result for task_id in ids]


def test_a_second_task_delivery_says_it_was_already_delivered(
    catalog: None, process_environment: None, django_capture_on_commit_callbacks: Any
) -> None:
    from django_q.models import Task
    from django_q.tasks import async_task

    leaky = InfrastructureError("provider_http_401", False, f"Incorrect API key provided: {B12_OPENAI} {OPENAI_VALUE}")
    schedule = script_night(timezone.now(), outcome=leaky)
    with django_capture_on_commit_callbacks(execute=True):
        first_id = async_task("runs.tasks.run_nightly", sync=True)
        second_id = async_task("runs.tasks.run_nightly", sync=True)
    first, second = Task.objects.get(id=first_id), Task.objects.get(id=second_id)
    run = Run.objects.get()
    assert first.success and second.success
    assert first.result == f"run {run.pk}: 40 executions queued for the workers (night {schedule.night})"
    assert second.result == f"nightly for {schedule.night} already delivered as run {run.pk}; nothing done"
    results = run_queued_executions()
    assert len(results) == 40 and all(" settled on " in result for result in results)
    assert len(REPLAY_CALLS) == 40
    # Task rows carry no configuration and no secret: the nightly takes no arguments, an
    # execution's task only its row id.
    for task in (first, second):
        assert task.args in (None, ())
        assert task.kwargs in (None, {})
    assert {len(task.args) for task in Task.objects.filter(func="runs.tasks.run_execution")} == {1}
    text = task_rows_text()
    for secret in SECRETS:
        assert secret not in text
    assert "[REDACTED]" in json.dumps(list(Execution.objects.values_list("failure_message", flat=True)))


def test_calling_the_task_function_twice_spends_once(
    catalog: None, process_environment: None, django_capture_on_commit_callbacks: Any
) -> None:
    script_night(timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        first = run_nightly()
        second = run_nightly()
    run = Run.objects.get()
    assert first.startswith(f"run {run.pk}: 40 executions queued for the workers")
    assert second.endswith(f"already delivered as run {run.pk}; nothing done")
    run_queued_executions()
    run.refresh_from_db()
    assert run_summary_line(run).startswith(f"run {run.pk}: 40 executions — 40 completed")
    assert run.spent_usd == Decimal("0.40")
    assert len(REPLAY_CALLS) == 40


def run_summary_line(run: Run) -> str:
    from runs.creation import summarize

    return summarize(run, with_report=True).line()


def test_a_failed_task_stores_only_a_redacted_message(catalog: None, process_environment: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError(f"provider said Bearer {B12_JWT} for {B12_AWS} with {OPENAI_VALUE}")

    monkeypatch.setattr("runs.tasks.start_nightly", broken)
    with pytest.raises(NightlyFailed) as caught:
        run_nightly()
    assert str(caught.value) == "RuntimeError: provider said [REDACTED] for [REDACTED] with [REDACTED]"
    # What django-q2's worker stores as the result of a failed task.
    stored = f"{caught.value} : {''.join(traceback.format_exception(caught.value))}"
    for secret in SECRETS:
        assert secret not in stored


def test_a_task_with_a_bad_cost_ceiling_fails_with_a_clear_message(catalog: None, settings: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "MAX_CAMPAIGN_COST_USD": "0x10"}
    with pytest.raises(NightlyFailed, match=r"^ScheduleError: EVALHUB_MAX_CAMPAIGN_COST_USD must be a positive decimal"):
        run_nightly()
    assert Schedule.objects.count() == 0


def test_a_night_whose_process_was_killed_is_taken_over_by_the_next_delivery(catalog: None, settings: Any) -> None:
    """``kill -9`` of ``nightly --execute`` mid-night: the run stays running with one execution
    under a lease nobody renews and the rest pending. Once a lease's length has passed, the next
    delivery takes it over: the dead one's attempt is closed as worker_lost, the rest run here,
    and the night finishes with every execution settled once."""
    script_night(NIGHT)
    run, _ = create_run(schedule=Schedule.objects.get(), cost_ceiling_usd=Decimal(12), trigger="nightly")
    long_ago = timezone.now() - dt.timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=long_ago)
    first = run.executions.order_by("position").first()
    Execution.objects.filter(pk=first.pk).update(
        status="running", owner="dead-host:1", lease_expires_at=long_ago, heartbeat_at=long_ago, started_at=long_ago
    )
    Attempt.objects.create(execution=first, number=1, outcome="running", owner="dead-host:1", started_at=long_ago)
    outcome = deliver()
    assert outcome.executed is True and outcome.run.pk == run.pk
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert not run.executions.exclude(status="finished").exists()
    assert Attempt.objects.filter(execution=first, outcome="worker_lost").count() == 1
    assert Run.objects.count() == 1


def test_a_night_running_elsewhere_is_not_taken_over(catalog: None) -> None:
    """A run whose execution holds a live lease (another process is on it) is left alone."""
    script_night(NIGHT)
    run, _ = create_run(schedule=Schedule.objects.get(), cost_ceiling_usd=Decimal(12), trigger="nightly")
    long_ago = timezone.now() - dt.timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=long_ago)
    Execution.objects.filter(pk=run.executions.order_by("position").first().pk).update(
        status="running", owner="busy-host:1", lease_expires_at=timezone.now() + dt.timedelta(minutes=1), started_at=long_ago
    )
    outcome = deliver()
    assert outcome.executed is False and len(REPLAY_CALLS) == 0
    # ... nor one that only just started (its process may still be setting up).
    Execution.objects.update(status="pending", owner="", lease_expires_at=None)
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now())
    assert deliver().executed is False


def test_an_interrupted_night_skips_what_never_started_so_it_can_be_re_run(catalog: None, monkeypatch: Any) -> None:
    """Ctrl-C or SIGTERM mid-night: the run fails saying why, and every execution that never
    started is skipped as run_interrupted (never left pending for nobody), ready for rerun --skipped."""
    from runs import actions, dispatch

    script_night(NIGHT)
    real = dispatch.execute_execution
    calls: list[int] = []

    def interrupted(pk: int, **kwargs: Any) -> str:
        calls.append(pk)
        if len(calls) == 3:
            raise KeyboardInterrupt("SIGTERM")
        return real(pk, **kwargs)

    monkeypatch.setattr(dispatch, "execute_execution", interrupted)
    with pytest.raises(KeyboardInterrupt):
        deliver()
    run = Run.objects.get()
    assert run.status == RunStatus.FAILED and "SIGTERM" in run.error
    assert run.executions.filter(status="finished", classification="completed").count() == 2
    skipped = run.executions.filter(classification="skipped", failure_code="run_interrupted")
    assert skipped.count() == 38 and not run.executions.filter(status="pending").exists()
    assert f"re-run it with `manage.py rerun {run.pk} --skipped`" in skipped.first().failure_message
    rerun = actions.rerun_run(run, scope="skipped")
    assert rerun.executions.count() == 38
