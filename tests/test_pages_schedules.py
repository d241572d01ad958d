"""Tonight's schedule and the coverage page: what they show, and pinned query counts."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from candidates.models import Candidate, Slot
from schedules.building import rotation_day
from schedules.models import Schedule
from schedules.services import catalog_coverage_matrix, iso_timestamp, preview_schedule
from tests.builders import make_budget, make_candidate, make_case, make_slot

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
TONIGHT = reverse("pages:tonight")
COVERAGE = reverse("pages:coverage")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.mark.parametrize("url", [TONIGHT, COVERAGE])
def test_the_schedule_pages_send_an_anonymous_visitor_to_sign_in(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


# --- tonight -------------------------------------------------------------------------------------


def test_tonight_without_a_saved_schedule_shows_the_preview_labelled_not_saved_yet(reader_client, reference_catalog) -> None:
    response = reader_client.get(TONIGHT)
    html = response.content.decode()
    now = timezone.now()
    expected = preview_schedule(seed=SEED, now=now)
    assert response.status_code == 200
    assert "not saved yet" in html
    assert now.astimezone(dt.UTC).date().isoformat() in html
    assert response.context["tonight"].document["rotationDay"] == expected["rotationDay"]
    assert [e["executionId"] for e in response.context["tonight"].document["entries"]] == [e["executionId"] for e in expected["entries"]]
    for entry in expected["entries"]:
        assert entry["executionId"] in html
    assert not Schedule.objects.exists()  # looking does not save


def test_tonight_with_a_saved_schedule_shows_it_and_its_runs(reader_client, reference_catalog) -> None:
    from runs.nightly import start_nightly

    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ={}, execute=True)
    html = reader_client.get(TONIGHT).content.decode()
    assert "not saved yet" not in html
    assert ">saved<" in html
    assert reverse("pages:run", args=[outcome.run.pk]) in html
    for entry in outcome.schedule.entries.all():
        assert entry.execution_id in html
    assert outcome.schedule.generated_at in html


def test_tonight_ignores_a_schedule_saved_for_another_night(reader_client, reference_catalog) -> None:
    from runs.nightly import start_nightly

    start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now() - dt.timedelta(days=1), environ={}, execute=False)
    assert "not saved yet" in reader_client.get(TONIGHT).content.decode()


def test_tonight_is_the_nightly_schedule_not_a_selection_saved_later_on_another_rotation_day(reader_client, reference_catalog) -> None:
    """``nightly --rotation-day N --candidate X`` saves a second schedule for the same night:
    Tonight (page and API) keeps tonight's own rotation day and its nightly run."""
    from runs.nightly import start_nightly
    from schedules.services import Selection

    now = timezone.now()
    nightly = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=now, environ={}, execute=True)
    other_day = (rotation_day(iso_timestamp(now)) + 1) % 7
    start_nightly(
        seed=SEED, cost_ceiling_usd=Decimal("12"), now=now, rotation_day=other_day, environ={}, execute=False, selection=Selection(limit=1)
    )
    assert Schedule.objects.filter(night=now.astimezone(dt.UTC).date()).count() == 2
    tonight = reader_client.get(TONIGHT).context["tonight"]
    assert tonight.schedule == nightly.schedule and [run.pk for run in tonight.runs] == [nightly.run.pk]
    api = reader_client.get("/api/tonight/").json()
    assert api["schedule"]["rotationDay"] == nightly.schedule.rotation_day != other_day
    assert [run["id"] for run in api["runs"]] == [nightly.run.pk]


def test_tonight_with_an_empty_catalog_explains_instead_of_failing(reader_client) -> None:
    response = reader_client.get(TONIGHT)
    assert response.status_code == 200
    assert "The schedule cannot be built" in response.content.decode()


def test_tonight_lists_the_line_up_with_required_variable_names(reader_client, reference_catalog) -> None:
    response = reader_client.get(TONIGHT)
    html = response.content.decode()
    for candidate in response.context["tonight"].document["candidates"]:
        assert candidate["id"] in html
        for name in candidate["qualification"]["requiredEnvironment"]:
            assert f"<code>{name}</code>" in html


def test_tonight_costs_the_same_queries_saved_or_not(reader_client, reference_catalog, django_assert_num_queries: Any) -> None:
    from runs.nightly import start_nightly

    with django_assert_num_queries(7):  # session, user, titles, schedule lookup, then the preview: slots, candidates, cases
        reader_client.get(TONIGHT)
    start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ={}, execute=True)
    with django_assert_num_queries(7):  # session, user, titles, schedule, its entries, its runs, the line-up's models now
        reader_client.get(TONIGHT)


