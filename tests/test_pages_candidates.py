"""The candidates page: slots in order, candidates, budgets and set/missing variables, never values."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from candidates.models import Candidate, Slot
from evalhub.templatetags.evalhub_format import duration
from schedules.building import rotation_day
from schedules.services import iso_timestamp
from tests.builders import make_budget, make_candidate

pytestmark = pytest.mark.django_db

PAGE = reverse("pages:candidates")
SECRET_VALUE = "sk-proj-FAKEfakeFAKE_0123456789-abcdefghijklmnop"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def environment(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_VALUE)
    monkeypatch.setenv("OPENROUTER_API_KEY", "")  # set but empty counts as missing
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def candidate_row(html: str, key: str) -> str:
    match = re.search(rf"<tr>\s*<td><strong>{key}</strong>.*?</tr>", html, re.S)
    assert match, f"no row for {key}"
    return match.group(0)


def test_the_candidates_page_needs_sign_in(client) -> None:
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={PAGE}"


def test_slots_appear_in_line_up_order_with_their_candidates_in_order(reader_client, reference_catalog) -> None:
    html = reader_client.get(PAGE).content.decode()
    slots = list(Slot.objects.order_by("position").values_list("key", flat=True))
    headings = re.findall(r'<h2><span class="muted">\d+\.</span> ([^<]+)</h2>', html)
    assert headings == slots
    keys = re.findall(r"<td><strong>([^<]+)</strong>", html)
    assert keys == list(Candidate.objects.order_by("slot__position", "position").values_list("key", flat=True))


def test_each_candidate_shows_its_runtime_model_tier_and_budget(reader_client, reference_catalog) -> None:
    html = reader_client.get(PAGE).content.decode()
    for candidate in Candidate.objects.select_related("budget"):
        row = candidate_row(html, candidate.key)
        for text in (candidate.adapter, candidate.provider, candidate.model, candidate.tier, candidate.budget.name):
            assert text in row
        # As Tonight's page and the schedule command show a budget: a duration, tokens in thousands.
        assert f"{duration(candidate.budget.max_latency_ms)} a turn" in row
        assert f"{candidate.budget.max_total_tokens:,} tokens" in row
        assert "ms/turn" not in row


def test_a_budget_reads_in_minutes_and_thousands(reader_client, reference_catalog) -> None:
    row = candidate_row(reader_client.get(PAGE).content.decode(), "codex-luna")
    budget = Candidate.objects.get(key="codex-luna").budget
    assert budget.max_latency_ms == 180_000 and budget.max_total_tokens == 100_000
    assert "3 min 00 s a turn" in row
    assert "100,000 tokens" in row


def test_required_variables_show_set_or_missing_and_never_a_value(reader_client, reference_catalog, environment) -> None:
    html = reader_client.get(PAGE).content.decode()
    assert SECRET_VALUE not in html and "FAKEfakeFAKE" not in html
    assert "<code>OPENAI_API_KEY</code> set" in candidate_row(html, "codex-luna")
    assert "<code>OPENROUTER_API_KEY</code> missing" in candidate_row(html, "opencode-kimi")
    assert "<code>ANTHROPIC_API_KEY</code> missing" in candidate_row(html, "acpx-claude-sonnet")


def test_the_candidate_playing_this_week_is_marked(reader_client, reference_catalog) -> None:
    html = reader_client.get(PAGE).content.decode()
    day = rotation_day(iso_timestamp(timezone.now()))
    for slot in Slot.objects.all():
        candidates = list(slot.candidates.order_by("position"))
        playing = candidates[day % len(candidates)]
        for candidate in candidates:
            assert ("this week" in candidate_row(html, candidate.key)) == (candidate == playing)


def test_an_empty_catalog_says_how_to_fill_it(reader_client) -> None:
    assert "No slots yet" in reader_client.get(PAGE).content.decode()


def test_the_candidates_page_costs_the_same_queries_for_few_or_many_candidates(
    reader_client, reference_catalog, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(4):  # session, user, slots, candidates with slot and budget
        reader_client.get(PAGE)
    for slot in Slot.objects.all():
        for _ in range(4):
            make_candidate(slot=slot, position=slot.candidates.count() + 10, budget=make_budget())
    with django_assert_num_queries(4):
        reader_client.get(PAGE)
