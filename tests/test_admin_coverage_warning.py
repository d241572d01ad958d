"""A catalog change in the admin that breaks the week's coverage is a warning on the page that
names the invariant and the arithmetic, and says the nightlies are refused until it is fixed —
never "added successfully" alone (``nightly`` then refuses with ``live schedule coverage failed``).
One coverage computation per save, however many rows the page saved."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from candidates.models import Candidate, Slot
from tests.builders import make_candidate
from tests.test_admin_candidates import candidate_post, changelist_post

pytestmark = pytest.mark.django_db

REFUSED = "Every nightly (seed runner-live-seven-week-v1) will be refused until the catalog meets all four coverage invariants again"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def page_messages(response: Any) -> list[tuple[str, str]]:
    return [(message.level_tag, str(message)) for message in response.context["messages"]]


def warnings(response: Any) -> list[str]:
    """The coverage warnings of the page (the admin also warns that saved schedules keep the old candidate)."""
    return [text for level, text in page_messages(response) if level == "warning" and REFUSED in text]


def fill_slot(slot: Slot, count: int) -> None:
    """Give ``slot`` ``count`` candidates (written directly, as a script or an older save would)."""
    for index in range(slot.candidates.count(), count):
        make_candidate(slot=slot, key=f"codex-extra-{index}", model=f"gpt-5.6-extra-{index}", tier="strong")


def count_coverage_checks(monkeypatch: Any, module: Any) -> list[str]:
    """Count every coverage check ``module`` makes (the seed of each) through its ``coverage_warning``."""
    calls: list[str] = []
    real = module.coverage_warning

    def counting(*, seed: str) -> str | None:
        calls.append(seed)
        return real(seed=seed)

    monkeypatch.setattr(module, "coverage_warning", counting)
    return calls


@pytest.fixture
def counted_warnings(monkeypatch) -> list[str]:
    """Every coverage check the admin makes (the seed of each)."""
    from schedules import admin as schedules_admin

    return count_coverage_checks(monkeypatch, schedules_admin)


def test_an_eighth_candidate_in_a_slot_is_saved_with_a_warning_naming_the_arithmetic(
    reference_catalog, staff_client, counted_warnings
) -> None:
    slot = Slot.objects.get(key="codex-strong")
    fill_slot(slot, 7)
    response = staff_client.post(reverse("admin:candidates_candidate_add"), candidate_post(slot=slot), follow=True)
    assert Candidate.objects.filter(key="codex-new").exists()
    (warning,) = warnings(response)
    assert warning == (
        "live schedule coverage failed: everyConcreteCandidateInRotation is false: slot codex-strong has 8 candidates, "
        "but a slot plays one candidate a rotation day and the rotation has 7 days, so codex-new is never played; keep at most "
        "7 candidates in a slot (move the others to another slot or remove them). " + REFUSED + "; the coverage page shows the gap."
    )
    assert counted_warnings == ["runner-live-seven-week-v1"]


def test_a_save_that_keeps_the_coverage_says_nothing_more(reference_catalog, staff_client, counted_warnings) -> None:
    slot = Slot.objects.get(key="codex-strong")
    response = staff_client.post(reverse("admin:candidates_candidate_add"), candidate_post(slot=slot, position="1"), follow=True)
    assert Candidate.objects.filter(key="codex-new").exists()
    assert warnings(response) == []
    assert counted_warnings == ["runner-live-seven-week-v1"]


def test_a_form_error_checks_nothing(reference_catalog, staff_client, counted_warnings) -> None:
    response = staff_client.post(reverse("admin:candidates_candidate_add"), candidate_post(model=""))
    assert response.status_code == 200
    assert counted_warnings == []


def test_the_changelist_checks_once_for_all_its_rows(reference_catalog, staff_client, counted_warnings) -> None:
    inexpensive = list(Candidate.objects.filter(tier="inexpensive").order_by("pk"))
    assert len(inexpensive) == 2
    data = changelist_post(inexpensive)
    data.update({"form-0-tier": "strong", "form-1-tier": "strong"})
    response = staff_client.post(reverse("admin:candidates_candidate_changelist"), data, follow=True)
    assert not Candidate.objects.filter(tier="inexpensive").exists()
    (warning,) = warnings(response)
    assert warning.startswith("live schedule coverage failed: strongAndInexpensiveNightly is false. " + REFUSED)
    assert counted_warnings == ["runner-live-seven-week-v1"]


def test_deleting_a_candidate_warns_while_the_slot_is_still_too_full(reference_catalog, staff_client) -> None:
    slot = Slot.objects.get(key="codex-strong")
    fill_slot(slot, 9)
    extra = Candidate.objects.get(key="codex-extra-8")
    response = staff_client.post(reverse("admin:candidates_candidate_delete", args=[extra.pk]), {"post": "yes"}, follow=True)
    assert not Candidate.objects.filter(pk=extra.pk).exists()
    (warning,) = warnings(response)
    assert "slot codex-strong has 8 candidates" in warning and "so codex-extra-7 is never played" in warning
    extra = Candidate.objects.get(key="codex-extra-7")
    response = staff_client.post(reverse("admin:candidates_candidate_delete", args=[extra.pk]), {"post": "yes"}, follow=True)
    assert warnings(response) == []


def test_a_slot_saved_with_too_many_candidates_warns(reference_catalog, staff_client) -> None:
    from tests.test_admin_candidates import slot_change

    slot = Slot.objects.get(key="codex-strong")
    fill_slot(slot, 8)
    url, data = slot_change(staff_client, slot)
    response = staff_client.post(url, data, follow=True)
    (warning,) = warnings(response)
    assert "everyConcreteCandidateInRotation is false: slot codex-strong has 8 candidates" in warning
