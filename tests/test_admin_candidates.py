"""Admin for budgets, slots (with the candidate inline) and candidates: every validation rule is a
form error with a readable message, never a 500, and reordering never trips the unique positions."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from candidates.models import Budget, Candidate, Slot
from tests.builders import make_budget, make_candidate, make_slot
from tests.test_admin_forms import add_inline_row, admin_form_data, error_text, inline_index

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


CANDIDATE_ADD = reverse("admin:candidates_candidate_add")


def candidate_post(**overrides: Any) -> dict[str, Any]:
    slot = overrides.pop("slot", None) or Slot.objects.order_by("position").first() or make_slot()
    budget = overrides.pop("budget", None) or Budget.objects.first() or make_budget()
    data = {
        "key": "codex-new",
        "slot": str(slot.pk),
        "position": "7",
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-luna",
        "tier": "strong",
        "reasoning_effort": "",
        "required_environment": '["OPENAI_API_KEY"]',
        "profile": "",
        "budget": str(budget.pk),
    }
    data.update(overrides)
    return data


def assert_form_error(response: Any, message: str) -> None:
    assert response.status_code == 200, response.status_code
    assert message in error_text(response), error_text(response)


# --- budgets -------------------------------------------------------------------------------------


def budget_post(**overrides: Any) -> dict[str, Any]:
    data = {"name": "night-cheap", "max_latency_ms": "60000", "max_attempts": "2", "max_cost_usd": "0.5", "max_total_tokens": "50000"}
    data.update(overrides)
    return data


def test_a_valid_budget_is_added(staff_client) -> None:
    response = staff_client.post(reverse("admin:candidates_budget_add"), budget_post())
    assert response.status_code == 302
    assert Budget.objects.get(name="night-cheap").max_cost_usd == Decimal("0.5")


def test_a_second_budget_with_the_same_name_is_a_form_error(staff_client) -> None:
    make_budget(name="night-cheap")
    response = staff_client.post(reverse("admin:candidates_budget_add"), budget_post())
    assert_form_error(response, "already exists")
    assert Budget.objects.filter(name="night-cheap").count() == 1


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_latency_ms", "0", "Max latency must be more than 0 ms."),
        ("max_attempts", "0", "Max attempts must be at least 1."),
        ("max_total_tokens", "0", "Max total tokens must be more than 0."),
        ("max_cost_usd", "0", "greater than or equal to 0.000001"),
        ("max_cost_usd", "-1", "greater than or equal to 0.000001"),
        ("max_cost_usd", "NaN", "Enter a number."),
        ("max_cost_usd", "Infinity", "Enter a number."),
        ("max_latency_ms", "-5", "greater than or equal to 0"),
        ("max_latency_ms", "99999999999999999999", "less than or equal to"),
    ],
)
def test_a_budget_that_is_not_positive_is_a_form_error(staff_client, field: str, value: str, message: str) -> None:
    response = staff_client.post(reverse("admin:candidates_budget_add"), budget_post(**{field: value}))
    assert_form_error(response, message)
    assert not Budget.objects.filter(name="night-cheap").exists()


def test_a_budget_name_must_be_a_key(staff_client) -> None:
    response = staff_client.post(reverse("admin:candidates_budget_add"), budget_post(name="Night Cheap"))
    assert_form_error(response, "Use lowercase letters")


# --- candidates (add, change) --------------------------------------------------------------------


def test_a_valid_candidate_is_added(staff_client) -> None:
    response = staff_client.post(CANDIDATE_ADD, candidate_post())
    assert response.status_code == 302
    assert Candidate.objects.get(key="codex-new").required_environment == ["OPENAI_API_KEY"]


def test_a_candidate_id_used_in_another_slot_is_a_form_error(staff_client) -> None:
    make_candidate(key="codex-new")
    other_slot = make_slot()
    response = staff_client.post(CANDIDATE_ADD, candidate_post(slot=other_slot))
    assert_form_error(response, "A candidate with this id already exists (ids are unique across all slots).")


def test_a_position_taken_in_the_slot_is_a_form_error(staff_client) -> None:
    taken = make_candidate(position=3)
    response = staff_client.post(CANDIDATE_ADD, candidate_post(slot=taken.slot, position="3"))
    assert_form_error(response, "Another candidate in this slot already has this position.")


@pytest.mark.parametrize(
    ("adapter", "provider"), [("codex_app_server", "opencode"), ("acpx_runtime", "codex"), ("opencode_server", "acpx")]
)
def test_an_adapter_with_another_runtime_s_provider_is_a_form_error(staff_client, adapter: str, provider: str) -> None:
    response = staff_client.post(CANDIDATE_ADD, candidate_post(adapter=adapter, provider=provider))
    assert_form_error(response, "Adapter and provider do not belong together")


@pytest.mark.parametrize("model", ["", "   "])
def test_a_blank_model_is_a_form_error(staff_client, model: str) -> None:
    response = staff_client.post(CANDIDATE_ADD, candidate_post(model=model))
    assert response.status_code == 200
    assert "model" in response.context["adminform"].form.errors


@pytest.mark.parametrize(
    ("required_environment", "message"),
    [
        ('"OPENAI_API_KEY"', "must be a list of environment variable names"),
        ("null", "must be a list of environment variable names"),
        ("", "must be a list of environment variable names"),
        ("{}", "must be a list of environment variable names"),
        ('{"OPENAI_API_KEY": 1}', "must be a list of environment variable names"),
        ("[1]", "item 1 must be a text name, not int"),
        ('[""]', "item 1 is not an environment variable name"),
        ('["OPENAI_API_KEY ", "X"]', "item 1 is not an environment variable name"),
        ('["openai api key"]', "item 1 is not an environment variable name"),
        ('["OPENAI_API_KEY", "OPENAI_API_KEY"]', "lists OPENAI_API_KEY twice"),
        ('["1PASSWORD"]', "item 1 is not an environment variable name"),
        ("NaN", "Enter valid JSON"),
        ('["X", Infinity]', "Enter valid JSON"),
        ("[1e309]", "Enter valid JSON"),
        ("[OPENAI_API_KEY]", "Enter valid JSON"),
    ],
)
def test_required_environment_that_is_not_a_list_of_names_is_a_form_error(staff_client, required_environment: str, message: str) -> None:
    response = staff_client.post(CANDIDATE_ADD, candidate_post(required_environment=required_environment))
    assert_form_error(response, message)
    assert not Candidate.objects.filter(key="codex-new").exists()


def test_the_change_view_reports_a_duplicate_id_as_a_form_error(staff_client) -> None:
    make_candidate(key="codex-taken")
    candidate = make_candidate(key="codex-mine")
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    data = admin_form_data(staff_client.get(url))
    data["key"] = "codex-taken"
    assert_form_error(staff_client.post(url, data), "A candidate with this id already exists")


def test_the_change_view_reports_a_mismatched_provider_and_keeps_the_row(staff_client) -> None:
    candidate = make_candidate()
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    data = admin_form_data(staff_client.get(url))
    data["provider"] = "acpx"
    assert_form_error(staff_client.post(url, data), "Adapter and provider do not belong together")
    candidate.refresh_from_db()
    assert candidate.provider == "codex"


def test_the_change_view_saves_a_valid_edit(staff_client) -> None:
    candidate = make_candidate()
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    data = admin_form_data(staff_client.get(url))
    data["required_environment"] = '["OPENAI_API_KEY", "OPENROUTER_API_KEY"]'
    assert staff_client.post(url, data).status_code == 302
    candidate.refresh_from_db()
    assert candidate.required_environment == ["OPENAI_API_KEY", "OPENROUTER_API_KEY"]


# --- candidates: list_editable changelist --------------------------------------------------------


def changelist_post(candidates: list[Candidate], **row: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "form-TOTAL_FORMS": str(len(candidates)),
        "form-INITIAL_FORMS": str(len(candidates)),
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    for index, candidate in enumerate(candidates):
        data[f"form-{index}-id"] = str(candidate.pk)
        data[f"form-{index}-model"] = candidate.model
        data[f"form-{index}-tier"] = candidate.tier
    for name, value in row.items():
        data[f"form-0-{name}"] = value
    return data


def test_the_changelist_saves_an_edited_model(staff_client) -> None:
    candidate = make_candidate()
    response = staff_client.post(reverse("admin:candidates_candidate_changelist"), changelist_post([candidate], model="gpt-5.7"))
    assert response.status_code == 302
    candidate.refresh_from_db()
    assert candidate.model == "gpt-5.7"


@pytest.mark.parametrize(("row", "message"), [({"model": "  "}, "This field is required."), ({"tier": "premium"}, "Select a valid choice")])
def test_the_changelist_reports_a_bad_row_as_a_form_error(staff_client, row: dict[str, str], message: str) -> None:
    candidate = make_candidate(model="gpt-5.6-luna")
    response = staff_client.post(reverse("admin:candidates_candidate_changelist"), changelist_post([candidate], **row))
    assert response.status_code == 200
    assert message in str(response.context["cl"].formset.errors)
    candidate.refresh_from_db()
    assert candidate.model == "gpt-5.6-luna"


def test_the_changelist_searches_and_filters(staff_client) -> None:
    make_candidate(key="codex-luna", model="gpt-5.6-luna")
    make_candidate(key="opencode-kimi", adapter="opencode_server", provider="opencode", model="kimi-k2", tier="inexpensive")
    url = reverse("admin:candidates_candidate_changelist")
    found = staff_client.get(url, {"q": "kimi"})
    assert [c.key for c in found.context["cl"].result_list] == ["opencode-kimi"]
    filtered = staff_client.get(url, {"tier__exact": "strong", "adapter__exact": "codex_app_server"})
    assert [c.key for c in filtered.context["cl"].result_list] == ["codex-luna"]


# --- slots and the candidate inline --------------------------------------------------------------


@pytest.fixture
def slot_with_three(db) -> Slot:
    slot = make_slot(key="codex-strong")
    budget = make_budget()
    for index, key in enumerate(["codex-a", "codex-b", "codex-c"]):
        make_candidate(key=key, slot=slot, position=index, budget=budget)
    return slot


def slot_order(slot: Slot) -> list[str]:
    return list(slot.candidates.order_by("position").values_list("key", flat=True))


def slot_change(staff_client, slot: Slot) -> tuple[str, dict[str, Any]]:
    url = reverse("admin:candidates_slot_change", args=[slot.pk])
    return url, admin_form_data(staff_client.get(url))


def test_the_slot_page_lists_its_candidates_inline_in_order(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    assert [data[f"candidates-{i}-key"] for i in range(3)] == ["codex-a", "codex-b", "codex-c"]


def test_swapping_two_candidates_in_the_inline_saves_the_new_order(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    a, b = inline_index(data, "candidates", "codex-a"), inline_index(data, "candidates", "codex-b")
    data[f"candidates-{a}-position"], data[f"candidates-{b}-position"] = "2", "1"  # what the drag-and-drop script posts (1-based)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-c')}-position"] = "3"

    response = staff_client.post(url, data)

    assert response.status_code == 302, error_text(response)
    assert slot_order(slot_with_three) == ["codex-b", "codex-a", "codex-c"]
    assert list(slot_with_three.candidates.order_by("position").values_list("position", flat=True)) == [0, 1, 2]


def test_reversing_the_whole_slot_in_the_inline_saves(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    for key, position in (("codex-a", "3"), ("codex-b", "2"), ("codex-c", "1")):
        data[f"candidates-{inline_index(data, 'candidates', key)}-position"] = position
    assert staff_client.post(url, data).status_code == 302
    assert slot_order(slot_with_three) == ["codex-c", "codex-b", "codex-a"]


def test_two_inline_rows_with_the_same_position_are_a_form_error(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-a')}-position"] = "1"
    data[f"candidates-{inline_index(data, 'candidates', 'codex-b')}-position"] = "1"
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "duplicate" in error_text(response)
    assert slot_order(slot_with_three) == ["codex-a", "codex-b", "codex-c"]


def test_a_candidate_added_inline_goes_last(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    add_inline_row(
        data,
        "candidates",
        {
            "key": "codex-d",
            "slot": str(slot_with_three.pk),
            "adapter": "codex_app_server",
            "provider": "codex",
            "model": "gpt-5.6-sol",
            "tier": "strong",
            "required_environment": '["OPENAI_API_KEY"]',
            "budget": str(Budget.objects.first().pk),
            "position": "",
        },
    )
    response = staff_client.post(url, data)
    assert response.status_code == 302, error_text(response)
    assert slot_order(slot_with_three) == ["codex-a", "codex-b", "codex-c", "codex-d"]


def test_deleting_a_candidate_inline_and_moving_another_into_its_place_saves(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-a')}-DELETE"] = "on"
    data[f"candidates-{inline_index(data, 'candidates', 'codex-c')}-position"] = "1"
    data[f"candidates-{inline_index(data, 'candidates', 'codex-b')}-position"] = "2"
    assert staff_client.post(url, data).status_code == 302
    assert slot_order(slot_with_three) == ["codex-c", "codex-b"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("provider", "opencode", "Adapter and provider do not belong together"),
        ("model", " ", "This field is required."),
        ("required_environment", '"OPENAI_API_KEY"', "must be a list of environment variable names"),
        ("required_environment", '["OPENAI_API_KEY", NaN]', "Enter valid JSON"),
        ("required_environment", '["A", "A"]', "lists A twice"),
        ("key", "Not A Key", "Use lowercase letters"),
    ],
)
def test_a_bad_inline_row_is_a_form_error(staff_client, slot_with_three: Slot, field: str, value: str, message: str) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-b')}-{field}"] = value
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert message in error_text(response)


def test_an_inline_id_used_by_a_candidate_of_another_slot_is_a_form_error(staff_client, slot_with_three: Slot) -> None:
    make_candidate(key="codex-elsewhere")
    url, data = slot_change(staff_client, slot_with_three)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-b')}-key"] = "codex-elsewhere"
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "A candidate with this id already exists" in error_text(response)


def test_two_new_inline_rows_with_one_id_are_a_form_error(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    row = {
        "key": "codex-twin",
        "slot": str(slot_with_three.pk),
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt",
        "tier": "strong",
        "required_environment": "[]",
        "budget": str(Budget.objects.first().pk),
        "position": "",
    }
    add_inline_row(data, "candidates", row)
    add_inline_row(data, "candidates", row)
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "duplicate" in error_text(response)


def test_a_new_slot_is_added_with_its_candidates_inline(staff_client) -> None:
    make_slot(key="first")
    budget = make_budget()
    url = reverse("admin:candidates_slot_add")
    data = admin_form_data(staff_client.get(url))
    data["key"] = "acpx-strong"
    add_inline_row(
        data,
        "candidates",
        {
            "key": "acpx-claude",
            "adapter": "acpx_runtime",
            "provider": "acpx",
            "model": "claude",
            "tier": "strong",
            "required_environment": '["ANTHROPIC_API_KEY"]',
            "budget": str(budget.pk),
            "position": "1",
        },
    )
    response = staff_client.post(url, data)
    assert response.status_code == 302, error_text(response)
    slot = Slot.objects.get(key="acpx-strong")
    assert slot.position == 1  # after "first"
    assert slot_order(slot) == ["acpx-claude"]


def test_a_duplicate_slot_id_is_a_form_error(staff_client) -> None:
    make_slot(key="codex-strong")
    url = reverse("admin:candidates_slot_add")
    data = admin_form_data(staff_client.get(url))
    data["key"] = "codex-strong"
    response = staff_client.post(url, data)
    assert_form_error(response, "A slot with this id already exists.")


def sortable_update(staff_client, url_name: str, items: list[list[int]]) -> Any:
    return staff_client.post(reverse(url_name), json.dumps({"updatedItems": items}), content_type="application/json")


def test_swapping_two_slots_in_the_changelist_saves_the_new_order(staff_client) -> None:
    first, second, _third = make_slot(key="one"), make_slot(key="two"), make_slot(key="three")
    response = sortable_update(
        staff_client, "admin:candidates_slot_sortable_update", [[second.pk, first.position], [first.pk, second.position]]
    )
    assert response.status_code == 200
    assert list(Slot.objects.order_by("position").values_list("key", flat=True)) == ["two", "one", "three"]


def test_a_slot_reorder_onto_a_taken_position_is_refused_without_a_500(staff_client) -> None:
    first, second = make_slot(key="one"), make_slot(key="two")
    response = sortable_update(staff_client, "admin:candidates_slot_sortable_update", [[first.pk, second.position]])
    assert response.status_code == 400
    assert list(Slot.objects.order_by("position").values_list("key", flat=True)) == ["one", "two"]


def test_the_slot_changelist_shows_slots_in_order_with_their_candidates(staff_client, slot_with_three: Slot) -> None:
    response = staff_client.get(reverse("admin:candidates_slot_changelist"), {"q": "codex-b"})
    assert response.status_code == 200
    assert "codex-a, codex-b, codex-c" in response.content.decode()


# --- two submitted rows clashing on a case-insensitive constraint ---------------------------------

SAME_MODEL = "This slot already has a candidate running this model"


def test_two_changelist_rows_given_the_same_model_are_a_form_error(staff_client, slot_with_three: Slot) -> None:
    a, b = slot_with_three.candidates.order_by("position")[:2]
    data = changelist_post([a, b], model="gpt-5.9-Same")
    data["form-1-model"] = "GPT-5.9-same"

    response = staff_client.post(reverse("admin:candidates_candidate_changelist"), data)

    assert response.status_code == 200
    assert SAME_MODEL in str(response.context["cl"].formset.errors)
    assert not Candidate.objects.filter(model__iexact="gpt-5.9-same").exists()


def test_two_inline_rows_given_the_same_model_are_a_form_error(staff_client, slot_with_three: Slot) -> None:
    url, data = slot_change(staff_client, slot_with_three)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-a')}-model"] = "gpt-5.9-Same"
    data[f"candidates-{inline_index(data, 'candidates', 'codex-b')}-model"] = "GPT-5.9-same"

    response = staff_client.post(url, data)

    assert response.status_code == 200
    assert SAME_MODEL in error_text(response)
    assert not Candidate.objects.filter(model__iexact="gpt-5.9-same").exists()


def test_an_inline_row_sent_without_its_position_is_a_form_error(staff_client, slot_with_three: Slot) -> None:
    # The drag-and-drop field is hidden and optional: a saved row posted without it was saved with
    # no position, a NOT NULL failure and a 500.
    url, data = slot_change(staff_client, slot_with_three)
    data[f"candidates-{inline_index(data, 'candidates', 'codex-b')}-position"] = ""
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "Position is required: drag the row to its place and save again." in error_text(response)
    assert slot_order(slot_with_three) == ["codex-a", "codex-b", "codex-c"]
