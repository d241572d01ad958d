"""The leaderboard and the live run view in headless Chromium: sorting by clicking a heading, the
best value standing out on the chart, and a running run's page updating as executions settle
(no reload) with its progress bar."""

from __future__ import annotations

import pytest

from runs.models import Classification, ExecutionStatus
from runs.queries import leaderboard
from tests.browser_night import Nights
from tests.browser_support import SCREENSHOTS, look_at, y_tick_labels

#: The tests that change nothing in the database read their module's nights, built once
#: (``shared_nights``, tests/conftest.py); the others build their own in a transactional database.
pytestmark = [pytest.mark.browser]


@pytest.mark.shared_nights
def test_the_leaderboard_sorts_by_a_clicked_heading_and_marks_the_best_value(signed_in, live_server, nights: Nights) -> None:
    page = signed_in
    look = look_at(page, f"{live_server.url}/leaderboard/", "leaderboard-sorted", folder="checks")
    assert look.problems() == []
    shown = page.locator("table.leaderboard tr.candidate-row").evaluate_all("rows => rows.map((row) => row.dataset.candidate)")
    assert shown == [row.candidate_key for row in leaderboard(sort="-pass_rate").rows]
    page.get_by_role("link", name="Cost per pass").click()
    page.wait_for_url("**sort=cost_per_pass")
    shown = page.locator("table.leaderboard tr.candidate-row").evaluate_all("rows => rows.map((row) => row.dataset.candidate)")
    board = leaderboard(sort="cost_per_pass")
    assert shown == [row.candidate_key for row in board.rows]
    assert page.locator("th[aria-sort=ascending]").text_content().strip().startswith("Cost per pass")
    best = board.best
    assert best is not None
    assert page.locator("tr.best-value").get_attribute("data-candidate") == best.candidate_key
    marker = page.locator(f'#chart-value g.candidate-point.best[data-candidate="{best.candidate_key}"]')
    assert marker.is_visible()
    assert "best value" in marker.text_content()
    # The best point is drawn larger and in the "good" colour than the others.
    radius = page.locator("#chart-value circle.point.best").get_attribute("r")
    others = page.locator("#chart-value circle.point:not(.best)").evaluate_all("circles => circles.map((c) => c.getAttribute('r'))")
    assert others and all(float(radius) > float(other) for other in others)
    chart = next(chart for chart in look.charts if chart["id"] == "chart-value")
    assert y_tick_labels(chart) == ["0%", "25%", "50%", "75%", "100%"]


@pytest.mark.shared_nights
def test_the_leaderboard_reads_unknown_cost_and_skips_as_such(signed_in, live_server, nights: Nights) -> None:
    signed_in.goto(f"{live_server.url}/leaderboard/")
    sol = signed_in.locator('tr[data-candidate="acpx-codex-sol"] td.cost-per-pass').inner_text()
    assert sol.startswith("unknown") and "unpriced" in sol
    glm = signed_in.locator('tr[data-candidate="opencode-glm"]')
    assert "skipped" in glm.inner_text() and "nothing scored" in glm.inner_text()
    assert "not plotted" in signed_in.locator("#chart-value").inner_text().lower()


def test_a_running_run_updates_as_its_executions_settle_without_a_reload(signed_in, live_server, nights: Nights) -> None:
    page = signed_in
    run = nights.pending
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.evaluate("window.__sameDocument = true")
    bar = page.locator(".live-progress .progress-bar")
    assert bar.get_attribute("aria-valuenow") == "0"
    executions = list(run.executions.order_by("position"))
    first, second = executions[0], executions[1]
    # Two executions settle in the database (as a worker would record them).
    for execution, classification in ((first, Classification.SKIPPED), (second, Classification.INFRASTRUCTURE_FAILURE)):
        execution.status = ExecutionStatus.FINISHED
        execution.classification = classification
        execution.failure_code = "run_cancelled" if classification == Classification.SKIPPED else "provider_http_503"
        execution.save(update_fields=["status", "classification", "failure_code"])
    page.wait_for_function("document.querySelector('.live-progress .progress-bar').getAttribute('aria-valuenow') === '2'", timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True  # the page was not reloaded
    assert page.locator(".live-progress .settled").inner_text() == "2"
    assert page.locator(f"#execution-{first.pk} .cls-skipped").inner_text() == "skipped"
    assert page.locator(f"#execution-{second.pk} .cls-infrastructure_failure").is_visible()
    assert page.locator('[data-count="skipped"]').inner_text() == "1"
    width = page.evaluate("parseFloat(document.querySelector('.live-progress .progress-bar span').style.width)")
    assert width == round(100 * 2 / len(executions))
    (SCREENSHOTS / "checks").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "checks" / "live-run-2-settled.png"), full_page=True)
    # The rest settle and the run finishes: the page says so and offers the report.
    for execution in executions[2:]:
        execution.status = ExecutionStatus.FINISHED
        execution.classification = Classification.SKIPPED
        execution.failure_code = "run_cancelled"
        execution.save(update_fields=["status", "classification", "failure_code"])
    run.status = "finished"
    run.save(update_fields=["status"])
    page.wait_for_selector(".live-progress.done", timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator(".run-status").inner_text() == "finished"
    assert page.get_by_role("link", name="show its report").is_visible()
    assert page.locator(".live-progress .progress-bar").get_attribute("aria-valuenow") == str(len(executions))


def test_a_queued_run_says_no_worker_is_running_until_one_starts(signed_in, live_server, nights: Nights) -> None:
    from django.utils import timezone

    from runs.models import Execution
    from tests.test_waiting_for_worker import a_cluster_is_alive

    page = signed_in
    run = nights.pending
    Execution.objects.filter(run=run).update(dispatched_at=timezone.now())
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.evaluate("window.__sameDocument = true")
    notice = page.locator(".live-progress .no-worker")
    assert notice.is_visible()
    assert notice.inner_text().startswith("No worker is running")
    assert notice.locator(".waiting").inner_text() == str(run.executions.count())
    (SCREENSHOTS / "checks").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "checks" / "live-run-no-worker.png"), full_page=True)
    # A worker starts (its sentinel saves the cluster's status): the next poll takes the notice away.
    a_cluster_is_alive()
    page.wait_for_selector(".live-progress .no-worker", state="hidden", timeout=15_000)
    assert page.evaluate("window.__sameDocument") is True


def test_a_run_deleted_while_its_page_is_open_says_so_and_stops_polling(signed_in, live_server, nights: Nights) -> None:
    """A pruned run's progress is a 404: the page said "updates paused (the server did not
    answer); retrying" every 6 s for ever."""
    from runs.models import Run

    page = signed_in
    run = nights.pending
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    Run.objects.filter(pk=run.pk).delete()
    state = page.locator(".live-progress .state")
    page.wait_for_function("document.querySelector('.live-progress .state').textContent.includes('no longer exists')", timeout=15_000)
    assert state.inner_text() == "this run no longer exists (it was deleted since the page was opened)"


@pytest.mark.shared_nights
def test_a_signed_out_page_says_so_instead_of_retrying(signed_in, live_server, nights: Nights) -> None:
    page = signed_in
    run = nights.pending
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.context.clear_cookies()
    page.wait_for_function("document.querySelector('.live-progress .state').textContent.includes('signed out')", timeout=15_000)
    assert page.locator(".live-progress .state").inner_text() == "updates stopped: you are signed out; reload the page to sign in again"
