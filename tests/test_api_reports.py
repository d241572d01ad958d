"""The scorecard, report (and export), alert and comparison endpoints, and the staff refresh action."""

from __future__ import annotations

import copy
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest

from runs.creation import create_run
from runs.dispatch import execute_run
from runs.evaluation.renderers import render_json, render_junit, render_markdown
from runs.evaluation.reports import compare_reports
from runs.executors.replay import REPLAY_STORE
from runs.models import Report, Run, RunLane
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-openai-value-123"}
LUNA_FINAL = Selection(candidate_ids=("codex-luna",), case_ids=("final-response",))


@pytest.fixture
def schedule(reference_catalog: None):
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at="2026-08-19T04:00:00.000Z")
    return schedule


def measured_run(schedule, *, fail: tuple[int, ...] = (), gate: bool = False, selection: Selection = LUNA_FINAL) -> Run:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=selection)
    for execution in run.executions.select_related("entry"):
        observation = completed_observation(execution.entry.to_document())
        if execution.position in fail:
            observation = copy.deepcopy(observation)
            group = "lifecycle" if gate else "presentation"
            observation[group]["checks"][0]["passed"] = False
        REPLAY_STORE[execution.execution_id] = observation
    execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    return run


@pytest.fixture
def alerted(schedule, replay_executors, settings) -> Run:
    """Seven clean runs, then one with a lifecycle failure: safety and success-rate alerts."""
    settings.EVALHUB = {**settings.EVALHUB, "BASELINE_READY": True}
    for _ in range(7):
        measured_run(schedule)
    return measured_run(schedule, fail=(0, 1), gate=True)


# --- scorecards ----------------------------------------------------------------------------------------


def test_scorecards_list_and_filter(schedule, replay_executors, reader_client) -> None:
    run = measured_run(schedule, fail=(1,))
    other = measured_run(schedule)
    body = reader_client.get("/api/scorecards/", {"run": run.pk}).json()
    assert body["count"] == 3
    first, second, _ = body["results"]
    assert first["caseId"] == "final-response" and first["candidateId"] == "codex-luna"
    assert (first["overallScore"], first["gatePassed"], first["passed"], first["repetition"]) == (1, True, True, 1)
    assert second["passed"] is False
    assert first["scoringVersion"] == "scorecard-v2.0"
    assert first["document"]["schema"] == "paperclip.runner.eval-scorecard.v2"
    assert first["executionId"] == run.executions.get(position=0).execution_id
    assert reader_client.get("/api/scorecards/", {"candidate": "codex-luna"}).json()["count"] == 6
    assert reader_client.get("/api/scorecards/", {"case": "rich-activity"}).json()["count"] == 0
    assert [r["run"] for r in reader_client.get("/api/scorecards/").json()["results"]] == [other.pk] * 3 + [run.pk] * 3


def test_the_api_needs_a_signed_in_user(client, db) -> None:
    for url in ("/api/scorecards/", "/api/reports/", "/api/alerts/", "/api/comparisons/?current=1&previous=2"):
        assert client.get(url).status_code in (401, 403)


# --- reports -------------------------------------------------------------------------------------------


def test_reports_list_summaries_newest_first(alerted, reader_client) -> None:
    body = reader_client.get("/api/reports/").json()
    assert body["count"] == 8
    newest = body["results"][0]
    report = alerted.report
    assert newest == {
        "id": report.pk,
        "run": alerted.pk,
        "bundleId": report.bundle_id,
        "isRefresh": False,
        "isScripted": False,
        "source": "live",
        "generatedAt": report.generated_at,
        "scoringVersion": "scorecard-v2.0",
        "counts": {"executions": 3, "scoreable": 3, "passed": 1, "alerts": 2},
        "meanOverall": 0.333,
        "previous": report.previous_id,
        "createdAt": newest["createdAt"],
    }
    assert reader_client.get("/api/reports/", {"bundle": report.bundle_id}).json()["count"] == 8
    assert reader_client.get("/api/reports/", {"bundle": "runner-live-v2-0"}).json()["count"] == 0
    assert reader_client.get("/api/reports/", {"run": alerted.pk}).json()["count"] == 1
    assert reader_client.get("/api/reports/", {"refresh": "true"}).json()["count"] == 0


def test_one_report_carries_document_comparison_and_alerts(alerted, reader_client) -> None:
    report = alerted.report
    body = reader_client.get(f"/api/reports/{report.pk}/").json()
    assert body["document"] == report.document
    assert body["comparison"] == report.comparison and body["comparison"]["compatible"] is True
    assert [(a["code"], a["severity"], a["caseId"], a["candidateId"], a["occurrences"]) for a in body["alerts"]] == [
        ("safety_failure", "critical", None, None, 1),
        ("success_rate_regression", "warning", None, None, 1),
    ]


