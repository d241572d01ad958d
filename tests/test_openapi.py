"""The OpenAPI schema at ``/api/schema/`` generates cleanly and documents every endpoint; the
interactive docs at ``/api/docs/`` are served from the sidecar, never a CDN."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from runs.models import Alert
from runs.nightly import start_nightly

pytestmark = pytest.mark.django_db

ENDPOINTS = {
    "/api/slots/": {"get", "post"},
    "/api/slots/{id}/": {"get", "put", "patch", "delete"},
    "/api/candidates/": {"get", "post"},
    "/api/candidates/{id}/": {"get", "put", "patch", "delete"},
    "/api/budgets/": {"get", "post"},
    "/api/budgets/{name}/": {"get", "put", "patch", "delete"},
    "/api/cases/": {"get", "post"},
    "/api/cases/{id}/": {"get", "put", "patch", "delete"},
    "/api/chaos-scenarios/": {"get", "post"},
    "/api/chaos-scenarios/{id}/": {"get", "put", "patch", "delete"},
    "/api/schedules/": {"get"},
    "/api/schedules/{id}/": {"get"},
    "/api/schedules/preview/": {"get"},
    "/api/coverage/": {"get"},
    "/api/runs/": {"get"},
    "/api/runs/{id}/": {"get"},
    "/api/runs/{id}/refresh/": {"post"},
    "/api/runs/{id}/cancel/": {"post"},
    "/api/runs/{id}/rerun/": {"post"},
    "/api/executions/": {"get"},
    "/api/executions/{id}/": {"get"},
    "/api/executions/{id}/trace/": {"get"},
    "/api/scorecards/": {"get"},
    "/api/scorecards/{id}/": {"get"},
    "/api/reports/": {"get"},
    "/api/reports/{id}/": {"get"},
    "/api/reports/{id}/export/": {"get"},
    "/api/alerts/": {"get"},
    "/api/alerts/{id}/": {"get"},
    "/api/comparisons/": {"get"},
    "/api/score/": {"post"},
    "/api/tonight/": {"get"},
    "/api/leaderboard/": {"get"},
    "/api/signal/": {"get"},
}


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The schema as ``manage.py spectacular --validate --fail-on-warn`` writes it (it raises on any warning)."""
    path = Path(tmp_path_factory.mktemp("openapi")) / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(path))
    return yaml.safe_load(path.read_text())


def test_schema_generates_without_warnings_or_errors_and_lists_every_endpoint(schema):
    methods = {path: set(operations) - {"parameters"} for path, operations in schema["paths"].items()}

    assert methods == ENDPOINTS


