"""A workflow case added in the admin runs, is scored and is reported like the reference's twelve:
the catalog in the database is the catalog."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from runs.evaluation.observation_schema import catalog_case_ids, reference_validation_error, validate_observation
from runs.models import Report, Scorecard
from runs.nightly import start_nightly
from schedules.services import preview_schedule
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 9, 2, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-test-1", "OPENROUTER_API_KEY": "x-test-2", "ANTHROPIC_API_KEY": "x-test-3"}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def add_case_in_the_admin(staff_client: Any, key: str) -> None:
    response = staff_client.post(
        reverse("admin:schedules_workflowcase_add"),
        {
            "key": key,
            "title": "A case of our own",
            "tags": '["response"]',
            "providers": '["codex", "opencode", "acpx"]',
            "repetitions": "1",
            "steps": '[{"kind": "run_start", "taskMode": "ask"}]',
            "assertions": '{"requiredOperationIds": ["finish_task"]}',
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]


def test_an_admin_added_case_runs_scores_and_reports(reference_catalog, staff_client, replay_executors) -> None:
    add_case_in_the_admin(staff_client, "our-own-case")
    entries = preview_schedule(seed=SEED, now=NIGHT)["entries"]
    ours = [entry for entry in entries if entry["caseId"] == "our-own-case"]
    assert len(ours) == 2  # two slots a night, like every case
    for entry in entries:
        replay_executors.REPLAY_STORE[entry["executionId"]] = completed_observation(entry, cost_usd=0.01)

    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NIGHT, environ=ENVIRON, execute=True)

    run = outcome.run
    assert run.error == ""
    executions = {execution.execution_id: execution for execution in run.executions.all()}
    for entry in ours:
        execution = executions[entry["executionId"]]
        assert (execution.classification, execution.failure_code) == ("completed", "")
        assert Scorecard.objects.get(execution=execution).passed is True
    report = Report.objects.get(run=run)
    assert report.scoreable == len(entries)
    # Reported everywhere a report goes: the run page and each export name the case.
    assert "our-own-case" in staff_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    for fmt in ("json", "markdown", "junit", "github"):
        response = staff_client.get(reverse("pages:run-export", args=[run.pk, fmt]))
        assert response.status_code == 200, (fmt, response.content[:500])
        assert b"our-own-case" in response.content, fmt


def test_a_case_outside_the_catalog_is_still_refused() -> None:
    observation = completed_observation({"executionId": "rwe-0123456789abcdef", "caseId": "our-own-case", "candidateId": "codex-luna"})
    assert reference_validation_error(observation) == "workflow observation identity is invalid"
    assert any(problem.startswith("caseId must be one of: final-response") for problem in validate_observation(observation))
    assert validate_observation(observation, case_ids=["our-own-case"]) == []
    assert reference_validation_error(observation, case_ids=["our-own-case"]) is None
    assert catalog_case_ids(["our-own-case", "final-response"])[-1] == "our-own-case"


def large_catalog(slots: int, cases: int) -> None:
    """``slots`` slots of one candidate each (strong and inexpensive in turn) and ``cases`` cases of one's own."""
    from tests.builders import make_budget, make_candidate, make_case, make_slot

    budget = make_budget()
    for index in range(slots):
        make_candidate(
            slot=make_slot(key=f"slot-{index:03d}", position=index), budget=budget, tier="strong" if index % 2 else "inexpensive"
        )
    for index in range(cases):
        make_case(key=f"case-{index:03d}", position=index)


def test_more_slots_than_a_week_can_visit_is_refused_with_the_arithmetic() -> None:
    from schedules.services import CoverageError, require_coverage

    large_catalog(15, 3)
    with pytest.raises(CoverageError) as refused:
        require_coverage(seed=SEED)
    message = str(refused.value)
    assert "everyWorkflowCoversEverySlot is false" in message
    assert "at most 2 × 7 = 14 in a week, and the catalog has 15 slots" in message
    assert "EVALHUB_COVERAGE_CASE_SLOTS=reachable" in message


def test_a_hundred_slots_and_two_hundred_cases_build_run_and_report(settings) -> None:
    """With ``COVERAGE_CASE_SLOTS = "reachable"`` every case must meet 14 distinct slots a week."""
    from schedules.services import catalog_coverage

    large_catalog(100, 200)
    assert catalog_coverage(seed=SEED)["everyWorkflowCoversEverySlot"] is False  # the reference's invariant
    settings.EVALHUB = {**settings.EVALHUB, "COVERAGE_CASE_SLOTS": "reachable"}
    assert all(catalog_coverage(seed=SEED).values())
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NIGHT, environ={}, execute=True)
    assert outcome.summary.executions == 400  # 200 cases × 2 slots
    assert outcome.summary.by_classification == {"skipped": 400}
    assert outcome.run.error == ""
    report = Report.objects.get(run=outcome.run)
    assert report.scoreable == 0 and report.executions == 400
