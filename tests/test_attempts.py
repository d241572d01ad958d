"""Attempts are exact: bounded by ``maxAttempts``, written before the call, finished in one
transaction; only infrastructure is retried; an executor's ``BaseException`` is one execution's
crash, redacted everywhere (stderr and logs included), never the worker's death.

Executors are replaced at the edge by the replay executor; secrets are synthetic and assembled by
concatenation.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import sys
from decimal import Decimal
from typing import Any

import pytest

from evalhub.credentials import credential_values, url_password
from evalhub.logging import RedactSecretsFilter
from runs import leases
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.executors import InfrastructureError
from runs.executors.live.session import provider_failure_retryable
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Attempt, Execution, Run, RunStatus
from runs.snapshots import secret_values
from schedules.models import ScheduleEntry
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
KEY = "x-9f3kQ7zz" + "-81Lm2p0042"
ENVIRON = {"OPENAI_API_KEY": KEY, "OPENROUTER_API_KEY": "or-plain-value-456789", "ANTHROPIC_API_KEY": "an-plain-value-987654"}


@pytest.fixture
def schedule(reference_catalog: None, replay_executors: Any):
    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    return schedule


def make_run(schedule, *, limit: int = 1, max_attempts: int | None = None) -> Run:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(candidate_ids=("codex-luna",), limit=limit))
    if max_attempts is not None:
        for execution in run.executions.select_related("entry"):
            candidate = execution.entry.candidate
            ScheduleEntry.objects.filter(pk=execution.entry_id).update(
                candidate={**candidate, "budget": {**candidate["budget"], "maxAttempts": max_attempts}}
            )
    return run


def executions(run: Run) -> list[Execution]:
    return list(run.executions.select_related("entry").order_by("position"))


def completed(execution: Execution, cost: float = 0.3) -> dict[str, Any]:
    return completed_observation(execution.entry.to_document(), cost_usd=cost)


# --- maxAttempts bounds every call ------------------------------------------------------------------


@pytest.mark.django_db
def test_max_attempts_of_one_means_no_retry(schedule) -> None:
    run = make_run(schedule, max_attempts=1)
    (execution,) = executions(run)
    error = InfrastructureError("provider_http_503", True, "HTTP 503 from the provider")
    REPLAY_STORE[execution.execution_id] = [error, completed(execution)]
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert len(REPLAY_CALLS) == execution.attempts.count() == 1
    assert (execution.classification, execution.failure_code, execution.failure_retryable) == (
        "infrastructure_failure",
        "provider_http_503",
        True,
    )
    assert execution.failure_message == "HTTP 503 from the provider (not retried: the budget allows 1 attempt)"


@pytest.mark.django_db
def test_the_retry_is_attempt_two_of_at_most_max_attempts(schedule) -> None:
    run = make_run(schedule, max_attempts=3)
    (execution,) = executions(run)
    error = InfrastructureError("provider_http_503", True, "HTTP 503")
    REPLAY_STORE[execution.execution_id] = [error, error, error]
    execute_run(run, environ=ENVIRON)
    # The reference retries once: a third call would need a different cause (a lost worker).
    assert [request.attempt for request in REPLAY_CALLS] == [1, 2]
    assert list(Attempt.objects.values_list("number", "outcome")) == [(1, "infrastructure_error"), (2, "infrastructure_error")]


# --- the attempt row exists before the call, and is finished with the result in one transaction -----


@pytest.mark.django_db
def test_the_attempt_row_is_written_before_the_executor_is_called(schedule, monkeypatch) -> None:
    run = make_run(schedule)
    (execution,) = executions(run)
    seen: list[tuple[Any, ...]] = []

    def execute(self, request) -> dict[str, Any]:
        seen.extend(Attempt.objects.filter(execution=execution).values_list("number", "outcome", "finished_at"))
        return completed(execution)

    monkeypatch.setattr("runs.executors.replay.ReplayExecutor.execute", execute)
    execute_run(run, environ=ENVIRON)
    assert seen == [(1, "running", None)]
    attempt = Attempt.objects.get(execution=execution)
    assert (attempt.outcome, attempt.message) == ("observation", "")
    assert attempt.finished_at is not None


@pytest.mark.django_db
def test_a_process_dying_mid_attempt_leaves_the_attempt_counted(schedule, monkeypatch) -> None:
    """``os._exit`` cannot run in a test; a ``BaseException`` escaping the bookkeeping stands for it."""
    run = make_run(schedule)
    (execution,) = executions(run)
    REPLAY_STORE[execution.execution_id] = completed(execution)

    class Died(BaseException):
        pass

    def die(*args: Any, **kwargs: Any) -> None:
        raise Died

    monkeypatch.setattr("runs.execution.finish_attempt", die)
    with pytest.raises(Died):
        execute_run(run, environ=ENVIRON)
    assert list(Attempt.objects.values_list("number", "outcome", "finished_at")) == [(1, "running", None)]


@pytest.mark.django_db(transaction=True)
def test_outcome_cost_and_result_are_one_transaction(schedule, monkeypatch) -> None:
    run = make_run(schedule)
    (execution,) = executions(run)
    REPLAY_STORE[execution.execution_id] = completed(execution, cost=0.3)

    def broken_settle(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the database went away while the result was written")

    monkeypatch.setattr("runs.settlement.settle", broken_settle)
    with pytest.raises(RuntimeError):
        execute_run(run, environ=ENVIRON)
    # Nothing of the finishing write survived: the attempt is still open and nothing was counted.
    attempt = Attempt.objects.get(execution=execution)
    assert (attempt.outcome, attempt.cost_usd, attempt.finished_at) == ("running", None, None)
    assert Run.objects.get(pk=run.pk).spent_usd == 0
    assert Execution.objects.get(pk=execution.pk).cost_usd is None


# --- only infrastructure is retried --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("provider_http_400", False),
        ("provider_http_413", False),
        ("provider_http_422", False),
        ("provider_http_404", False),
        ("provider_context_window_exceeded", False),
        ("provider_quota_exhausted", False),
        ("provider_auth_refused", False),
        ("provider_unknown_model", False),
        ("provider_something_new", False),
        ("provider_http_500", True),
        ("provider_http_503", True),
        ("provider_http_529", True),
        ("provider_http_429", True),
        ("provider_http_408", True),
        ("provider_rate_limited", True),
        ("provider_stream_dropped", True),
        ("provider_unreachable", True),
        ("live_provider_execution_failed", True),
    ],
)
def test_only_transient_provider_failures_are_retryable(code: str, retryable: bool) -> None:
    assert provider_failure_retryable(code) is retryable


@pytest.mark.parametrize("code", ["provider_http_400", "provider_http_413", "provider_http_422", "provider_context_window_exceeded"])
def test_a_refused_request_from_the_live_session_is_not_retryable(code: str) -> None:
    """The codex driver's codes go through the session's one decision."""
    from runs.executors.live.contracts import TurnOutcome
    from runs.executors.live.session import _raise_for_infrastructure

    class Evidence:
        turns = [TurnOutcome(turn_id="t1", status="failed", started_ms=0, ended_ms=5, error="refused", error_code=code)]

    class Driver:
        runtime_name = "codex app-server"

    with pytest.raises(InfrastructureError) as raised:
        _raise_for_infrastructure(Evidence(), Driver(), None)
    assert (raised.value.code, raised.value.retryable) == (code, False)


# --- an executor's BaseException: one execution's crash, redacted, never the worker's death ---------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raised",
    [asyncio.CancelledError(f"cancelled holding {KEY}"), SystemExit(f"exit {KEY}"), GeneratorExit(f"closing {KEY}")],
    ids=["CancelledError", "SystemExit", "GeneratorExit"],
)
def test_a_base_exception_is_one_executions_crash(schedule, capsys, caplog, raised) -> None:
    caplog.set_level(logging.DEBUG)
    run = make_run(schedule, limit=2)
    first, second = executions(run)
    REPLAY_STORE[first.execution_id] = raised
    REPLAY_STORE[second.execution_id] = completed(second)
    summary = execute_run(run, environ=ENVIRON)
    first.refresh_from_db()
    assert (first.classification, first.failure_code) == ("infrastructure_failure", "executor_crashed")
    assert first.failure_message == f"the executor crashed: {type(raised).__name__}: {raised}".replace(KEY, "[REDACTED]")
    assert list(first.attempts.values_list("outcome", "error_code")) == [("crash", "executor_crashed")]
    assert Execution.objects.get(pk=second.pk).classification == "completed"
    assert Run.objects.get(pk=run.pk).status == RunStatus.FINISHED
    assert summary.by_classification == {"infrastructure_failure": 1, "completed": 1}
    captured = capsys.readouterr()
    rows = json.dumps([list(Execution.objects.values()), list(Attempt.objects.values())], default=str)
    for text in (captured.out, captured.err, caplog.text, rows):
        assert KEY not in text


@pytest.mark.django_db
def test_what_an_executor_prints_to_stderr_is_redacted(schedule, capsys, monkeypatch) -> None:
    run = make_run(schedule)
    (execution,) = executions(run)
    monkeypatch.setenv("PGPASSWORD", "pgZq81xW77410")

    def execute(self, request) -> dict[str, Any]:
        print(f"debug: environment {dict(request.environment)}", file=sys.stderr)
        sys.stderr.write("half a key: " + KEY[:9])
        sys.stderr.write(KEY[9:] + " and the database password pgZq81xW77410\n")
        return completed(execution)

    monkeypatch.setattr("runs.executors.replay.ReplayExecutor.execute", execute)
    execute_run(run, environ=ENVIRON)
    err = capsys.readouterr().err
    assert KEY not in err and "pgZq81xW77410" not in err
    assert "debug: environment {'OPENAI_API_KEY': '[REDACTED]'}" in err
    assert "half a key: [REDACTED] and the database password [REDACTED]" in err


@pytest.mark.django_db
def test_the_nightly_task_survives_an_executor_that_raises_system_exit(reference_catalog, replay_executors, monkeypatch) -> None:
    from runs.tasks import run_execution, run_nightly

    for key, value in ENVIRON.items():
        monkeypatch.setenv(key, value)
    assert run_nightly().startswith("run ")
    run = Run.objects.get(trigger="nightly")
    for execution_id in run.executions.values_list("execution_id", flat=True):
        REPLAY_STORE[execution_id] = SystemExit(f"exit with {KEY}")
    # What each worker's task returns: the execution crashed, the task (and the worker) did not.
    lines = [run_execution(pk) for pk in run.executions.order_by("position").values_list("pk", flat=True)]
    assert all(line.endswith(f"settled on {leases.owner_id()}") for line in lines)
    assert not any(KEY in line for line in lines)
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert set(run.executions.values_list("failure_code", flat=True)) == {"executor_crashed"}


# --- the redaction set: every credential of the process -------------------------------------------------


def test_every_credential_of_the_process_is_in_the_redaction_set() -> None:
    environ = {
        "PGPASSWORD": "pg-password-value",
        "STRIPE_KEY": "stripe-key-value",
        "SSH_KEY_PASSPHRASE": "passphrase-value",
        "GPG_PASSPHRASE_FILE_CONTENT": "gpg-passphrase-value",
        "DATABASE_URL": "postgres://evalhub:db%40password-value@db.internal:5432/evalhub",
        "REDIS_URL": "redis://:redis-password-value@127.0.0.1:6379/0",
        "GITHUB_TOKEN": "github-token-value",
        "DJANGO_SECRET_KEY": "django-secret-value",
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/evalhub",
        "LANG": "C.UTF-8",
        "TOKENIZERS_PARALLELISM": "false",
        "KEYBOARD_LAYOUT": "us-international",
        "PUBLIC_URL": "https://example.org/path",
    }
    values = set(secret_values(environ, [{"qualification": {"requiredEnvironment": ["CUSTOM_CREDENTIAL_VAR"]}}]))
    assert {
        "pg-password-value",
        "stripe-key-value",
        "passphrase-value",
        "gpg-passphrase-value",
        "db%40password-value",
        "db@password-value",
        "redis-password-value",
        "github-token-value",
        "django-secret-value",
    } <= values
    assert not values & {"/usr/bin:/bin", "/home/evalhub", "C.UTF-8", "false", "us-international", "https://example.org/path"}
    assert credential_values({"CUSTOM_CREDENTIAL_VAR": "custom-value"}, names=["CUSTOM_CREDENTIAL_VAR"]) == ["custom-value"]
    assert url_password("postgres://user@host/db") is None


def test_the_credential_values_follow_the_environment_as_it_changes(monkeypatch) -> None:
    """What a variable is (credential-named, a URL with a password) is remembered per name and
    value: a value that changes, a variable that comes or goes, is seen at the next call."""
    monkeypatch.setenv("EVALHUB_TEST_SERVICE_TOKEN", "token-value-one-4711")
    monkeypatch.setenv("EVALHUB_TEST_BROKER", "amqp://user:broker-pass-4711@127.0.0.1/")
    first = set(credential_values(os.environ))
    assert {"token-value-one-4711", "broker-pass-4711"} <= first
    monkeypatch.setenv("EVALHUB_TEST_SERVICE_TOKEN", "token-value-two-4711")
    monkeypatch.setenv("EVALHUB_TEST_BROKER", "amqp://127.0.0.1/")
    monkeypatch.setenv("EVALHUB_TEST_PLAIN", "plain-value-4711")
    second = set(credential_values(os.environ))
    assert "token-value-two-4711" in second
    assert not second & {"token-value-one-4711", "broker-pass-4711", "plain-value-4711"}
    assert "plain-value-4711" in credential_values(os.environ, names=["EVALHUB_TEST_PLAIN"])
    assert credential_values({"EVALHUB_TEST_BROKER": "amqp://u:p%40ss-4711@h/"}) == ["p%40ss-4711", "p@ss-4711"]


def test_the_log_filter_redacts_the_processs_credentials(monkeypatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "pg-log-password-4711")
    monkeypatch.setenv("REDIS_URL", "redis://:redis-log-password-4711@127.0.0.1:6379/6")
    record = logging.LogRecord(
        "runs", logging.ERROR, __file__, 1, "connect failed: %s / %s", ("pg-log-password-4711", "redis-log-password-4711"), None
    )
    RedactSecretsFilter().filter(record)
    assert record.getMessage() == "connect failed: [REDACTED] / [REDACTED]"
