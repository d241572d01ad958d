"""The run history and run pages: sign-in, what they show, odd page numbers, pinned query counts."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from candidates.models import Candidate
from runs.models import Execution, Run, RunLane, Trigger
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
HISTORY = reverse("pages:runs")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def nightly(now: dt.datetime, *, environ: dict[str, str] | None = None, ceiling: str = "12") -> Run:
    from runs.nightly import start_nightly

    return start_nightly(seed=SEED, cost_ceiling_usd=Decimal(ceiling), now=now, environ=environ or {}, execute=True).run


def every_required_variable() -> dict[str, str]:
    return {name: "dummy-value" for candidate in Candidate.objects.all() for name in candidate.required_environment}


@pytest.fixture
def skipped_run(reference_catalog) -> Run:
    """Tonight's nightly with no provider variables set: every execution is skipped."""
    return nightly(NIGHT)


@pytest.fixture
def replayed_run(reference_catalog, replay_executors) -> Run:
    """A nightly whose executions complete through the replay executor; every third reports no price."""
    from runs.nightly import start_nightly

    schedule = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("1000"), now=NIGHT, environ={}, execute=False).schedule
    for index, entry in enumerate(schedule.entries.order_by("position")):
        cost = None if index % 3 == 0 else 0.25
        replay_executors.REPLAY_STORE[entry.execution_id] = completed_observation(
            entry.to_document(), cost_usd=cost, provider=entry.candidate["provider"]
        )
    return nightly(NIGHT, environ=every_required_variable(), ceiling="1000")


def row_of(html: str, execution_id: str) -> str:
    match = re.search(rf"<tr[^>]*>\s*<td[^>]*>\d+</td>\s*<td><code>{execution_id}</code>.*?</tr>", html, re.S)
    assert match, f"no row for {execution_id}"
    return match.group(0).replace("<wbr>", "")  # long codes may break after underscores


# --- sign-in -------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [HISTORY, "/runs/1/", "/runs/1/?page=2"])
def test_the_run_pages_send_an_anonymous_visitor_to_sign_in(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


# --- history -------------------------------------------------------------------------------------


def test_the_history_says_so_when_there_are_no_runs(reader_client) -> None:
    response = reader_client.get(HISTORY)
    assert response.status_code == 200
    assert "No runs yet" in response.content.decode()


def test_the_history_shows_night_rotation_day_counts_and_cost(reader_client, skipped_run: Run) -> None:
    html = reader_client.get(HISTORY).content.decode()
    total = skipped_run.executions.count()
    assert f'href="{reverse("pages:run", args=[skipped_run.pk])}"' in html
    assert "2026-11-30" in html
    assert f'<td class="num">{skipped_run.schedule.rotation_day}</td>' in html
    assert f'<td class="num">{total}</td>' in html  # executions, and the same number skipped
    assert f"{total} skipped: required environment missing" in html
    assert "$0.00" in html and '<div class="muted small">of $12.00</div>' in html


def test_the_history_shows_unknown_cost_for_a_run_with_unpriced_executions(reader_client, replayed_run: Run) -> None:
    html = reader_client.get(HISTORY).content.decode()
    assert replayed_run.has_unpriced
    assert "unknown" in html
    assert "some costs unknown" in html


def test_the_history_counts_each_classification(reader_client, replayed_run: Run) -> None:
    response = reader_client.get(HISTORY)
    run = response.context["runs"][0]
    assert (run.completed_count, run.skipped_count, run.execution_count) == (
        replayed_run.executions.count(),
        0,
        replayed_run.executions.count(),
    )


def test_the_history_counts_pending_executions_once(reader_client, skipped_run: Run) -> None:
    from runs.creation import create_run
    from schedules.services import Selection

    pending, _ = create_run(schedule=skipped_run.schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(limit=3))
    Execution.objects.filter(run=pending, position=0).update(classification="completed", status="finished")
    rows = {row.pk: row for row in reader_client.get(HISTORY).context["runs"]}
    assert (rows[pending.pk].execution_count, rows[pending.pk].completed_count, rows[pending.pk].skipped_count) == (3, 1, 0)


def test_the_history_row_notes_a_refresh_an_error_and_a_stop_at_the_ceiling(reader_client, skipped_run: Run) -> None:
    refresh = Run.objects.create(
        schedule=skipped_run.schedule,
        trigger=Trigger.MANUAL,
        cost_ceiling_usd=Decimal("0.25"),
        lane=RunLane.REPLAY,
        refresh_of=skipped_run,
        error="<b>boom</b>",
        stopped_at_ceiling=True,
        spent_usd=Decimal("0.0031"),
    )
    html = reader_client.get(HISTORY).content.decode()
    row = re.search(
        rf'<tr>\s*<td class="nowrap"><a href="{reverse("pages:run", args=[refresh.pk])}">run {refresh.pk}</a>.*?</tr>', html, re.S
    )
    assert row, html
    text = row.group(0)
    original = reverse("pages:run", args=[skipped_run.pk])
    assert f'manual · <a class="tag tag-warn refresh" href="{original}">refresh of run {skipped_run.pk}</a>' in text
    assert '<span class="status status-pending">pending</span>' in text
    assert '<td class="num">0</td>' in text  # no executions yet
    assert "$0.0031" in text and '<div class="muted small">of $0.25</div>' in text
    assert '<span class="tag tag-warn">stopped at the cost ceiling</span>' in text
    assert '<span class="tag tag-bad">error</span>' in text and "boom" not in text
    assert "required environment missing" not in text


def test_the_history_row_notes_the_executions_a_cancel_skipped(reader_client, reference_catalog) -> None:
    from runs.actions import cancel_run
    from runs.creation import create_run
    from schedules.services import Selection, schedule_for_night

    schedule, _ = schedule_for_night(seed=SEED, now=NIGHT)
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(limit=3))
    cancel_run(run)
    html = reader_client.get(HISTORY).content.decode()
    row = re.search(rf'<tr>\s*<td class="nowrap"><a href="{reverse("pages:run", args=[run.pk])}">run {run.pk}</a>.*?</tr>', html, re.S)
    assert row, html
    assert '<span class="status status-cancelled">cancelled</span>' in row.group(0)
    assert '<td class="notes"><span class="tag">3 skipped: run cancelled</span></td>' in row.group(0)


