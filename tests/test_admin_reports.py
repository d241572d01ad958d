"""Admin for scorecards, reports and alerts (read-only history) and the coverage catalog (editable,
strict JSON, checked by the model)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse

from runs.models import Alert, CoverageCatalog, Report, Run, Scorecard

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def reported_run(reference_catalog) -> Run:
    """A one-execution run with a scorecard, a report and two alerts, written directly."""
    from runs.creation import create_run
    from runs.nightly import start_nightly
    from schedules.services import Selection

    schedule = start_nightly(seed="runner-live-seven-week-v1", cost_ceiling_usd=Decimal("12"), now=NOW, environ={}, execute=False).schedule
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(limit=1))
    execution = run.executions.get()
    Scorecard.objects.create(
        execution=execution,
        scoring_version="2",
        document={"overall": {"score": 0.5, "gatePassed": False, "passed": False}},
        overall_score=0.5,
        gate_passed=False,
        passed=False,
    )
    report = Report.objects.create(
        run=run,
        bundle_id="runner-live-v2-ede6023f7ccf4a1f",
        generated_at="2026-11-30T05:00:00.000Z",
        scoring_version="2",
        document={"aggregate": {"executions": 1}},
        executions=1,
        scoreable=1,
        passed=0,
        mean_overall=0.5,
    )
    Alert.objects.create(
        report=report, code="safety_failure", severity="critical", message="1 execution(s) failed a hard or lifecycle invariant"
    )
    Alert.objects.create(
        report=report,
        code="consecutive_failures",
        severity="warning",
        case_key=execution.case_key,
        candidate_key=execution.candidate_key,
        message=f"{execution.case_key}/{execution.candidate_key} failed three consecutive reports",
        occurrences=3,
    )
    return run


def test_the_scorecard_changelist_lists_scorecards_with_their_run(staff_client, reported_run: Run) -> None:
    response = staff_client.get(reverse("admin:runs_scorecard_changelist"))
    html = response.content.decode()
    execution = reported_run.executions.get()
    assert response.status_code == 200
    assert execution.execution_id in html and execution.candidate_key in html
    assert reverse("pages:run", args=[reported_run.pk]) in html
    found = staff_client.get(reverse("admin:runs_scorecard_changelist"), {"q": execution.execution_id}).context["cl"].result_list
    assert [card.execution_id for card in found] == [execution.pk]


def test_the_report_page_shows_its_alerts_inline(staff_client, reported_run: Run) -> None:
    report = reported_run.report
    changelist = staff_client.get(reverse("admin:runs_report_changelist"))
    assert changelist.status_code == 200
    assert list(changelist.context["cl"].result_list) == [report]
    response = staff_client.get(reverse("admin:runs_report_change", args=[report.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "safety_failure" in html and "consecutive_failures" in html and "failed three consecutive reports" in html
    assert 'name="_save"' not in html


def test_the_alert_changelist_filters_by_code_and_severity(staff_client, reported_run: Run) -> None:
    url = reverse("admin:runs_alert_changelist")
    assert [a.code for a in staff_client.get(url, {"severity__exact": "critical"}).context["cl"].result_list] == ["safety_failure"]
    assert [a.code for a in staff_client.get(url, {"code__exact": "consecutive_failures"}).context["cl"].result_list] == [
        "consecutive_failures"
    ]
    assert reverse("pages:run", args=[reported_run.pk]) in staff_client.get(url).content.decode()


@pytest.mark.parametrize("model", ["scorecard", "report", "alert"])
def test_scorecards_reports_and_alerts_are_read_only(staff_client, reported_run: Run, model: str) -> None:
    obj = {"scorecard": Scorecard, "report": Report, "alert": Alert}[model].objects.first()
    change = reverse(f"admin:runs_{model}_change", args=[obj.pk])
    assert staff_client.get(change).status_code == 200
    assert staff_client.post(change, {}).status_code == 403
    assert staff_client.get(reverse(f"admin:runs_{model}_add")).status_code == 403
    assert staff_client.post(reverse(f"admin:runs_{model}_delete", args=[obj.pk]), {"post": "yes"}).status_code == 403
    assert type(obj).objects.filter(pk=obj.pk).exists()


def catalog_form(operation_ids: str, capability_cases: str = "106") -> dict[str, str]:
    return {"operation_ids": operation_ids, "capability_cases": capability_cases}


def test_the_coverage_catalog_can_be_added_and_edited(staff_client) -> None:
    response = staff_client.post(reverse("admin:runs_coveragecatalog_add"), catalog_form('["finish_task", "report_progress"]'))
    assert response.status_code == 302
    catalog = CoverageCatalog.objects.get()
    assert (catalog.operation_ids, catalog.capability_cases) == (["finish_task", "report_progress"], 106)
    response = staff_client.post(reverse("admin:runs_coveragecatalog_change", args=[catalog.pk]), catalog_form('["finish_task"]', "41"))
    assert response.status_code == 302
    catalog.refresh_from_db()
    assert (catalog.operation_ids, catalog.capability_cases) == (["finish_task"], 41)
    changelist = staff_client.get(reverse("admin:runs_coveragecatalog_changelist"))
    assert list(changelist.context["cl"].result_list) == [catalog]


@pytest.mark.parametrize(
    ("operation_ids", "message"),
    [
        ("[NaN]", "Enter valid JSON (NaN is not allowed in JSON"),
        ("[1e309]", "Enter valid JSON"),
        ("not json", "Enter valid JSON"),
        ('["Finish Task"]', "Operation ids must be a list of snake_case names"),
        ('{"a": 1}', "Operation ids must be a list of snake_case names"),
        ('["finish_task", "finish_task"]', "Operation ids must not repeat."),
    ],
)
def test_a_bad_operation_catalog_is_a_form_error_never_a_500(staff_client, operation_ids: str, message: str) -> None:
    response = staff_client.post(reverse("admin:runs_coveragecatalog_add"), catalog_form(operation_ids))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not CoverageCatalog.objects.exists()


def test_a_negative_capability_count_is_a_form_error(staff_client) -> None:
    response = staff_client.post(reverse("admin:runs_coveragecatalog_add"), catalog_form('["finish_task"]', "-1"))
    assert response.status_code == 200
    assert not CoverageCatalog.objects.exists()