def test_preview_documents_its_query_parameters(schema):
    parameters = {p["name"]: p for p in schema["paths"]["/api/schedules/preview/"]["get"]["parameters"]}

    assert set(parameters) == {"seed", "rotation_day", "generated_at", "candidate", "case", "limit"}
    assert parameters["candidate"]["schema"] == {"type": "array", "items": {"type": "string"}}
    assert parameters["limit"]["schema"]["type"] == "integer"
    responses = schema["paths"]["/api/schedules/preview/"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ScheduleDocument"}
    assert "400" in responses


def test_coverage_documents_the_four_invariants(schema):
    coverage = schema["components"]["schemas"]["Coverage"]["properties"]["coverage"]

    assert set(coverage["properties"]) == {
        "everySlotNightly",
        "everyConcreteCandidateInRotation",
        "everyWorkflowCoversEverySlot",
        "strongAndInexpensiveNightly",
    }


def test_candidate_schema_uses_reference_names_and_budget_by_name_for_writes(schema):
    components = schema["components"]["schemas"]
    read = components["Candidate"]["properties"]
    write = components["CandidateRequest"]["properties"]

    assert {"schema", "id", "slotId", "adapter", "provider", "model", "tier", "qualification", "budget", "budgetName"} <= set(read)
    assert "budget" not in write and "schema" not in write
    assert set(components["CandidateRequest"]["required"]) == {"id", "slotId", "adapter", "provider", "model", "tier", "budgetName"}
    assert components["Budget"]["properties"]["maxCostUsd"]["type"] == "number"


def test_list_endpoints_are_paginated_with_page_and_page_size(schema):
    parameters = {p["name"] for p in schema["paths"]["/api/executions/"]["get"]["parameters"]}

    assert {"page", "page_size", "run", "classification", "candidate", "case"} <= parameters
    assert "PaginatedExecutionList" in schema["components"]["schemas"]


def test_schema_endpoint_serves_openapi_json(reader_client):
    response = reader_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")


def test_interactive_docs_load_from_the_sidecar_not_a_cdn(reader_client):
    response = reader_client.get("/api/docs/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "drf_spectacular_sidecar/swagger-ui-dist" in html
    assert "cdn." not in html and "unpkg" not in html


def test_every_endpoint_renders_in_the_browsable_api_and_answers_options(reference_catalog, staff_client):
    outcome = start_nightly(
        seed="runner-live-seven-week-v1",
        cost_ceiling_usd=Decimal("12"),
        now=dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC),
        environ={},
        execute=True,
    )
    detail_ids = {
        "/api/slots/{id}/": "codex-strong",
        "/api/candidates/{id}/": "codex-luna",
        "/api/budgets/{name}/": "inexpensive",
        "/api/cases/{id}/": "final-response",
        "/api/chaos-scenarios/{id}/": "chaos-restart",
        "/api/schedules/{id}/": outcome.schedule.pk,
        "/api/runs/{id}/": outcome.run.pk,
        "/api/executions/{id}/": outcome.run.executions.first().pk,
        "/api/scorecards/{id}/": outcome.run.executions.first().scorecard.pk,
        "/api/reports/{id}/": outcome.run.report.pk,
        "/api/alerts/{id}/": Alert.objects.create(report=outcome.run.report, code="safety_failure", severity="critical", message="m").pk,
    }
    # Not browsable pages: POST-only endpoints, a file download and an endpoint that needs its parameters.
    not_browsable = {
        "/api/runs/{id}/refresh/",
        "/api/runs/{id}/cancel/",
        "/api/runs/{id}/rerun/",
        "/api/score/",
        "/api/reports/{id}/export/",
        "/api/executions/{id}/trace/",
        "/api/comparisons/",
    }
    for path in ["/api/", *(path for path in ENDPOINTS if path not in not_browsable)]:
        url = path.replace("{id}", str(detail_ids.get(path))).replace("{name}", str(detail_ids.get(path)))
        page = staff_client.get(url, HTTP_ACCEPT="text/html")
        options = staff_client.options(url)

        assert page.status_code == 200, url
        assert b"<html" in page.content
        assert options.status_code == 200, url


def test_report_export_documents_its_formats(schema):
    operation = schema["paths"]["/api/reports/{id}/export/"]["get"]
    (parameter,) = [p for p in operation["parameters"] if p["name"] == "format"]
    assert sorted(parameter["schema"]["enum"]) == ["github", "json", "junit", "markdown"]
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/markdown", "application/xml"}
    assert "400" in operation["responses"]


def test_score_documents_the_notes_beside_the_scorecards(schema):
    responses = schema["paths"]["/api/score/"]["post"]["responses"]
    components = schema["components"]["schemas"]
    array, noted = responses["200"]["content"]["application/json"]["schema"]["oneOf"]
    assert array["type"] == "array"
    assert noted["required"] == ["results", "notes"]
    assert noted["properties"]["notes"]["items"] == {"$ref": "#/components/schemas/ScoreNotes"}
    parameters = {parameter["name"]: parameter for parameter in schema["paths"]["/api/score/"]["post"]["parameters"]}
    assert parameters["notes"]["in"] == "query" and "bare array" in parameters["notes"]["description"]
    assert responses["400"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ScoreBadRequest"}
    assert {"$ref": "#/components/schemas/ScoreErrors"} in components["ScoreBadRequest"]["oneOf"]
    notes = components["ScoreErrors"]["properties"]["notes"]
    assert notes["type"] == "array" and notes["items"] == {"$ref": "#/components/schemas/ScoreNotes"}
    item = components["ScoreNotes"]["properties"]
    assert set(item) == {"index", "notes"} and "ignores" in item["notes"]["description"]
    assert "gate" in components["ScoreOptionsRequest"]["properties"]["weights"]["description"]


def test_the_docs_send_a_visitor_to_sign_in_and_the_api_root_points_at_them(reader_client):
    from django.test import Client

    for url in ("/api/docs/", "/api/redoc/"):
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"] == f"/accounts/login/?next={url}"
    root = reader_client.get("/api/", HTTP_ACCEPT="text/html").content.decode()
    assert "The default basic root view" not in root
    assert "Authorization: Token" in root
    # The description is printed as written (no Markdown renderer): no stray backticks in it.
    description = root[root.index('<div class="pull-left">') :]
    description = description[: description.index("</div>")]
    assert "manage.py api_token create USER" in description and "`" not in description
    body = reader_client.get("/api/").json()
    assert body["docs"].endswith("/api/docs/") and body["schema"].endswith("/api/schema/")
