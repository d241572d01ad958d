"""The catalog API: slots, candidates, budgets, workflow cases and chaos scenarios.

Reading needs a signed-in user, writing a staff user (session or token); rows are addressed by
their natural id; reads use the reference document names; pages are stable and bounded
(docs/failure-modes.md B11); list endpoints cost the same queries for one row as for many.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from candidates.models import Budget, Candidate, Slot
from candidates.services import export_manifest
from schedules.models import ChaosScenario, WorkflowCase
from tests.builders import make_budget, make_candidate, make_case, make_slot

pytestmark = pytest.mark.django_db


def send(client: Client, method: str, url: str, body: Any = None, **extra: Any):
    """A JSON request; ``body`` may be a ready string (to send raw, malformed or huge-number JSON)."""
    data = body if isinstance(body, str) else json.dumps(body)
    return getattr(client, method)(url, data=data, content_type="application/json", **extra)


def new_candidate(**overrides: Any) -> dict[str, Any]:
    body = {
        "id": "codex-nova",
        "slotId": "codex-strong",
        "adapter": "codex_app_server",
        "provider": "codex",
        "model": "gpt-5.6-nova",
        "tier": "strong",
        "reasoningEffort": "high",
        "qualification": {"requiredEnvironment": ["OPENAI_API_KEY"]},
        "budgetName": "strong-premium",
    }
    body.update(overrides)
    return body


@pytest.fixture
def token_header(django_user_model):
    def make(*, staff: bool) -> dict[str, str]:
        user = django_user_model.objects.create_user(f"token-{'staff' if staff else 'reader'}", is_staff=staff)
        return {"HTTP_AUTHORIZATION": f"Token {AuthToken.objects.create(user=user)[1]}"}

    return make


# --- reading ------------------------------------------------------------------------------------


def test_candidate_reads_as_the_reference_document_plus_position_and_budget_name(reference_catalog, reader_client):
    response = reader_client.get("/api/candidates/codex-luna/")

    assert response.status_code == 200
    manifest_document = export_manifest()["slots"][0]["candidates"][0]
    assert response.json() == {**manifest_document, "position": 0, "budgetName": "strong-premium"}
    assert list(response.json())[:10] == list(manifest_document)


def test_candidate_list_is_the_manifest_in_line_up_order(reference_catalog, reader_client):
    response = reader_client.get("/api/candidates/")

    body = response.json()
    expected = [candidate for slot in export_manifest()["slots"] for candidate in slot["candidates"]]
    assert body["count"] == 7
    assert [{k: v for k, v in c.items() if k not in ("position", "budgetName")} for c in body["results"]] == expected


def test_blank_optional_candidate_fields_are_omitted_like_the_reference(reader_client, db):
    make_candidate(key="plain", reasoning_effort="", profile="")

    body = reader_client.get("/api/candidates/plain/").json()

    assert "reasoningEffort" not in body
    assert body["qualification"] == {"requiredEnvironment": ["OPENAI_API_KEY"]}


def test_candidates_filter_by_slot_tier_and_budget(reference_catalog, reader_client):
    by_slot = reader_client.get("/api/candidates/?slot=opencode-strong").json()
    by_tier = reader_client.get("/api/candidates/?tier=inexpensive").json()
    by_budget = reader_client.get("/api/candidates/?budget=strong-premium").json()

    assert [c["id"] for c in by_slot["results"]] == ["opencode-kimi", "opencode-glm"]
    assert {c["tier"] for c in by_tier["results"]} == {"inexpensive"} and by_tier["count"] >= 1
    assert {c["budgetName"] for c in by_budget["results"]} == {"strong-premium"}


def test_unknown_filter_choice_is_a_400_naming_the_filter(reference_catalog, reader_client):
    response = reader_client.get("/api/candidates/?tier=premium")

    assert response.status_code == 400
    assert list(response.json()) == ["tier"]


def test_slots_list_their_candidate_ids_in_rotation_order(reference_catalog, reader_client):
    body = reader_client.get("/api/slots/").json()

    assert [(s["id"], s["position"]) for s in body["results"]] == [
        (slot["id"], index) for index, slot in enumerate(export_manifest()["slots"])
    ]
    assert body["results"][1] == {"id": "opencode-strong", "position": 1, "candidates": ["opencode-kimi", "opencode-glm"]}


def test_budget_reads_with_cost_as_a_json_number(reference_catalog, reader_client):
    response = reader_client.get("/api/budgets/strong-premium/")

    assert response.json() == {
        "name": "strong-premium",
        "maxLatencyMs": 180000,
        "maxAttempts": 3,
        "maxCostUsd": 1.5,
        "maxTotalTokens": 100000,
    }
    assert b'"maxCostUsd":1.5' in response.content


def test_case_reads_as_the_catalog_document_plus_prompt_position_and_version(reference_catalog, reader_client):
    case = WorkflowCase.objects.get(key="final-response")

    body = reader_client.get("/api/cases/final-response/").json()

    assert case.prompt.startswith("Ask task:")
    assert body == {**case.to_document(), "prompt": case.prompt, "position": 0, "version": 1}


def test_chaos_scenario_reads_with_reference_names(reference_catalog, reader_client):
    body = reader_client.get("/api/chaos-scenarios/chaos-restart/").json()

    assert body == {
        "id": "chaos-restart",
        "lane": "chaos",
        "fault": "restart",
        "expectedInvariant": "one resumable execution owns finalization",
        "position": 0,
    }
    assert reader_client.get("/api/chaos-scenarios/?fault=wake_race").json()["count"] == 1


def test_an_unknown_natural_id_is_a_json_404(reference_catalog, reader_client):
    response = reader_client.get("/api/slots/no-such-slot/")

    assert response.status_code == 404
    assert response.json() == {"detail": "No Slot matches the given query."}


def test_ids_with_dots_are_addressable(reader_client, db):
    make_candidate(key="gpt-5.6")

    assert reader_client.get("/api/candidates/gpt-5.6/").json()["id"] == "gpt-5.6"


# --- permissions --------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/api/slots/", "/api/candidates/", "/api/budgets/", "/api/cases/", "/api/chaos-scenarios/"])
def test_anonymous_clients_cannot_read(client, url, db):
    response = client.get(url)

    assert response.status_code in (401, 403)
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_a_signed_in_reader_cannot_write(reference_catalog, reader_client):
    response = send(reader_client, "post", "/api/candidates/", new_candidate())

    assert response.status_code == 403
    assert response.json() == {"detail": "Sign in to read; writing needs a staff account."}
    assert not Candidate.objects.filter(key="codex-nova").exists()


def test_a_staff_token_can_write_and_a_reader_token_cannot(reference_catalog, client, token_header):
    refused = send(client, "post", "/api/candidates/", new_candidate(), **token_header(staff=False))
    accepted = send(client, "post", "/api/candidates/", new_candidate(), **token_header(staff=True))

    assert refused.status_code == 403
    assert accepted.status_code == 201
    assert Candidate.objects.filter(key="codex-nova").exists()


def test_a_reader_token_can_read(reference_catalog, client, token_header):
    response = client.get("/api/slots/", **token_header(staff=False))

    assert response.status_code == 200


def test_a_bad_token_is_refused(client, db):
    response = client.get("/api/slots/", HTTP_AUTHORIZATION="Token not-a-token")

    # 401 with the token challenge: token authentication comes first (evalhub/settings.py).
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Invalid token."}


# --- writing ------------------------------------------------------------------------------------


def test_staff_creates_a_candidate_that_goes_last_in_its_slot(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", new_candidate())

    assert response.status_code == 201, response.json()
    candidate = Candidate.objects.get(key="codex-nova")
    assert candidate.slot.key == "codex-strong"
    assert candidate.position == 1
    assert candidate.budget.name == "strong-premium"
    assert response.json()["budget"] == Budget.objects.get(name="strong-premium").to_document()
    assert response.json()["position"] == 1


def test_candidate_model_is_stored_trimmed(reference_catalog, staff_client):
    response = send(staff_client, "post", "/api/candidates/", new_candidate(model="  gpt-5.6-nova  "))

    assert response.status_code == 201
    assert Candidate.objects.get(key="codex-nova").model == "gpt-5.6-nova"


def test_staff_patches_a_candidate_budget_by_name(reference_catalog, staff_client):
    response = send(staff_client, "patch", "/api/candidates/codex-luna/", {"budgetName": "inexpensive"})

    assert response.status_code == 200
    assert response.json()["budget"]["maxCostUsd"] == 0.2
    assert Candidate.objects.get(key="codex-luna").budget.name == "inexpensive"


def test_a_candidate_read_can_be_sent_back_unchanged(reference_catalog, staff_client):
    document = staff_client.get("/api/candidates/opencode-kimi/").json()

    response = send(staff_client, "put", "/api/candidates/opencode-kimi/", document)

    assert response.status_code == 200, response.json()
    assert response.json() == document


def test_staff_moves_a_candidate_to_another_slot(reference_catalog, staff_client):
    response = send(staff_client, "patch", "/api/candidates/opencode-glm/", {"slotId": "codex-strong", "position": 5})

    assert response.status_code == 200
    assert response.json()["slotId"] == "codex-strong"
    assert staff_client.get("/api/slots/codex-strong/").json()["candidates"] == ["codex-luna", "opencode-glm"]


def test_staff_creates_and_deletes_a_slot(reference_catalog, staff_client):
    created = send(staff_client, "post", "/api/slots/", {"id": "extra-slot"})

    assert created.status_code == 201
    assert created.json() == {"id": "extra-slot", "position": 5, "candidates": []}
    assert staff_client.delete("/api/slots/extra-slot/").status_code == 204
    assert not Slot.objects.filter(key="extra-slot").exists()


def test_staff_creates_and_updates_a_budget(staff_client, db):
    body = {"name": "tiny", "maxLatencyMs": 1000, "maxAttempts": 1, "maxCostUsd": 0.05, "maxTotalTokens": 2000}

    created = send(staff_client, "post", "/api/budgets/", body)
    updated = send(staff_client, "patch", "/api/budgets/tiny/", {"maxCostUsd": 2})

    assert created.status_code == 201 and created.json() == body
    assert updated.json()["maxCostUsd"] == 2
    assert Budget.objects.get(name="tiny").max_cost_usd == Decimal("2")


def test_deleting_a_budget_in_use_is_a_409_naming_the_candidates(reference_catalog, staff_client):
    response = staff_client.delete("/api/budgets/inexpensive/")

    assert response.status_code == 409
    users = sorted(c.key for c in Candidate.objects.filter(budget__name="inexpensive"))
    assert response.json() == {
        "detail": f"Cannot delete: still used by {', '.join('candidate ' + key for key in users)}. Move or delete those first."
    }
    assert Budget.objects.filter(name="inexpensive").exists()


def test_staff_creates_a_case_at_the_end_of_the_catalog(reference_catalog, staff_client):
    body = {
        "id": "new-case",
        "title": "A new case",
        "providers": ["codex"],
        "steps": [{"kind": "run_start", "taskMode": "ask"}],
    }

    response = send(staff_client, "post", "/api/cases/", body)

    assert response.status_code == 201, response.json()
    assert response.json() == {
        **body,
        "tags": [],
        "repetitions": 1,
        "assertions": {},
        "prompt": "",
        "position": 12,
        "version": 1,
    }


def test_changing_case_steps_bumps_its_version_and_a_title_change_does_not(reference_catalog, staff_client):
    retitled = send(staff_client, "patch", "/api/cases/final-response/", {"title": "Renamed"})
    restepped = send(staff_client, "patch", "/api/cases/final-response/", {"steps": [{"kind": "run_start", "taskMode": "plan"}]})

    assert retitled.json()["version"] == 1
    assert restepped.json()["version"] == 2
    assert WorkflowCase.objects.get(key="final-response").version == 2


def test_staff_creates_a_chaos_scenario_in_the_chaos_lane_by_default(reference_catalog, staff_client):
    response = send(
        staff_client,
        "post",
        "/api/chaos-scenarios/",
        {"id": "chaos-extra", "fault": "restart", "expectedInvariant": "nothing is lost"},
    )

    assert response.status_code == 201
    assert response.json() == {
        "id": "chaos-extra",
        "lane": "chaos",
        "fault": "restart",
        "expectedInvariant": "nothing is lost",
        "position": 8,
    }
    assert ChaosScenario.objects.get(key="chaos-extra").position == 8


# --- pagination (docs/failure-modes.md B11) -------------------------------------------------------


@pytest.fixture
def many_budgets(db) -> list[str]:
    names = [f"budget-{index:03d}" for index in range(230)]
    Budget.objects.bulk_create(
        Budget(name=name, max_latency_ms=1, max_attempts=1, max_cost_usd=Decimal("1"), max_total_tokens=1) for name in names
    )
    return names


@pytest.mark.parametrize(("page_size", "expected"), [("10", 10), ("100000000", 200), (None, 50), ("0010", 10)])
def test_page_size_is_clamped_and_left_out_is_the_default(many_budgets, reader_client, page_size, expected):
    response = reader_client.get("/api/budgets/" + (f"?page_size={page_size}" if page_size is not None else ""))

    assert response.status_code == 200
    assert len(response.json()["results"]) == expected
    assert response.json()["count"] == 230


@pytest.mark.parametrize("page_size", ["", "-1", "0", "abc", "1e3", "null", "2.5", "9" * 4301, str(2**63)])
def test_a_page_size_that_is_not_a_whole_number_from_1_is_a_400(many_budgets, reader_client, page_size):
    response = reader_client.get(f"/api/budgets/?page_size={page_size}")

    assert response.status_code == 400
    assert response.json() == {"page_size": [f"Give a page size: a whole number from 1 to {2**63 - 1} (at most 200 rows are returned)."]}


@pytest.mark.parametrize("url", ["/api/budgets/", "/api/executions/", "/api/scorecards/", "/api/runs/"])
def test_a_blank_page_is_a_400_not_page_1(many_budgets, reader_client, url):
    response = reader_client.get(f"{url}?page=")

    assert response.status_code == 400
    assert response.json() == {"page": ["Give a page number from 1 (or last), or leave the parameter out."]}


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        ("0", "That page number is less than 1"),
        ("-1", "That page number is less than 1"),
        ("99999999", "That page contains no results"),
        ("1e3", "That page number is not an integer"),
        ("abc", "That page number is not an integer"),
    ],
)
def test_an_invalid_page_is_a_json_404_saying_why(many_budgets, reader_client, page, reason):
    response = reader_client.get(f"/api/budgets/?page={page}")

    assert response.status_code == 404
    assert response.json() == {"detail": f"Invalid page: {reason}."}


def test_page_last_is_the_last_page(many_budgets, reader_client):
    response = reader_client.get("/api/budgets/?page=last&page_size=100")

    assert response.status_code == 200
    assert [b["name"] for b in response.json()["results"]] == many_budgets[200:]


def test_pages_neither_repeat_nor_skip_rows(many_budgets, reader_client):
    seen: list[str] = []
    url: str | None = "/api/budgets/?page_size=70"
    while url:
        body = reader_client.get(url).json()
        seen.extend(budget["name"] for budget in body["results"])
        url = body["next"]

    assert seen == many_budgets


def test_candidates_with_equal_positions_page_in_a_stable_order(reader_client, db):
    budget = make_budget()
    slots = [make_slot(key=f"slot-{index}", position=index) for index in range(3)]
    for index in range(12):
        make_candidate(key=f"c-{index:02d}", slot=slots[index % 3], budget=budget, position=index // 3)

    first = [c["id"] for page in (1, 2, 3) for c in reader_client.get(f"/api/candidates/?page_size=5&page={page}").json()["results"]]

    assert first == [f"c-{index:02d}" for slot in range(3) for index in range(slot, 12, 3)]


# --- query counts -------------------------------------------------------------------------------

# Session and user lookups (2) + count + page (+ one prefetch for slots' candidate ids).
LIST_QUERIES = {
    "/api/slots/": 5,
    "/api/candidates/": 4,
    "/api/budgets/": 4,
    "/api/cases/": 4,
    "/api/chaos-scenarios/": 4,
}


def grow_catalog(rows: int) -> None:
    for index in range(rows):
        slot = make_slot(key=f"grow-slot-{index}", position=100 + index)
        make_candidate(key=f"grow-{index}", slot=slot)
        make_case(key=f"grow-case-{index}", position=100 + index)
        ChaosScenario.objects.create(key=f"grow-chaos-{index}", fault="restart", expected_invariant="x", position=100 + index)


@pytest.mark.parametrize("url", list(LIST_QUERIES))
@pytest.mark.parametrize("rows", [1, 25])
def test_catalog_list_query_count_does_not_grow_with_rows(reader_client, django_assert_num_queries, url, rows):
    grow_catalog(rows)

    with django_assert_num_queries(LIST_QUERIES[url]):
        response = reader_client.get(url)

    assert response.status_code == 200
    assert response.json()["count"] >= rows