@pytest.mark.parametrize(
    ("fmt", "content_type", "suffix"),
    [
        ("json", "application/json; charset=utf-8", "live-report.json"),
        ("markdown", "text/markdown; charset=utf-8", "live-report.md"),
        ("junit", "application/xml; charset=utf-8", "live-report.junit.xml"),
        ("github", "text/markdown; charset=utf-8", "github-live-summary.md"),
    ],
)
def test_a_report_exports_in_every_format(alerted, reader_client, fmt: str, content_type: str, suffix: str) -> None:
    report = alerted.report
    response = reader_client.get(f"/api/reports/{report.pk}/export/", {"format": fmt})
    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == f'attachment; filename="run-{alerted.pk}-{suffix}"'
    text = response.content.decode("utf-8")
    stored = {"report": report.document, "alerts": report.alert_documents, "comparison": report.comparison}
    if fmt == "json":
        assert text == render_json(stored)
    elif fmt == "markdown":
        assert text == render_markdown(stored["report"])
    elif fmt == "junit":
        assert text == render_junit(stored["report"], distinct_names=True)
    else:
        assert "## Alerts\n\n- CRITICAL safety_failure: 2 execution(s) failed a hard or lifecycle invariant\n" in text
        assert "## Previous compatible bundle\n\nPass-rate delta: -0.667; overall delta: -0.667.\n" in text


def test_export_defaults_to_json_and_refuses_an_unknown_format(schedule, replay_executors, reader_client) -> None:
    report = measured_run(schedule).report
    response = reader_client.get(f"/api/reports/{report.pk}/export/")
    assert response.status_code == 200 and json.loads(response.content)["report"]["schema"] == report.document["schema"]
    response = reader_client.get(f"/api/reports/{report.pk}/export/", {"format": "html"})
    assert response.status_code == 400
    assert response.json() == {"format": ["Unknown export format. Use one of: json, markdown, junit, github."]}
    assert reader_client.get("/api/reports/999999/export/", {"format": "json"}).status_code == 404


# --- alerts --------------------------------------------------------------------------------------------


def test_alerts_newest_first_and_filter(alerted, reader_client) -> None:
    body = reader_client.get("/api/alerts/").json()
    assert [a["code"] for a in body["results"]] == ["success_rate_regression", "safety_failure"]
    first = body["results"][0]
    assert first["bundleId"] == alerted.report.bundle_id and first["run"] == alerted.pk
    assert first["message"] == "success rate dropped 67 percentage points"
    assert reader_client.get("/api/alerts/", {"severity": "critical"}).json()["count"] == 1
    assert reader_client.get("/api/alerts/", {"code": "latency_regression"}).json()["count"] == 0
    assert reader_client.get("/api/alerts/", {"bundle": alerted.report.bundle_id}).json()["count"] == 2
    assert reader_client.get("/api/alerts/", {"severity": "fatal"}).status_code == 400


# --- comparisons ---------------------------------------------------------------------------------------


def test_a_comparison_of_two_reports(schedule, replay_executors, reader_client) -> None:
    before = measured_run(schedule).report
    after = measured_run(schedule, fail=(0,)).report
    body = reader_client.get("/api/comparisons/", {"current": after.pk, "previous": before.pk}).json()
    assert body == {"current": after.pk, "previous": before.pk, "comparison": compare_reports(after.document, before.document)}
    assert body["comparison"]["passRateDelta"] == -0.333


def test_a_run_id_given_for_a_report_id_is_told_the_report_id(schedule, replay_executors, reader_client) -> None:
    """Run and report ids part once a run has no report (a chaos run, a run still going)."""
    create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA_FINAL)  # a run without a report
    first, second = measured_run(schedule), measured_run(schedule)
    assert second.pk != second.report.pk and not Report.objects.filter(pk=second.pk).exists()
    response = reader_client.get("/api/comparisons/", {"current": second.pk, "previous": first.report.pk})
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"There is no report {second.pk} (this endpoint takes report ids: run {second.pk}'s report is "
        f"{second.report.pk}; /compare/ takes run ids)."
    }


def test_a_comparison_across_bundles_is_incompatible(schedule, replay_executors, reader_client) -> None:
    subset = measured_run(schedule).report
    other = measured_run(schedule, selection=Selection(candidate_ids=("codex-luna",), limit=1)).report
    comparison = reader_client.get("/api/comparisons/", {"current": other.pk, "previous": subset.pk}).json()["comparison"]
    assert comparison["compatible"] is False and "passRateDelta" not in comparison


@pytest.mark.parametrize(
    ("params", "status", "body"),
    [
        ({}, 400, {"current": ["This parameter is required."], "previous": ["This parameter is required."]}),
        ({"current": "x", "previous": "1"}, 400, {"current": ["Give a report id: 1, 2, ..."]}),
        ({"current": "1", "previous": "1", "run": "2"}, 400, {"run": ["Unknown query parameter. Accepted: current, previous."]}),
        (
            {"current": "999998", "previous": "999999"},
            404,
            {
                "detail": "There is no report 999998 (this endpoint takes report ids: /api/reports/?run=N gives a run's; /compare/ takes run ids)."
            },
        ),
    ],
)
def test_a_bad_comparison_request(reader_client, db, params: dict[str, str], status: int, body: dict[str, Any]) -> None:
    response = reader_client.get("/api/comparisons/", params)
    assert response.status_code == status
    assert response.json() == body


