"""Deep page numbers of the long lists (``/api/executions/``, ``/api/scorecards/``): a page past
``IDS_FIRST_OFFSET`` rows reads its ids first over the ordering's index, then its rows. Whatever the
depth, every page holds the rows, in the order, with the count and links that one query per page
gives; and the executions' ids come from ``execution_api_order_idx`` alone (on SQLite and
PostgreSQL alike)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.db.models import F, Max

from evalhub.api import pagination
from runs.api import EXECUTION_ORDER
from runs.models import Execution, Scorecard
from runs.nightly import start_nightly

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NIGHT = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
LISTS = ["/api/executions/", "/api/scorecards/"]


@pytest.fixture
def three_nights(reference_catalog) -> None:
    """Three nightly runs of 40 skipped executions (each with its scorecard); in the middle run the
    positions are turned around, so schedule order there is the opposite of id order."""
    for day in range(3):
        start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NIGHT + dt.timedelta(days=day), environ={}, execute=True)
    middle = sorted(set(Execution.objects.values_list("run_id", flat=True)))[1]
    last = Execution.objects.filter(run_id=middle).aggregate(last=Max("position"))["last"]
    Execution.objects.filter(run_id=middle).update(position=last - F("position"))


def walk(client: Any, url: str, size: int, **filters: Any) -> list[dict[str, Any]]:
    """Every page's body, page 1 on, following ``next``, and then ``page=last``."""
    bodies, link = [], f"{url}?{urlencode({**filters, 'page_size': size})}"
    while link is not None:
        response = client.get(link)
        assert response.status_code == 200, (link, response.content)
        bodies.append(response.json())
        link = bodies[-1]["next"]
    bodies.append(client.get(url, {**filters, "page_size": size, "page": "last"}).json())
    return bodies


def expected_ids(url: str) -> list[int]:
    """The list's order worked out in Python: newest run first, then schedule position, then id."""
    if url == "/api/executions/":
        rows = Execution.objects.values_list("run_id", "position", "id")
        return [pk for _, _, pk in sorted(rows, key=lambda row: (-row[0], row[1], row[2]))]
    rows = Scorecard.objects.values_list("execution__run_id", "execution__position", "id")
    return [pk for _, _, pk in sorted(rows, key=lambda row: (-row[0], row[1], row[2]))]


@pytest.mark.parametrize("url", LISTS)
def test_deep_pages_hold_the_rows_links_and_count_of_one_query_pages(reader_client, three_nights, monkeypatch, url: str) -> None:
    # Seven a page: pages start and end inside runs, and the middle run's order is not its ids'.
    monkeypatch.setattr(pagination, "IDS_FIRST_OFFSET", 10**9)
    one_query = walk(reader_client, url, 7)
    monkeypatch.setattr(pagination, "IDS_FIRST_OFFSET", 0)
    ids_first = walk(reader_client, url, 7)
    assert ids_first == one_query  # rows, fields, count, next and previous links, page by page
    ids = [row["id"] for body in one_query[:-1] for row in body["results"]]
    assert ids == expected_ids(url)
    assert one_query[0]["count"] == 120 and len(one_query) == 18 + 1
    assert one_query[-1] == one_query[-2]  # page=last is the last page


def test_a_deep_page_of_a_filtered_list_keeps_its_filter_and_order(reader_client, three_nights, monkeypatch) -> None:
    monkeypatch.setattr(pagination, "IDS_FIRST_OFFSET", 0)
    run = sorted(set(Execution.objects.values_list("run_id", flat=True)))[1]
    bodies = walk(reader_client, "/api/executions/", 6, run=run, classification="skipped")
    ids = [row["id"] for body in bodies[:-1] for row in body["results"]]
    assert ids == list(Execution.objects.filter(run_id=run).order_by("position").values_list("id", flat=True))
    assert ids != sorted(ids)  # the turned-around run: schedule order, not id order
    assert all(f"run={run}" in body["next"] for body in bodies[:-2])


def test_a_deep_page_reads_the_same_queries_whatever_its_depth(reader_client, three_nights, monkeypatch, django_assert_num_queries) -> None:
    monkeypatch.setattr(pagination, "IDS_FIRST_OFFSET", 0)
    for page in (1, 9, 17):
        with django_assert_num_queries(6):  # session, user, count, the page's ids, the page, attempts
            assert reader_client.get("/api/executions/", {"page": page, "page_size": 7}).status_code == 200


def test_a_deep_page_reads_its_execution_ids_from_the_ordering_index_alone(three_nights) -> None:
    """The ids query of a deep page walks ``execution_api_order_idx`` and never the rows (which
    carry the observations): without the index the database reads every row and sorts them."""
    ids = Execution.objects.order_by(*EXECUTION_ORDER).values_list("pk", flat=True)[100:107]
    sql, params = ids.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Three nights are a few pages: without this the planner may rightly prefer to sort, or
            # to walk another index that starts with the run and sort each run's rows (an
            # incremental sort: what CI's planner chose once with the table's statistics unset).
            cursor.execute("ANALYZE runs_execution")
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute("SET LOCAL enable_incremental_sort = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            # Whether PostgreSQL skips the heap is its visibility map's business (autovacuum sets
            # it; a test transaction cannot VACUUM): the index must give the order, so no sort.
            assert re.search(r"Index (Only )?Scan using execution_api_order_idx", plan), plan
            assert "Sort" not in plan, plan
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
            assert "USING COVERING INDEX execution_api_order_idx" in plan, plan
            assert "TEMP B-TREE" not in plan, plan
    assert list(ids) == expected_ids("/api/executions/")[100:107]
