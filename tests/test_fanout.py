"""A night shared by many workers: one task per execution, leases and the reaper, database blips,
SIGTERM hand-back, provider slots, cancel and re-run (admin, API, CLI).

In-process, with the replay executor at the edge; the real multi-process runs (two qcluster
workers, ``kill -9``) are in ``test_cluster.py``. Secrets are synthetic.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError, connection
from django.utils import timezone
from django_q.models import OrmQ

from runs import actions, creation, dispatch, leases, settlement
from runs.actions import cancel_run, rerun_run
from runs.creation import create_run
from runs.dispatch import dispatch_run
from runs.execution import execute_execution
from runs.executors import InfrastructureError
from runs.executors.candidate import CandidateSpec
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Attempt, Execution, ExecutionStatus, ProviderSlot, Report, Run, RunStatus
from runs.recovery import reap
from runs.tasks import run_execution
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-fan-0a9Qz", "OPENROUTER_API_KEY": "x-fan-1b8Wy", "ANTHROPIC_API_KEY": "x-fan-2c7Ex"}


@pytest.fixture
def schedule(reference_catalog: None, replay_executors: Any, monkeypatch: pytest.MonkeyPatch):
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    return schedule


@pytest.fixture(autouse=True)
def _no_shutdown():
    leases.reset_shutdown()
    yield
    leases.reset_shutdown()


def luna_run(schedule, limit: int = 3, ceiling: str = "12") -> Run:
    run, _ = create_run(
        schedule=schedule, cost_ceiling_usd=Decimal(ceiling), selection=Selection(candidate_ids=("codex-luna",), limit=limit)
    )
    for execution in run.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = [completed_observation(execution.entry.to_document(), cost_usd=0.1)]
    return run


def queued() -> list[dict[str, Any]]:
    return [row.task for row in OrmQ.objects.order_by("id")]


def leave_dead_worker(execution: Execution) -> None:
    """What a killed worker leaves: the execution held, its attempt open and reserved, the lease expired."""
    run = execution.run
    creation.claim_run(run)
    Execution.objects.filter(pk=execution.pk).update(
        status=ExecutionStatus.RUNNING, owner="dead-host:4242", lease_expires_at=timezone.now() - dt.timedelta(seconds=5)
    )
    settlement.begin_attempt(run, execution, execution.attempts.count() + 1, Decimal("1.5"), "dead-host:4242")


# --- fan-out -------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_night_fans_out_into_one_task_per_execution(schedule, django_capture_on_commit_callbacks) -> None:
    from runs.tasks import run_nightly

    with django_capture_on_commit_callbacks(execute=True):
        line = run_nightly()
    run = Run.objects.get(trigger="nightly")
    assert line == f"run {run.pk}: 40 executions queued for the workers (night {run.schedule.night})"
    tasks = queued()
    assert [task["func"] for task in tasks] == ["runs.tasks.run_execution"] * 40
    assert [task["args"] for task in tasks] == [(pk,) for pk in run.executions.order_by("position").values_list("pk", flat=True)]
    assert {task["group"] for task in tasks} == {f"run-{run.pk}"}
    assert tasks[0]["name"] == f"run-{run.pk}-{run.executions.get(position=0).execution_id}-1"
    assert run.status == RunStatus.RUNNING
    # Each worker's task settles its execution; the last one finishes and reports the run, once.
    for execution in run.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document(), cost_usd=0.01)
    results = [run_execution(task["args"][0]) for task in tasks]
    assert all(result.endswith(f"settled on {leases.owner_id()}") for result in results)
    run.refresh_from_db()
    assert (run.status, run.spent_usd, run.reserved_usd) == (RunStatus.FINISHED, Decimal("0.4"), Decimal("0"))
    assert Report.objects.filter(run=run).count() == 1
    assert set(run.executions.values_list("owner", flat=True)) == {leases.owner_id()}
    assert set(Attempt.objects.values_list("owner", flat=True)) == {leases.owner_id()}
    # A duplicate delivery afterwards does nothing and says so.
    assert run_execution(tasks[0]["args"][0]) == f"execution {tasks[0]['args'][0]}: already settled on {leases.owner_id()}"


@pytest.mark.django_db
def test_the_nightly_command_can_queue_the_night(schedule, django_capture_on_commit_callbacks) -> None:
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("nightly", "--execute", "--queue", "--no-progress", "--candidate", "codex-luna", stdout=out)
    run = Run.objects.get()
    count = run.executions.count()
    assert f"run {run.pk}: {count} execution(s) queued for the workers (start one with `manage.py worker`)" in out.getvalue()
    assert len(queued()) == count > 0


@pytest.mark.django_db
def test_the_scripted_lanes_provider_travels_with_the_run(schedule) -> None:
    from runs.executors.providers import scripted_provider

    run = luna_run(schedule, limit=1)
    provider = scripted_provider("http://127.0.0.1:9/scripts/{case_id}/v1")
    dispatch.execute_run(run, environ=ENVIRON, providers={"codex-luna": provider})
    assert Run.objects.get(pk=run.pk).provider_overrides["codex-luna"]["base_url"] == "http://127.0.0.1:9/scripts/{case_id}/v1"
    assert [request.provider for request in REPLAY_CALLS] == [provider]


# --- leases and the reaper -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_dead_workers_execution_is_taken_back_and_runs_again(schedule, django_capture_on_commit_callbacks) -> None:
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.all()
    leave_dead_worker(execution)
    run.refresh_from_db()
    assert run.reserved_usd == Decimal("1.5")
    with django_capture_on_commit_callbacks(execute=True):
        summary = reap()
    assert (summary.taken_back, summary.finalised) == (1, 0)
    execution.refresh_from_db()
    assert (execution.status, execution.owner, execution.dispatches) == ("pending", "", 1)
    attempt = execution.attempts.get()
    assert (attempt.outcome, attempt.error_code, attempt.retryable, attempt.counted_usd) == (
        "worker_lost",
        "worker_lost",
        True,
        Decimal("1.5"),
    )
    assert attempt.message.startswith("the worker dead-host:4242 stopped renewing its lease")
    run.refresh_from_db()
    # The unknown cost of the lost attempt is counted at its reservation; nothing stays reserved.
    assert (run.reserved_usd, run.spent_usd, run.has_unpriced) == (Decimal("0"), Decimal("1.5"), True)
    assert queued()[0]["args"] == (execution.pk,)
    assert run_execution(execution.pk).startswith(f"execution {execution.pk}: settled")
    execution.refresh_from_db()
    assert execution.classification == "completed"
    assert list(execution.attempts.values_list("number", "outcome")) == [(1, "worker_lost"), (2, "observation")]
    assert (execution.cost_usd, execution.cost_known) == (Decimal("1.6"), False)
    assert Run.objects.get(pk=run.pk).status == RunStatus.FINISHED


@pytest.mark.django_db
def test_a_worker_lost_twice_is_an_infrastructure_failure(schedule) -> None:
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.all()
    for _ in range(2):
        leave_dead_worker(execution)
        reap(dispatch=False)
        execution.refresh_from_db()
    assert (execution.status, execution.classification, execution.failure_code) == ("finished", "infrastructure_failure", "worker_lost")
    assert execution.failure_message == "the worker running this execution was lost (2 times); 2 of 3 attempts used"
    assert Run.objects.get(pk=run.pk).status == RunStatus.FINISHED


@pytest.mark.django_db
def test_attempts_never_exceed_max_attempts_across_workers(schedule) -> None:
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.all()
    error = InfrastructureError("provider_http_503", True, "HTTP 503")
    REPLAY_STORE[execution.execution_id] = [error, error, error, error]
    leave_dead_worker(execution)
    reap(dispatch=False)
    execute_execution(execution.pk, environ=ENVIRON)
    execution.refresh_from_db()
    assert list(execution.attempts.values_list("outcome", flat=True)) == ["worker_lost", "infrastructure_error", "infrastructure_error"]
    assert len(REPLAY_CALLS) == 2 and execution.status == "finished"


@pytest.mark.django_db
def test_a_redelivered_task_recovers_an_expired_lease(schedule) -> None:
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.all()
    leave_dead_worker(execution)
    assert execute_execution(execution.pk, environ=ENVIRON) == "settled"
    execution.refresh_from_db()
    assert list(execution.attempts.values_list("outcome", flat=True)) == ["worker_lost", "observation"]


@pytest.mark.django_db
def test_a_live_lease_is_never_taken(schedule) -> None:
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.all()
    leave_dead_worker(execution)
    Execution.objects.filter(pk=execution.pk).update(lease_expires_at=timezone.now() + dt.timedelta(seconds=60))
    assert reap().taken_back == 0
    assert execute_execution(execution.pk, environ=ENVIRON) == "running elsewhere (dead-host:4242)"
    assert REPLAY_CALLS == []


@pytest.mark.django_db
def test_a_run_left_running_with_everything_settled_is_finished_and_reported(schedule) -> None:
    run = luna_run(schedule, limit=2)
    creation.claim_run(run)
    for pk in run.executions.values_list("pk", flat=True):
        execute_execution(pk, environ=ENVIRON, finalise=False)  # the finaliser "died"
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert reap().finalised == 1
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED and Report.objects.filter(run=run).count() == 1
    assert reap().finalised == 0


@pytest.mark.django_db
def test_pending_executions_a_broker_lost_are_queued_again(schedule, settings, django_capture_on_commit_callbacks) -> None:
    run = luna_run(schedule, limit=2)
    creation.claim_run(run)
    long_ago = timezone.now() - dt.timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(started_at=long_ago)
    run.executions.update(dispatched_at=long_ago, dispatches=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert reap().redispatched == 2
    assert sorted(task["args"][0] for task in queued()) == sorted(run.executions.values_list("pk", flat=True))
    # Touched recently (a worker is on it): left alone.
    run.executions.update(dispatched_at=timezone.now())
    assert reap().redispatched == 0


@pytest.mark.django_db(transaction=True)
def test_a_database_blip_after_the_executor_returns_loses_nothing(schedule, settings, monkeypatch) -> None:
    monkeypatch.setattr(leases.time, "sleep", lambda seconds: None)
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.select_related("entry")
    failures = {"left": 4}

    def blip(execute, sql, params, many, context):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    def execute(self, request) -> dict[str, Any]:
        connection.execute_wrappers.append(blip)  # the database goes away as the executor returns
        return completed_observation(execution.entry.to_document(), cost_usd=0.25)

    monkeypatch.setattr("runs.executors.replay.ReplayExecutor.execute", execute)
    try:
        dispatch.execute_run(run, environ=ENVIRON)
    finally:
        if blip in connection.execute_wrappers:
            connection.execute_wrappers.remove(blip)
    execution.refresh_from_db()
    assert failures["left"] == 0
    assert (execution.classification, execution.cost_usd) == ("completed", Decimal("0.25"))
    run.refresh_from_db()
    assert (run.status, run.spent_usd, run.reserved_usd) == (RunStatus.FINISHED, Decimal("0.25"), Decimal("0"))


def test_db_retry_gives_up_after_its_deadline(monkeypatch) -> None:
    monkeypatch.setattr(leases.time, "sleep", lambda seconds: None)
    calls: list[int] = []

    def down() -> None:
        calls.append(1)
        raise OperationalError("connection refused")

    with pytest.raises(OperationalError):
        leases.db_retry(down, what="test", deadline_s=0)
    assert calls == [1]


# --- SIGTERM: hand back, then exit -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_worker_asked_to_stop_hands_its_execution_back(schedule, django_capture_on_commit_callbacks, monkeypatch) -> None:
    run = luna_run(schedule, limit=1)
    (execution,) = run.executions.select_related("entry")
    creation.claim_run(run)
    stopped: list[bool] = []

    def execute(self, request) -> dict[str, Any]:
        try:
            leases.request_shutdown()  # what the worker's SIGTERM handler does
            time.sleep(30)  # interrupted at once: the heartbeat's signal wakes the wait
            return completed_observation(execution.entry.to_document())
        finally:
            stopped.append(True)  # where the live executor kills its runtime's process group

    monkeypatch.setattr("runs.executors.replay.ReplayExecutor.execute", execute)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(SystemExit):
        run_execution(execution.pk)
    execution.refresh_from_db()
    assert stopped == [True]
    assert (execution.status, execution.owner, execution.lease_expires_at) == ("pending", "", None)
    attempt = execution.attempts.get()
    assert (attempt.outcome, attempt.error_code, attempt.retryable) == ("worker_lost", "worker_shutdown", True)
    assert queued()[0]["args"] == (execution.pk,)
    assert Run.objects.get(pk=run.pk).reserved_usd == 0


def test_guards_running_in_other_threads_never_become_the_current_one() -> None:
    # Two executions in threads, finishing in the order they started: were either the process's
    # current guard, the first to finish would hand "current" back to the other, left behind.
    first_in, second_in, first_done = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with leases.Guard(lambda: None, interval=60).running():
            first_in.set()
            second_in.wait(5)
        first_done.set()

    def second() -> None:
        first_in.wait(5)
        with leases.Guard(lambda: None, interval=60).running():
            second_in.set()
            first_done.wait(5)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert leases._current is None


def test_an_idle_worker_exits_on_sigterm() -> None:
    assert leases._current is None  # no earlier test left a guard behind
    with pytest.raises(SystemExit):
        leases._on_stop_signal(15, None)
    assert leases.shutdown_requested()


# --- per-provider concurrency --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_provider_at_its_limit_makes_the_next_execution_wait(schedule, settings, django_capture_on_commit_callbacks) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "PROVIDER_CONCURRENCY": {"openai": 1}}
    run = luna_run(schedule, limit=2)
    creation.claim_run(run)
    first, second = run.executions.order_by("position")
    ProviderSlot.objects.create(provider="openai", number=0, execution=first, expires_at=timezone.now() + dt.timedelta(seconds=60))
    with django_capture_on_commit_callbacks(execute=True):
        assert execute_execution(second.pk, environ=ENVIRON, slot_wait_s=0, requeue=True) == "waiting for a provider slot"
    assert [task["args"] for task in queued()] == [(second.pk,)]
    assert REPLAY_CALLS == []
    ProviderSlot.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))  # its holder's lease ran out
    assert execute_execution(second.pk, environ=ENVIRON, slot_wait_s=0) == "settled"
    assert ProviderSlot.objects.get().execution_id is None


# --- cancel ------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_skips_pending_executions_and_ends_the_run(schedule) -> None:
    run = luna_run(schedule, limit=3)
    dispatch_run(run)
    assert cancel_run(run) == 3
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.cancel_requested_at is not None
    assert set(run.executions.values_list("classification", "failure_code")) == {("skipped", "run_cancelled")}
    assert REPLAY_CALLS == []
    assert Report.objects.filter(run=run).exists()
    with pytest.raises(actions.RunActionError, match=f"run {run.pk} is cancelled: only a pending or running run can be cancelled"):
        cancel_run(run)
    # A task delivered after the cancel does nothing.
    assert execute_execution(run.executions.first().pk, environ=ENVIRON) == "already settled"


@pytest.mark.django_db
def test_cancel_interrupts_the_running_executor(schedule, monkeypatch) -> None:
    run = luna_run(schedule, limit=2)
    first, second = run.executions.select_related("entry").order_by("position")
    creation.claim_run(run)
    finished: list[str] = []

    def execute(self, request) -> dict[str, Any]:
        try:
            cancel_run(Run.objects.get(pk=run.pk))  # a person cancels while it runs
            guard = leases._current
            guard.interrupt(guard._beat())  # the heartbeat's next beat sees the cancel
            time.sleep(30)
            finished.append("ran to the end")
            return completed_observation(first.entry.to_document())
        finally:
            finished.append("runtime stopped")

    monkeypatch.setattr("runs.executors.replay.ReplayExecutor.execute", execute)
    assert execute_execution(first.pk, environ=ENVIRON) == "settled"
    assert finished == ["runtime stopped"]
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.classification, first.failure_code) == ("skipped", "run_cancelled")
    assert first.attempts.get().outcome == "cancelled"
    assert (second.classification, second.failure_code) == ("skipped", "run_cancelled")
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.reserved_usd == 0


# --- re-run --------------------------------------------------------------------------------------------------------


@pytest.fixture
def mixed_run(schedule) -> Run:
    run = luna_run(schedule, limit=4)
    rows = list(run.executions.select_related("entry").order_by("position"))
    failed = completed_observation(rows[1].entry.to_document())
    failed["classification"] = "candidate_failure"
    failed["failure"] = {"code": "candidate_checks_failed", "category": "candidate", "retryable": False, "message": "checks failed"}
    REPLAY_STORE[rows[1].execution_id] = failed
    REPLAY_STORE[rows[2].execution_id] = InfrastructureError("runtime_missing", False, "no runtime")
    dispatch.execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    return run


@pytest.mark.django_db
@pytest.mark.parametrize(("scope", "positions"), [("failed", [1, 2]), ("infrastructure", [2])])
def test_a_rerun_repeats_only_the_failed_executions(mixed_run, scope, positions) -> None:
    original = list(mixed_run.executions.order_by("position").values_list("execution_id", "classification"))
    rerun = rerun_run(mixed_run, scope=scope)
    assert (rerun.repeat_of_id, rerun.repeat_scope, rerun.status, rerun.lane) == (mixed_run.pk, scope, "pending", mixed_run.lane)
    assert list(rerun.executions.order_by("position").values_list("execution_id", flat=True)) == [original[p][0] for p in positions]
    assert rerun.selection["executionIds"] == [original[p][0] for p in positions]
    # The original keeps its history.
    assert list(mixed_run.executions.order_by("position").values_list("execution_id", "classification")) == original


@pytest.mark.django_db
def test_a_rerun_needs_an_ended_run_with_failures(schedule, mixed_run) -> None:
    with pytest.raises(actions.RunActionError, match="is still pending: wait for it to end"):
        rerun_run(luna_run(schedule, limit=1))
    passing = rerun_run(mixed_run, scope="infrastructure")
    REPLAY_STORE[passing.executions.get().execution_id] = completed_observation(passing.executions.get().entry.to_document())
    dispatch.execute_run(passing, environ=ENVIRON)
    with pytest.raises(actions.RunActionError, match=f"run {passing.pk} has no infrastructure-failed executions to re-run"):
        rerun_run(Run.objects.get(pk=passing.pk), scope="infrastructure")
    with pytest.raises(actions.RunActionError, match="unknown re-run scope 'everything'"):
        rerun_run(mixed_run, scope="everything")


@pytest.mark.django_db
def test_a_refresh_is_not_re_run_and_says_which_run_to_re_run(schedule, mixed_run) -> None:
    from runs.reporting import refresh_run

    refresh = refresh_run(mixed_run, generated_at="2026-08-19T05:00:00.000Z")
    with pytest.raises(actions.RunActionError) as refused:
        rerun_run(refresh)
    assert str(refused.value) == (
        f"run {refresh.pk} is a refresh (replay lane) of run {mixed_run.pk}: re-run run {mixed_run.pk} instead "
        f"(`manage.py rerun {mixed_run.pk}`), then refresh that re-run"
    )


@pytest.mark.django_db
def test_a_rerun_of_skips_still_missing_their_credentials_says_which_to_set(schedule, monkeypatch) -> None:
    """``rerun --skipped`` is for after the credentials were added: when they still are not
    there, the command says which to set instead of making another all-skipped run; queued, the
    workers' environment decides, so it is made."""
    skipped = luna_run(schedule, limit=2)
    dispatch.execute_run(skipped, environ={})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runs_before = Run.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("rerun", str(skipped.pk), "--skipped", stdout=StringIO())
    assert str(refused.value) == (
        f"the 2 skipped executions of run {skipped.pk} would all be skipped again: set OPENAI_API_KEY in the environment "
        "first (only names are configured; values are never stored), or queue them for workers that have them (--queue)"
    )
    assert Run.objects.count() == runs_before
    out = StringIO()
    call_command("rerun", str(skipped.pk), "--skipped", "--queue", stdout=out)
    assert Run.objects.count() == runs_before + 1
    Run.objects.filter(repeat_of=skipped).update(status="finished")
    monkeypatch.setenv("OPENAI_API_KEY", "x-set-now")
    out = StringIO()
    call_command("rerun", str(skipped.pk), "--skipped", stdout=out)
    assert "need provider credentials" not in out.getvalue()


