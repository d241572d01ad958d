"""The leaderboard (page and API) and the live run view's progress endpoint: what they compute,
bad parameters, and their query counts pinned (the same with few or many nights)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from runs.evaluation.reports import percentile_95
from runs.evaluation.stats import wilson_interval
from runs.models import Classification, Execution, ExecutionStatus, Run, RunLane
from runs.queries import LeaderboardRow, leaderboard, sort_leaderboard
from tests.browser_night import build_nights

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def nights(replay_executors):
    return build_nights()


def expected_row(key: str, runs: list[Run]) -> dict[str, Any]:
    """The candidate's numbers computed directly from its executions (the definition, not the query)."""
    executions = list(Execution.objects.filter(run__in=runs, candidate_key=key).select_related("scorecard"))
    reached = [e for e in executions if e.classification != Classification.SKIPPED]
    verdicts = [e.scorecard.passed for e in reached if e.scorecard_or_none is not None and e.scorecard.passed is not None]
    passed = sum(verdicts)
    cost = sum((e.cost_usd for e in reached if e.cost_known), Decimal(0))
    return {
        "executions": len(executions),
        "skipped": len(executions) - len(reached),
        "scoreable": len(verdicts),
        "passed": passed,
        "interval": wilson_interval(passed, len(verdicts)),
        "p95": percentile_95([e.settlement_ms for e in reached if e.settlement_ms is not None]),
        "cost": cost,
        "unpriced": sum(1 for e in reached if not e.cost_known),
    }


def test_the_leaderboard_covers_the_newest_live_nightly_runs_only(nights) -> None:
    board = leaderboard(nights=7)
    assert board.nights == sorted({run.schedule.night for run in [*nights.past, nights.tonight]}, reverse=True)
    measured = [*nights.past, nights.tonight]  # not the scripted run, not the pending manual one
    for row in board.rows:
        expected = expected_row(row.candidate_key, measured)
        assert (row.executions, row.skipped, row.scoreable, row.passed, row.unpriced) == (
            expected["executions"],
            expected["skipped"],
            expected["scoreable"],
            expected["passed"],
            expected["unpriced"],
        ), row.candidate_key
        assert row.interval == expected["interval"]
        assert row.p95_latency_ms == expected["p95"]
        assert row.cost_usd == expected["cost"]


def test_the_leaderboard_keeps_to_the_nights_asked_for(nights) -> None:
    board = leaderboard(nights=2)
    assert board.nights == [nights.tonight.schedule.night, nights.past[-1].schedule.night]
    luna = next(row for row in board.rows if row.candidate_key == "codex-luna")
    assert luna.executions == expected_row("codex-luna", [nights.past[-1], nights.tonight])["executions"]


def test_an_unknown_cost_gives_no_cost_per_pass_and_a_lower_bound(nights) -> None:
    rows = {row.candidate_key: row for row in leaderboard().rows}
    sol = rows["acpx-codex-sol"]
    assert sol.unpriced > 0 and sol.cost_per_pass is None and sol.cost_per_pass_at_least == Decimal(0)
    luna = rows["codex-luna"]
    assert luna.cost_per_pass == (luna.cost_usd / luna.passed).quantize(Decimal("0.000001"))


def test_the_best_value_is_the_lowest_known_cost_per_pass(nights) -> None:
    rows = leaderboard().rows
    valued = [row for row in rows if row.cost_per_pass is not None]
    best = [row for row in rows if row.best_value]
    assert len(best) == 1
    assert best[0].cost_per_pass == min(row.cost_per_pass for row in valued)


def test_an_all_skipped_candidate_has_no_rate_latency_or_cost(nights) -> None:
    glm = next(row for row in leaderboard().rows if row.candidate_key == "opencode-glm")
    assert glm.skipped == glm.executions > 0
    assert (glm.pass_rate, glm.interval, glm.p95_latency_ms, glm.cost_per_pass, glm.mean_score) == (None, None, None, None, None)


def _row(key: str, scoreable: int, passed: int, cost: str = "1", unpriced: int = 0) -> LeaderboardRow:
    return LeaderboardRow(key, "m", "s", 1, scoreable, 0, scoreable, passed, None, None, None, Decimal(cost), unpriced)


