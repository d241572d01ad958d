"""Errors at the API's edges stay JSON and never become a 500 (found by the bad-input review)."""

from __future__ import annotations

import logging

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "/api/runs/?schedule=99999999999999999999",
        "/api/executions/?run=99999999999999999999",
        "/api/executions/?run=1.5",
        "/api/executions/?run=-3",
        "/api/scorecards/?run=abc",
        "/api/schedules/?rotation_day=1e400",
        "/api/schedules/?rotation_day=7",
    ],
)
def test_an_out_of_range_or_malformed_id_filter_is_a_400_naming_the_filter(reader_client, url: str) -> None:
    response = reader_client.get(url)
    assert response.status_code == 400
    name = url.split("?")[1].split("=")[0]
    assert name in response.json()


def test_an_unknown_api_path_is_a_json_404(reader_client) -> None:
    response = reader_client.get("/api/runs/abc/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_a_body_over_the_upload_limit_is_a_json_400(staff_client) -> None:
    body = '{"name": "' + "x" * (3 * 1024 * 1024) + '"}'
    response = staff_client.post("/api/budgets/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "larger than the 2.5 MB limit" in response.json()["detail"]


def test_the_access_log_redacts_a_secret_typed_into_a_url() -> None:
    logger = logging.getLogger("django.server")
    handler = logger.handlers[0]
    secret = "sk-proj-" + "FAKEfake0123" * 3
    record = logger.makeRecord("django.server", logging.INFO, __file__, 1, '"GET /api/?q=%s HTTP/1.1" 200', (secret,), None)
    assert all(f.filter(record) for f in handler.filters)
    assert secret not in record.getMessage()


@pytest.mark.parametrize("value", ["yes", "1", "42299637542813373139255296", "null"])
def test_a_boolean_filter_that_is_not_true_or_false_is_a_400(reader_client, value: str) -> None:
    response = reader_client.get(f"/api/reports/?refresh={value}")
    assert response.status_code == 400
    assert response.json() == {"refresh": ["Give true or false."]}


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/slots/", "/api/budgets/", "/api/cases/", "/api/chaos-scenarios/", "/api/slots/codex-strong/"])
def test_an_unknown_query_parameter_is_a_400_on_every_list_and_detail(reference_catalog, reader_client, url: str) -> None:
    response = reader_client.get(url, {"zzz": "1"})
    assert response.status_code == 400, response.content
    assert response.json()["zzz"][0].startswith("Unknown query parameter. Accepted: format")
    assert reader_client.get(url, {"format": "json"}).status_code == 200
