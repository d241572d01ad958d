"""Secret-shaped input in the admin: the form names the field, and the page sent back holds no
trace of the value — not in the field, not in an error message, not in the title (docs/failure-modes.md
B8, B12). Checked for text and JSON fields, on add and change views, in the candidate
inline under Slot, in the list_editable changelist and on the schedule preview."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse

from candidates.models import Budget, Candidate, Slot
from schedules.models import ChaosScenario, WorkflowCase
from tests.builders import make_budget, make_candidate, make_case, make_slot
from tests.test_admin_forms import add_inline_row, admin_form_data, error_text, inline_index

pytestmark = pytest.mark.django_db

SECRET = "sk-proj-FAKEfakeFAKE_0123456789-abcdefghijklmnop"
# Lowercase, digits and '-' only: passes the id format, so only the secret check stops it.
KEY_SHAPED_SECRET = "sk-proj-fakefakefake0123456789abcd"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
TRACES = ("FAKEfakeFAKE", "fakefakefake0123456789", AWS_KEY_ID)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def assert_refused_without_echo(response: Any, field_label: str) -> None:
    assert response.status_code == 200, response.status_code
    html = response.content.decode()
    for trace in TRACES:
        assert trace not in html, f"{trace!r} was sent back to the browser"
    assert f"{field_label} looks like it contains a secret" in html, error_text(response)


def candidate_post(**overrides: Any) -> dict[str, Any]:
    data = {
        "key": "codex-new",
        "slot": str(make_slot().pk),
        "position": "0",
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-luna",
        "tier": "strong",
        "reasoning_effort": "",
        "required_environment": '["OPENAI_API_KEY"]',
        "profile": "",
        "budget": str(make_budget().pk),
    }
    data.update(overrides)
    return data


# --- add views -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("model", SECRET, "Model"),
        ("model", f"gpt-5 {SECRET}", "Model"),
        ("profile", f"Bearer {SECRET}", "Profile"),
        ("key", KEY_SHAPED_SECRET, "Id"),
        ("required_environment", json.dumps([SECRET]), "Required environment"),
        ("required_environment", json.dumps(["OPENAI_API_KEY", {"note": SECRET}]), "Required environment"),
    ],
)
def test_the_candidate_add_view_refuses_a_secret_and_does_not_send_it_back(staff_client, field: str, value: str, label: str) -> None:
    response = staff_client.post(reverse("admin:candidates_candidate_add"), candidate_post(**{field: value}))
    assert_refused_without_echo(response, label)
    assert not Candidate.objects.exists()


def test_the_budget_add_view_refuses_a_secret_shaped_name(staff_client) -> None:
    data = {"name": KEY_SHAPED_SECRET, "max_latency_ms": "1000", "max_attempts": "1", "max_cost_usd": "1", "max_total_tokens": "10"}
    response = staff_client.post(reverse("admin:candidates_budget_add"), data)
    assert_refused_without_echo(response, "Name")
    assert not Budget.objects.exists()


def case_post(**overrides: Any) -> dict[str, Any]:
    data = {
        "key": "new-case",
        "title": "A new case",
        "tags": '["response"]',
        "providers": '["codex"]',
        "repetitions": "1",
        "steps": '[{"kind": "run_start", "taskMode": "ask"}]',
        "assertions": "{}",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("title", f"Uses {SECRET}", "Title"),
        ("steps", json.dumps([{"kind": "run_start", "taskMode": "ask", "prompt": SECRET}]), "Steps"),
        ("assertions", json.dumps({"orderedMarkers": [SECRET]}), "Assertions"),
        ("tags", json.dumps([AWS_KEY_ID]), "Tags"),
    ],
)
def test_the_workflow_case_add_view_refuses_a_secret_and_does_not_send_it_back(staff_client, field: str, value: str, label: str) -> None:
    response = staff_client.post(reverse("admin:schedules_workflowcase_add"), case_post(**{field: value}))
    assert_refused_without_echo(response, label)
    assert not WorkflowCase.objects.exists()


def test_the_chaos_scenario_add_view_refuses_a_secret(staff_client) -> None:
    data = {"key": "restart", "lane": "chaos", "fault": "restart", "expected_invariant": f"token {SECRET} survives", "position": "0"}
    response = staff_client.post(reverse("admin:schedules_chaosscenario_add"), data)
    assert_refused_without_echo(response, "Expected invariant")
    assert not ChaosScenario.objects.exists()


def test_broken_json_holding_a_secret_is_not_sent_back(staff_client) -> None:
    response = staff_client.post(reverse("admin:candidates_candidate_add"), candidate_post(required_environment=f'["{SECRET}"'))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Enter valid JSON" in html
    assert "FAKEfakeFAKE" not in html


def test_an_error_message_that_quotes_a_secret_shaped_name_is_redacted(staff_client) -> None:
    # AKIA… matches the variable-name pattern, so "lists X twice" would quote it.
    response = staff_client.post(
        reverse("admin:candidates_candidate_add"), candidate_post(required_environment=json.dumps([AWS_KEY_ID, AWS_KEY_ID]))
    )
    assert_refused_without_echo(response, "Required environment")


# --- change views --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("model", SECRET, "Model"),
        ("key", KEY_SHAPED_SECRET, "Id"),  # the change page prints the object's name in its title
        ("required_environment", json.dumps([SECRET]), "Required environment"),
    ],
)
def test_the_candidate_change_view_refuses_a_secret_and_does_not_send_it_back(staff_client, field: str, value: str, label: str) -> None:
    candidate = make_candidate(key="codex-luna", model="gpt-5.6-luna")
    url = reverse("admin:candidates_candidate_change", args=[candidate.pk])
    data = admin_form_data(staff_client.get(url))
    data[field] = value
    response = staff_client.post(url, data)
    assert_refused_without_echo(response, label)
    assert "codex-luna" in response.content.decode()  # the title still names the stored candidate
    candidate.refresh_from_db()
    assert candidate.key == "codex-luna" and candidate.model == "gpt-5.6-luna"


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [("title", SECRET, "Title"), ("steps", json.dumps([{"kind": "steer", "delivery": SECRET}]), "Steps")],
)
def test_the_workflow_case_change_view_refuses_a_secret_and_does_not_send_it_back(staff_client, field: str, value: str, label: str) -> None:
    case = make_case(key="approval")
    url = reverse("admin:schedules_workflowcase_change", args=[case.pk])
    data = admin_form_data(staff_client.get(url))
    data[field] = value
    assert_refused_without_echo(staff_client.post(url, data), label)


def test_the_slot_change_view_refuses_a_secret_shaped_slot_id(staff_client) -> None:
    slot = make_slot(key="codex-strong")
    url = reverse("admin:candidates_slot_change", args=[slot.pk])
    data = admin_form_data(staff_client.get(url))
    data["key"] = KEY_SHAPED_SECRET
    response = staff_client.post(url, data)
    assert_refused_without_echo(response, "Id")
    assert "codex-strong" in response.content.decode()


# --- the candidate inline under Slot -------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [
        ("model", SECRET, "Model"),
        ("key", KEY_SHAPED_SECRET, "Id"),  # the inline row prints the stored candidate's name
        ("required_environment", json.dumps([SECRET]), "Required environment"),
    ],
)
def test_the_candidate_inline_refuses_a_secret_and_does_not_send_it_back(staff_client, field: str, value: str, label: str) -> None:
    candidate = make_candidate(key="codex-luna", model="gpt-5.6-luna")
    url = reverse("admin:candidates_slot_change", args=[candidate.slot.pk])
    data = admin_form_data(staff_client.get(url))
    data[f"candidates-{inline_index(data, 'candidates', 'codex-luna')}-{field}"] = value
    response = staff_client.post(url, data)
    assert_refused_without_echo(response, label)
    candidate.refresh_from_db()
    assert candidate.key == "codex-luna" and candidate.required_environment == ["OPENAI_API_KEY"]


@pytest.mark.parametrize(
    ("field", "value", "label"), [("model", SECRET, "Model"), ("required_environment", json.dumps([SECRET]), "Required environment")]
)
def test_a_new_inline_row_on_the_slot_add_view_refuses_a_secret(staff_client, field: str, value: str, label: str) -> None:
    budget = make_budget()
    url = reverse("admin:candidates_slot_add")
    data = admin_form_data(staff_client.get(url))
    data["key"] = "codex-strong"
    row = {
        "key": "codex-luna",
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt",
        "tier": "strong",
        "required_environment": "[]",
        "budget": str(budget.pk),
        "position": "1",
    }
    row[field] = value
    add_inline_row(data, "candidates", row)
    assert_refused_without_echo(staff_client.post(url, data), label)
    assert not Slot.objects.exists()


# --- the list_editable changelist and the preview ------------------------------------------------


def test_the_candidate_changelist_refuses_a_secret_and_does_not_send_it_back(staff_client) -> None:
    candidate = make_candidate(model="gpt-5.6-luna")
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "form-0-id": str(candidate.pk),
        "form-0-model": SECRET,
        "form-0-tier": "strong",
        "_save": "Save",
    }
    response = staff_client.post(reverse("admin:candidates_candidate_changelist"), data)
    assert_refused_without_echo(response, "Model")
    candidate.refresh_from_db()
    assert candidate.model == "gpt-5.6-luna"


def test_the_schedule_preview_refuses_a_secret_seed_without_sending_it_back(staff_client) -> None:
    response = staff_client.get(reverse("admin:schedules_schedule_preview"), {"seed": SECRET})
    assert response.status_code == 200
    html = response.content.decode()
    assert "This looks like a secret" in html
    assert "FAKEfakeFAKE" not in html