def test_sorting_puts_missing_values_last_either_way() -> None:
    rows = [_row("a", 4, 1), _row("b", 0, 0), _row("c", 4, 3), _row("d", 4, 3, unpriced=1)]
    assert [row.candidate_key for row in sort_leaderboard(rows, "-pass_rate")] == ["c", "d", "a", "b"]
    assert [row.candidate_key for row in sort_leaderboard(rows, "pass_rate")] == ["a", "c", "d", "b"]
    assert [row.candidate_key for row in sort_leaderboard(rows, "cost_per_pass")] == ["c", "a", "b", "d"]
    assert [row.candidate_key for row in sort_leaderboard(rows, "-candidate")] == ["d", "c", "b", "a"]
    with pytest.raises(ValueError, match="sort must be one of"):
        sort_leaderboard(rows, "colour")


def test_an_empty_leaderboard_says_how_it_fills(reader_client) -> None:
    response = reader_client.get(reverse("pages:leaderboard"))
    assert response.status_code == 200
    assert "No live nightly runs yet" in response.content.decode()


def test_a_value_chart_with_nothing_to_plot_is_a_sentence_not_an_empty_plot() -> None:
    """It wraps on a phone; an empty plot's text scrolled out of sight with the plot."""
    from types import SimpleNamespace

    from django.template import Context, Template

    rows = [SimpleNamespace(candidate_key="codex-luna", cost_per_pass=None, pass_rate=0.5, best_value=False)]
    html = Template("{% load evalhub_charts %}{% value_chart rows %}").render(Context({"rows": rows}))
    assert "<svg" not in html
    assert '<p class="empty no-data">No candidate has a known cost per pass yet' in html
    assert "Not plotted (nothing scored or passed, or a cost is unknown): codex-luna." in html
    plotted = [SimpleNamespace(candidate_key="codex-luna", cost_per_pass=0.02, pass_rate=0.5, best_value=True)]
    html = Template("{% load evalhub_charts %}{% value_chart rows %}").render(Context({"rows": plotted}))
    assert "<svg" in html and "no-data" not in html


def test_the_leaderboard_page_shows_each_candidate_sorted_with_the_chart(reader_client, nights) -> None:
    page = reader_client.get(reverse("pages:leaderboard"), {"sort": "cost_per_pass"}).content.decode()
    board = leaderboard(sort="cost_per_pass")
    order = [page.index(f'data-candidate="{row.candidate_key}"', page.index('table class="data leaderboard"')) for row in board.rows]
    assert order == sorted(order)
    assert 'id="chart-value"' in page and "best value" in page
    assert 'aria-sort="ascending"' in page
    assert "?nights=7&amp;sort=-cost_per_pass" in page


def test_a_candidate_never_scored_reads_nothing_scored_not_nothing_passed(reader_client, nights) -> None:
    board = {row.candidate_key: row for row in leaderboard().rows}
    assert board["opencode-glm"].scoreable == 0 and board["opencode-glm"].skipped > 0
    page = reader_client.get(reverse("pages:leaderboard")).content.decode()
    row = page[page.index('data-candidate="opencode-glm"', page.index('table class="data leaderboard"')) :]
    cost = row[row.index('class="num cost-per-pass"') : row.index("</td>", row.index('class="num cost-per-pass"'))]
    assert "nothing scored" in cost and "nothing passed" not in cost


@pytest.mark.parametrize("query", [{"nights": "0"}, {"nights": "abc"}, {"nights": "91"}, {"sort": "colour"}])
def test_bad_leaderboard_parameters_are_a_400_page(reader_client, query: dict[str, str]) -> None:
    response = reader_client.get(reverse("pages:leaderboard"), query)
    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()


def test_the_leaderboard_api_gives_the_same_numbers(reader_client, nights) -> None:
    body = reader_client.get("/api/leaderboard/", {"nights": 3, "sort": "-pass_rate"}).json()
    board = leaderboard(nights=3, sort="-pass_rate")
    assert body["nights"] == [f"{night:%Y-%m-%d}" for night in board.nights]
    assert [row["candidateId"] for row in body["candidates"]] == [row.candidate_key for row in board.rows]
    luna = next(row for row in body["candidates"] if row["candidateId"] == "codex-luna")
    expected = next(row for row in board.rows if row.candidate_key == "codex-luna")
    assert luna["passRate"] == expected.pass_rate
    assert luna["passRateInterval"] == list(expected.interval)
    assert luna["costPerPassUsd"] == float(expected.cost_per_pass)
    assert luna["p95LatencyMs"] == expected.p95_latency_ms
    assert sum(row["bestValue"] for row in body["candidates"]) == 1