@pytest.fixture
def thirty_runs(skipped_run: Run) -> list[Run]:
    runs = [skipped_run]
    for _ in range(29):
        runs.append(Run.objects.create(schedule=skipped_run.schedule, trigger=Trigger.MANUAL, cost_ceiling_usd=Decimal("5")))
    return runs


def test_the_history_is_paginated_newest_first(reader_client, thirty_runs: list[Run]) -> None:
    first = reader_client.get(HISTORY)
    second = reader_client.get(HISTORY, {"page": "2"})
    assert len(first.context["runs"]) == 25
    assert [run.pk for run in first.context["runs"]] + [run.pk for run in second.context["runs"]] == sorted(
        (run.pk for run in thirty_runs), reverse=True
    )
    assert "page 1 of 2" in first.content.decode()


@pytest.mark.parametrize(("page", "shown"), [("abc", 1), ("", 1), ("1e3", 1), ("0", 2), ("-1", 2), ("99999999", 2), ("last", 1), ("2", 2)])
def test_an_odd_page_number_shows_a_page_never_an_error(reader_client, thirty_runs: list[Run], page: str, shown: int) -> None:
    response = reader_client.get(HISTORY, {"page": page})
    assert response.status_code == 200
    assert response.context["page"].number == shown


# --- one run -------------------------------------------------------------------------------------


def test_the_run_page_lists_every_execution_with_its_outcome(reader_client, skipped_run: Run) -> None:
    html = reader_client.get(reverse("pages:run", args=[skipped_run.pk])).content.decode()
    executions = list(skipped_run.executions.order_by("position"))
    for execution in executions:
        row = row_of(html, execution.execution_id)
        for text in (execution.case_key, execution.candidate_key, execution.slot_key, "skipped", "qualification_environment_missing"):
            assert text in row
        assert f"repetition {execution.repetition}</div>" in row
        assert execution.failure_message in row
    assert f"<strong>{len(executions)}</strong> skipped" in html
    # The table scrolls sideways on a phone: a line above it says so, and its box marks the edges.
    assert '<p class="scroll-hint" aria-hidden="true">Scroll sideways for more columns →</p>\n<div class="scroll scroll-cue">' in html


