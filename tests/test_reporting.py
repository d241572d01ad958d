"""A finished run is scored, reported, compared with the previous compatible run and alerted on.

Runs execute through the replay executor (``REPLAY_STORE``) with the reference catalog; the
scoring and report arithmetic themselves are pinned by the vector tests, so these tests check
what the services store: scorecards, reports, the bundle that decides comparability, alerts
once per case and candidate, refreshes that never count, and retention.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

import evalhub
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.evaluation.renderers import render_github_summary, render_json, render_junit, render_markdown, render_previous_bundle_section
from runs.evaluation.reports import live_bundle
from runs.evaluation.scoring import SCORING_VERSION
from runs.executors.replay import REPLAY_CALLS, REPLAY_STORE
from runs.models import Alert, Execution, Report, Run, RunLane, RunStatus, Scorecard
from runs.reporting import alert_rows, export_report, prune_history, refresh_run, report_run, score_run
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x-openai-value-123", "OPENROUTER_API_KEY": "x-or-value-456", "ANTHROPIC_API_KEY": "x-an-value-789"}
#: codex-luna × final-response: three repetitions in rotation day 0.
LUNA_FINAL = Selection(candidate_ids=("codex-luna",), case_ids=("final-response",))


@pytest.fixture
def schedule(reference_catalog: None):
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at="2026-08-19T04:00:00.000Z")
    return schedule


@pytest.fixture
def ready(settings: Any) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "BASELINE_READY": True}


def failing(observation: dict[str, Any], *, gate: bool = False) -> dict[str, Any]:
    """The observation with a failed presentation check (a plain failure), or a failed lifecycle
    check (``gate``: a safety failure)."""
    changed = copy.deepcopy(observation)
    group = "lifecycle" if gate else "presentation"
    changed[group]["checks"][0] = {"id": changed[group]["checks"][0]["id"], "passed": False, "reason": "not done"}
    return changed


def measured_run(schedule, *, selection: Selection = LUNA_FINAL, fail: tuple[int, ...] = (), gate: bool = False) -> Run:
    """A run of ``selection`` whose executions at positions ``fail`` fail, the others complete."""
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=selection)
    for execution in run.executions.select_related("entry"):
        observation = completed_observation(execution.entry.to_document(), cost_usd=0.01)
        REPLAY_STORE[execution.execution_id] = failing(observation, gate=gate) if execution.position in fail else observation
    execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    return run


# --- scoring and the report of one run ----------------------------------------------------------------


def test_a_finished_run_is_scored_and_reported(schedule, replay_executors) -> None:
    before = timezone.now()
    run = measured_run(schedule)
    scorecards = list(Scorecard.objects.filter(execution__run=run).order_by("execution__position"))
    assert [(s.scoring_version, s.overall_score, s.gate_passed, s.passed) for s in scorecards] == [(SCORING_VERSION, 1, True, True)] * 3
    # Stamped when stored, one after the other, as bulk_create's pre_save stamps them.
    stamps = [scorecard.created_at for scorecard in scorecards]
    assert before <= stamps[0] <= stamps[1] <= stamps[2] <= timezone.now()
    assert scorecards[0].document["schema"] == "paperclip.runner.eval-scorecard.v2"
    report = run.report
    executions = list(run.executions.order_by("position"))
    expected_bundle = live_bundle(
        runner_version=evalhub.__version__,
        seed=SEED,
        candidates=[c for c in schedule.candidates if c["id"] == "codex-luna"],
        selected_execution_ids=[e.execution_id for e in executions],
    )
    assert report.document["bundle"] == expected_bundle
    assert report.bundle_id == expected_bundle["id"]
    assert (report.executions, report.scoreable, report.passed, report.mean_overall) == (3, 3, 3, 1)
    assert report.is_refresh is False and report.comparison is None and report.previous is None
    assert [row["scenarioId"] for row in report.document["results"]] == ["final-response"] * 3
    assert [row["scorecard"]["bundleId"] for row in report.document["results"]] == [report.bundle_id] * 3
    assert report.document["coverage"]["canonicalOperations"] == 41
    assert report.document["coverage"]["capabilityCases"] == 106
    assert len(report.document["coverage"]["composedWorkflows"]) == 12
    assert report.generated_at.endswith("Z") and run.error == ""


def test_skipped_and_failed_executions_get_unscored_scorecards(schedule, replay_executors) -> None:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA_FINAL)
    execute_run(run, environ={})  # no credentials: every execution is skipped
    report = Report.objects.get(run=run)
    assert (report.executions, report.scoreable, report.passed, report.mean_overall) == (3, 0, 0, None)
    assert set(Scorecard.objects.filter(execution__run=run).values_list("overall_score", "passed")) == {(None, None)}
    assert report.document["aggregate"]["skipped"] == 3


def test_scoring_and_reporting_again_change_nothing(schedule, replay_executors) -> None:
    run = measured_run(schedule)
    report = run.report
    assert score_run(run) == 0
    assert report_run(run, generated_at="2030-01-01T00:00:00.000Z") == report
    assert Report.objects.count() == 1 and Scorecard.objects.count() == 3
    assert Report.objects.get().generated_at == report.generated_at


def test_a_stored_observation_with_unknown_metrics_still_scores(schedule, replay_executors) -> None:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=Selection(candidate_ids=("codex-luna",), limit=1))
    (execution,) = run.executions.select_related("entry")
    observation = completed_observation(execution.entry.to_document(), cost_usd=float("nan"))
    observation["metrics"]["settlementMs"] = float("inf")
    REPLAY_STORE[execution.execution_id] = observation
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert execution.observation["metrics"]["costUsd"] is None
    assert execution.scorecard.passed is True
    row = Report.objects.get(run=run).document["results"][0]
    assert "costUsd" not in row["observation"]["metrics"] and "settlementMs" not in row["observation"]["metrics"]


def test_an_invalid_observation_lists_every_problem(schedule, replay_executors) -> None:
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=Selection(candidate_ids=("codex-luna",), limit=1))
    (execution,) = run.executions.select_related("entry")
    observation = completed_observation(execution.entry.to_document())
    del observation["lifecycle"]
    observation["presentation"]["checks"] = []
    observation["traceLineage"]["frameCount"] = -1
    REPLAY_STORE[execution.execution_id] = observation
    execute_run(run, environ=ENVIRON)
    execution.refresh_from_db()
    assert (execution.classification, execution.failure_code) == ("infrastructure_failure", "invalid_observation")
    assert execution.failure_message == (
        "the executor returned an invalid observation: lifecycle is required; "
        "presentation.checks must have at least 1 item; traceLineage.frameCount must be at least 0"
    )
    assert execution.scorecard.overall_score is None


def test_a_reporting_failure_keeps_the_run_and_says_why(schedule, replay_executors, monkeypatch) -> None:
    def broken(run: Run, *, generated_at: str) -> Report:
        raise RuntimeError(f"catalog unreadable near {ENVIRON['OPENAI_API_KEY']}")

    monkeypatch.setattr("runs.reporting.report_run", broken)
    run = measured_run(schedule)
    assert run.status == RunStatus.FINISHED
    assert run.executions.filter(classification="completed").count() == 3
    assert not Report.objects.exists()
    assert run.error.startswith("reporting failed: RuntimeError: catalog unreadable near ")
    assert ENVIRON["OPENAI_API_KEY"] not in run.error


# --- comparison and bundles ----------------------------------------------------------------------------


def test_a_run_is_compared_with_the_previous_compatible_run(schedule, replay_executors) -> None:
    first = measured_run(schedule)
    second = measured_run(schedule, fail=(0,))
    report = second.report
    assert report.previous == first.report
    assert report.bundle_id == first.report.bundle_id
    assert report.comparison == {
        "compatible": True,
        "currentBundleId": report.bundle_id,
        "previousBundleId": report.bundle_id,
        "passRateDelta": -0.333,
        "overallDelta": -0.042,
    }


def test_a_selection_never_mixes_with_full_runs(schedule, replay_executors) -> None:
    full, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"))
    execute_run(full, environ={})
    subset = measured_run(schedule)
    other_subset = measured_run(schedule, selection=Selection(candidate_ids=("codex-luna",), case_ids=("final-response",), limit=2))
    bundles = {Report.objects.get(run=run).bundle_id for run in (full, subset, other_subset)}
    assert len(bundles) == 3
    assert subset.report.comparison is None and other_subset.report.comparison is None
    full_bundle = Report.objects.get(run=full).document["bundle"]
    assert list(full_bundle["providerVersions"]) == [c["id"] for c in schedule.candidates]


def test_the_runner_build_setting_changes_the_bundle(schedule, replay_executors, settings) -> None:
    first = measured_run(schedule)
    settings.EVALHUB = {**settings.EVALHUB, "RUNNER_BUILD": "build-42"}
    second = measured_run(schedule)
    assert second.report.bundle_id != first.report.bundle_id
    assert second.report.document["bundle"]["runnerBuild"] == "build-42"
    assert second.report.comparison is None


# --- alerts ---------------------------------------------------------------------------------------------


def test_alerts_need_seven_compatible_reports_and_a_ready_baseline(schedule, replay_executors, ready) -> None:
    for _ in range(6):
        measured_run(schedule)
    early = measured_run(schedule, fail=(0, 1, 2), gate=True)
    assert early.report.alert_documents == [] and not Alert.objects.exists()
    measured_run(schedule)  # the seventh clean one; history now holds seven reports
    current = measured_run(schedule, fail=(0, 1), gate=True)
    assert current.report.alert_documents == [
        {"severity": "critical", "code": "safety_failure", "message": "2 execution(s) failed a hard or lifecycle invariant"},
        {"severity": "warning", "code": "success_rate_regression", "message": "success rate dropped 52 percentage points"},
    ]
    rows = list(current.report.alerts.order_by("id").values_list("code", "severity", "case_key", "candidate_key", "occurrences"))
    # Beside the reference's alerts (exactly its list above), evalhub's own: nine nights of the
    # case (six clean, then 4 of 9 passed) are a significant regression (runs/signal.py).
    assert rows == [
        ("safety_failure", "critical", "", "", 1),
        ("success_rate_regression", "warning", "", "", 1),
        ("significant_regression", "warning", "final-response", "codex-luna", 1),
    ]


def test_no_alerts_until_the_baseline_is_declared_ready(schedule, replay_executors) -> None:
    for _ in range(7):
        measured_run(schedule)
    current = measured_run(schedule, fail=(0, 1, 2), gate=True)
    assert current.report.alert_documents == [] and not Alert.objects.exists()


def test_a_consecutive_failure_is_stored_once_per_case_and_candidate(schedule, replay_executors, ready) -> None:
    for _ in range(7):
        measured_run(schedule)
    measured_run(schedule, fail=(0, 1, 2))
    measured_run(schedule, fail=(0, 1, 2))
    third = measured_run(schedule, fail=(0, 1, 2))
    consecutive = [a for a in third.report.alert_documents if a["code"] == "consecutive_failures"]
    assert (
        consecutive
        == [
            {"severity": "warning", "code": "consecutive_failures", "message": "final-response/codex-luna failed three consecutive reports"}
        ]
        * 3
    )
    (row,) = third.report.alerts.filter(code="consecutive_failures")
    assert (row.case_key, row.candidate_key, row.occurrences, row.severity) == ("final-response", "codex-luna", 3, "warning")
    assert row.message == "final-response/codex-luna failed three consecutive reports"


def test_alert_rows_fold_repetitions() -> None:
    alerts = [
        {"severity": "warning", "code": "consecutive_failures", "message": "a/b failed three consecutive reports"},
        {"severity": "warning", "code": "consecutive_failures", "message": "a/b failed three consecutive reports"},
        {"severity": "warning", "code": "consecutive_failures", "message": "c/b failed three consecutive reports"},
        {"severity": "critical", "code": "safety_failure", "message": "3 execution(s) failed a hard or lifecycle invariant"},
    ]
    assert [(r["code"], r["case_key"], r["candidate_key"], r["occurrences"]) for r in alert_rows(alerts)] == [
        ("consecutive_failures", "a", "b", 2),
        ("consecutive_failures", "c", "b", 1),
        ("safety_failure", "", "", 1),
    ]


# --- refresh (replay lane) -----------------------------------------------------------------------------


def test_a_refresh_rescores_stored_observations_without_calling_anything(schedule, replay_executors) -> None:
    original = measured_run(schedule, fail=(1,))
    calls = len(REPLAY_CALLS)
    Scorecard.objects.filter(execution__run=original).update(scoring_version="scorecard-v1.9")
    refresh = refresh_run(original, generated_at="2026-08-20T10:00:00.000Z")
    assert len(REPLAY_CALLS) == calls
    assert (refresh.lane, refresh.refresh_of, refresh.status, refresh.spent_usd) == (RunLane.REPLAY, original, RunStatus.FINISHED, 0)
    assert refresh.selection == original.selection and refresh.schedule == original.schedule
    copied = list(refresh.executions.order_by("position").values_list("execution_id", "observation"))
    assert copied == list(original.executions.order_by("position").values_list("execution_id", "observation"))
    report = refresh.report
    assert report.is_refresh is True and report.comparison is None and report.alert_documents == []
    assert report.bundle_id == original.report.bundle_id
    assert report.generated_at == "2026-08-20T10:00:00.000Z"
    assert set(Scorecard.objects.filter(execution__run=refresh).values_list("scoring_version", flat=True)) == {SCORING_VERSION}
    assert (report.scoreable, report.passed) == (3, 2)


def test_a_refresh_never_counts_in_history(schedule, replay_executors, ready) -> None:
    runs = [measured_run(schedule) for _ in range(6)]
    refresh_run(runs[-1], generated_at="2026-08-20T10:00:00.000Z")
    current = measured_run(schedule, fail=(0, 1, 2), gate=True)
    assert current.report.previous == runs[-1].report  # not the newer refresh
    assert current.report.alert_documents == []  # six measurements, not seven
    measured = measured_run(schedule, fail=(0,), gate=True)
    assert [a["code"] for a in measured.report.alert_documents] == ["safety_failure"]


def test_a_refresh_of_a_refresh_is_refused(schedule, replay_executors) -> None:
    refresh = refresh_run(measured_run(schedule), generated_at="2026-08-20T10:00:00.000Z")
    with pytest.raises(ValueError, match=r"is a refresh; refresh the run it refreshes"):
        refresh_run(refresh, generated_at="2026-08-20T10:00:00.000Z")


# --- retention -----------------------------------------------------------------------------------------


def _age(run: Run, days: int) -> None:
    moment = dt.datetime(2026, 8, 19, tzinfo=dt.UTC) - dt.timedelta(days=days)
    Run.objects.filter(pk=run.pk).update(created_at=moment)
    Report.objects.filter(run=run).update(created_at=moment)


def test_retention_keeps_the_last_seven_reports_of_every_bundle(schedule, replay_executors) -> None:
    old = [measured_run(schedule) for _ in range(9)]
    for index, run in enumerate(old):
        _age(run, 400 - index)  # oldest first
    refresh = refresh_run(old[0], generated_at="2026-08-20T10:00:00.000Z")
    _age(refresh, 10)
    unreported, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA_FINAL)
    Run.objects.filter(pk=unreported.pk).update(status=RunStatus.FAILED)
    _age(unreported, 300)
    pending, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("12"), selection=LUNA_FINAL)
    _age(pending, 300)
    recent = measured_run(schedule)
    _age(recent, 1)

    pruned = prune_history(now=dt.datetime(2026, 8, 19, tzinfo=dt.UTC), retention_days=120)

    # The seven newest reports of the bundle are recent and old[3:]: old[0..2] go (old[0] with its
    # refresh), and so does the old failed run without a report; the pending run stays.
    assert pruned == 5
    assert set(Run.objects.values_list("pk", flat=True)) == {run.pk for run in old[3:]} | {recent.pk, pending.pk}
    gone = [run.pk for run in old[:3]]
    assert not Execution.objects.filter(run_id__in=gone).exists()
    assert not Report.objects.filter(run_id__in=gone).exists()
    assert prune_history(now=dt.datetime(2026, 8, 19, tzinfo=dt.UTC), retention_days=120) == 0


def test_prune_history_refuses_less_than_a_day() -> None:
    with pytest.raises(ValueError, match=r"^retention must be at least 1 day, not 0$"):
        prune_history(now=NOW, retention_days=0)


# --- exports of a stored report ------------------------------------------------------------------------


def test_exports_render_the_stored_report_as_the_nightly_script_writes_it(schedule, replay_executors, ready) -> None:
    for _ in range(7):
        measured_run(schedule)
    report = measured_run(schedule, fail=(0,), gate=True).report
    content, content_type, filename = export_report(report, "json")
    assert json.loads(content) == {"report": report.document, "alerts": report.alert_documents, "comparison": report.comparison}
    assert json.loads(content)["alerts"][0]["code"] == "safety_failure"
    assert (content_type, filename) == ("application/json; charset=utf-8", f"run-{report.run_id}-live-report.json")
    stored = {"report": report.document, "alerts": report.alert_documents}
    assert export_report(report, "markdown")[0] == render_markdown(stored["report"])
    assert export_report(report, "junit")[0] == render_junit(stored["report"], distinct_names=True)
    assert export_report(report, "junit")[1] == "application/xml; charset=utf-8"
    github = export_report(report, "github")[0]
    assert github == render_github_summary(stored["report"], stored["alerts"]) + render_previous_bundle_section(report.comparison)
    assert "- CRITICAL safety_failure: 1 execution(s) failed a hard or lifecycle invariant" in github
    with pytest.raises(ValueError, match=r"^unknown export format 'html': use one of json, markdown, junit, github$"):
        export_report(report, "html")


def test_an_export_keeps_the_key_order_the_report_was_built_with(schedule, replay_executors) -> None:
    report = measured_run(schedule).report
    report.refresh_from_db()  # read back: PostgreSQL's jsonb would have re-sorted the keys
    assert export_report(report, "json")[0] == render_json(
        {"report": report.document, "alerts": report.alert_documents, "comparison": report.comparison}
    )
    report = measured_run(schedule).report
    text = export_report(report, "json")[0]
    assert text.index('"schema"') < text.index('"generatedAt"') < text.index('"source"') < text.index('"bundle"')


# --- added after the issue-3 review ------------------------------------------------------------------


def test_an_integer_too_large_for_a_double_is_an_invalid_observation() -> None:
    from runs.evaluation.observation_schema import validate_observation
    from tests.builders import completed_observation

    observation = completed_observation({"caseId": "final-response", "candidateId": "codex-luna"})
    observation["base"].setdefault("efficiency", {})["latencyMs"] = 10**400
    assert "base.efficiency.latencyMs is too large: numbers must fit a double (at most 1e308)" in validate_observation(observation)


def test_prune_history_refuses_an_absurd_retention() -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=r"--days must be from 1 to 36500 \(100 years\), not 99999999999999999999"):
        call_command("prune_history", "--days", "99999999999999999999")


@pytest.mark.django_db
def test_a_scorecard_a_concurrent_scorer_stored_first_stands(schedule, monkeypatch) -> None:
    """Two scorers of the same run: the one-to-one key keeps the scorecard stored first, and the
    other scorer stores every other one."""
    from runs import reporting

    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(limit=3))
    execute_run(run, environ={})
    Scorecard.objects.filter(execution__run=run).delete()
    first = run.executions.order_by("position").first()
    real = reporting._score

    def meanwhile(pending: Any, **kwargs: Any) -> Any:
        # The other scorer stores its scorecard of the first execution after this one read it as pending.
        Scorecard.objects.create(execution=first, scoring_version="other", document={}, overall_score=0, gate_passed=False, passed=False)
        return real(pending, **kwargs)

    monkeypatch.setattr(reporting, "_score", meanwhile)
    assert score_run(run) == 3
    stored = dict(Scorecard.objects.filter(execution__run=run).values_list("execution_id", "scoring_version"))
    assert len(stored) == 3
    assert stored.pop(first.pk) == "other"
    assert set(stored.values()) == {SCORING_VERSION}
