"""Keyset (cursor) pages of the long lists, ``/api/executions/`` and ``/api/scorecards/``: the same
rows in the same order as page numbers, forward and back, at a cost that does not grow with the
depth; page numbers unchanged; a cursor not of the links' form is a 400 that says so."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from evalhub.api.pagination import KeysetPagination
from runs.models import Execution, Scorecard
from runs.nightly import start_nightly

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
LISTS = ["/api/executions/", "/api/scorecards/"]


@pytest.fixture
def three_nights(reference_catalog) -> None:
    """Three nightly runs of 40 skipped executions each (every one with its scorecard)."""
    for day in range(3):
        start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NIGHT + dt.timedelta(days=day), environ={}, execute=True)


def ids_by_page_numbers(client: Any, url: str, size: int) -> list[int]:
    ids, page = [], 1
    while True:
        body = client.get(url, {"page": page, "page_size": size}).json()
        ids += [row["id"] for row in body["results"]]
        if body["next"] is None:
            return ids
        page += 1


def cursor_of(link: str) -> str:
    return parse_qs(urlsplit(link).query)["cursor"][0]


@pytest.mark.parametrize("url", LISTS)
def test_cursor_pages_walk_the_same_rows_as_page_numbers_forward_and_back(reader_client, three_nights, url: str) -> None:
    # Seven a page: pages start and end inside a run (40 executions), where a first-column
    # cursor would skip or repeat rows when turning back.
    expected = ids_by_page_numbers(reader_client, url, 7)
    assert len(expected) == 120 == len(set(expected))
    pages: list[list[int]] = []
    body = reader_client.get(url, {"cursor": "", "page_size": 7}).json()
    assert "count" not in body and body["previous"] is None
    while True:
        pages.append([row["id"] for row in body["results"]])
        if body["next"] is None:
            break
        body = reader_client.get(url, {"cursor": cursor_of(body["next"]), "page_size": 7}).json()
    assert [pk for page in pages for pk in page] == expected
    # Back from the last page by the previous links: the same pages, newest last.
    back = []
    while body["previous"] is not None:
        body = reader_client.get(url, {"cursor": cursor_of(body["previous"]), "page_size": 7}).json()
        back.append([row["id"] for row in body["results"]])
    assert back == pages[-2::-1]


def test_a_cursor_page_keeps_the_filters_and_page_size_in_its_links(reader_client, three_nights) -> None:
    run = Execution.objects.order_by("run_id").values_list("run_id", flat=True).first()
    body = reader_client.get("/api/executions/", {"cursor": "", "run": run, "page_size": 15}).json()
    assert len(body["results"]) == 15 and {row["run"] for row in body["results"]} == {run}
    query = parse_qs(urlsplit(body["next"]).query)
    assert query["run"] == [str(run)] and query["page_size"] == ["15"]
    rest = reader_client.get(body["next"]).json()
    assert {row["run"] for row in rest["results"]} == {run}


@pytest.mark.parametrize("url", LISTS)
def test_a_deep_cursor_page_costs_the_queries_of_the_first(reader_client, three_nights, url: str, django_assert_num_queries) -> None:
    first = reader_client.get(url, {"cursor": ""}).json()
    second = reader_client.get(url, {"cursor": cursor_of(first["next"])}).json()
    queries = 4 if url == "/api/executions/" else 3  # session, user, the page (and its attempts)
    with django_assert_num_queries(queries):
        reader_client.get(url, {"cursor": ""})
    with django_assert_num_queries(queries):
        reader_client.get(url, {"cursor": cursor_of(second["next"])})


@pytest.mark.parametrize("url", LISTS)
def test_page_numbers_keep_working_beside_cursors(reader_client, three_nights, url: str) -> None:
    body = reader_client.get(url, {"page": 2}).json()
    assert body["count"] == 120 and len(body["results"]) == 50
    assert "page=3" in body["next"] and "cursor" not in body["next"]


BAD_CURSORS = [
    "not a cursor",
    "after-abc",
    "after-1.2",  # too few columns
    "after-1.2.3.4",  # too many
    "after--1.2.3",
    "after-1.2.99999999999999999999999",  # past any id
    "sideways-1.2.3",
    "1.2.3",
    "after-1.2.3 ",
    "after-\u0661.2.3",  # an Arabic-Indic digit
    "\u00e9",
]


def test_a_cursor_not_of_the_links_form_is_a_400_that_says_so(reader_client, three_nights) -> None:
    for url in LISTS:
        for cursor in BAD_CURSORS:
            response = reader_client.get(url, {"cursor": cursor})
            assert response.status_code == 400, (url, cursor, response.content)
            assert response.json() == {"cursor": [KeysetPagination.invalid_cursor_message]}


def test_page_and_cursor_together_are_a_400(reader_client, three_nights) -> None:
    response = reader_client.get("/api/executions/", {"cursor": "", "page": 2})
    assert response.status_code == 400
    assert response.json() == {"cursor": ["Give page or cursor, not both."]}


def test_a_cursor_past_the_end_is_an_empty_page_not_an_error(reader_client, three_nights) -> None:
    oldest = Scorecard.objects.select_related("execution").order_by("execution__run_id", "-execution__position", "-id").first()
    cursor = f"after-{oldest.execution.run_id}.{oldest.execution.position}.{oldest.pk}"
    body = reader_client.get("/api/scorecards/", {"cursor": cursor}).json()
    assert body["results"] == [] and body["next"] is None and body["previous"] is not None


def test_the_schema_documents_the_cursor_and_a_count_only_page_numbers_give(reader_client) -> None:
    schema = reader_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    for path in LISTS:
        parameters = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
        assert {"page", "page_size", "cursor"} <= set(parameters)
        assert "first page" in parameters["cursor"]["description"]
        pattern = re.compile(parameters["cursor"]["schema"]["pattern"])
        assert pattern.fullmatch("") and pattern.fullmatch("after-12.3.456") and pattern.fullmatch("before-1.0.7")
        assert not any(pattern.fullmatch(cursor) for cursor in BAD_CURSORS)
    listed = schema["components"]["schemas"]["PaginatedExecutionList"]
    assert listed["required"] == ["next", "previous", "results"] and "count" in listed["properties"]
    runs = {p["name"] for p in schema["paths"]["/api/runs/"]["get"]["parameters"]}
    assert "cursor" not in runs