@pytest.mark.django_db
def test_cancel_and_rerun_from_the_command_line(schedule, mixed_run) -> None:
    out = StringIO()
    call_command("rerun", str(mixed_run.pk), "--infrastructure-only", stdout=out)
    rerun = Run.objects.get(repeat_of=mixed_run)
    assert f"run {rerun.pk} re-runs 1 infrastructure-failed executions of run {mixed_run.pk}" in out.getvalue()
    assert Run.objects.get(pk=rerun.pk).status == RunStatus.FINISHED
    pending = luna_run(schedule, limit=2)
    call_command("cancel_run", str(pending.pk), stdout=out)
    assert f"run {pending.pk} cancelled: 2 pending execution(s) skipped; status cancelled" in out.getvalue()
    with pytest.raises(CommandError, match="there is no run 999999"):
        call_command("cancel_run", "999999")
    with pytest.raises(CommandError, match="only a pending or running run can be cancelled"):
        call_command("cancel_run", str(pending.pk))


@pytest.mark.django_db
def test_cancel_and_rerun_from_the_api(schedule, mixed_run, staff_client, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(f"/api/runs/{mixed_run.pk}/rerun/", {"scope": "failed"}, content_type="application/json")
    assert response.status_code == 201, response.content
    rerun = Run.objects.get(pk=response.json()["run"])
    assert response.json()["executions"] == 2 and rerun.repeat_of_id == mixed_run.pk
    assert len(queued()) == 2 and rerun.status == RunStatus.RUNNING
    detail = staff_client.get(f"/api/runs/{rerun.pk}/").json()
    assert (detail["repeatOf"], detail["repeatScope"]) == (mixed_run.pk, "failed")
    assert staff_client.post(f"/api/runs/{rerun.pk}/cancel/").json() == {"run": rerun.pk, "skipped": 2}
    again = staff_client.post(f"/api/runs/{rerun.pk}/cancel/")
    assert again.status_code == 409 and "only a pending or running run can be cancelled" in again.json()["detail"]
    bad = staff_client.post(f"/api/runs/{mixed_run.pk}/rerun/", {"scope": "all"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["detail"] == "scope must be one of: failed, infrastructure, skipped"
    # A body that is not an object was told its scope was wrong.
    for body in ("[]", '"infrastructure"', "3"):
        wrong = staff_client.post(f"/api/runs/{mixed_run.pk}/rerun/", body, content_type="application/json")
        assert wrong.status_code == 400 and wrong.json()["detail"].startswith("the body must be a JSON object such as")
    assert Run.objects.filter(repeat_of=mixed_run).count() == 1


@pytest.mark.django_db
def test_the_skipped_executions_of_a_cancelled_run_re_run_once_asked_for(
    schedule, staff_client, django_capture_on_commit_callbacks
) -> None:
    """A cancelled run (or one whose credentials were missing) has nothing *failed*: the failed
    scope says so and points at the skipped scope, which the CLI, the API and the admin offer."""
    cancelled = luna_run(schedule, limit=3)
    actions.cancel_run(cancelled)
    cancelled.refresh_from_db()
    with pytest.raises(
        actions.RunActionError,
        match=rf"has no failed executions to re-run; it has 3 skipped execution\(s\): .*rerun {cancelled.pk} --skipped",
    ):
        rerun_run(cancelled)
    out = StringIO()
    call_command("rerun", str(cancelled.pk), "--skipped", "--queue", stdout=out)
    first = Run.objects.get(repeat_of=cancelled)
    assert f"run {first.pk} re-runs 3 skipped executions of run {cancelled.pk}" in out.getvalue()
    assert "3 execution(s) queued for the workers (start one with `manage.py worker`)" in out.getvalue()
    assert (first.repeat_scope, first.executions.count()) == ("skipped", 3)
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("rerun", str(cancelled.pk), "--skipped", "--infrastructure-only")
    # While the first re-run is unfinished, a second one is refused (tests/test_run_conflicts.py).
    busy = staff_client.post(f"/api/runs/{cancelled.pk}/rerun/", {"scope": "skipped"}, content_type="application/json")
    assert busy.status_code == 409 and f"is already being re-run by run {first.pk}" in busy.json()["detail"]
    actions.cancel_run(first)
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(f"/api/runs/{cancelled.pk}/rerun/", {"scope": "skipped"}, content_type="application/json")
    assert response.status_code == 201 and response.json()["executions"] == 3
    actions.cancel_run(Run.objects.get(pk=response.json()["run"]))
    with django_capture_on_commit_callbacks(execute=True):
        page = staff_client.post(
            "/admin/runs/run/", {"action": "rerun_skipped", "_selected_action": [cancelled.pk], "index": 0}, follow=True
        ).content.decode()
    assert "re-runs 3 skipped executions of run" in page
    assert Run.objects.filter(repeat_of=cancelled, repeat_scope="skipped").count() == 3


@pytest.mark.django_db
def test_readers_cannot_cancel_or_rerun(mixed_run, reader_client) -> None:
    assert reader_client.post(f"/api/runs/{mixed_run.pk}/cancel/").status_code == 403
    assert reader_client.post(f"/api/runs/{mixed_run.pk}/rerun/").status_code == 403
    assert not Run.objects.filter(repeat_of=mixed_run).exists()


@pytest.mark.django_db
def test_cancel_and_rerun_from_the_admin(schedule, mixed_run, staff_client, django_capture_on_commit_callbacks) -> None:
    changelist = "/admin/runs/run/"
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            changelist, {"action": "rerun_infrastructure_failed", "_selected_action": [mixed_run.pk], "index": 0}, follow=True
        )
    rerun = Run.objects.get(repeat_of=mixed_run)
    assert f"Run {rerun.pk} re-runs 1 infrastructure-failed executions of run {mixed_run.pk}" in response.content.decode()
    response = staff_client.post(changelist, {"action": "cancel_runs", "_selected_action": [rerun.pk], "index": 0}, follow=True)
    assert f"Run {rerun.pk} cancelled: 1 pending execution(s) skipped" in response.content.decode()
    response = staff_client.post(changelist, {"action": "cancel_runs", "_selected_action": [mixed_run.pk], "index": 0}, follow=True)
    assert "only a pending or running run can be cancelled" in response.content.decode()
    page = staff_client.get(f"/runs/{rerun.pk}/").content.decode()
    assert f'of <a href="/runs/{mixed_run.pk}/">run {mixed_run.pk}</a>' in page and "Cancelled" in page


@pytest.mark.django_db
def test_the_chaos_lane_runs_from_the_admin(reference_catalog, staff_client) -> None:
    from schedules.models import ChaosScenario

    keys = list(ChaosScenario.objects.filter(fault__in=["restart", "wake_race"]).values_list("pk", flat=True))
    response = staff_client.post(
        "/admin/schedules/chaosscenario/", {"action": "run_chaos_scenarios", "_selected_action": keys, "index": 0}, follow=True
    )
    run = Run.objects.get(lane="chaos")
    assert f'Chaos run <a href="/runs/{run.pk}/">{run.pk}</a>: 2 of 2 invariants held' in response.content.decode()
    page = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "one resumable execution owns finalization" in page and "chaos lane" in page
    assert "A chaos run has no report: its executions are fault scenarios" in page and "no report yet" not in page
    api = staff_client.get(f"/api/executions/?run={run.pk}").json()
    assert {item["chaos"]["fault"] for item in api["results"]} == {"restart", "wake_race"}
    json.dumps(api)


@pytest.mark.django_db
def test_a_scripted_run_is_never_re_run_and_its_executions_never_carry_a_real_key(schedule, monkeypatch) -> None:
    """A scripted run's model lived in the process that ran it: a re-run is refused, and an
    execution of it taken over elsewhere sends a placeholder, never the worker's real key, to
    the address it stored (which may by then be anyone's)."""
    from runs.executors.base import ExecutionRequest
    from runs.executors.live import executor as live_executor
    from runs.executors.providers import scripted_provider
    from runs.models import RunLane

    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(limit=1), lane=RunLane.SCRIPTED)
    actions.cancel_run(run)
    with pytest.raises(actions.RunActionError, match=f"run {run.pk} is a scripted-lane run: its scripted model is gone"):
        rerun_run(Run.objects.get(pk=run.pk), scope="skipped")

    seen: dict = {}

    def fake_run(**kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr("runs.executors.live.session.run_live_execution", fake_run)
    monkeypatch.setattr(live_executor, "configured_binary", lambda runtime_key: "/bin/true")
    request = ExecutionRequest(
        run_id=run.pk,
        entry={"executionId": "rwe-0000000000000001"},
        candidate=CandidateSpec.from_snapshot({"id": "codex-luna", "model": "gpt-5.6-luna", "adapter": "codex_app_server"}),
        case={"id": "final-response"},
        environment={"OPENAI_API_KEY": "REAL-openai-key-do-not-send-42"},
        provider=scripted_provider("http://127.0.0.1:9/v1", wire_api="responses", env_key="OPENAI_API_KEY"),
    )
    with pytest.raises(RuntimeError, match="stop here"):
        live_executor.CodexAppServerExecutor().execute(request)
    assert seen["required_environment"] == {"OPENAI_API_KEY": live_executor.SCRIPTED_MODEL_KEY}


@pytest.mark.django_db
def test_a_rerun_body_with_an_unknown_key_is_refused_not_read_as_the_failed_scope(mixed_run, staff_client) -> None:
    """``{"scop": "infrastructure"}`` (a typo) re-ran every failed execution, the default scope:
    the body is refused, naming the key, and nothing is created (the schema says it too)."""
    response = staff_client.post(f"/api/runs/{mixed_run.pk}/rerun/", {"scop": "infrastructure"}, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {"detail": "unknown field(s) scop: the body takes only scope (failed, infrastructure or skipped)"}
    response = staff_client.post(f"/api/runs/{mixed_run.pk}/rerun/", {"scope": "failed", "limit": 1}, content_type="application/json")
    assert response.status_code == 400 and "unknown field(s) limit" in response.json()["detail"]
    assert not Run.objects.filter(repeat_of=mixed_run).exists()
    schema = staff_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert schema["components"]["schemas"]["RerunRequest"]["additionalProperties"] is False


@pytest.mark.django_db
def test_a_rerun_body_whose_key_is_a_lone_surrogate_is_a_400_not_a_500(mixed_run, staff_client) -> None:
    """``{"\\ud800": 1}``: the refusal named the key, and no UTF-8 encodes it, so the answer was
    a 500; the body is refused as JSON that holds no text."""
    response = staff_client.post(f"/api/runs/{mixed_run.pk}/rerun/", '{"\\ud800": 1}', content_type="application/json")
    assert response.status_code == 400, response.content
    assert "a string holds \\ud800, half of a surrogate pair" in response.json()["detail"]
    assert not Run.objects.filter(repeat_of=mixed_run).exists()