def test_the_run_page_says_plainly_which_variables_are_missing(reader_client, skipped_run: Run) -> None:
    html = reader_client.get(reverse("pages:run", args=[skipped_run.pk])).content.decode()
    notice = re.search(r'<div class="notice notice-warn" role="note">(.*?)</div>', html, re.S).group(1)
    total = skipped_run.executions.count()
    assert f"{total} executions skipped" in notice
    assert "required environment variables were not set where the run executed" in notice
    # What to do next, for a run that ended (a running one cannot be re-run yet).
    # A command, marked so that it never breaks across lines (evalhub.css, code.command).
    assert f'<code class="command">manage.py rerun {skipped_run.pk} --skipped</code>' in notice
    for name in {name for execution in skipped_run.executions.all() for name in execution.failure_message.rpartition(": ")[2].split(", ")}:
        assert f"<code>{name}</code>" in notice
    assert "required qualification environment is missing: OPENAI_API_KEY" in html


def test_the_run_page_of_a_night_that_scored_nothing_does_not_call_it_measured(reader_client, skipped_run: Run) -> None:
    """Every execution skipped: the signal section says nothing was scored, as the Signal page does,
    not that this is the bundle's first measured night."""
    html = reader_client.get(reverse("pages:run", args=[skipped_run.pk])).content.decode()
    section = html[html.index('<section class="signal-section"') :]
    section = section[: section.index("</section>")]
    assert "Nothing of this bundle was scored yet: every execution was skipped or failed on the infrastructure." in section
    assert "first measured night" not in section
    assert "measured night" not in section
    # The history it counts is not called anything but unscored (it read "1 night in its history"
    # right above "Nothing of this bundle was scored yet").
    assert "The bundle has 1 night in its history so far, none of it scored." in section
    # And what to do next: set the variables for the next nightly, or re-run the skipped executions.
    assert "Set the candidates' required environment variables where the nightly runs" in section
    assert f'<code class="command">manage.py rerun {skipped_run.pk} --skipped</code>' in section


def test_the_run_page_of_a_first_night_that_scored_says_there_is_nothing_before_it(reader_client, replayed_run: Run) -> None:
    html = reader_client.get(reverse("pages:run", args=[replayed_run.pk])).content.decode()
    assert "This is the bundle's first measured night: there is no previous night to compare with yet." in html
    assert "Nothing of this bundle was scored yet" not in html
    assert "The bundle has 1 night in its history so far." in html and "none of it scored" not in html


def test_the_run_page_shows_unknown_for_an_unpriced_execution_never_zero(reader_client, replayed_run: Run) -> None:
    html = reader_client.get(reverse("pages:run", args=[replayed_run.pk])).content.decode()
    unpriced = list(replayed_run.executions.filter(cost_known=False))
    priced = list(replayed_run.executions.filter(cost_known=True))
    assert unpriced and priced
    for execution in unpriced:
        row = row_of(html, execution.execution_id)
        assert '<td class="num cost">unknown</td>' in row
        assert "$" not in row
    for execution in priced:
        assert '<td class="num cost">$0.25</td>' in row_of(html, execution.execution_id)
    assert "$0.00" not in html
    assert "completed" in row_of(html, priced[0].execution_id)


def test_the_run_page_says_when_a_run_stopped_at_the_ceiling(reader_client, reference_catalog, replay_executors) -> None:
    from runs.nightly import start_nightly

    schedule = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("1"), now=NIGHT, environ={}, execute=False).schedule
    for entry in schedule.entries.all():
        replay_executors.REPLAY_STORE[entry.execution_id] = completed_observation(
            entry.to_document(), cost_usd=0.6, provider=entry.candidate["provider"]
        )
    run = nightly(NIGHT, environ=every_required_variable(), ceiling="1")
    html = reader_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    skipped = run.executions.filter(failure_code="campaign_cost_ceiling_reached").count()
    assert skipped > 0
    assert f"Stopped at the cost ceiling:</strong> {skipped} executions skipped" in html
    assert "stopped at the cost ceiling" in reader_client.get(HISTORY).content.decode()


