"""What a first user hit, server side: each rough edge the browser suite saw, pinned where it is made.

Skipped executions read as skipped, charts leave unmeasured nights out with distinct ticks, the
compare page refuses to count across incomparable runs and names a missing run, tonight's worst
case against the ceiling, edited candidates, words, titles and file names, the empty alerts page,
the admin's required environment, the API's 401, unknown filters, tonight's endpoint and root,
the favicon, JUnit test names.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from candidates.models import Candidate
from evalhub.templatetags.evalhub_charts import NARROW, line_chart_geometry, nice_axis
from runs.evaluation.renderers import render_junit
from runs.models import Classification, Report, Run
from runs.queries import candidate_history
from schedules.building import ScheduleError, ceiling_projection, select_schedule
from tests.browser_night import build_nights

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def nights(replay_executors):
    return build_nights()


def html(response) -> str:
    return response.content.decode()


# --- a skipped execution -------------------------------------------------------------------------


def test_a_skipped_execution_page_is_neither_red_nor_failed(reader_client, nights) -> None:
    execution = nights.tonight.executions.filter(classification=Classification.SKIPPED).first()
    page = html(reader_client.get(reverse("pages:execution", args=[execution.pk])))
    assert "notice-error" not in page
    assert "tag-bad" not in page
    assert '<div class="notice skipped" role="note">' in page
    assert "never attempted" in page
    assert "No attempts yet" not in page
    # Nothing ran, so nothing took time or money: no "0 ms" as if it had been measured.
    assert '<dt>Duration</dt><dd>— <span class="muted">(never attempted)</span></dd>' in page
    assert '<dt>Cost</dt><dd>— <span class="muted">(never attempted)</span></dd>' in page


def test_an_infrastructure_failure_says_so_in_its_box(reader_client, nights) -> None:
    execution = nights.tonight.executions.filter(classification=Classification.INFRASTRUCTURE_FAILURE).first()
    page = html(reader_client.get(reverse("pages:execution", args=[execution.pk])))
    assert "<strong>Infrastructure failure</strong>" in page


def test_the_run_page_shows_a_gate_in_words_and_no_cost_for_a_skip(reader_client, nights) -> None:
    page = html(reader_client.get(reverse("pages:run", args=[nights.tonight.pk])))
    assert "gate passed" in page
    assert ">true<" not in page
    skipped = nights.tonight.executions.filter(classification=Classification.SKIPPED).first()
    row = page[page.index(f'id="execution-{skipped.pk}"') :]
    row = row[: row.index("</tr>")]
    assert '<td class="num cost">—</td>' in row
    assert '<span class="muted">skipped</span>' in row


# --- charts ----------------------------------------------------------------------------------------


def test_the_trend_leaves_skipped_executions_out_and_plots_no_point_for_an_all_skipped_night(nights) -> None:
    history = candidate_history("opencode-glm")
    assert history.points
    assert all(point.p95_latency_ms is None and point.pass_rate is None and point.cost_usd is None for point in history.points)
    assert all(point.skipped == point.executions for point in history.points)
    measured = [point for point in candidate_history("codex-luna").points if point.scoreable]
    assert len(measured) == 4
    assert all(point.p95_latency_ms >= 30_000 for point in measured)
    assert {point.model for point in measured} == {"gpt-5.6-luna"}


@pytest.mark.parametrize(
    ("largest", "ticks"),
    [
        (0.0, [0.0, 0.5, 1.0]),
        (1.0, [0.0, 0.5, 1.0]),
        (41_000.0, [0, 20_000, 40_000, 60_000]),
        (0.23, [0.0, 0.1, 0.2, 0.3]),
        (7.0, [0, 2, 4, 6, 8]),
    ],
)
def test_an_axis_has_nice_ticks_that_never_repeat(largest: float, ticks: list[float]) -> None:
    top, values = nice_axis(largest)
    assert values == ticks
    assert top == ticks[-1] >= largest


def test_latency_ticks_read_in_seconds_and_an_empty_chart_keeps_distinct_ticks() -> None:
    geometry = line_chart_geometry(["run 1", "run 2"], [41_000, 52_000], kind="seconds")
    assert [tick.text for tick in geometry["y_ticks"]] == ["0", "20 s", "40 s", "60 s"]
    empty = line_chart_geometry(["run 1"], [None], kind="seconds")
    texts = [tick.text for tick in empty["y_ticks"]]
    assert len(set(texts)) == len(texts) and empty["empty"]


def test_a_narrow_chart_labels_its_first_and_last_runs_within_its_box() -> None:
    labels = ["run 1 · 2026-12-01", "run 2 · 2026-12-02", "run 3 · 2026-12-03"]
    wide = line_chart_geometry(labels, [0.5, 0.6, 0.7], kind="rate")
    narrow = line_chart_geometry(labels, [0.5, 0.6, 0.7], kind="rate", layout=NARROW)
    assert [tick.text for tick in wide["x_ticks"]] == labels
    assert [(tick.text, tick.anchor) for tick in narrow["x_ticks"]] == [(labels[0], "start"), (labels[-1], "end")]
    # The narrow layout's 56 leaves no room for "100%" beside the rotated title (its glyphs take up
    # to 3 × 8 + 12 units, 6 from the axis, the title 20): the axis moves to 62.
    assert (narrow["width"], narrow["left"], narrow["right"]) == (330, 62, 318)
    assert all(narrow["left"] <= point.x <= narrow["right"] for point in narrow["points"])


def test_the_latency_chart_is_titled_for_people(reader_client, nights) -> None:
    page = html(reader_client.get(reverse("pages:candidate", args=["codex-luna"])))
    assert "p95 settlement latency (s)" in page
    assert "settlementMs, p95" not in page
    # Drawn at both layouts, each scaling to its box rather than a fixed 560 px.
    assert page.count('<svg class="line-chart chart-wide" viewBox="0 0 560 220"') == 4
    assert page.count('<svg class="line-chart chart-narrow" viewBox="0 0 330 240"') == 4
    assert 'width="560"' not in page


# --- compare -------------------------------------------------------------------------------------


def test_comparing_with_a_scripted_run_gives_the_reason_and_no_counts(reader_client, nights) -> None:
    response = reader_client.get(reverse("pages:compare"), {"a": nights.tonight.pk, "b": nights.scripted.pk})
    page = html(response)
    assert response.status_code == 200
    assert f"Not comparable: run {nights.scripted.pk} is a scripted run" in page
    assert "regression" not in page.split("not-comparable", 1)[1]
    assert "executions compared" not in page
    assert '<table class="data compare">' not in page


def test_comparing_a_run_that_does_not_exist_is_a_form_error(reader_client, nights) -> None:
    response = reader_client.get(reverse("pages:compare"), {"a": nights.tonight.pk, "b": 987654})
    assert response.status_code == 404
    page = html(response)
    assert "Run B (after): There is no run 987654: pick one from the list." in page
    assert '<form class="compare-form"' in page


# --- tonight, the preview, edited candidates ----------------------------------------------------


def test_a_worst_case_over_the_ceiling_says_where_the_night_stops() -> None:
    entries = [{"executionId": f"rwe-{index}", "budget": {"maxCostUsd": cost}} for index, cost in enumerate([5, 5, 0.8, 3, 1])]
    projection = ceiling_projection(entries, Decimal("12"))
    assert projection.worst_case_usd == Decimal("14.8")
    assert (projection.first_refused, projection.refused, projection.stops_early) == (3, 2, True)
    fits = ceiling_projection(entries[:3], Decimal("12"))
    assert (fits.first_refused, fits.stops_early, fits.refused) == (None, False, 0)


def worst_case_usd(run: Run) -> Decimal:
    """The sum of every entry's ``budget.maxCostUsd`` in ``run``'s schedule. Tonight's schedule
    rotates with the weekday (``build_nights`` builds it for the real tonight), so its worst case
    is $40.80 on some days and $46.00 on others: the tests read it from the entries."""
    return sum((Decimal(str(entry.to_document()["budget"]["maxCostUsd"])) for entry in run.schedule.entries.all()), Decimal(0))


def test_tonight_warns_that_the_night_may_stop_early_and_where(reader_client, nights) -> None:
    worst = worst_case_usd(nights.tonight)
    assert worst > 12  # forty executions never fit the $12 ceiling, whatever the weekday
    page = html(reader_client.get(reverse("pages:tonight")))
    assert "This night may stop early." in page
    assert f"Its worst case is ${worst:.2f}" in page and "against the $12.00 campaign ceiling" in page
    assert "would stop at execution #" in page
    # It names the setting to change (evalhub/settings.py reads it as MAX_CAMPAIGN_COST_USD).
    assert "The ceiling is set by the <code>EVALHUB_MAX_CAMPAIGN_COST_USD</code> environment variable where the nightly runs" in page
    assert "180000 ms" not in page and "3 min 00 s" in page


def test_the_preview_warns_too_and_shows_money_as_money(staff_client, nights) -> None:
    night = nights.tonight.schedule.night
    page = html(
        staff_client.get(reverse("admin:schedules_schedule_preview"), {"seed": nights.tonight.schedule.seed, "night": f"{night:%Y-%m-%d}"})
    )
    assert "This night may stop early." in page
    assert "<code>EVALHUB_MAX_CAMPAIGN_COST_USD</code>" in page
    assert "<td>0.8</td>" not in page and "<td>$0.80</td>" in page
    assert "<td>180000</td>" not in page


def test_tonight_lists_a_candidate_edited_after_its_schedule_was_saved(reader_client, nights) -> None:
    Candidate.objects.filter(key="codex-luna").update(model="gpt-5.7-luna")
    page = html(reader_client.get(reverse("pages:tonight")))
    assert "Edited after this schedule was saved:" in page
    assert (
        "<code>codex-luna</code> now names <code>gpt-5.7-luna</code>, but tonight's saved schedule runs <code>gpt-5.6-luna</code>" in page
    )
    candidate = html(reader_client.get(reverse("pages:candidate", args=["codex-luna"])))
    assert "The model changed." in candidate and "<code>gpt-5.6-luna</code>" in candidate


def test_the_tonight_api_gives_the_schedule_its_worst_case_and_edits(reader_client, nights) -> None:
    Candidate.objects.filter(key="codex-luna").update(model="gpt-5.7-luna")
    body = reader_client.get("/api/tonight/").json()
    assert body["saved"] is True
    assert body["night"] == f"{nights.tonight.schedule.night:%Y-%m-%d}"
    assert body["schedule"]["expectedExecutions"] == 40
    assert (body["worstCaseUsd"], body["ceilingUsd"], body["stopsEarly"]) == (float(worst_case_usd(nights.tonight)), 12, True)
    assert body["firstRefusedExecutionId"].startswith("rwe-")
    assert {"candidateId": "codex-luna", "scheduled": "gpt-5.6-luna", "current": "gpt-5.7-luna"} in body["modelChanges"]
    assert [run["id"] for run in body["runs"]] == sorted(
        (run.pk for run in Run.objects.filter(schedule=nights.tonight.schedule)), reverse=True
    )
    refused = reader_client.get("/api/tonight/", {"night": "x"})
    assert refused.status_code == 400 and refused.json() == {"night": ["This endpoint takes no query parameters."]}


def test_an_admin_edit_of_a_candidate_says_saved_schedules_keep_the_old_one(staff_client, reference_catalog) -> None:
    candidate = Candidate.objects.get(key="codex-luna")
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    data = _candidate_form(candidate, model="gpt-5.7-luna")
    response = staff_client.post(url, data, follow=True)
    assert response.status_code == 200
    messages = [str(message) for message in response.context["messages"]]
    assert any("codex-luna: the model change applies from the next schedule built" in message for message in messages), messages


def _candidate_form(candidate: Candidate, **changes: Any) -> dict[str, Any]:
    data = {
        "key": candidate.key,
        "slot": candidate.slot_id,
        "position": candidate.position,
        "adapter": candidate.adapter,
        "provider": candidate.provider,
        "model": candidate.model,
        "tier": candidate.tier,
        "reasoning_effort": candidate.reasoning_effort,
        "required_environment": ", ".join(candidate.required_environment),
        "profile": candidate.profile,
        "budget": candidate.budget_id,
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("OPENAI_API_KEY", ["OPENAI_API_KEY"]),
        ("OPENAI_API_KEY, EXTRA_KEY", ["OPENAI_API_KEY", "EXTRA_KEY"]),
        ('["OPENAI_API_KEY"]', ["OPENAI_API_KEY"]),
        ("OPENAI_API_KEY\nEXTRA_KEY", ["OPENAI_API_KEY", "EXTRA_KEY"]),
    ],
)
def test_the_admin_takes_required_environment_as_plain_names(staff_client, reference_catalog, typed: str, stored: list[str]) -> None:
    candidate = Candidate.objects.get(key="codex-luna")
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    response = staff_client.post(url, _candidate_form(candidate, required_environment=typed))
    assert response.status_code == 302, response.content.decode()[:2000]
    candidate.refresh_from_db()
    assert candidate.required_environment == stored
    form = html(staff_client.get(url))
    assert f'value="{", ".join(stored)}"' in form


def test_the_admin_refuses_a_name_that_is_not_a_variable_name(staff_client, reference_catalog) -> None:
    candidate = Candidate.objects.get(key="codex-luna")
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    response = staff_client.post(url, _candidate_form(candidate, required_environment="openai-key"))
    assert response.status_code == 200
    assert "Required environment" in response.content.decode()
    candidate.refresh_from_db()
    assert candidate.required_environment == ["OPENAI_API_KEY"]


# --- words, titles, file names -------------------------------------------------------------------


def test_a_resting_candidate_is_told_apart_from_an_unknown_one() -> None:
    schedule = {
        "rotationDay": 1,
        "candidates": [{"id": "codex-luna"}],
        "entries": [{"caseId": "final-response", "candidateId": "codex-luna"}],
    }
    with pytest.raises(ScheduleError, match=r"^candidate opencode-kimi does not play on rotation day 1: .*line-up: codex-luna"):
        select_schedule(schedule, candidate_ids=["opencode-kimi"], catalog_ids={"opencode-kimi"})
    with pytest.raises(ScheduleError, match=r"^unknown Runner live eval candidate: nobody \(not in rotation day 1"):
        select_schedule(schedule, candidate_ids=["nobody"], catalog_ids={"opencode-kimi"})


def test_the_candidates_page_says_rotation_day_as_everywhere(reader_client, reference_catalog) -> None:
    page = html(reader_client.get(reverse("pages:candidates")))
    assert "rotation week" not in page
    assert "On rotation day <var>d</var>" in page


def test_an_execution_page_title_names_its_run(reader_client, nights) -> None:
    execution = nights.scripted.executions.first()
    page = html(reader_client.get(reverse("pages:execution", args=[execution.pk])))
    assert f"<title>Execution {execution.execution_id} · run {nights.scripted.pk} · evalhub</title>" in page


def test_junit_names_each_repetition_in_evalhubs_export_only() -> None:
    row = {
        "scenarioId": "final-response",
        "candidateId": "codex-luna",
        "observation": {},
        "scorecard": {"overall": {"passed": True}, "dimensions": {}},
    }
    report = {"results": [row, row, row, {**row, "scenarioId": "rich-activity"}]}
    names = re.findall(r'<testcase classname="[^"]*" name="([^"]*)"', render_junit(report, distinct_names=True))
    assert names == [
        "final-response/codex-luna (repetition 1)",
        "final-response/codex-luna (repetition 2)",
        "final-response/codex-luna (repetition 3)",
        "rich-activity/codex-luna",
    ]
    reference = [line for line in render_junit(report).splitlines() if "<testcase" in line]
    assert reference[0] == reference[1]


def test_the_junit_export_of_a_night_has_no_duplicate_test_names(reader_client, nights) -> None:
    body = reader_client.get(reverse("pages:run-export", args=[nights.tonight.pk, "junit"])).content.decode()
    names = re.findall(r'<testcase classname="[^"]*" name="([^"]*)"', body)
    assert len(names) == 40 == len(set(names))


# --- alerts ----------------------------------------------------------------------------------------


def test_the_empty_alerts_page_says_when_alerts_start(reader_client, nights, settings) -> None:
    page = html(reader_client.get(reverse("pages:alerts")))
    assert "No open alerts." in page
    assert "Alerts fire only once the baseline is ready" in page
    assert "EVALHUB_BASELINE_READY=true" in page
    assert "seven compatible reports" in page
    newest = Report.objects.filter(is_refresh=False, is_scripted=False).order_by("-created_at", "-id").first()
    count = Report.objects.filter(bundle_id=newest.bundle_id, is_refresh=False, is_scripted=False).count()
    assert f"<code>{newest.bundle_id}</code>, has {count} of them" in page


# --- the API -------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/api/", "/api/runs/", "/api/tonight/", "/api/leaderboard/"])
def test_a_request_without_credentials_is_a_401_with_a_challenge(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_signed_in_reader_still_cannot_write(reader_client, reference_catalog) -> None:
    assert reader_client.post("/api/budgets/", {}, content_type="application/json").status_code == 403


@pytest.mark.parametrize(("url", "param"), [("/api/runs/", "colour"), ("/api/executions/", "lane"), ("/api/alerts/", "candidate_id")])
def test_an_unknown_filter_is_a_400_naming_the_accepted_ones(reader_client, url: str, param: str) -> None:
    response = reader_client.get(url, {param: "x"})
    assert response.status_code == 400
    assert "Unknown query parameter. Accepted: " in response.json()[param][0]


def test_runs_filter_by_lane(reader_client, nights) -> None:
    body = reader_client.get("/api/runs/", {"lane": "scripted"}).json()
    assert [run["id"] for run in body["results"]] == [nights.scripted.pk]
    assert reader_client.get("/api/runs/", {"lane": "live", "page": 1}).status_code == 200


def test_the_api_root_lists_every_endpoint(reader_client) -> None:
    body = reader_client.get("/api/").json()
    for name in ("runs", "tonight", "schedules/preview", "coverage", "comparisons", "leaderboard", "score"):
        assert name in body, name
    assert body["tonight"].endswith("/api/tonight/")


def test_the_favicon_is_served(client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("evalhub/favicon.svg")


def test_every_page_links_its_favicon(reader_client) -> None:
    assert 'rel="icon"' in html(reader_client.get(reverse("pages:runs")))
