"""Case prompts: the shipped prompts match their cases, load with the catalog, are versioned like
steps and assertions, and never change the reference-shaped case documents."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from evalhub import reference_data
from evalhub.secrets import contains_secret
from runs.executors.live.operations import OPERATIONS
from schedules.models import WorkflowCase
from schedules.services import load_cases
from tests.builders import make_case
from tests.test_admin_forms import admin_form_data

PROMPTS: dict[str, str] = reference_data.load("case-prompts.json")
CASES: list[dict[str, Any]] = reference_data.load("workflow-cases.json")["cases"]
MUTATING = {operation.name for operation in OPERATIONS if not operation.read_only}
ALL_OPERATIONS = {operation.name for operation in OPERATIONS}


def named_operations(prompt: str) -> set[str]:
    return {name for name in ALL_OPERATIONS if re.search(rf"\b{name}\b", prompt)}


# --- the shipped prompts (no database) -------------------------------------------------------------


def test_every_case_has_one_prompt_in_catalog_order() -> None:
    assert list(PROMPTS) == [case["id"] for case in CASES]
    assert all(isinstance(prompt, str) and len(prompt.strip()) >= 100 for prompt in PROMPTS.values())
    assert not contains_secret(PROMPTS)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_a_prompt_asks_for_exactly_the_operations_its_case_requires(case: dict[str, Any]) -> None:
    prompt = PROMPTS[case["id"]]
    required = set(case["assertions"].get("requiredOperationIds", []))

    # Every required operation is named; no other operation that changes the board is.
    assert required <= named_operations(prompt)
    assert named_operations(prompt) & MUTATING == required


def test_the_final_response_prompt_asks_for_a_long_answer_and_one_finish() -> None:
    prompt = PROMPTS["final-response"]
    assert "at least 1200 characters" in prompt
    assert "finish_task exactly once" in prompt


def test_the_cancellation_prompt_forbids_every_task_tool_and_any_completion() -> None:
    prompt = PROMPTS["cancellation-permissions"]
    assert named_operations(prompt) == set()
    assert "not even a read-only one" in prompt
    assert "do not finish" in prompt


def test_the_verification_prompt_spells_out_the_not_run_caveat() -> None:
    assert '{"name": "integration-tests", "status": "not_run", "reason": "tool_unavailable"}' in PROMPTS["verification-policy"]


# --- loading and versioning ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_reference_load_stores_every_prompt(reference_catalog) -> None:
    stored = dict(WorkflowCase.objects.values_list("key", "prompt"))
    assert stored == PROMPTS
    assert set(WorkflowCase.objects.values_list("version", flat=True)) == {1}


@pytest.mark.django_db
def test_case_documents_stay_the_reference_shape(reference_catalog) -> None:
    """No ``prompt`` leaks into the reference case document: same keys in the same order, same
    values (PostgreSQL's jsonb may reorder keys inside steps and assertions, which JSON ignores)."""
    documents = [case.to_document() for case in WorkflowCase.objects.order_by("position")]

    assert [list(document) for document in documents] == [list(case) for case in CASES]
    assert documents == CASES


@pytest.mark.django_db
def test_loading_the_same_prompts_again_keeps_the_versions(reference_catalog) -> None:
    load_cases(CASES, prompts=PROMPTS)

    assert set(WorkflowCase.objects.values_list("version", flat=True)) == {1}


@pytest.mark.django_db
def test_a_changed_prompt_is_a_new_case_version_and_a_missing_one_is_kept(reference_catalog) -> None:
    load_cases(CASES, prompts={"trace-lineage": "Acknowledge the task, then call finish_task once."})

    changed = WorkflowCase.objects.get(key="trace-lineage")
    untouched = WorkflowCase.objects.get(key="final-response")
    assert (changed.version, changed.prompt) == (2, "Acknowledge the task, then call finish_task once.")
    assert (untouched.version, untouched.prompt) == (1, PROMPTS["final-response"])


@pytest.mark.django_db
def test_prompts_for_unknown_cases_roll_the_load_back(reference_catalog) -> None:
    with pytest.raises(ValidationError, match="Prompts given for unknown workflow cases: no-such-case"):
        load_cases(CASES, prompts={"trace-lineage": "changed", "no-such-case": "x"})

    assert WorkflowCase.objects.get(key="trace-lineage").prompt == PROMPTS["trace-lineage"]


@pytest.mark.django_db
def test_a_prompt_that_is_not_text_is_refused(reference_catalog) -> None:
    with pytest.raises(ValidationError, match="Prompts must be text; not for: trace-lineage"):
        load_cases(CASES, prompts={"trace-lineage": ["not", "text"]})


# --- the API ---------------------------------------------------------------------------------------


@pytest.fixture
def fast_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def patch(client: Any, url: str, body: dict[str, Any]) -> Any:
    return client.patch(url, json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_the_api_shows_the_prompt_and_a_change_bumps_the_version(fast_hashing, reference_catalog, staff_client) -> None:
    url = "/api/cases/trace-lineage/"
    assert staff_client.get(url).json()["prompt"] == PROMPTS["trace-lineage"]

    same = patch(staff_client, url, {"prompt": PROMPTS["trace-lineage"]})
    changed = patch(staff_client, url, {"prompt": "Say hello, then call finish_task once."})

    assert same.json()["version"] == 1
    assert (changed.json()["version"], changed.json()["prompt"]) == (2, "Say hello, then call finish_task once.")


@pytest.mark.django_db
def test_the_api_refuses_a_secret_in_a_prompt(fast_hashing, reference_catalog, staff_client) -> None:
    secret = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"

    response = patch(staff_client, "/api/cases/trace-lineage/", {"prompt": f"use the key {secret}"})

    assert response.status_code == 400
    assert secret not in response.content.decode()
    assert WorkflowCase.objects.get(key="trace-lineage").prompt == PROMPTS["trace-lineage"]


# --- the admin -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_editing_the_prompt_in_the_admin_bumps_the_version(fast_hashing, staff_client) -> None:
    case = make_case(prompt="First line.\nSecond line.")
    url = reverse("admin:schedules_workflowcase_change", args=[case.pk])

    data = admin_form_data(staff_client.get(url))
    data["prompt"] = "First line.\r\nSecond line.\r\n"  # what a browser posts for the same text
    assert staff_client.post(url, data).status_code == 302
    case.refresh_from_db()
    assert (case.version, case.prompt) == (1, "First line.\nSecond line.")

    data["prompt"] = "A different task."
    assert staff_client.post(url, data).status_code == 302
    case.refresh_from_db()
    assert (case.version, case.prompt) == (2, "A different task.")
