"""Runs and executions over the API: read-only history with counts, money, observations and attempts.

Runs are produced by the real orchestration (``runs.dispatch``, ``runs.execution``) with the replay executor at the
edge. Unknown prices read as ``costUsd: null, costKnown: false``, never $0 (docs/failure-modes.md B5);
list endpoints cost the same queries for one run as for many.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from rest_framework.renderers import JSONRenderer

from evalhub.jsnum import json_number
from runs.api import ObservationField
from runs.creation import create_run
from runs.dispatch import execute_run
from runs.executors import InfrastructureError
from runs.executors.replay import REPLAY_STORE
from runs.models import Execution, Run
from runs.nightly import start_nightly
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
DAY0 = "2026-08-19T04:00:00.000Z"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
ENVIRON = {"OPENAI_API_KEY": "x" * 20, "OPENROUTER_API_KEY": "y" * 20, "ANTHROPIC_API_KEY": "z" * 20}


@pytest.fixture
def schedule(reference_catalog):
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    return schedule


def manual_run(schedule, *, limit: int = 4, candidate: str = "codex-luna") -> Run:
    run, _ = create_run(
        schedule=schedule,
        cost_ceiling_usd=Decimal("12"),
        selection=Selection(candidate_ids=(candidate,), limit=limit),
    )
    return run


@pytest.fixture
def mixed_run(schedule, replay_executors) -> Run:
    """Four codex-luna executions: priced, unpriced, retried then completed, and an infrastructure failure."""
    run = manual_run(schedule)
    first, second, third, _fourth = run.executions.select_related("entry").order_by("position")
    REPLAY_STORE[first.execution_id] = completed_observation(first.entry.to_document(), cost_usd=0.25)
    REPLAY_STORE[second.execution_id] = completed_observation(second.entry.to_document(), cost_usd=None)
    REPLAY_STORE[third.execution_id] = [
        InfrastructureError("rate_limited", True, "slow down", cost_usd=0.05),
        completed_observation(third.entry.to_document(), cost_usd=0.1),
    ]
    execute_run(run, environ=ENVIRON)
    run.refresh_from_db()
    return run


# --- runs ---------------------------------------------------------------------------------------


def test_a_run_reads_with_counts_money_and_its_schedule(mixed_run, reader_client):
    body = reader_client.get(f"/api/runs/{mixed_run.pk}/").json()

    assert body["schedule"] == mixed_run.schedule_id
    assert body["night"] == "2026-08-19"
    assert body["seed"] == SEED and body["rotationDay"] == 0
    assert body["trigger"] == "manual" and body["status"] == "finished"
    assert body["selection"] == {"candidateIds": ["codex-luna"], "caseIds": [], "limit": 4}
    assert body["executions"] == 4
    assert body["counts"] == {
        "completed": 3,
        "candidate_failure": 0,
        "infrastructure_failure": 1,
        "skipped": 0,
        "pending": 0,
    }
    assert body["failureCodes"] == {"replay_missing": 1}
    # 0.25 + the unpriced one's reserve (codex-luna's maxCostUsd 1.5) + 0.05 for the failed try + 0.1.
    assert body["spentUsd"] == 1.9 == json_number(mixed_run.spent_usd)
    assert body["costCeilingUsd"] == 12
    assert body["hasUnpriced"] is True
    assert body["stoppedAtCeiling"] is False


def test_a_nightly_without_credentials_counts_every_execution_as_skipped(reference_catalog, reader_client):
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=NOW, environ={}, execute=True)

    body = reader_client.get("/api/runs/").json()

    [run] = body["results"]
    total = outcome.schedule.entries.count()
    assert run["id"] == outcome.run.pk
    assert run["trigger"] == "nightly" and run["selection"] is None
    assert run["counts"]["skipped"] == run["executions"] == total
    assert run["failureCodes"] == {"qualification_environment_missing": total}
    assert run["spentUsd"] == 0


def test_runs_list_newest_first_and_filter(schedule, reader_client):
    older, newer = manual_run(schedule, limit=1), manual_run(schedule, limit=2)

    assert [r["id"] for r in reader_client.get("/api/runs/").json()["results"]] == [newer.pk, older.pk]
    assert reader_client.get("/api/runs/", {"status": "finished"}).json()["count"] == 0
    assert reader_client.get("/api/runs/", {"status": "pending", "night": "2026-08-19"}).json()["count"] == 2
    assert reader_client.get("/api/runs/", {"schedule": schedule.pk + 1}).json()["count"] == 0


def test_a_pending_run_counts_its_executions_as_pending(schedule, reader_client):
    run = manual_run(schedule, limit=3)

    body = reader_client.get(f"/api/runs/{run.pk}/").json()

    assert body["counts"]["pending"] == 3
    assert body["failureCodes"] == {}
    assert body["startedAt"] is None


def test_an_unknown_run_status_filter_is_a_400(reader_client, db):
    response = reader_client.get("/api/runs/", {"status": "exploded"})

    assert response.status_code == 400
    assert response.json() == {"status": ["Select a valid choice. exploded is not one of the available choices."]}


# --- executions ---------------------------------------------------------------------------------


def test_executions_carry_observation_failure_cost_and_attempts(mixed_run, reader_client):
    body = reader_client.get("/api/executions/", {"run": mixed_run.pk}).json()

    priced, unpriced, retried, failed = body["results"]
    assert priced["classification"] == "completed" and priced["failure"] is None
    assert priced["costUsd"] == 0.25 and priced["costKnown"] is True
    assert priced["observation"]["metrics"]["costUsd"] == 0.25
    assert unpriced["costUsd"] is None and unpriced["costKnown"] is False
    assert unpriced["chargedUsd"] == 1.5
    assert [(a["number"], a["outcome"], a["errorCode"], a["retryable"]) for a in retried["attempts"]] == [
        (1, "infrastructure_error", "rate_limited", True),
        (2, "observation", "", None),
    ]
    assert retried["costUsd"] == pytest.approx(0.15)
    assert failed["classification"] == "infrastructure_failure"
    assert failed["failure"] == {
        "code": "replay_missing",
        "category": "provider",
        "retryable": False,
        "message": f"no stored observation for {failed['executionId']}",
    }
    assert failed["observation"]["failure"]["code"] == "replay_missing"


def test_an_execution_reads_by_id_with_its_entry_fields(mixed_run, reader_client):
    execution = mixed_run.executions.order_by("position").first()

    body = reader_client.get(f"/api/executions/{execution.pk}/").json()

    assert {k: body[k] for k in ("id", "run", "executionId", "position", "caseId", "candidateId", "slotId", "repetition")} == {
        "id": execution.pk,
        "run": mixed_run.pk,
        "executionId": execution.execution_id,
        "position": 0,
        "caseId": execution.case_key,
        "candidateId": "codex-luna",
        "slotId": "codex-strong",
        "repetition": execution.repetition,
    }


def test_a_pending_execution_has_no_classification_failure_or_cost(schedule, reader_client):
    run = manual_run(schedule, limit=1)

    [execution] = reader_client.get("/api/executions/", {"run": run.pk}).json()["results"]

    assert execution["status"] == "pending"
    assert execution["classification"] is None
    assert execution["failure"] is None
    assert execution["costUsd"] is None and execution["chargedUsd"] is None
    assert execution["observation"] is None and execution["attempts"] == []


def test_executions_filter_by_run_classification_candidate_and_case(mixed_run, schedule, reader_client):
    other = manual_run(schedule, limit=2, candidate="opencode-kimi")

    def ids(params: dict) -> list[str]:
        return [e["executionId"] for e in reader_client.get("/api/executions/", params).json()["results"]]

    all_of_run = ids({"run": mixed_run.pk})
    assert ids({"run": mixed_run.pk, "classification": "infrastructure_failure"}) == all_of_run[3:]
    assert len(ids({"candidate": "opencode-kimi"})) == 2
    assert ids({"candidate": "opencode-kimi"}) == ids({"run": other.pk})
    first_case = Execution.objects.get(run=mixed_run, position=0).case_key
    assert ids({"run": mixed_run.pk, "case": first_case}) == [
        e.execution_id for e in mixed_run.executions.filter(case_key=first_case).order_by("position")
    ]


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({"classification": "great"}, {"classification": ["Select a valid choice. great is not one of the available choices."]}),
        ({"run": "latest"}, {"run": ["Enter a whole number."]}),
    ],
)
def test_bad_execution_filters_are_400s(reader_client, db, params, errors):
    response = reader_client.get("/api/executions/", params)

    assert response.status_code == 400
    assert response.json() == errors


def test_a_non_finite_number_in_an_observation_reads_as_null():
    value = ObservationField().to_representation({"metrics": {"costUsd": float("nan"), "latency": [float("inf"), 1.5]}})

    assert value == {"metrics": {"costUsd": None, "latency": [None, 1.5]}}
    assert json.loads(JSONRenderer().render(value)) == value


# --- read-only and permissions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url"),
    [("post", "/api/runs/"), ("post", "/api/executions/"), ("patch", "/api/runs/{run}/"), ("delete", "/api/executions/{execution}/")],
)
def test_history_is_read_only_even_for_staff(mixed_run, staff_client, method, url):
    execution = mixed_run.executions.first()

    response = getattr(staff_client, method)(
        url.format(run=mixed_run.pk, execution=execution.pk), data="{}", content_type="application/json"
    )

    assert response.status_code == 405


@pytest.mark.parametrize("url", ["/api/runs/", "/api/executions/"])
def test_history_needs_a_signed_in_user(client, db, url):
    response = client.get(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


# --- query counts -------------------------------------------------------------------------------


@pytest.mark.parametrize("runs", [1, 6])
def test_run_and_execution_list_query_counts_do_not_grow(schedule, reader_client, django_assert_num_queries, runs):
    for _ in range(runs):
        run = manual_run(schedule, limit=5)
        execute_run(run, environ={})

    with django_assert_num_queries(5):  # session, user, count, page with counts, failure codes
        body = reader_client.get("/api/runs/").json()
    assert body["count"] == runs
    with django_assert_num_queries(5):  # session, user, count, page, attempts
        body = reader_client.get("/api/executions/").json()
    assert body["count"] == runs * 5
    execution = run.executions.first()
    with django_assert_num_queries(4):  # session, user, run with counts, failure codes
        assert reader_client.get(f"/api/runs/{run.pk}/").status_code == 200
    with django_assert_num_queries(4):  # session, user, execution, attempts
        assert reader_client.get(f"/api/executions/{execution.pk}/").status_code == 200


def test_deep_pages_read_their_ids_first_and_hold_the_same_rows(schedule, reader_client, monkeypatch, django_assert_num_queries):
    """Past ``IDS_FIRST_OFFSET`` rows a page reads its ids, then its rows: the same rows in the
    same order as one query would give, one query more, and page numbers (``last`` included) keep working."""
    from evalhub.api import pagination

    for _ in range(3):
        execute_run(manual_run(schedule, limit=5), environ={})
    whole = [row["id"] for row in reader_client.get("/api/executions/?page_size=200").json()["results"]]
    assert len(whole) == 15
    monkeypatch.setattr(pagination, "IDS_FIRST_OFFSET", 4)
    paged = []
    for page in range(1, 5):
        body = reader_client.get(f"/api/executions/?page_size=4&page={page}").json()
        paged.extend(row["id"] for row in body["results"])
    assert paged == whole
    assert [row["id"] for row in reader_client.get("/api/executions/?page_size=4&page=last").json()["results"]] == whole[12:]
    with django_assert_num_queries(6):  # session, user, count, the page's ids, the page, attempts
        reader_client.get("/api/executions/?page_size=4&page=2")
    runs = [row["id"] for row in reader_client.get("/api/runs/?page_size=1&page=3").json()["results"]]
    assert runs == [row["id"] for row in reader_client.get("/api/runs/").json()["results"]][2:3]