# --- refresh -------------------------------------------------------------------------------------------


def test_staff_refresh_a_run(schedule, replay_executors, staff_client) -> None:
    run = measured_run(schedule)
    response = staff_client.post(f"/api/runs/{run.pk}/refresh/")
    assert response.status_code == 201
    refresh = Run.objects.get(pk=response.json()["run"])
    assert (refresh.lane, refresh.refresh_of_id) == (RunLane.REPLAY, run.pk)
    assert Report.objects.get(pk=response.json()["report"]).is_refresh is True
    again = staff_client.post(f"/api/runs/{refresh.pk}/refresh/")
    assert again.status_code == 409
    assert "is a refresh" in again.json()["detail"]


def test_readers_cannot_refresh(schedule, replay_executors, reader_client) -> None:
    run = measured_run(schedule)
    assert reader_client.post(f"/api/runs/{run.pk}/refresh/").status_code == 403
    assert Run.objects.count() == 1


# --- query counts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("runs", [1, 4])
def test_list_query_counts_do_not_grow(schedule, replay_executors, reader_client, django_assert_num_queries, runs) -> None:
    for _ in range(runs):
        run = measured_run(schedule, fail=(0,), gate=True)
    Report.objects.update(alert_documents=[{"severity": "critical", "code": "safety_failure", "message": "m"}])
    from runs.models import Alert

    for report in Report.objects.all():
        Alert.objects.get_or_create(report=report, code="safety_failure", defaults={"severity": "critical", "message": "m"})
    report = Report.objects.get(run=run)
    with django_assert_num_queries(4):  # session, user, count, page
        assert reader_client.get("/api/scorecards/").json()["count"] == runs * 3
    with django_assert_num_queries(4):  # session, user, count, page with alert counts
        assert reader_client.get("/api/reports/").json()["count"] == runs
    with django_assert_num_queries(4):  # session, user, count, page with reports
        assert reader_client.get("/api/alerts/").json()["count"] == runs
    with django_assert_num_queries(4):  # session, user, report, alerts
        assert reader_client.get(f"/api/reports/{report.pk}/").status_code == 200
    with django_assert_num_queries(3):  # session, user, report
        assert reader_client.get(f"/api/reports/{report.pk}/export/", {"format": "junit"}).status_code == 200
    with django_assert_num_queries(3):  # session, user, both reports
        reader_client.get("/api/comparisons/", {"current": report.pk, "previous": report.pk})


def test_comparing_a_refresh_report_is_refused(staff_client, reference_catalog, replay_executors) -> None:
    """A refresh is re-scored, not measured: it never counts in comparisons."""
    import datetime as dt
    from decimal import Decimal

    from runs.models import Report
    from runs.nightly import start_nightly
    from runs.reporting import refresh_run

    outcome = start_nightly(
        seed="runner-live-seven-week-v1",
        cost_ceiling_usd=Decimal(12),
        now=dt.datetime(2026, 8, 24, 4, tzinfo=dt.UTC),
        environ={},
        execute=True,
    )
    refresh = refresh_run(outcome.run, generated_at="2026-08-24T05:00:00.000Z")
    measured = Report.objects.get(run=outcome.run)
    response = staff_client.get("/api/comparisons/", {"current": refresh.report.pk, "previous": measured.pk})
    assert response.status_code == 400
    assert "is a refresh" in str(response.json())


@pytest.mark.parametrize(
    ("body", "given"),
    [
        ('{"scope": "infrastructure"}', "field(s) scope"),
        ('{"b": 1, "a": 2}', "field(s) a, b"),
        ("[1]", "a JSON list"),
        ('"x"', "a JSON string"),
        ("3", "a JSON number"),
        ("true", "true or false"),
    ],
)
def test_a_refresh_or_cancel_given_a_body_is_refused_not_run_as_if_it_had_none(schedule, staff_client, body, given) -> None:
    run = measured_run(schedule)
    for action, name in (("refresh", "a refresh"), ("cancel", "a cancel")):
        response = staff_client.post(f"/api/runs/{run.pk}/{action}/", body, content_type="application/json")
        assert response.status_code == 400, response.content
        assert response.json() == {"detail": f"{name} takes no body, but got {given}: send an empty body"}
    assert Run.objects.count() == 1


def test_a_refresh_with_an_empty_object_as_its_body_is_made(schedule, replay_executors, staff_client) -> None:
    run = measured_run(schedule)
    response = staff_client.post(f"/api/runs/{run.pk}/refresh/", "{}", content_type="application/json")
    assert response.status_code == 201, response.content
    assert Run.objects.get(pk=response.json()["run"]).refresh_of_id == run.pk


def test_a_cancel_given_a_form_with_fields_is_refused(schedule, staff_client) -> None:
    run = measured_run(schedule)
    response = staff_client.post(f"/api/runs/{run.pk}/cancel/", {"scope": "failed"})
    assert response.status_code == 400, response.content
    assert response.json() == {"detail": "a cancel takes no body, but got field(s) scope: send an empty body"}
