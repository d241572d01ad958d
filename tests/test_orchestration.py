"""Executing a run: qualification, the cost ceiling, retry once, fallbacks, cost accounting, redaction.

The orchestration follows the reference ``executeRunnerLiveSchedule`` and nightly script
(its execution loop and retry wrapper). Executors are replaced by the replay executor at the edge
(``REPLAY_STORE[execution_id]``); everything else is the real code path. Secrets are synthetic
and assembled by concatenation.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from decimal import Decimal
from typing import Any

import pytest

from runs.creation import create_run
from runs.dispatch import execute_run
from runs.evaluation.observations import unavailable_observation
from runs.executors import InfrastructureError
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Attempt, Execution, Run, RunStatus
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation
from tests.reference import scoring_vectors

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
#: Rotation day 0: codex-luna, opencode-kimi, opencode-gpt-oss, acpx-claude-sonnet, acpx-codex-sol.
DAY0 = "2026-08-19T04:00:00.000Z"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)

OPENAI_VALUE = "x-very-secret-value-123"
ENVIRON = {
    "OPENAI_API_KEY": OPENAI_VALUE,
    "OPENROUTER_API_KEY": "or-plain-value-456789",
    "ANTHROPIC_API_KEY": "an-plain-value-987654",
    "PATH": "/usr/bin",
    "HOME": "/home/evalhub",
}

# docs/failure-modes.md B12 (d): exact strings, built by concatenation.
B12_OPENAI = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
B12_JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiJ4In0" + "." + "c2lnbmF0dXJl"
B12_AWS = "AKIA" + "IOSFODNN7EXAMPLE"
B12_401 = f"Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: {B12_OPENAI}'}}}}"
B12_HEADERS = f"headers={{'Authorization': 'Bearer {B12_JWT}'}}"
SECRETS = (B12_OPENAI, B12_JWT, B12_AWS, OPENAI_VALUE, ENVIRON["OPENROUTER_API_KEY"], ENVIRON["ANTHROPIC_API_KEY"])


@pytest.fixture
def schedule(reference_catalog: None):
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    assert schedule.rotation_day == 0
    return schedule


def make_run(
    schedule, *, candidates: tuple[str, ...] = (), cases: tuple[str, ...] = (), limit: int | None = None, ceiling: str = "12"
) -> Run:
    selection = Selection(candidate_ids=candidates, case_ids=cases, limit=limit)
    run, created = create_run(schedule=schedule, cost_ceiling_usd=Decimal(ceiling), selection=selection)
    assert created
    return run


def executions(run: Run) -> list[Execution]:
    return list(run.executions.select_related("entry").order_by("position"))


def entry_of(execution: Execution) -> dict[str, Any]:
    return execution.entry.to_document()


def store(execution: Execution, *outcomes: Any) -> None:
    """Script what the replay executor returns for ``execution``, one item per attempt."""
    REPLAY_STORE[execution.execution_id] = list(outcomes)


def completed(execution: Execution, cost: Any = 0.3, provider: str = "codex") -> dict[str, Any]:
    return completed_observation(entry_of(execution), cost_usd=cost, provider=provider)


def scoring_vector(vector_id: str) -> dict[str, Any]:
    vectors = scoring_vectors()
    return next(item for item in vectors["observations"] if item["id"] == vector_id)["observation"]


# --- the reference's unscored observation shape --------------------------------------------------------


@pytest.mark.parametrize("vector_id", ["dev-skipped-env", "dev-infra"])
def test_unavailable_observation_is_the_reference_shape(reference_catalog: None, vector_id: str) -> None:
    from candidates.models import Candidate
    from schedules.models import WorkflowCase

    vector = scoring_vector(vector_id)
    failure = vector["failure"]
    observation = unavailable_observation(
        case=WorkflowCase.objects.get(key=vector["caseId"]).to_document(),
        candidate=Candidate.objects.select_related("slot", "budget").get(key=vector["candidateId"]).to_document(),
        classification=vector["classification"],
        code=failure["code"],
        category=failure["category"],
        retryable=failure["retryable"],
        message=failure["message"],
    )
    assert observation == vector
    assert json.dumps(observation) == json.dumps(vector)


def test_a_missing_variable_gives_the_reference_skipped_observation(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("acpx-claude-sonnet",), cases=("final-response",), limit=1)
    environ = {key: value for key, value in ENVIRON.items() if key != "ANTHROPIC_API_KEY"}
    execute_run(run, environ=environ)
    (execution,) = executions(run)
    assert execution.execution_id == "rwe-3bc25cbe1d93cec3"
    assert execution.observation == scoring_vector("dev-skipped-env")
    assert REPLAY_CALLS == []


def test_two_retryable_failures_give_the_reference_infrastructure_observation(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("opencode-kimi",), cases=("rich-activity",), limit=1)
    (execution,) = executions(run)
    error = InfrastructureError("live_provider_execution_failed", True, "opencode server returned HTTP 502 twice")
    store(execution, error, error)
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert execution.observation == scoring_vector("dev-infra")
    assert len(REPLAY_CALLS) == 2


# --- qualification -------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_a_missing_or_empty_variable_skips_without_calling_the_executor(schedule, replay_executors, value) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=2)
    environ = {key: val for key, val in ENVIRON.items() if key != "OPENAI_API_KEY"}
    if value is not None:
        environ["OPENAI_API_KEY"] = value
    summary = execute_run(run, environ=environ)
    assert REPLAY_CALLS == []
    for execution in executions(run):
        assert execution.classification == "skipped"
        assert execution.failure_code == "qualification_environment_missing"
        assert execution.failure_category == "qualification"
        assert execution.failure_retryable is False
        assert execution.failure_message == "required qualification environment is missing: OPENAI_API_KEY"
        assert execution.cost_usd == 0 and execution.cost_known
        assert execution.attempts.count() == 0
    assert summary.by_failure_code == {"qualification_environment_missing": 2}
    assert summary.spent_usd == 0


def test_the_missing_message_names_variables_never_values(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("opencode-kimi", "codex-luna"), cases=("rich-activity",))
    execute_run(run, environ={"OPENAI_API_KEY": OPENAI_VALUE})
    messages = {execution.candidate_key: execution.failure_message for execution in executions(run)}
    assert messages["opencode-kimi"] == "required qualification environment is missing: OPENROUTER_API_KEY"
    text = json.dumps(list(Execution.objects.values("observation", "failure_message")))
    assert OPENAI_VALUE not in text


def test_the_executor_receives_only_the_candidates_own_variables(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, completed(execution))
    execute_run(run, environ=ENVIRON)
    (request,) = REPLAY_CALLS
    assert dict(request.environment) == {"OPENAI_API_KEY": OPENAI_VALUE}
    assert request.attempt == 1
    assert request.entry == entry_of(execution)
    assert request.candidate.id == "codex-luna"
    assert request.case["id"] == execution.case_key


def test_qualification_is_checked_before_the_ceiling(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("opencode-kimi",), limit=1, ceiling="0.1")
    Run.objects.filter(pk=run.pk).update(spent_usd=Decimal("5"))
    execute_run(run, environ={})
    assert executions(run)[0].failure_code == "qualification_environment_missing"
    run.refresh_from_db()
    assert run.stopped_at_ceiling is False


# --- the campaign cost ceiling: a reservation, never an overshoot ---------------------------------------
# Each attempt reserves its budget's maxCostUsd (codex-luna: $1.50) before it runs; the reference
# checked spent-so-far instead and could overshoot by one execution (docs/DESIGN.md's quirks).


def test_an_execution_runs_only_when_its_worst_case_fits_under_the_ceiling(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=4, ceiling="2.1")
    for execution in executions(run):
        store(execution, completed(execution, cost=0.3))
    summary = execute_run(run, environ=ENVIRON)
    rows = executions(run)
    # $0 + $1.50, $0.30 + $1.50 and $0.60 + $1.50 fit under $2.10; $0.90 + $1.50 does not.
    assert [row.classification for row in rows] == ["completed", "completed", "completed", "skipped"]
    assert rows[3].failure_code == "campaign_cost_ceiling_reached"
    assert rows[3].failure_category == "orchestration"
    assert rows[3].failure_retryable is False
    assert rows[3].failure_message == (
        "campaign cost ceiling reached: spent $0.90 and $0.00 reserved of $2.10; an attempt may cost up to $1.50"
    )
    assert len(REPLAY_CALLS) == 3
    run.refresh_from_db()
    assert (run.spent_usd, run.reserved_usd, run.stopped_at_ceiling) == (Decimal("0.9"), Decimal("0"), True)
    assert summary.stopped_at_ceiling is True
    assert "spent $0.90 of $2.10 (stopped at the ceiling) · 3/3 scoreable passed; 0 infrastructure, 1 skipped, 0 alert(s)" in summary.line()


def test_a_run_under_the_ceiling_is_not_marked_stopped(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=2, ceiling="1.8")
    for execution in executions(run):
        store(execution, completed(execution, cost=0.3))
    execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    assert (run.spent_usd, run.stopped_at_ceiling, run.has_unpriced) == (Decimal("0.6"), False, False)


def test_a_worst_case_exactly_at_the_ceiling_still_runs(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=3, ceiling="1.8")
    for execution in executions(run):
        store(execution, completed(execution, cost=0.3))
    execute_run(run, environ=ENVIRON)
    # $0.30 spent + $1.50 reserved is exactly $1.80: it runs; $0.60 + $1.50 does not.
    assert [row.classification for row in executions(run)] == ["completed", "completed", "skipped"]


def test_a_ceiling_below_one_worst_case_runs_nothing(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=2, ceiling="1.49")
    for execution in executions(run):
        store(execution, completed(execution, cost=0.01))
    execute_run(run, environ=ENVIRON)
    assert REPLAY_CALLS == []
    assert [row.failure_code for row in executions(run)] == ["campaign_cost_ceiling_reached"] * 2
    assert Run.objects.get(pk=run.pk).spent_usd == 0


# --- retry once (the reference's retry wrapper) ---------------------------------------------------------------------


def test_a_retryable_error_is_retried_once_and_can_succeed(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, InfrastructureError("provider_http_503", True, "HTTP 503 from the provider"), completed(execution))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert execution.classification == "completed"
    assert [request.attempt for request in REPLAY_CALLS] == [1, 2]
    assert list(execution.attempts.values_list("number", "outcome", "error_code", "retryable", "message")) == [
        (1, "infrastructure_error", "provider_http_503", True, "HTTP 503 from the provider"),
        (2, "observation", "", None, ""),
    ]


def test_a_retryable_error_twice_is_an_infrastructure_failure(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    error = InfrastructureError("provider_http_503", True, "HTTP 503 from the provider")
    store(execution, error, error, completed(execution))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert len(REPLAY_CALLS) == 2
    assert execution.attempts.count() == 2
    assert (execution.classification, execution.failure_code, execution.failure_category, execution.failure_retryable) == (
        "infrastructure_failure",
        "provider_http_503",
        "provider",
        True,
    )
    assert execution.failure_message == "HTTP 503 from the provider"


def test_a_non_retryable_error_is_not_retried(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, InfrastructureError("quota_exhausted", False, "insufficient_quota"), completed(execution))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert len(REPLAY_CALLS) == 1
    assert list(execution.attempts.values_list("number", "error_code", "retryable")) == [(1, "quota_exhausted", False)]
    assert (execution.classification, execution.failure_retryable) == ("infrastructure_failure", False)


def test_failed_attempts_count_toward_spend(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=2)
    first, second = executions(run)
    billed = InfrastructureError("provider_http_529", True, "overloaded", cost_usd=0.3)
    store(first, billed, completed(first, cost=0.3))
    store(second, billed, billed)
    summary = execute_run(run, environ=ENVIRON)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.classification, first.cost_usd) == ("completed", Decimal("0.6"))
    assert (second.classification, second.cost_usd) == ("infrastructure_failure", Decimal("0.6"))
    assert list(second.attempts.values_list("cost_usd", flat=True)) == [Decimal("0.3"), Decimal("0.3")]
    assert summary.spent_usd == Decimal("1.2")


def test_a_retry_reserves_again_and_the_next_entry_waits_for_room(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=2, ceiling="2.0")
    first, second = executions(run)
    store(first, InfrastructureError("provider_http_503", True, "503", cost_usd=0.3), completed(first, cost=0.3))
    store(second, completed(second))
    execute_run(run, environ=ENVIRON)
    second.refresh_from_db()
    assert second.failure_code == "campaign_cost_ceiling_reached"
    assert len(REPLAY_CALLS) == 2
    assert Run.objects.get(pk=run.pk).spent_usd == Decimal("0.6")


def test_a_retry_that_cannot_reserve_is_not_made(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1, ceiling="1.7")
    (execution,) = executions(run)
    store(execution, InfrastructureError("provider_http_503", True, "HTTP 503", cost_usd=0.3), completed(execution, cost=0.3))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert len(REPLAY_CALLS) == 1
    assert (execution.classification, execution.failure_code, execution.cost_usd) == (
        "infrastructure_failure",
        "provider_http_503",
        Decimal("0.3"),
    )
    assert execution.failure_message == (
        "HTTP 503 (not retried: campaign cost ceiling reached: spent $0.30 and $0.00 reserved of $1.70; an attempt may cost up to $1.50)"
    )


# --- unknown cost (docs/failure-modes.md B5, docs/failure-modes.md B9) -------------------------------------------------------------


@pytest.mark.parametrize(
    "cost",
    [None, float("nan"), float("inf"), float("-inf"), -0.5, "0.3", True, 1e12],
    ids=["absent", "NaN", "inf", "-inf", "negative", "text", "boolean", "unbelievable"],
)
def test_an_unknown_cost_is_counted_at_the_candidates_budget(schedule, replay_executors, cost) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, completed(execution, cost=cost))
    summary = execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert execution.classification == "completed"
    assert execution.cost_known is False
    assert execution.cost_usd == Decimal("1.5")  # codex-luna's maxCostUsd, never $0
    run.refresh_from_db()
    assert (run.spent_usd, run.has_unpriced) == (Decimal("1.5"), True)
    assert summary.line().endswith("spent $1.50 + unpriced of $12.00 · 1/1 scoreable passed; 0 infrastructure, 0 skipped, 0 alert(s)")
    # The stored document is valid JSON on every database: no NaN or Infinity token.
    json.dumps(execution.observation, allow_nan=False)
    assert execution.attempts.get().cost_usd is None


@pytest.mark.parametrize(
    ("cost", "recorded"),
    [(0.1234567891, Decimal("0.123457")), (1e-9, Decimal("0.000001")), (0, Decimal("0")), (999999.5, Decimal("999999.5"))],
)
def test_a_known_cost_is_rounded_up_to_the_micro_dollar(schedule, replay_executors, cost, recorded) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, completed(execution, cost=cost))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert (execution.cost_usd, execution.cost_known) == (recorded, True)


def test_non_finite_metrics_are_stored_as_null(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    observation = completed(execution, cost=float("nan"))
    observation["metrics"]["settlementMs"] = float("inf")
    observation["base"]["efficiency"] = {"latencyMs": float("-inf"), "costUsd": float("nan")}
    store(execution, observation)
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert execution.observation["metrics"]["costUsd"] is None
    assert execution.observation["metrics"]["settlementMs"] is None
    assert execution.observation["base"]["efficiency"] == {"latencyMs": None, "costUsd": None}
    assert execution.observation["metrics"]["totalTokens"] == 1200


def test_unknown_cost_reserves_the_budget_against_the_ceiling(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=2, ceiling="2")
    first, second = executions(run)
    store(first, completed(first, cost=None))
    store(second, completed(second, cost=0.01))
    execute_run(run, environ=ENVIRON)
    second.refresh_from_db()
    assert second.failure_code == "campaign_cost_ceiling_reached"


# --- fallbacks: crashes, invalid observations, unavailable runtimes -------------------------------------------


def test_an_unexpected_exception_is_recorded_and_the_run_goes_on(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=3)
    first, second, third = executions(run)
    store(first, ZeroDivisionError("division by zero"), completed(first))
    store(second, completed(second, cost=0.1))
    store(third, KeyError("missing"))
    summary = execute_run(run, environ=ENVIRON)
    rows = executions(run)
    assert [row.classification for row in rows] == ["infrastructure_failure", "completed", "infrastructure_failure"]
    assert rows[0].failure_code == "executor_crashed"
    assert rows[0].failure_category == "orchestration"
    assert rows[0].failure_retryable is False
    assert rows[0].failure_message == "the executor crashed: ZeroDivisionError: division by zero"
    assert list(rows[0].attempts.values_list("outcome", "error_code")) == [("crash", "executor_crashed")]
    assert len(REPLAY_CALLS) == 3  # a crash is not retried
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert summary.by_failure_code == {"executor_crashed": 2}


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        ("not a dict", "observation must be a JSON object"),
        ({"schema": "v0", "classification": "completed", "metrics": {}}, "schema must be paperclip.runner.workflow-observation.v1"),
        (
            {"schema": "paperclip.runner.workflow-observation.v1", "classification": "great", "metrics": {}},
            "classification must be one of: completed, candidate_failure, infrastructure_failure, skipped",
        ),
        (
            {"schema": "paperclip.runner.workflow-observation.v1", "classification": "skipped", "metrics": {}},
            "failure is required when classification is infrastructure_failure or skipped",
        ),
        (
            {"schema": "paperclip.runner.workflow-observation.v1", "classification": "completed", "metrics": []},
            "metrics must be an object",
        ),
        (
            {"schema": "paperclip.runner.workflow-observation.v1", "classification": "completed", "metrics": {}, "extra": {1, 2}},
            "extra is not a JSON value",
        ),
    ],
)
def test_an_invalid_observation_is_an_infrastructure_failure(schedule, replay_executors, returned, problem) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, returned)
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert (execution.classification, execution.failure_code, execution.failure_retryable) == (
        "infrastructure_failure",
        "invalid_observation",
        False,
    )
    assert execution.failure_message.startswith("the executor returned an invalid observation: ")
    assert problem in execution.failure_message
    assert execution.observation["failure"]["code"] == "invalid_observation"


@pytest.mark.parametrize(
    ("candidate", "runtime", "setting"),
    # Every adapter runs through its live executor by default; an ACP candidate needs its agent
    # (and acpx-codex-sol the codex that codex-acp runs).
    [
        ("codex-luna", "codex", "EVALHUB_CODEX_BIN"),
        ("opencode-kimi", "opencode", "EVALHUB_OPENCODE_BIN"),
        ("acpx-claude-sonnet", "claude-acp", "EVALHUB_CLAUDE_ACP_BIN"),
        ("acpx-codex-sol", "codex-acp", "EVALHUB_CODEX_ACP_BIN"),
        ("acpx-codex-sol", "codex", "EVALHUB_CODEX_BIN"),
    ],
)
def test_the_default_executor_reports_a_missing_runtime_without_retrying(schedule, settings, candidate, runtime, setting) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "RUNTIME_BINARIES": {runtime: f"/nonexistent/{runtime}"}}
    run = make_run(schedule, candidates=(candidate,), limit=1)
    execute_run(run, environ=ENVIRON)
    (execution,) = executions(run)
    assert (execution.classification, execution.failure_code, execution.failure_retryable) == (
        "infrastructure_failure",
        "runtime_missing",
        False,
    )
    assert execution.attempts.count() == 1
    assert f"fix {setting}" in execution.failure_message


def test_an_unregistered_adapter_is_an_infrastructure_failure(schedule, settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "EXECUTORS": {"codex_app_server": "runs.executors.nowhere.Missing"}}
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    execute_run(run, environ=ENVIRON)
    (execution,) = executions(run)
    assert execution.failure_code == "executor_not_registered"
    assert execution.failure_message == ("the executor for adapter codex_app_server (runs.executors.nowhere.Missing) cannot be imported")


def test_a_run_claimed_elsewhere_is_left_alone(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    summary = execute_run(run, environ=ENVIRON)
    assert REPLAY_CALLS == []
    assert summary.by_classification == {}
    assert executions(run)[0].status == "pending"


def test_progress_is_reported_after_each_execution(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=3)
    seen: list[tuple[int, int, str]] = []
    execute_run(run, environ={}, progress=lambda done, total, execution: seen.append((done, total, execution.execution_id)))
    assert seen == [(index, 3, execution.execution_id) for index, execution in enumerate(executions(run), start=1)]


# --- redaction everywhere (docs/failure-modes.md B12) ----------------------------------------------------------


def stored_text(caplog: pytest.LogCaptureFixture) -> str:
    """Everything evalhub stored or logged during the test, as one text."""
    rows = [
        list(Execution.objects.values()),
        list(Attempt.objects.values()),
        list(Run.objects.values()),
    ]
    return json.dumps(rows, default=str) + caplog.text


def test_secrets_never_reach_rows_or_logs(schedule, replay_executors, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    run = make_run(schedule, candidates=("codex-luna",), limit=5)
    first, second, third, fourth, fifth = executions(run)
    environ_dump = str(dict(ENVIRON))
    store(first, InfrastructureError("provider_http_401", False, f"{B12_401} key={OPENAI_VALUE}"))
    store(second, RuntimeError(f"{B12_HEADERS} {B12_AWS} environ={environ_dump}"))
    leaky = completed(third)
    leaky["classification"] = "candidate_failure"
    leaky["failure"] = {
        "code": "wrong_answer",
        "category": "candidate",
        "retryable": False,
        "message": f"model echoed {OPENAI_VALUE} and {B12_OPENAI}",
    }
    leaky["lifecycle"]["checks"] = [{"id": "finished", "passed": False, "reason": f"saw Bearer {B12_JWT}"}]
    leaky["artifactDigests"] = [environ_dump]
    store(third, leaky)
    store(
        fourth,
        InfrastructureError("provider_http_503", True, f"503 for {B12_AWS} using {OPENAI_VALUE}"),
        completed(fourth),
    )
    store(
        fifth,
        InfrastructureError("provider_http_503", True, f"503 {environ_dump}"),
        InfrastructureError("provider_http_503", True, f"again {B12_HEADERS}"),
    )
    execute_run(run, environ=ENVIRON)

    text = stored_text(caplog)
    for secret in SECRETS:
        assert secret not in text
    assert "[REDACTED]" in text
    rows = executions(run)
    assert rows[0].failure_message == ("Error code: 401 - {'error': {'message': 'Incorrect API key provided: [REDACTED]'}} key=[REDACTED]")
    assert rows[2].classification == "candidate_failure"
    assert rows[2].failure_message == "model echoed [REDACTED] and [REDACTED]"
    assert rows[2].observation["lifecycle"]["checks"][0]["reason"] == "saw [REDACTED]"
    assert "/usr/bin" in rows[1].failure_message  # harmless values are kept
    assert rows[3].attempts.get(number=1).message == "503 for [REDACTED] using [REDACTED]"


def test_a_secret_in_a_crash_is_redacted_in_the_warning_log(schedule, replay_executors, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, ValueError(f"bad key {OPENAI_VALUE} {B12_OPENAI}"))
    execute_run(run, environ=ENVIRON)
    warnings = [record.getMessage() for record in caplog.records if record.name == "runs.execution"]
    assert warnings == [f"execution {execution.execution_id}: the executor crashed: ValueError: bad key [REDACTED] [REDACTED]"]


def test_an_aborted_run_records_a_redacted_error(schedule, replay_executors) -> None:
    run = make_run(schedule, candidates=("codex-luna",), limit=1)

    def interrupt(done: int, total: int, execution: Execution) -> None:
        raise KeyboardInterrupt(f"stopped while holding {OPENAI_VALUE} {B12_AWS}")

    with pytest.raises(KeyboardInterrupt):
        execute_run(run, environ=ENVIRON, progress=interrupt)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error == "KeyboardInterrupt: stopped while holding [REDACTED] [REDACTED]"


def test_a_candidate_carrying_a_secret_is_refused_and_redacted(schedule, replay_executors) -> None:
    """A snapshot written around full_clean() (a raw update, loaddata) never reaches an executor."""
    from schedules.models import ScheduleEntry

    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    ScheduleEntry.objects.filter(pk=execution.entry_id).update(candidate={**execution.entry.candidate, "model": B12_OPENAI})
    store(execution, completed(execution))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert REPLAY_CALLS == []
    assert (execution.classification, execution.failure_code, execution.failure_category) == (
        "skipped",
        "candidate_configuration_invalid",
        "qualification",
    )
    assert execution.failure_message == (
        "the candidate's configuration holds secret-shaped data (OpenAI API key); store environment variable names only in the catalog, "
        "then run it again"
    )
    assert B12_OPENAI not in json.dumps(execution.observation)


def test_a_candidate_carrying_a_secret_keeps_the_night_and_its_schedule_never_holds_it(reference_catalog: None) -> None:
    """A row written around validation does not stop the night: the schedule is built with the
    value redacted, and only that candidate's executions are refused when they run
    (tests/test_rows_around_validation.py runs them)."""
    from candidates.models import Candidate
    from schedules.services import unsafe_candidate_problem

    Candidate.objects.filter(key="codex-luna").update(reasoning_effort=B12_AWS)
    schedule, created = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    assert created
    document = schedule.to_document()
    assert B12_AWS not in json.dumps(document)
    (luna,) = [candidate for candidate in document["candidates"] if candidate["id"] == "codex-luna"]
    assert unsafe_candidate_problem(luna) == (
        "the candidate's configuration holds secret-shaped data; store environment variable names only in the catalog, then run it again"
    )


# --- provider errors: which failures get the one retry (docs/failure-modes.md B4) --------------------------


def provider_error(code: str, retryable: bool, *, retry_after_s: float | None = None, cost_usd: float | None = None) -> InfrastructureError:
    """A provider failure as the live drivers raise it (``runs.executors.live.session.PROVIDER_FAILURES``)."""
    return InfrastructureError(code, retryable, f"the model provider failed: {code}", retry_after_s=retry_after_s, cost_usd=cost_usd)


B4_CASES = [
    pytest.param(
        lambda: provider_error("provider_rate_limited", True, retry_after_s=1.0), 2, "provider_rate_limited", [1.0], id="429 rate limit"
    ),
    pytest.param(lambda: provider_error("provider_quota_exhausted", False), 1, "provider_quota_exhausted", [], id="429 quota"),
    pytest.param(lambda: provider_error("provider_http_500", True), 2, "provider_http_500", [0.0], id="500"),
    pytest.param(lambda: provider_error("provider_http_503", True), 2, "provider_http_503", [0.0], id="503"),
    pytest.param(lambda: provider_error("provider_stream_dropped", True), 2, "provider_stream_dropped", [0.0], id="dropped stream"),
    pytest.param(lambda: provider_error("provider_unreachable", True), 2, "provider_unreachable", [0.0], id="connection refused"),
    pytest.param(lambda: provider_error("provider_bad_request", False), 1, "provider_bad_request", [], id="400"),
    pytest.param(lambda: provider_error("provider_auth_refused", False), 1, "provider_auth_refused", [], id="401"),
    pytest.param(lambda: provider_error("provider_unknown_model", False), 1, "provider_unknown_model", [], id="404 model"),
    pytest.param(
        lambda: provider_error("provider_rate_limited", True, retry_after_s=3600.0), 1, "provider_rate_limited", [], id="429 wait an hour"
    ),
]


@pytest.mark.parametrize(("make_error", "attempts", "code", "waits"), B4_CASES)
def test_provider_failures_get_one_retry_only_when_it_can_help(
    schedule, replay_executors, monkeypatch, make_error, attempts, code, waits
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("runs.execution.sleep", slept.append)
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, make_error(), make_error())
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert len(REPLAY_CALLS) == execution.attempts.count() == attempts
    assert (execution.classification, execution.failure_code) == ("infrastructure_failure", code)
    assert slept == waits


def test_a_retry_after_beyond_the_cap_fails_fast_and_says_why(schedule, replay_executors, monkeypatch) -> None:
    monkeypatch.setattr("runs.execution.sleep", lambda seconds: pytest.fail(f"slept {seconds} s"))
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, provider_error("provider_rate_limited", True, retry_after_s=3600.0))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert execution.failure_message == (
        "the model provider failed: provider_rate_limited (not retried: the provider asked to wait 3600 s, more than 30 s)"
    )


def test_a_rate_limit_then_success_completes(schedule, replay_executors, monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("runs.execution.sleep", slept.append)
    run = make_run(schedule, candidates=("codex-luna",), limit=1)
    (execution,) = executions(run)
    store(execution, provider_error("provider_rate_limited", True, retry_after_s=2.0, cost_usd=0.3), completed(execution))
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert (execution.classification, execution.cost_usd, slept) == ("completed", Decimal("0.6"), [2.0])


@pytest.mark.parametrize("bad", ["OPENAI_API_KEY", 5, {"a": 1}])
def test_a_required_environment_written_around_validation_refuses_only_that_candidate(reference_catalog, bad) -> None:
    """A row updated without full_clean() must not be read letter by letter (docs/failure-modes.md B8)
    or crash the nightly: the preview is built, and the candidate is named as not runnable."""
    import datetime as dt

    from candidates.models import Candidate
    from schedules.services import preview_schedule, unsafe_candidate_problem

    Candidate.objects.filter(key="codex-luna").update(required_environment=bad)
    document = preview_schedule(seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 24, tzinfo=dt.UTC))
    (luna,) = [candidate for candidate in document["candidates"] if candidate["id"] == "codex-luna"]
    assert unsafe_candidate_problem(luna) == (
        "the candidate's required environment is not a list of environment variable names; "
        "fix it in the catalog (for example OPENAI_API_KEY), then run it again"
    )
