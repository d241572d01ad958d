"""Admin for workflow cases, chaos scenarios, saved schedules (read-only) and the schedule preview."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from schedules.building import rotation_day
from schedules.models import ChaosScenario, Schedule, WorkflowCase
from schedules.services import Selection, preview_schedule
from tests.builders import make_case
from tests.test_admin_forms import admin_form_data, error_text

pytestmark = pytest.mark.django_db

CASE_ADD = reverse("admin:schedules_workflowcase_add")
PREVIEW = reverse("admin:schedules_schedule_preview")
SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def case_post(**overrides: Any) -> dict[str, Any]:
    data = {
        "key": "new-case",
        "title": "A new case",
        "tags": '["response"]',
        "providers": '["codex", "acpx"]',
        "repetitions": "1",
        "steps": '[{"kind": "run_start", "taskMode": "ask"}]',
        "assertions": '{"requiredOperationIds": ["finish_task"]}',
    }
    data.update(overrides)
    return data


def assert_form_error(response: Any, message: str) -> None:
    assert response.status_code == 200, response.status_code
    assert message in error_text(response), error_text(response)


# --- workflow cases ------------------------------------------------------------------------------


def test_a_valid_case_is_added_last_in_the_catalog(staff_client) -> None:
    make_case(key="first")
    response = staff_client.post(CASE_ADD, case_post())
    assert response.status_code == 302, error_text(response)
    case = WorkflowCase.objects.get(key="new-case")
    assert case.position == 1
    assert case.steps == [{"kind": "run_start", "taskMode": "ask"}]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("steps", '[{"kind": "dance"}]', "Steps[1].kind is an unknown step kind"),
        ("steps", "[]", "Steps needs at least one step"),
        ("steps", '[{"kind": "run_start"}]', "Steps[1] is missing"),
        ("steps", '[{"kind": "run_start", "taskMode": "ask", "extra": 1}]', "has unknown field extra"),
        ("steps", '{"kind": "run_start"}', "must be a list"),
        ("assertions", '{"colour": "blue"}', "Unknown assertion key colour"),
        (
            "assertions",
            '{"requiredPrpEventTypes": ["run.terminal"], "forbiddenPrpEventTypes": ["run.terminal"]}',
            "Event type run.terminal is both required and forbidden",
        ),
        ("assertions", '{"maxAttempts": NaN}', "Enter valid JSON"),
        ("steps", '[{"kind": "run_start", "taskMode": "ask", "n": Infinity}]', "Enter valid JSON"),
        ("tags", '["resp\\u0000onse"]', "without the NUL character"),  # PostgreSQL jsonb cannot store it
        ("tags", '"response"', "Tags must be a list"),
        ("tags", '["a", "a"]', "Tags must not repeat."),
        ("providers", '["gemini"]', "Providers must be a non-empty list"),
        ("providers", "[]", "This field is required."),
        ("repetitions", "0", "greater than or equal to 1"),
        ("title", "  ", "This field is required."),
        ("key", "Not A Key", "Use lowercase letters"),
    ],
)
def test_a_bad_case_is_a_form_error(staff_client, field: str, value: str, message: str) -> None:
    response = staff_client.post(CASE_ADD, case_post(**{field: value}))
    assert_form_error(response, message)
    assert not WorkflowCase.objects.filter(key="new-case").exists()


def test_a_duplicate_case_id_is_a_form_error(staff_client) -> None:
    make_case(key="new-case")
    assert_form_error(staff_client.post(CASE_ADD, case_post()), "A workflow case with this id already exists.")


def test_changing_a_case_s_steps_gives_it_a_new_version(staff_client) -> None:
    case = make_case()
    url = reverse("admin:schedules_workflowcase_change", args=[case.pk])
    data = admin_form_data(staff_client.get(url))
    data["steps"] = '[{"kind": "run_start", "taskMode": "execute"}]'
    assert staff_client.post(url, data).status_code == 302
    case.refresh_from_db()
    assert (case.version, case.steps[0]["taskMode"]) == (2, "execute")


def test_changing_only_a_case_s_title_keeps_its_version(staff_client) -> None:
    case = make_case()
    url = reverse("admin:schedules_workflowcase_change", args=[case.pk])
    data = admin_form_data(staff_client.get(url))
    data["title"] = "Renamed"
    assert staff_client.post(url, data).status_code == 302
    case.refresh_from_db()
    assert (case.version, case.title) == (1, "Renamed")


def test_swapping_two_cases_in_the_changelist_saves_the_new_order(staff_client) -> None:
    first, second = make_case(key="one"), make_case(key="two")
    response = staff_client.post(
        reverse("admin:schedules_workflowcase_sortable_update"),
        json.dumps({"updatedItems": [[first.pk, second.position], [second.pk, first.position]]}),
        content_type="application/json",
    )
    assert response.status_code == 200
    assert list(WorkflowCase.objects.order_by("position").values_list("key", flat=True)) == ["two", "one"]


def test_the_case_changelist_searches(staff_client, reference_catalog) -> None:
    response = staff_client.get(reverse("admin:schedules_workflowcase_changelist"), {"q": "steering"})
    assert response.status_code == 200
    assert [case.key for case in response.context["cl"].result_list] == ["steering-causality"]


# --- chaos scenarios -----------------------------------------------------------------------------


def chaos_post(**overrides: Any) -> dict[str, Any]:
    data = {"key": "restart-mid-turn", "lane": "chaos", "fault": "restart", "expected_invariant": "no lost turn", "position": "0"}
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("fault", "meteor", "Select a valid choice"),
        ("expected_invariant", " ", "This field is required."),
        ("key", "Bad Key", "Use lowercase"),
    ],
)
def test_a_bad_chaos_scenario_is_a_form_error(staff_client, field: str, value: str, message: str) -> None:
    response = staff_client.post(reverse("admin:schedules_chaosscenario_add"), chaos_post(**{field: value}))
    assert_form_error(response, message)


def test_a_duplicate_chaos_scenario_id_is_a_form_error(staff_client) -> None:
    assert staff_client.post(reverse("admin:schedules_chaosscenario_add"), chaos_post()).status_code == 302
    response = staff_client.post(reverse("admin:schedules_chaosscenario_add"), chaos_post())
    assert_form_error(response, "A chaos scenario with this id already exists.")
    assert ChaosScenario.objects.count() == 1


# --- saved schedules are read-only ---------------------------------------------------------------


@pytest.fixture
def saved_schedule(reference_catalog) -> Schedule:
    from runs.nightly import start_nightly

    return start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=NOW, environ={}, execute=False).schedule


def test_a_saved_schedule_shows_its_entries_and_cannot_be_edited(staff_client, saved_schedule: Schedule) -> None:
    url = reverse("admin:schedules_schedule_change", args=[saved_schedule.pk])
    response = staff_client.get(url)
    html = response.content.decode()
    assert response.status_code == 200
    first = saved_schedule.entries.order_by("position").first()
    assert first.execution_id in html
    assert 'name="_save"' not in html
    assert staff_client.post(url, {"seed": "changed"}).status_code == 403
    saved_schedule.refresh_from_db()
    assert saved_schedule.seed == SEED


def test_schedules_cannot_be_added_or_deleted_in_the_admin(staff_client, saved_schedule: Schedule) -> None:
    assert staff_client.get(reverse("admin:schedules_schedule_add")).status_code == 403
    assert staff_client.post(reverse("admin:schedules_schedule_delete", args=[saved_schedule.pk]), {"post": "yes"}).status_code == 403
    assert Schedule.objects.filter(pk=saved_schedule.pk).exists()


def test_the_schedule_changelist_filters_and_links_to_the_preview(staff_client, saved_schedule: Schedule) -> None:
    response = staff_client.get(reverse("admin:schedules_schedule_changelist"), {"rotation_day": str(saved_schedule.rotation_day)})
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [saved_schedule]
    assert PREVIEW in response.content.decode()


def test_the_admin_index_links_to_the_preview(staff_client) -> None:
    assert PREVIEW in staff_client.get(reverse("admin:index")).content.decode()


def test_the_admin_tools_link_the_api_and_its_docs(staff_client) -> None:
    html = staff_client.get(reverse("admin:index")).content.decode()
    tools = html[html.index('<div class="module evalhub-tools">') : html.index("</div>", html.index("evalhub-tools"))]
    assert f'<a href="{reverse("api-root")}">API</a>' in tools
    assert f'<a href="{reverse("api-docs")}">interactive docs</a>' in tools


# --- the preview page ----------------------------------------------------------------------------


def entry_ids(response: Any) -> list[str]:
    return [entry["executionId"] for entry in response.context["document"]["entries"]]


def test_the_preview_builds_the_schedule_of_any_date_without_saving(staff_client, reference_catalog) -> None:
    response = staff_client.get(PREVIEW, {"seed": SEED, "night": "2026-08-27"})
    expected = preview_schedule(seed=SEED, now=NOW, generated_at="2026-08-27T00:00:00.000Z")
    assert response.status_code == 200
    assert response.context["document"]["rotationDay"] == rotation_day("2026-08-27T00:00:00.000Z")
    assert entry_ids(response) == [entry["executionId"] for entry in expected["entries"]]
    html = response.content.decode()
    assert expected["entries"][0]["executionId"] in html
    assert not Schedule.objects.exists()


def test_the_preview_defaults_to_tonight_and_the_configured_seed(staff_client, reference_catalog, settings) -> None:
    settings.EVALHUB = {**settings.EVALHUB, "SCHEDULE_SEED": "custom-seed"}
    response = staff_client.get(PREVIEW)
    assert response.status_code == 200
    assert response.context["form"]["seed"].value() == "custom-seed"
    assert response.context["document"]["seed"] == "custom-seed"


def test_the_preview_overrides_the_rotation_day(staff_client, reference_catalog) -> None:
    response = staff_client.get(PREVIEW, {"seed": SEED, "night": "2026-08-27", "rotation_day": "5"})
    expected = preview_schedule(seed=SEED, now=NOW, rotation_day=5, generated_at="2026-08-27T00:00:00.000Z")
    assert response.context["document"]["rotationDay"] == 5
    assert entry_ids(response) == [entry["executionId"] for entry in expected["entries"]]


def test_the_preview_applies_a_selection(staff_client, reference_catalog) -> None:
    full = preview_schedule(seed=SEED, now=NOW, generated_at="2026-08-27T00:00:00.000Z")
    candidate = full["candidates"][0]["id"]
    response = staff_client.get(
        PREVIEW, {"seed": SEED, "night": "2026-08-27", "candidates": [candidate], "cases": ["final-response"], "limit": "1"}
    )
    expected = preview_schedule(
        seed=SEED,
        now=NOW,
        generated_at="2026-08-27T00:00:00.000Z",
        selection=Selection(candidate_ids=(candidate,), case_ids=("final-response",), limit=1),
    )
    assert entry_ids(response) == [entry["executionId"] for entry in expected["entries"]]


def test_a_candidate_outside_the_week_s_line_up_is_a_form_error(staff_client, reference_catalog) -> None:
    full = preview_schedule(seed=SEED, now=NOW, generated_at="2026-08-27T00:00:00.000Z")
    playing = {candidate["id"] for candidate in full["candidates"]}
    from candidates.models import Candidate

    benched = Candidate.objects.exclude(key__in=playing).values_list("key", flat=True).first()
    response = staff_client.get(PREVIEW, {"seed": SEED, "night": "2026-08-27", "candidates": [benched]})
    assert response.status_code == 200
    assert response.context["document"] is None
    assert f"candidate {benched} does not play on rotation day" in str(response.context["form"].non_field_errors())


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"night": "2026-02-30"}, "night"),
        ({"night": "yesterday"}, "night"),
        ({"rotation_day": "7"}, "rotation_day"),
        ({"rotation_day": "-1"}, "rotation_day"),
        ({"limit": "0"}, "limit"),
        ({"limit": "abc"}, "limit"),
        ({"cases": ["no-such-case"]}, "cases"),
        ({"seed": ""}, "seed"),
    ],
)
def test_bad_preview_input_is_a_form_error(staff_client, reference_catalog, params: dict[str, Any], field: str) -> None:
    response = staff_client.get(PREVIEW, {"seed": SEED, **params})
    assert response.status_code == 200
    assert field in response.context["form"].errors


def test_the_preview_shows_the_coverage_invariants(staff_client, reference_catalog) -> None:
    response = staff_client.get(PREVIEW, {"seed": SEED})
    names = [row["name"] for row in response.context["coverage"]]
    assert names == ["everySlotNightly", "everyConcreteCandidateInRotation", "everyWorkflowCoversEverySlot", "strongAndInexpensiveNightly"]
    assert all(row["holds"] for row in response.context["coverage"])
    assert "Every night&#x27;s schedule plays every slot at least once." in response.content.decode()


def test_the_preview_of_an_empty_catalog_explains_instead_of_failing(staff_client) -> None:
    response = staff_client.get(PREVIEW, {"seed": SEED})
    assert response.status_code == 200
    assert response.context["document"] is None
    assert response.context["form"].non_field_errors()
    assert response.context["coverage_error"]


def test_the_preview_needs_an_admin_sign_in(reader_client) -> None:
    response = reader_client.get(PREVIEW)
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