# --- coverage ------------------------------------------------------------------------------------


def test_coverage_shows_the_four_invariants_with_their_descriptions(reader_client, reference_catalog) -> None:
    html = reader_client.get(COVERAGE).content.decode()
    for name, description in (
        ("everySlotNightly", "Every night&#x27;s schedule plays every slot at least once."),
        ("everyConcreteCandidateInRotation", "Every candidate of every slot is played on at least one rotation day."),
        ("everyWorkflowCoversEverySlot", "Over the seven rotation days, every workflow case meets every slot."),
        ("strongAndInexpensiveNightly", "Every night plays at least one strong and at least one inexpensive candidate."),
    ):
        assert f"<code>{name}</code> <strong>✓ holds</strong>" in html
        assert description in html


def test_coverage_shows_which_slots_each_case_meets_on_each_day(reader_client, reference_catalog) -> None:
    html = reader_client.get(COVERAGE).content.decode()
    matrix = catalog_coverage_matrix(seed=SEED)
    for case_id, days in matrix.items():
        row = re.search(rf'<th scope="row"><code>{case_id}</code>.*?</tr>', html, re.S).group(0)
        cells = re.findall(r'<td class="day[^"]*">(.*?)</td>', row, re.S)
        assert len(cells) == 7
        assert [re.findall(r'<span class="chip">([^<]+)</span>', cell) for cell in cells] == days
        assert "✓ all 5" in row


def test_coverage_highlights_this_week_s_rotation_day(reader_client, reference_catalog) -> None:
    html = reader_client.get(COVERAGE).content.decode()
    day = rotation_day(iso_timestamp(timezone.now()))
    assert f'<th class="day current">Day {day}</th>' in html


def test_coverage_shows_a_failing_invariant(reader_client) -> None:
    slot = make_slot(key="only-strong")
    make_candidate(slot=slot, tier="strong")
    make_case()
    html = reader_client.get(COVERAGE).content.decode()
    assert "<code>strongAndInexpensiveNightly</code> <strong>✗ fails</strong>" in html
    assert "<code>everySlotNightly</code> <strong>✓ holds</strong>" in html


def test_coverage_with_an_empty_catalog_explains_instead_of_failing(reader_client) -> None:
    response = reader_client.get(COVERAGE)
    assert response.status_code == 200
    assert "Coverage cannot be computed" in response.content.decode()


def test_coverage_costs_the_same_queries_for_a_small_or_large_catalog(
    reader_client, reference_catalog, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(5):  # session, user, slots, their candidates, cases
        reader_client.get(COVERAGE)
    budget = make_budget()
    for slot in Slot.objects.all():
        for _ in range(3):
            make_candidate(slot=slot, position=slot.candidates.count() + 10, budget=budget, tier=slot.candidates.first().tier)
    for _ in range(5):
        make_case(position=100 + _)
    assert Candidate.objects.count() > 20
    with django_assert_num_queries(5):
        reader_client.get(COVERAGE)


# --- a slot saved before its candidates ------------------------------------------------------------


def test_a_slot_without_candidates_never_breaks_the_night_and_is_shown_as_such(reader_client, reference_catalog) -> None:
    from runs.nightly import start_nightly

    now = timezone.now()
    before = preview_schedule(seed=SEED, now=now)
    make_slot(key="new-empty-slot")
    for url in (reverse("pages:tonight"), reverse("pages:coverage")):
        text = reader_client.get(url).content.decode()
        assert "Slot new-empty-slot has no candidates yet and is not scheduled." in text, url

    assert preview_schedule(seed=SEED, now=now) == before
    assert reader_client.get("/api/schedules/preview/").status_code == 200
    coverage = reader_client.get("/api/coverage/")
    assert coverage.status_code == 200
    assert "new-empty-slot" not in str(coverage.json()["matrix"])
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ={}, execute=False)
    assert outcome.schedule.entries.exists()
    assert not outcome.schedule.entries.filter(slot_key="new-empty-slot").exists()

    page = reader_client.get(reverse("pages:candidates")).content.decode()
    assert "new-empty-slot" in page
    assert "No candidates yet: this slot is not scheduled until one is added." in page