@pytest.mark.parametrize("query", [{"nights": "0"}, {"nights": "x"}, {"sort": "cost"}, {"lane": "live"}])
def test_bad_leaderboard_api_parameters_are_a_400(reader_client, query: dict[str, str]) -> None:
    response = reader_client.get("/api/leaderboard/", query)
    assert response.status_code == 400
    assert set(response.json()) == set(query)


def _more_nights(count: int) -> None:
    """``count`` more past live nightly runs (skipped: no keys), each a night of its own."""
    import datetime as dt

    from django.utils import timezone

    from runs.nightly import start_nightly

    for days in range(20, 20 + count):
        start_nightly(
            seed="runner-live-seven-week-v1",
            cost_ceiling_usd=Decimal("12"),
            now=timezone.now() - dt.timedelta(days=days),
            environ={},
            execute=True,
        )


def test_the_leaderboard_costs_the_same_queries_with_few_or_many_nights(reader_client, nights, django_assert_num_queries) -> None:
    # Session and user (2), the nights (1), their executions (1), the catalog's models (1).
    with django_assert_num_queries(5):
        assert reader_client.get(reverse("pages:leaderboard"), {"nights": 30}).status_code == 200
    with django_assert_num_queries(5):
        assert reader_client.get("/api/leaderboard/", {"nights": 30}).status_code == 200
    _more_nights(3)
    with django_assert_num_queries(5):
        assert reader_client.get(reverse("pages:leaderboard"), {"nights": 30}).status_code == 200
    with django_assert_num_queries(5):
        assert reader_client.get("/api/leaderboard/", {"nights": 30}).status_code == 200


# --- the live run view ---------------------------------------------------------------------------


def test_a_running_run_page_carries_the_live_view_and_a_finished_one_does_not(reader_client, nights) -> None:
    pending = reader_client.get(reverse("pages:run", args=[nights.pending.pk])).content.decode()
    assert 'class="progress live-progress"' in pending and "live-run.js" in pending
    assert 'aria-valuenow="0"' in pending and f'aria-valuemax="{nights.pending.executions.count()}"' in pending
    finished = reader_client.get(reverse("pages:run", args=[nights.tonight.pk])).content.decode()
    assert "live-progress" not in finished and "live-run.js" not in finished


def test_the_progress_endpoint_counts_settled_executions_and_renders_their_rows(reader_client, nights) -> None:
    url = reverse("pages:run-progress", args=[nights.pending.pk])
    body = reader_client.get(url).json()
    assert (body["status"], body["finished"], body["settled"], body["total"]) == ("pending", False, 0, 6)
    first = nights.pending.executions.order_by("position").first()
    Execution.objects.filter(pk=first.pk).update(
        status=ExecutionStatus.FINISHED, classification=Classification.SKIPPED, failure_code="run_cancelled"
    )
    body = reader_client.get(url).json()
    assert (body["settled"], body["counts"]["skipped"]) == (1, 1)
    assert f'<tr id="execution-{first.pk}"' in body["rows"][str(first.pk)]
    assert 'class="cls cls-skipped"' in body["rows"][str(first.pk)]
    assert len(body["rows"]) == 6


def test_the_progress_endpoint_needs_sign_in_and_a_run(reader_client, nights) -> None:
    from django.test import Client

    assert Client().get(reverse("pages:run-progress", args=[nights.pending.pk])).status_code == 302
    assert reader_client.get(reverse("pages:run-progress", args=[987654])).status_code == 404


def test_the_progress_endpoint_costs_two_queries_with_few_or_many_executions(reader_client, nights, django_assert_num_queries) -> None:
    # Session and user (2), the run (1), its executions with scorecards and attempt counts (1).
    for run in (nights.pending, nights.tonight):
        with django_assert_num_queries(4):
            assert reader_client.get(reverse("pages:run-progress", args=[run.pk])).status_code == 200
    assert Run.objects.get(pk=nights.tonight.pk).lane == RunLane.LIVE
