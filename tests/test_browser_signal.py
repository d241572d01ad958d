"""The signal across nights in headless Chromium, over a week of one bundle with a regression, a
bimodal case and a flaky one (tests/signal_nights.py): the heat map with its flaky badges and the
significant regression, the run report's verdicts and the compare page's, at the desktop and a
phone width, without console errors, overflow, covered links or broken links. Screenshots under
``var/screenshots/signal/``."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runs.creation import create_run
from runs.dispatch import execute_run
from tests.browser_night import ENVIRON
from tests.browser_support import SCREENSHOTS, broken_links, look_at, sign_in
from tests.signal_nights import WEEK_WINDOWS, SignalNights, build_signal_nights

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def week(transactional_db, replay_executors, settings) -> SignalNights:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.EVALHUB = {**settings.EVALHUB, **WEEK_WINDOWS, "BASELINE_READY": True}
    return build_signal_nights()


@pytest.fixture
def page(browser, live_server, week, django_user_model):
    django_user_model.objects.create_user("stakeholder", password="pw-stakeholder-123")
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    sign_in(page, live_server.url, "stakeholder", "pw-stakeholder-123")
    yield page
    context.close()


def _row(page, pair: tuple[str, str]):
    return page.locator(f'table.heatmap tr[data-case="{pair[0]}"][data-candidate="{pair[1]}"]')


def test_the_signal_pages_read_cleanly_and_show_their_verdicts(page, live_server, week: SignalNights, settings) -> None:
    runs = week.runs
    urls = {
        "heat-map": "/signal/",
        "run-report": f"/runs/{runs[-1].pk}/",
        "compare": f"/compare/?a={runs[3].pk}&b={runs[-1].pk}",
        "heat-map-early": f"/signal/?run={runs[1].pk}",
    }
    problems: list[str] = []
    checked: dict[str, int] = {}
    for name, url in urls.items():
        look = look_at(page, live_server.url + url, name, folder="signal")
        print(f"{name}: screenshots {', '.join(str(path) for path in look.screenshots)}")
        problems += [f"{name}: {problem}" for problem in look.problems()]
        problems += [f"{name}: broken link {link}" for link in broken_links(page, live_server.url, look.links, checked)]
    assert not problems, "\n".join(problems)

    # The heat map: one significant regression, two flaky badges, every night a column.
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/signal/")
    assert page.locator("table.heatmap th.night").count() == len(runs)
    regression = _row(page, week.regression)
    assert regression.locator(".badge-regression").inner_text() == "▼ significant regression"
    assert regression.locator("td.cell").all_inner_texts() == ["3/3", "3/3", "3/3", "3/3", "1/3", "0/3", "1/3"]
    assert regression.locator("td.cell.role-recent").count() == 3 and regression.locator("td.cell.role-baseline").count() == 4
    assert _row(page, week.bimodal).locator(".badge-flaky").is_visible()
    assert _row(page, week.flaky).locator(".badge-flaky").is_visible()
    assert page.locator(".badge-flaky").count() == 2 and page.locator(".badge-regression").count() == 1
    assert page.locator('[data-verdict="regression"]').first.inner_text() == "1"

    # The run report: the verdict counts, and the alert of evalhub's own beside the reference's.
    page.goto(f"{live_server.url}/runs/{runs[-1].pk}/")
    section = page.locator("section.signal-section")
    section.screenshot(path=str(SCREENSHOTS / "signal" / "run-report-signal-section-1366.png"))
    assert page.locator(".signal-counts [data-verdict=regression]").inner_text() == "1"
    assert "significant_regression" in page.locator("table.alerts").inner_text()
    changes = page.locator("table.night-changes")
    assert changes.locator(f'tr[data-case="{week.bimodal[0]}"][data-candidate="{week.bimodal[1]}"] .change-flaky').is_visible()

    # The compare page: the regressed pair's changes are significant.
    page.goto(f"{live_server.url}/compare/?a={runs[3].pk}&b={runs[-1].pk}")
    assert page.locator("td.signal .change-significant").count() == 2  # two of its three repetitions flipped
    assert page.locator(".signal-summary [data-change=significant]").inner_text() == "2"

    # With the default windows (3 + 6 nights) the heat map shows nine nights and still fits the
    # desktop width: two more measured runs of the bundle make nine.
    settings.EVALHUB = {key: value for key, value in settings.EVALHUB.items() if key not in WEEK_WINDOWS}
    for _ in range(2):
        run, _ = create_run(schedule=runs[-1].schedule, cost_ceiling_usd=Decimal("12"))
        execute_run(run, environ=ENVIRON)
    look = look_at(page, f"{live_server.url}/signal/", "heat-map-nine-nights", folder="signal")
    assert look.problems() == []
    assert page.locator("table.heatmap th.night").count() == 9
