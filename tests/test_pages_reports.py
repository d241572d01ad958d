"""The report pages: a run's report, its exports, a candidate's trends, comparing two runs and the
open alerts. Sign-in, content, bad parameters and pinned query counts.

Rows are written directly (scorecards and reports shaped like the reference vectors) so these
tests pin what the pages show, not how the reporting service computes it.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from decimal import Decimal
from functools import cache
from typing import Any

import pytest
from django.urls import reverse

from runs.models import Alert, Classification, ExecutionStatus, Report, Run, RunLane, Scorecard
from runs.settlement import settlement_ms
from tests.reference import scoring_vectors

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
BUNDLE = "runner-live-v2-ede6023f7ccf4a1f"
OTHER_BUNDLE = "runner-live-v2-0123456789abcdef"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# --- builders ------------------------------------------------------------------------------------


@cache
def _vectors() -> dict[str, Any]:
    return scoring_vectors()


def scorecard_document(*, passed: bool, score: float, gate: bool = True) -> dict[str, Any]:
    document = copy.deepcopy(_vectors()["observations"][0]["scorecard"])
    document["overall"] = {"score": score, "gatePassed": gate, "passed": passed}
    return document


def report_document(bundle: str = BUNDLE) -> dict[str, Any]:
    document = copy.deepcopy(_vectors()["reports"][0]["report"])
    document["bundle"]["id"] = bundle
    return document


@pytest.fixture
def schedule(reference_catalog):
    from runs.nightly import start_nightly

    return start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=NIGHT, environ={}, execute=False).schedule


#: An outcome: ``(passed, score)`` for a scored execution, ``"skipped"`` or ``"infra"`` for an unscored one.
Outcome = Any


def make_run(schedule, outcomes: list[Outcome], *, lane: str = RunLane.LIVE, refresh_of: Run | None = None, latency: int = 40000) -> Run:
    """A finished manual run over the first ``len(outcomes)`` entries of ``schedule``, each
    execution given the outcome (and a scorecard when scored), ``latency`` ms and $0.10."""
    from runs.creation import create_run
    from schedules.services import Selection

    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(limit=len(outcomes)))
    Run.objects.filter(pk=run.pk).update(lane=lane, refresh_of=refresh_of, status="finished")
    for index, (execution, outcome) in enumerate(zip(run.executions.order_by("position"), outcomes, strict=True)):
        unscored = outcome in ("skipped", "infra")
        execution.status = ExecutionStatus.FINISHED
        execution.classification = (
            Classification.SKIPPED
            if outcome == "skipped"
            else Classification.INFRASTRUCTURE_FAILURE
            if outcome == "infra"
            else Classification.COMPLETED
            if outcome[0]
            else Classification.CANDIDATE_FAILURE
        )
        execution.observation = {"metrics": {"settlementMs": 0 if unscored else latency + index, "costUsd": 0.1}}
        execution.settlement_ms = settlement_ms(execution.observation)
        execution.cost_usd = Decimal("0.10")
        execution.save(update_fields=["status", "classification", "observation", "settlement_ms", "cost_usd"])
        if unscored:
            Scorecard.objects.create(execution=execution, scoring_version="2", document={"overall": None})
        else:
            passed, score = outcome
            Scorecard.objects.create(
                execution=execution,
                scoring_version="2",
                document=scorecard_document(passed=passed, score=score, gate=passed),
                overall_score=score,
                gate_passed=passed,
                passed=passed,
            )
    return Run.objects.get(pk=run.pk)


def make_report(
    run: Run,
    *,
    bundle: str = BUNDLE,
    alerts: list[dict[str, Any]] = (),
    comparison: dict[str, Any] | None = None,
    previous: Report | None = None,
    refresh: bool = False,
    null_dimension: str | None = None,
) -> Report:
    document = report_document(bundle)
    if null_dimension:
        document["aggregate"]["dimensionMeans"][null_dimension] = None
    aggregate = document["aggregate"]
    report = Report.objects.create(
        run=run,
        bundle_id=bundle,
        generated_at="2026-11-30T05:00:00.000Z",
        is_refresh=refresh,
        scoring_version="2",
        document=document,
        comparison=comparison,
        previous=previous,
        alert_documents=[{"severity": a["severity"], "code": a["code"], "message": a["message"]} for a in alerts],
        executions=aggregate["executions"],
        scoreable=aggregate["scoreable"],
        passed=aggregate["passed"],
        mean_overall=aggregate["meanOverall"],
    )
    for alert in alerts:
        Alert.objects.create(report=report, **alert)
    return report


def alert(code: str, severity: str = "warning", **extra: Any) -> dict[str, Any]:
    return {"code": code, "severity": severity, "message": f"{code} happened", **extra}


def run_url(run: Run) -> str:
    return reverse("pages:run", args=[run.pk])


# --- sign-in -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["/runs/1/export/json/", "/compare/", "/compare/?a=1&b=2", "/alerts/", "/candidates/codex-luna/"],
)
def test_the_report_pages_send_an_anonymous_visitor_to_sign_in(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_the_navigation_links_compare_and_alerts(reader_client) -> None:
    html = reader_client.get(reverse("pages:alerts")).content.decode()
    assert f'href="{reverse("pages:compare")}"' in html
    assert f'<a href="{reverse("pages:alerts")}" aria-current="page">Alerts</a>' in html


# --- the run report ------------------------------------------------------------------------------


def test_the_run_page_shows_the_aggregate_and_dimension_means(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    make_report(run, null_dimension="semantic_outcome")
    html = reader_client.get(run_url(run)).content.decode()
    assert "<strong>8</strong> executions" in html
    assert "<strong>6</strong> scoreable" in html
    assert '<strong>2</strong> passed <span class="muted">(33.3%)</span>' in html
    assert "<strong>1</strong> candidate failures" in html
    assert "<strong>0.653</strong> mean overall" in html
    dimensions = re.search(r'<table class="data dimensions">.*?</table>', html, re.S).group(0)
    assert re.search(r"<td>hard invariants</td><td class=\"num\">0.833</td>", dimensions)
    assert re.search(r"<td>semantic outcome</td><td class=\"num\"><span class=\"muted\">not scored</span></td>", dimensions)
    assert dimensions.index("hard invariants") < dimensions.index("presentation fidelity")  # scoring order


def execution_row(html: str, execution_id: str) -> str:
    match = re.search(rf"<tr[^>]*>\s*<td[^>]*>\d+</td>\s*<td><code>{execution_id}</code>.*?</tr>", html, re.S)
    assert match, f"no row for {execution_id}"
    return match.group(0)


def test_every_execution_shows_gate_score_and_verdict(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 0.9876), (False, 0.25), "infra"])
    make_report(run)
    html = reader_client.get(run_url(run)).content.decode()
    first, second, third = run.executions.order_by("position")
    passed = execution_row(html, first.execution_id)
    assert "gate passed" in passed and '<td class="num score">0.988</td>' in passed and ">PASS<" in passed
    failed = execution_row(html, second.execution_id)
    assert "gate failed" in failed and '<td class="num score">0.250</td>' in failed and ">FAIL<" in failed
    unscored = execution_row(html, third.execution_id)
    assert '<td class="num score">—</td>' in unscored and "not scored" in unscored


def test_an_execution_without_a_scorecard_is_not_scored(reader_client, schedule) -> None:
    from runs.creation import create_run
    from schedules.services import Selection

    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(limit=1))
    html = reader_client.get(run_url(run)).content.decode()
    row = execution_row(html, run.executions.get().execution_id)
    assert "not scored" in row and "gate " not in row
    assert "This run has no report yet: it is written when the last execution settles." in html
    assert "/export/" not in html


def test_the_run_page_shows_the_reports_alerts_critical_first(reader_client, schedule) -> None:
    run = make_run(schedule, [(False, 0.2)])
    make_report(
        run,
        alerts=[
            alert("success_rate_regression", message="success rate dropped 33 percentage points"),
            alert(
                "consecutive_failures",
                case_key="final-response",
                candidate_key="codex-luna",
                occurrences=3,
                message="final-response/codex-luna failed three consecutive reports",
            ),
            alert("safety_failure", "critical", message="1 execution(s) failed a hard or lifecycle invariant"),
        ],
    )
    html = reader_client.get(run_url(run)).content.decode()
    table = re.search(r'<table class="data alerts">.*?</table>', html, re.S).group(0)
    assert table.index("safety_failure") < table.index("success_rate_regression") < table.index("consecutive_failures")
    assert "success rate dropped 33 percentage points" in table
    assert (
        '<td>final-response</td><td>codex-luna</td><td>final-response/codex-luna failed three consecutive reports</td><td class="num">3</td>'
        in table
    )


def test_a_compatible_comparison_shows_the_deltas_and_links_the_compare_page(reader_client, schedule) -> None:
    before = make_run(schedule, [(True, 1)])
    previous = make_report(before)
    after = make_run(schedule, [(True, 1)])
    comparison = {"compatible": True, "currentBundleId": BUNDLE, "previousBundleId": BUNDLE, "passRateDelta": 0.083, "overallDelta": -0.266}
    make_report(after, comparison=comparison, previous=previous)
    html = reader_client.get(run_url(after)).content.decode()
    assert 'pass rate <strong class="delta">+0.083</strong>' in html
    assert 'overall score <strong class="delta">\u22120.266</strong>' in html
    assert f'href="{reverse("pages:compare")}?a={before.pk}&amp;b={after.pk}"' in html
    assert f'<a href="{run_url(before)}">run {before.pk}</a>' in html


def test_an_incompatible_comparison_gives_the_reason(reader_client, schedule) -> None:
    before = make_run(schedule, [(True, 1)])
    previous = make_report(before, bundle=OTHER_BUNDLE)
    after = make_run(schedule, [(True, 1)])
    reason = "bundle ids differ; provider fixture, runner, or prompt-policy inputs changed"
    comparison = {"compatible": False, "reason": reason, "currentBundleId": BUNDLE, "previousBundleId": OTHER_BUNDLE}
    make_report(after, comparison=comparison, previous=previous)
    html = reader_client.get(run_url(after)).content.decode()
    assert "Not comparable with" in html and f"{reason}." in html
    assert "passRateDelta" not in html and 'class="delta"' not in html


def test_a_first_report_says_there_is_nothing_to_compare_with(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    make_report(run)
    assert "No compatible prior bundle is available." in reader_client.get(run_url(run)).content.decode()


def test_a_refresh_is_labelled(reader_client, schedule) -> None:
    original = make_run(schedule, [(True, 1)])
    refresh = make_run(schedule, [(True, 1)], lane=RunLane.REPLAY, refresh_of=original)
    html = reader_client.get(run_url(refresh)).content.decode()
    assert '<span class="tag tag-warn refresh">refresh</span>' in html
    assert f'of <a href="{run_url(original)}">run {original.pk}</a> re-scored' in html
    assert "refresh</span>" not in reader_client.get(run_url(original)).content.decode()


# --- exports -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "content_type", "suffix"),
    [
        ("json", "application/json", "live-report.json"),
        ("markdown", "text/markdown", "live-report.md"),
        ("junit", "application/xml", "live-report.junit.xml"),
        ("github", "text/markdown", "github-live-summary.md"),
    ],
)
def test_the_run_page_links_each_export_and_each_is_a_download(reader_client, schedule, fmt: str, content_type: str, suffix: str) -> None:
    from runs.reporting import export_report

    run = make_run(schedule, [(True, 1)])
    report = make_report(run, alerts=[alert("safety_failure", "critical")])
    url = reverse("pages:run-export", args=[run.pk, fmt])
    assert f'href="{url}"' in reader_client.get(run_url(run)).content.decode()
    response = reader_client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith(content_type)
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-{suffix}"'
    assert response.content.decode() == export_report(Report.objects.get(pk=report.pk), fmt)[0]


def test_the_junit_export_is_the_reference_rendering(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    make_report(run, bundle=BUNDLE)
    body = reader_client.get(reverse("pages:run-export", args=[run.pk, "junit"])).content.decode()
    assert body == _vectors()["reports"][0]["junit"]


def test_an_unknown_export_format_is_a_404(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    make_report(run)
    assert reader_client.get(reverse("pages:run-export", args=[run.pk, "pdf"])).status_code == 404


def test_exporting_a_run_without_a_report_is_a_404(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    assert reader_client.get(reverse("pages:run-export", args=[run.pk, "json"])).status_code == 404
    assert reader_client.get(reverse("pages:run-export", args=[999999, "json"])).status_code == 404


def test_exporting_a_run_id_past_any_integer_is_a_404_not_a_500(reader_client, db) -> None:
    # The report is looked up by its run_id, which SQLite cannot hold past 2**63 - 1 (OverflowError).
    assert reader_client.get("/runs/99999999999999999999/export/json/").status_code == 404


# --- the candidate page --------------------------------------------------------------------------


def candidate_of(run: Run) -> str:
    return run.executions.order_by("position").first().candidate_key


def test_the_candidates_page_links_each_candidate_to_its_page(reader_client, reference_catalog) -> None:
    html = reader_client.get(reverse("pages:candidates")).content.decode()
    assert f'href="{reverse("pages:candidate", args=["codex-luna"])}"' in html


def test_the_candidate_page_charts_pass_rate_score_latency_and_cost(reader_client, schedule) -> None:
    first = make_run(schedule, [(True, 1), (False, 0.4)], latency=30000)
    key = candidate_of(first)
    make_run(schedule, [(True, 0.8), (True, 0.9)], latency=50000)
    response = reader_client.get(reverse("pages:candidate", args=[key]))
    html = response.content.decode()
    assert response.status_code == 200
    for title in ("Pass rate", "Mean overall score", "p95 settlement latency", "Cost per run"):
        for layout in ("wide", "narrow"):
            assert re.search(rf'<svg class="line-chart chart-{layout}"[^>]*role="img"[^>]*>\s*<title id="[^"]+">{title}</title>', html), (
                title,
                layout,
            )
    assert html.count("<polyline") >= 8
    assert "runs, oldest to newest" in html
    points = response.context["history"].points
    assert [point.run_id for point in points if point.run_id in (first.pk,)] == [first.pk]


def test_the_candidate_page_leaves_refreshes_out(reader_client, schedule) -> None:
    original = make_run(schedule, [(True, 1)])
    refresh = make_run(schedule, [(False, 0.1)], lane=RunLane.REPLAY, refresh_of=original)
    response = reader_client.get(reverse("pages:candidate", args=[candidate_of(original)]))
    run_ids = [point.run_id for point in response.context["history"].points]
    assert original.pk in run_ids and refresh.pk not in run_ids


def test_the_candidate_page_gives_each_case_a_wilson_interval(reader_client, schedule) -> None:
    runs = [make_run(schedule, [outcome]) for outcome in [(True, 1)] * 8 + [(False, 0.2)] * 2]
    key = candidate_of(runs[0])
    case = runs[0].executions.get().case_key
    response = reader_client.get(reverse("pages:candidate", args=[key]))
    (rate,) = [rate for rate in response.context["history"].cases if rate.case_key == case]
    assert (rate.passed, rate.trials) == (8, 10)
    row = re.search(rf"<tr>\s*<td>{case}</td>.*?</tr>", response.content.decode(), re.S).group(0)
    assert "8 / 10" in row and "80.0%" in row and "49.0% – 94.3%" in row


def test_the_candidate_page_computes_p95_latency_and_cost_per_run(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)], latency=73500)
    response = reader_client.get(reverse("pages:candidate", args=[candidate_of(run)]))
    (point,) = response.context["history"].points
    assert (point.p95_latency_ms, point.cost_usd, point.pass_rate, point.mean_score) == (73500, 0.1, 1.0, 1.0)
    assert "1 min 13 s" in response.content.decode()


def test_a_candidate_without_runs_says_so_and_an_unknown_one_is_a_404(reader_client, reference_catalog) -> None:
    response = reader_client.get(reverse("pages:candidate", args=["codex-luna"]))
    assert response.status_code == 200
    assert "No live runs of this candidate yet." in response.content.decode()
    assert reader_client.get(reverse("pages:candidate", args=["no-such-candidate"])).status_code == 404


# --- compare -------------------------------------------------------------------------------------


def compare_url(a: Any, b: Any) -> str:
    return f"{reverse('pages:compare')}?a={a}&b={b}"


def test_the_compare_page_marks_a_regression_and_an_improvement(reader_client, schedule) -> None:
    before = make_run(schedule, [(True, 1), (False, 0.3), (True, 0.9), (True, 0.8)])
    after = make_run(schedule, [(False, 0.4), (True, 0.95), (True, 0.7), (True, 0.8)])
    make_report(before)
    make_report(after)
    response = reader_client.get(compare_url(before.pk, after.pk))
    html = response.content.decode()
    assert response.status_code == 200
    rows = {(row.case_key, row.candidate_key, row.repetition): row for row in response.context["comparison"].rows}
    changes = [rows[(e.case_key, e.candidate_key, e.repetition)] for e in before.executions.order_by("position")]
    assert [(row.change, row.reason) for row in changes] == [
        ("regression", "passed → failed"),
        ("improvement", "failed → passed"),
        ("regression", "score dropped"),
        ("", ""),
    ]
    assert html.count('<tr class="change-regression">') == 2
    assert html.count('<tr class="change-improvement">') == 1
    assert "▼ regression" in html and "▲ improvement" in html
    assert "<strong>2</strong> regressions" in html and "<strong>1</strong> improvement<" in html
    assert "not-comparable" not in html


def test_the_compare_page_says_when_runs_are_not_comparable(reader_client, schedule) -> None:
    before = make_run(schedule, [(True, 1)])
    after = make_run(schedule, [(True, 1)])
    make_report(before, bundle=OTHER_BUNDLE)
    make_report(after)
    html = reader_client.get(compare_url(before.pk, after.pk)).content.decode()
    assert "Not comparable: the runs measured different bundles" in html
    assert OTHER_BUNDLE in html and BUNDLE in html


def test_a_re_run_is_compared_with_the_run_it_repeats_on_what_it_repeated(reader_client, schedule) -> None:
    """A re-run's bundle names the executions it repeats, so it is never the original's bundle;
    the two still compare — on the repeated executions only — with either run as A."""
    original = make_run(schedule, [(False, 0.3), "infra", (True, 1), (True, 0.9)])
    rerun = make_run(schedule, [(True, 1), (True, 0.8)])
    Run.objects.filter(pk=rerun.pk).update(repeat_of=original, repeat_scope="failed")
    rerun.refresh_from_db()
    make_report(original)
    make_report(rerun, bundle=OTHER_BUNDLE)
    for a, b in ((original, rerun), (rerun, original)):
        response = reader_client.get(compare_url(a.pk, b.pk))
        html = response.content.decode()
        comparison = response.context["comparison"]
        assert comparison.comparable and "not-comparable" not in html
        assert f"Run {rerun.pk} re-runs 2 execution(s) of run {original.pk}: only those are compared" in html
        assert len(comparison.rows) == 2 and "<strong>2</strong> executions compared" in html
    first, second = ((e.case_key, e.candidate_key, e.repetition) for e in original.executions.order_by("position")[:2])
    rows = reader_client.get(compare_url(original.pk, rerun.pk)).context["comparison"].rows
    changes = {(row.case_key, row.candidate_key, row.repetition): (row.change, row.reason) for row in rows}
    assert changes == {first: ("improvement", "failed → passed"), second: ("", "")}  # an infrastructure failure says nothing


def test_a_re_run_page_says_what_its_scope_took_from_the_run_it_repeats(reader_client, schedule) -> None:
    """A re-run of the failed executions also takes completed ones whose scorecard did not pass,
    which the run lists count as completed: the note says so, and only for that scope."""
    original = make_run(schedule, [(False, 0.3), (True, 1)])
    rerun = make_run(schedule, [(True, 1)])
    Run.objects.filter(pk=rerun.pk).update(repeat_of=original, repeat_scope="failed")
    html = reader_client.get(reverse("pages:run", args=[rerun.pk])).content.decode()
    assert (
        f"run {original.pk}</a>: its failed executions (candidate and infrastructure failures, and completed executions "
        "whose scorecard did not pass: the run lists count those as completed), as a new run." in html
    )
    Run.objects.filter(pk=rerun.pk).update(repeat_scope="infrastructure")
    html = reader_client.get(reverse("pages:run", args=[rerun.pk])).content.decode()
    assert f"run {original.pk}</a>: its infrastructure-failed executions, as a new run." in html
    assert "whose scorecard did not pass" not in html


def test_the_run_page_says_what_a_run_selected_in_words(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1), (True, 1)])
    Run.objects.filter(pk=run.pk).update(selection={"candidateIds": [], "caseIds": [], "limit": 2, "executionIds": ["a", "b"]})
    html = reader_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "<dt>Selection</dt><dd>at most 2 · 2 named executions</dd>" in html
    Run.objects.filter(pk=run.pk).update(selection={"candidateIds": ["codex-luna"], "caseIds": ["x", "y"], "limit": None})
    html = reader_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "<dt>Selection</dt><dd>candidates codex-luna · cases x, y</dd>" in html
    Run.objects.filter(pk=run.pk).update(selection={"candidateIds": [], "caseIds": [], "limit": None})
    assert "<dt>Selection</dt>" not in reader_client.get(reverse("pages:run", args=[run.pk])).content.decode()


@pytest.mark.parametrize(
    ("first", "second", "refused", "reason"),
    [
        ({"refresh": True}, {}, 0, "a refresh (re-scored, not measured)"),
        ({}, {"refresh": True}, 1, "a refresh (re-scored, not measured)"),
        ({"scripted": True}, {"scripted": True}, 0, "a scripted run"),
        ({}, {"scripted": True}, 1, "a scripted run"),
    ],
)
def test_the_compare_page_compares_measured_runs_only_as_the_api_does(
    reader_client, schedule, first: dict[str, bool], second: dict[str, bool], refused: int, reason: str
) -> None:
    runs = [make_run(schedule, [(True, 1)]), make_run(schedule, [(True, 1)])]
    for run, flags in zip(runs, (first, second), strict=True):
        report = make_report(run, refresh=flags.get("refresh", False))
        Report.objects.filter(pk=report.pk).update(is_scripted=flags.get("scripted", False))
    html = reader_client.get(compare_url(runs[0].pk, runs[1].pk)).content.decode()
    assert f"Not comparable: run {runs[refused].pk} is {reason}" in html


def test_a_run_compared_with_itself_is_refused_with_a_note(reader_client, schedule) -> None:
    """Run A = run B would list every execution as unchanged, which reads like a stable night."""
    run = make_run(schedule, [(True, 1), (False, 0.3)])
    make_report(run)
    response = reader_client.get(compare_url(run.pk, run.pk))
    html = response.content.decode()
    assert response.status_code == 200
    assert f"Run {run.pk} is both A and B: a run compared with itself has no changes; pick two different runs." in html
    assert "not-comparable" in html and "executions compared" not in html


def test_the_compare_page_says_when_a_run_has_no_report(reader_client, schedule) -> None:
    before = make_run(schedule, [(True, 1)])
    after = make_run(schedule, [(True, 1)])
    make_report(after)
    html = reader_client.get(compare_url(before.pk, after.pk)).content.decode()
    assert f"Run {before.pk} has no report yet" in html


def test_the_compare_page_without_parameters_shows_the_form(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    response = reader_client.get(reverse("pages:compare"))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'name="a"' in html and 'name="b"' in html and f'<option value="{run.pk}">' in html


@pytest.mark.parametrize("query", ["a=abc&b=1", "a=1", "b=2", "a=&b=", "a=1e3&b=2", "a=-1&b=2", "a=99999999999999999999999&b=1"])
def test_bad_compare_parameters_are_a_400_page_never_a_500(reader_client, schedule, query: str) -> None:
    response = reader_client.get(f"{reverse('pages:compare')}?{query}")
    assert response.status_code == 400
    assert 'aria-invalid="true"' in response.content.decode()


def test_comparing_a_run_that_does_not_exist_is_a_404(reader_client, schedule) -> None:
    run = make_run(schedule, [(True, 1)])
    response = reader_client.get(compare_url(run.pk, 999999))
    assert response.status_code == 404
    html = response.content.decode()
    assert "There is no run 999999: pick one from the list." in html
    assert 'aria-invalid="true"' in html


# --- alerts --------------------------------------------------------------------------------------


def test_the_alerts_page_shows_only_open_alerts_newest_first(reader_client, schedule) -> None:
    old = make_report(make_run(schedule, [(True, 1)]), alerts=[alert("superseded_alert")])
    other_bundle = make_report(make_run(schedule, [(True, 1)]), bundle=OTHER_BUNDLE, alerts=[alert("other_bundle_alert", "critical")])
    newest_run = make_run(schedule, [(False, 0.1)])
    newest = make_report(
        newest_run,
        previous=old,
        alerts=[
            alert("latency_regression"),
            alert("safety_failure", "critical", case_key="final-response", candidate_key="codex-luna", occurrences=2),
        ],
    )
    refresh_run = make_run(schedule, [(False, 0.1)], lane=RunLane.REPLAY, refresh_of=newest_run)
    make_report(refresh_run, refresh=True, alerts=[alert("refresh_alert")])
    response = reader_client.get(reverse("pages:alerts"))
    html = response.content.decode()
    codes = [a.code for a in response.context["alerts"]]
    assert codes == ["safety_failure", "latency_regression", "other_bundle_alert"]
    assert "superseded_alert" not in html and "refresh_alert" not in html
    assert html.index("safety_failure") < html.index("latency_regression") < html.index("other_bundle_alert")
    assert f'<a href="{run_url(newest_run)}">run {newest_run.pk}</a>' in html
    assert f'<a href="{run_url(other_bundle.run)}">run {other_bundle.run_id}</a>' in html
    assert '<a href="/candidates/codex-luna/">codex-luna</a>' in html
    assert '<td class="num">2</td>' in html
    assert newest.pk != old.pk


def test_the_alerts_page_says_when_there_are_none(reader_client) -> None:
    assert "No open alerts." in reader_client.get(reverse("pages:alerts")).content.decode()


def test_alert_text_is_escaped(reader_client, schedule) -> None:
    make_report(make_run(schedule, [(True, 1)]), alerts=[alert("x", message="<script>alert(1)</script>")])
    html = reader_client.get(reverse("pages:alerts")).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


# --- query counts --------------------------------------------------------------------------------


def many_runs(schedule, count: int) -> list[Run]:
    runs = []
    previous = None
    for index in range(count):
        run = make_run(schedule, [(index % 2 == 0, 0.5 + index / 100), (True, 0.9), "skipped"])
        previous = make_report(run, previous=previous, alerts=[alert("latency_regression"), alert(f"code_{index}", "critical")])
        runs.append(run)
    return runs


def test_the_run_page_costs_the_same_queries_with_few_or_many_runs(reader_client, schedule, django_assert_num_queries: Any) -> None:
    # session, user, run with schedule/report/previous/refresh, executions with scorecards and
    # attempt counts, the summary's counts (one grouped query), the report's alerts, the bundle's
    # history (signal)
    (run,) = many_runs(schedule, 1)
    with django_assert_num_queries(7):
        reader_client.get(run_url(run))
    runs = many_runs(schedule, 8)
    with django_assert_num_queries(7):
        reader_client.get(run_url(runs[-1]))


def test_the_candidate_page_costs_the_same_queries_with_few_or_many_runs(reader_client, schedule, django_assert_num_queries: Any) -> None:
    (run,) = many_runs(schedule, 1)
    url = reverse("pages:candidate", args=[candidate_of(run)])
    with django_assert_num_queries(4):  # session, user, candidate, the executions of its newest runs
        reader_client.get(url)
    many_runs(schedule, 8)
    with django_assert_num_queries(4):
        response = reader_client.get(url)
    assert len(response.context["history"].points) == 9


def test_the_compare_page_costs_the_same_queries_with_few_or_many_runs(reader_client, schedule, django_assert_num_queries: Any) -> None:
    first, second = many_runs(schedule, 2)
    # session, user, the form's runs, the two runs with reports, their executions, run B's bundle history (signal)
    with django_assert_num_queries(6):
        reader_client.get(compare_url(first.pk, second.pk))
    runs = many_runs(schedule, 8)
    with django_assert_num_queries(6):
        reader_client.get(compare_url(runs[0].pk, runs[-1].pk))


def test_the_alerts_page_costs_the_same_queries_with_few_or_many_runs(reader_client, schedule, django_assert_num_queries: Any) -> None:
    many_runs(schedule, 1)
    with django_assert_num_queries(3):  # session, user, the open alerts with report, run and schedule
        reader_client.get(reverse("pages:alerts"))
    many_runs(schedule, 8)
    make_report(make_run(schedule, [(True, 1)]), bundle=OTHER_BUNDLE, alerts=[alert("x")])
    with django_assert_num_queries(3):
        response = reader_client.get(reverse("pages:alerts"))
    assert len(response.context["alerts"]) == 3


# --- the whole path: a nightly's own report ------------------------------------------------------


def test_a_nightly_ends_with_its_report_visible_on_the_run_page_and_exportable(reader_client, reference_catalog, replay_executors) -> None:
    from candidates.models import Candidate
    from runs.nightly import start_nightly
    from runs.reporting import export_report
    from tests.builders import completed_observation

    schedule = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("1000"), now=NIGHT, environ={}, execute=False).schedule
    for entry in schedule.entries.all():
        replay_executors.REPLAY_STORE[entry.execution_id] = completed_observation(
            entry.to_document(), cost_usd=0.25, provider=entry.candidate["provider"]
        )
    environ = {name: "dummy-value" for candidate in Candidate.objects.all() for name in candidate.required_environment}
    run = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("1000"), now=NIGHT, environ=environ, execute=True).run
    report = Report.objects.get(run=run)
    html = reader_client.get(run_url(run)).content.decode()
    assert f"<code>{report.bundle_id}</code>" in html
    assert f"<strong>{report.executions}</strong> executions" in html
    assert html.count(">PASS<") == report.passed
    for fmt in ("json", "markdown", "junit", "github"):
        response = reader_client.get(reverse("pages:run-export", args=[run.pk, fmt]))
        assert response.content.decode() == export_report(report, fmt)[0]
    candidate = run.executions.first().candidate_key
    points = reader_client.get(reverse("pages:candidate", args=[candidate])).context["history"].points
    assert [point.run_id for point in points] == [run.pk]
