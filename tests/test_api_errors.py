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


@pytest.mark.parametrize(
    "url",
    ["/api/tonight/", "/api/signal/", "/api/leaderboard/", "/api/coverage/", "/api/schedules/preview/", "/api/comparisons/"],
)
def test_the_browsable_apis_format_links_work_on_the_views_outside_the_router(reference_catalog, reader_client, url: str) -> None:
    # The browsable API's "GET ▾ json / api" menu links every page to ?format=json and ?format=api:
    # a view refusing ``format`` as an unknown parameter answered its own link with a 400.
    plain = reader_client.get(url, HTTP_ACCEPT="application/json")
    for fmt in ("json", "api"):
        response = reader_client.get(url, {"format": fmt})
        assert response.status_code == plain.status_code, response.content
        if response.status_code == 400 and fmt == "json":
            assert "format" not in response.json()
    assert "zzz" in reader_client.get(url, {"format": "json", "zzz": "1"}).json()


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/api/executions/?run=1&run=2", "run"),
        ("/api/runs/?schedule=1&schedule=1", "schedule"),
        ("/api/scorecards/?run=1&run=2&run=3", "run"),
        ("/api/schedules/?rotation_day=1&rotation_day=2", "rotation_day"),
        ("/api/reports/?refresh=true&refresh=false", "refresh"),
        ("/api/budgets/?page=1&page=2", "page"),
        ("/api/budgets/?page_size=5&page_size=10", "page_size"),
        ("/api/executions/?cursor=&cursor=", "cursor"),
        ("/api/slots/?format=json&format=json", "format"),
        ("/api/signal/?run=1&run=2", "run"),
        ("/api/schedules/preview/?seed=a&seed=b", "seed"),
    ],
)
def test_a_single_valued_parameter_given_twice_is_a_400_naming_it(reader_client, url: str, name: str) -> None:
    response = reader_client.get(url)
    assert response.status_code == 400, response.content
    count = url.count(f"{name}=")
    assert response.json() == {name: [f"Given {count} times: this parameter takes one value; give it once."]}


def test_the_preview_still_takes_repeated_candidates_and_cases(reference_catalog, reader_client) -> None:
    response = reader_client.get(
        "/api/schedules/preview/?rotation_day=0&generated_at=2026-08-20T00:00:00.000Z&candidate=codex-luna&candidate=opencode-kimi&case=a&case=b"
    )
    assert "Given 2 times" not in response.content.decode()
    response = reader_client.get(
        "/api/schedules/preview/?rotation_day=0&generated_at=2026-08-20T00:00:00.000Z&candidate=codex-luna&candidate=codex-luna"
    )
    assert response.status_code == 200, response.content