def test_a_missing_run_is_a_plain_404(reader_client) -> None:
    response = reader_client.get(reverse("pages:run", args=[999999]))
    assert response.status_code == 404
    assert "Not found" in response.content.decode()


def test_execution_text_is_escaped(reader_client, skipped_run: Run) -> None:
    execution = skipped_run.executions.order_by("position").first()
    Execution.objects.filter(pk=execution.pk).update(failure_message="<script>alert(1)</script>")
    html = reader_client.get(reverse("pages:run", args=[skipped_run.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html


# --- query counts --------------------------------------------------------------------------------


def test_the_history_costs_the_same_queries_for_one_run_or_many(reader_client, skipped_run: Run, django_assert_num_queries: Any) -> None:
    # Session, user, the page of runs (with the count of all runs), and their executions counted
    # in one grouped query.
    with django_assert_num_queries(4):
        reader_client.get(HISTORY)
    for day in range(1, 4):
        nightly(NIGHT + dt.timedelta(days=day))
    for _ in range(30):
        Run.objects.create(schedule=skipped_run.schedule, trigger=Trigger.MANUAL, cost_ceiling_usd=Decimal("5"))
    with django_assert_num_queries(4):
        response = reader_client.get(HISTORY)
    assert "page 1 of 2" in response.content.decode()
    with django_assert_num_queries(4):
        response = reader_client.get(HISTORY, {"page": "2"})
    assert "page 2 of 2" in response.content.decode()
    assert len(response.context["runs"]) == Run.objects.count() - 25


def test_an_empty_history_and_a_page_past_the_end_count_the_runs_on_their_own(
    reader_client, thirty_runs: list[Run], django_assert_num_queries: Any
) -> None:
    # Past the end: session, user, the empty page, the count, then the last page and its counts.
    with django_assert_num_queries(6):
        response = reader_client.get(HISTORY, {"page": "3"})
    assert response.context["page"].number == 2 and "page 2 of 2" in response.content.decode()
    Run.objects.all().delete()
    # No runs: session, user, the empty page and the count.
    with django_assert_num_queries(4):
        response = reader_client.get(HISTORY)
    assert "No runs yet" in response.content.decode()


@pytest.mark.parametrize("page", [str(2**63 - 1), str(10**19), str(10**20), str(2**63 // 25 + 1)])
def test_a_page_past_any_database_offset_shows_the_last_page(
    reader_client, thirty_runs: list[Run], django_assert_num_queries: Any, page: str
) -> None:
    # Its rows would start past the largest offset SQLite and PostgreSQL take: never asked for,
    # counted instead. Session, user, the count, then the last page and its counts.
    with django_assert_num_queries(5):
        response = reader_client.get(HISTORY, {"page": page})
    assert response.status_code == 200
    assert response.context["page"].number == 2 and "page 2 of 2" in response.content.decode()


def test_the_deepest_page_a_database_takes_is_asked_for_and_past_the_end(reader_client, thirty_runs: list[Run]) -> None:
    response = reader_client.get(HISTORY, {"page": str(2**63 // 25)})  # its last row is the largest offset
    assert response.status_code == 200
    assert response.context["page"].number == 2


def test_the_run_page_costs_the_same_queries_for_few_or_many_executions(
    reader_client, skipped_run: Run, django_assert_num_queries: Any
) -> None:
    from runs.creation import create_run
    from schedules.services import Selection

    small, _ = create_run(
        schedule=skipped_run.schedule, cost_ceiling_usd=Decimal("5"), selection=Selection(limit=2), trigger=Trigger.MANUAL
    )
    # session, user, run + schedule + report, executions with scorecards and attempt counts, the
    # summary's counts (one grouped query; three before); and the report's alerts and its
    # bundle's history (signal) once the run has a report (the nightly has one)
    expected = 5
    with django_assert_num_queries(expected):
        reader_client.get(reverse("pages:run", args=[small.pk]))
    with django_assert_num_queries(expected + 2):
        response = reader_client.get(reverse("pages:run", args=[skipped_run.pk]))
    assert len(response.context["executions"]) == skipped_run.executions.count() > 2
