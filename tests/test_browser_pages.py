"""Every page and the admin screens a user reaches, in headless Chromium, as a stakeholder sees them.

Each page is opened at 1366 × 900 and at a phone width (390 px) over the realistic nights of
:mod:`tests.browser_night`: no console error, no text overflowing (or clipped by) its box, no
table cut off at the desktop width, no link covered by another element, charts with readable,
distinct ticks, and every link on the page leads somewhere that is not an error. A screenshot of
each page at each width is saved under ``var/screenshots/pages/`` (the path is printed).
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from django.conf import settings
from django.template import Context, Template

from evalhub.templatetags.evalhub_charts import NARROW
from runs.models import Classification
from runs.queries import TrendPoint
from tests.browser_night import Nights
from tests.browser_support import DESKTOP, PHONE, SCREENSHOTS, broken_links, charts_on, look_at, overlapping_axis_texts, y_tick_labels

#: The tests that change nothing in the database read their module's nights, built once
#: (``shared_nights``, tests/conftest.py); the others build their own in a transactional database.
pytestmark = [pytest.mark.browser]


def _execution(nights: Nights, classification: str) -> int:
    return nights.tonight.executions.filter(classification=classification).order_by("position").first().pk


#: Every page a signed-in user reaches, by name: its address for the nights built.
PAGES: dict[str, Callable[[Nights], str]] = {
    "runs": lambda nights: "/",
    "run-tonight": lambda nights: f"/runs/{nights.tonight.pk}/",
    "run-past": lambda nights: f"/runs/{nights.past[0].pk}/",
    "run-scripted": lambda nights: f"/runs/{nights.scripted.pk}/",
    "run-pending": lambda nights: f"/runs/{nights.pending.pk}/",
    "execution-skipped": lambda nights: f"/executions/{_execution(nights, Classification.SKIPPED)}/",
    "execution-completed": lambda nights: f"/executions/{_execution(nights, Classification.COMPLETED)}/",
    "execution-infrastructure": lambda nights: f"/executions/{_execution(nights, Classification.INFRASTRUCTURE_FAILURE)}/",
    "execution-scripted": lambda nights: f"/executions/{nights.scripted.executions.order_by('position').first().pk}/",
    "tonight": lambda nights: "/tonight/",
    "coverage": lambda nights: "/coverage/",
    "candidates": lambda nights: "/candidates/",
    "candidate-measured": lambda nights: "/candidates/codex-luna/",
    "candidate-all-skipped": lambda nights: "/candidates/opencode-glm/",
    "leaderboard": lambda nights: "/leaderboard/",
    "compare-form": lambda nights: "/compare/",
    "compare-two-nights": lambda nights: f"/compare/?a={nights.past[-1].pk}&b={nights.tonight.pk}",
    "compare-scripted": lambda nights: f"/compare/?a={nights.tonight.pk}&b={nights.scripted.pk}",
    "alerts": lambda nights: "/alerts/",
    "signal": lambda nights: "/signal/",
    "admin-index": lambda nights: "/admin/",
    "admin-schedule-preview": lambda nights: "/admin/schedules/schedule/preview/",
    "admin-schedule-preview-tonight": lambda nights: f"/admin/schedules/schedule/preview/?night={nights.tonight.schedule.night:%Y-%m-%d}",
    "admin-candidates": lambda nights: "/admin/candidates/candidate/",
    "admin-candidate": lambda nights: "/admin/candidates/candidate/1/change/",
    "admin-slot": lambda nights: "/admin/candidates/slot/1/change/",
    "admin-budgets": lambda nights: "/admin/candidates/budget/",
    "admin-model-prices": lambda nights: "/admin/candidates/modelprice/",
    "admin-schedules": lambda nights: "/admin/schedules/schedule/",
    "admin-schedule": lambda nights: f"/admin/schedules/schedule/{nights.tonight.schedule_id}/change/",
    "admin-runs": lambda nights: "/admin/runs/run/",
    "admin-run": lambda nights: f"/admin/runs/run/{nights.tonight.pk}/change/",
    "admin-cases": lambda nights: "/admin/schedules/workflowcase/",
}


#: The pages in groups of about five, spread over the xdist workers (each worker builds the
#: module's nights once, a few seconds).
GROUPS = {
    "runs": ["runs", "run-tonight", "run-past", "run-scripted", "run-pending"],
    "executions": ["execution-skipped", "execution-completed", "execution-infrastructure", "execution-scripted"],
    "schedule": ["tonight", "coverage", "candidates", "candidate-measured", "candidate-all-skipped"],
    "reports": ["leaderboard", "compare-form", "compare-two-nights", "compare-scripted", "alerts", "signal"],
    "admin-catalog": ["admin-index", "admin-candidates", "admin-candidate", "admin-slot", "admin-budgets", "admin-model-prices"],
    "admin-history": [
        "admin-schedule-preview",
        "admin-schedule-preview-tonight",
        "admin-schedules",
        "admin-schedule",
        "admin-runs",
        "admin-run",
        "admin-cases",
    ],
}


def test_the_groups_hold_every_page_once() -> None:
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(PAGES)


@pytest.mark.shared_nights
@pytest.mark.parametrize("group", GROUPS)
def test_every_page_reads_cleanly_at_desktop_and_phone_width(signed_in, live_server, nights: Nights, group: str) -> None:
    problems: list[str] = []
    checked: dict[str, int] = {}
    for name in GROUPS[group]:
        look = look_at(signed_in, live_server.url + PAGES[name](nights), name)
        print(f"{name} ({look.seconds:.1f} s): screenshots {', '.join(str(path) for path in look.screenshots)}")
        if look.status != 200:
            problems.append(f"{name}: status {look.status}")
        problems += [f"{name}: {problem}" for problem in look.problems()]
        problems += [f"{name}: broken link {link}" for link in broken_links(signed_in, live_server.url, look.links, checked)]
    assert not problems, "\n".join(problems)


def test_the_sign_in_page_reads_cleanly(browser, live_server, transactional_db) -> None:
    context = browser.new_context()
    try:
        look = look_at(context.new_page(), f"{live_server.url}/accounts/login/", "sign-in")
    finally:
        context.close()
    assert look.status == 200
    assert look.problems() == []


# --- what a person reads (a few checks per test) --------------------------------------------------


@pytest.mark.shared_nights
def test_skipped_scripted_and_unknown_cost_read_as_such(signed_in, live_server, nights: Nights) -> None:
    page = signed_in
    # A skipped execution: a grey "Skipped" note naming the missing variable, no red box, no fail badges.
    page.goto(f"{live_server.url}/executions/{_execution(nights, Classification.SKIPPED)}/")
    assert page.locator(".notice-error").count() == 0
    skipped = page.locator(".notice.skipped")
    assert skipped.is_visible()
    assert "Skipped" in skipped.inner_text() and "OPENROUTER_API_KEY" in skipped.inner_text()
    assert page.locator(".tag-bad").count() == 0
    assert "No attempts yet" not in page.inner_text("main")
    assert "never attempted" in page.inner_text("main")
    # The scripted run says so in its heading and a note.
    page.goto(f"{live_server.url}/runs/{nights.scripted.pk}/")
    assert page.locator("h1 .tag.scripted").inner_text() == "scripted"
    assert "not a measurement" in page.inner_text(".notice")
    # A cost nobody priced reads "unknown", never $0.00; a skip costs nothing and shows a dash.
    page.goto(f"{live_server.url}/runs/{nights.tonight.pk}/")
    unpriced = nights.tonight.executions.filter(cost_known=False).exclude(classification=Classification.SKIPPED)
    assert unpriced.exists()
    for execution in unpriced:
        assert page.locator(f"#execution-{execution.pk} td.cost").inner_text() == "unknown"
    skip = nights.tonight.executions.filter(classification=Classification.SKIPPED).first()
    assert page.locator(f"#execution-{skip.pk} td.cost").inner_text() == "—"
    assert page.locator(f"#execution-{skip.pk} td.verdict").inner_text() == "skipped"


@pytest.mark.shared_nights
def test_charts_the_admin_tools_link_the_favicon_and_the_screenshots(signed_in, live_server, nights: Nights) -> None:
    page = signed_in
    # The latency chart plots measured nights only, in seconds, with distinct, readable ticks.
    look = look_at(page, f"{live_server.url}/candidates/codex-luna/", "candidate-measured-charts", folder="checks")
    assert [path.parent for path in look.screenshots] == [SCREENSHOTS / "checks"] * 2
    assert all(path.stat().st_size > 1000 for path in look.screenshots)
    latency = next(chart for chart in look.charts if chart["id"] == "chart-latency")
    ticks = y_tick_labels(latency)
    assert len(set(ticks)) == len(ticks) >= 3
    assert all(tick.endswith(" s") for tick in ticks[1:]), ticks
    labels = [text["text"] for text in latency["texts"] if "axis-label" in (text["cls"] or "")]
    assert "p95 settlement latency (s)" in labels
    assert look.chart_problems() == []
    page.goto(f"{live_server.url}/candidates/opencode-glm/")
    # Every execution of this candidate was skipped: nothing was measured, so nothing is plotted.
    assert page.locator("#chart-latency circle.point").count() == 0
    assert page.locator("#chart-pass-rate circle.point").count() == 0
    assert page.locator("#chart-cost circle.point").count() == 0
    assert page.locator("#chart-latency .no-data:visible").is_visible()
    # The admin's "Preview a schedule" link is on top, and clicking it opens the preview.
    page.goto(f"{live_server.url}/admin/")
    page.get_by_role("link", name="Preview a schedule").click(timeout=5000)
    page.wait_for_url("**/admin/schedules/schedule/preview/")
    # Pages and admin name the same icon, and the browser's own /favicon.ico request finds it.
    icon = page.get_attribute("link[rel=icon]", "href")
    page.goto(f"{live_server.url}/")
    assert page.get_attribute("link[rel=icon]", "href") == icon
    assert page.context.request.get(live_server.url + icon).status == 200
    assert page.context.request.get(f"{live_server.url}/favicon.ico").status == 200


@pytest.mark.shared_nights
def test_the_candidate_charts_fit_a_phone_and_keep_their_desktop_layout(signed_in, live_server, nights: Nights) -> None:
    """At 390 px each chart is drawn within its box, no wider, with every label whole and at
    reading size, and "no data" in the middle of the plot; at 1366 px it is the wide layout."""
    for candidate in ("codex-luna", "opencode-glm"):
        look = look_at(signed_in, f"{live_server.url}/candidates/{candidate}/", f"candidate-{candidate}-charts", folder="checks")
        assert len(look.phone_charts) == len(look.charts) == 4
        assert all("chart-wide" in chart["cls"].split() for chart in look.charts)
        for chart in look.phone_charts:
            assert "chart-narrow" in chart["cls"].split(), chart["id"]
            assert chart["width"] <= chart["room"] + 0.5, (chart["id"], chart["width"], chart["room"])
            for text in chart["texts"]:
                assert text["left"] >= -0.5 and text["right"] >= -0.5, (chart["id"], text)
                assert text["size"] >= 11, (chart["id"], text)
        assert look.chart_problems() == []
        if candidate == "opencode-glm":
            signed_in.set_viewport_size(PHONE)
            signed_in.goto(f"{live_server.url}/candidates/{candidate}/")
            no_data = signed_in.locator("#chart-latency svg.chart-narrow .no-data").bounding_box()
            plot = signed_in.locator("#chart-latency svg.chart-narrow").bounding_box()
            # The plot's middle in the narrow layout's units (evalhub/templatetags/evalhub_charts.py), scaled to pixels.
            middle = plot["x"] + (NARROW.left + (NARROW.width - NARROW.left - NARROW.right) / 2) * plot["width"] / NARROW.width
            assert abs(no_data["x"] + no_data["width"] / 2 - middle) < 2


@pytest.mark.shared_nights
def test_a_run_at_a_phone_width_keeps_its_command_whole_and_says_the_table_scrolls(signed_in, live_server, nights: Nights) -> None:
    """At 390 px the skipped banner's ``manage.py rerun N --skipped`` stays on one line, and the
    executions table, which scrolls sideways, has a line above it saying so and a shadow on its
    right edge; at 1366 px, where the table fits, neither shows."""
    page = signed_in
    look = look_at(page, f"{live_server.url}/runs/{nights.tonight.pk}/", "run-phone-command-and-scroll", folder="checks")
    assert look.problems() == []
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/runs/{nights.tonight.pk}/")
    command = page.locator(".missing-next code.command")
    assert command.inner_text() == f"manage.py rerun {nights.tonight.pk} --skipped"
    assert command.evaluate("(code) => code.getClientRects().length") == 1
    box = command.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    scroller = page.locator("div.scroll-cue:has(> table.executions)")
    assert scroller.evaluate("(box) => box.scrollWidth > box.clientWidth + 1")
    assert page.locator(".scroll-hint").inner_text() == "Scroll sideways for more columns →"
    assert page.locator(".scroll-hint").is_visible()
    assert "rgba(31, 41, 51, 0.28)" in scroller.evaluate("(box) => getComputedStyle(box).backgroundImage")
    page.set_viewport_size(DESKTOP)
    assert not scroller.evaluate("(box) => box.scrollWidth > box.clientWidth + 1")
    assert not page.locator(".scroll-hint").is_visible()


def test_the_history_fits_the_desktop_width_with_a_chaos_run_and_a_re_run(signed_in, live_server, nights: Nights) -> None:
    """The chaos lane's tag and a re-run's in the Trigger column wrap like the notes do: with
    ``manage.py chaos`` and ``manage.py rerun`` in the history (what a first user tries after
    ``make demo``), the table still fits 1366 px and the Notes column is not cut off."""
    from django.core.management import call_command

    from runs.actions import rerun_run

    call_command("chaos", stdout=io.StringIO(), stderr=io.StringIO())
    rerun_run(nights.past[-1])
    look = look_at(signed_in, f"{live_server.url}/", "runs-with-chaos-and-re-run", folder="checks")
    assert signed_in.locator("table.runs .tag.chaos").count() == 1
    assert look.problems() == []


@pytest.mark.parametrize("milliseconds", [0.4, 0.9, 420.0, 7_000.0, 95_000.0])
def test_a_latency_chart_keeps_its_tick_labels_clear_of_its_axis_title(browser, milliseconds: float) -> None:
    """``0.0005 s`` ran into the rotated "p95 settlement latency (s)" at a 64-unit margin; ticks
    below a second now read in ms and the axis moves right for a longer label, at both layouts."""
    points = [
        TrendPoint(
            run_id=run,
            night=None,
            executions=1,
            scoreable=1,
            passed=1,
            pass_rate=1.0,
            mean_score=1.0,
            p95_latency_ms=milliseconds * run / 2,
            cost_usd=0.0,
            unpriced=0,
        )
        for run in (1, 2)
    ]
    chart = Template(
        '{% load evalhub_charts %}{% line_chart points "p95_latency_ms" title="p95 settlement latency" '
        'y_label="p95 settlement latency (s)" kind="seconds" chart_id="chart-latency" %}'
    )
    stylesheet = (settings.BASE_DIR / "evalhub" / "static" / "evalhub" / "evalhub.css").read_text()
    page = browser.new_page()
    try:
        page.set_content(
            f"<html><head><style>{stylesheet}</style></head><body><main>{chart.render(Context({'points': points}))}</main></body></html>"
        )
        for size in (DESKTOP, PHONE):
            page.set_viewport_size(size)
            drawn = charts_on(page)
            assert len(drawn) == 1 and y_tick_labels(drawn[0])
            assert overlapping_axis_texts(drawn[0]) == [], (size, y_tick_labels(drawn[0]))
    finally:
        page.close()
