"""Schedules over the API: saved schedules (history), the unsaved preview, and weekly coverage.

The preview reproduces the reference's golden schedules exactly (same keys, same order); its
parameters are validated with the schedule core's own messages.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from candidates.models import Candidate, Slot
from schedules.building import DEFAULT_SEED, rotation_day
from schedules.coverage import COVERAGE_INVARIANTS
from schedules.models import Schedule
from schedules.services import catalog_coverage_matrix, schedule_for_night
from tests.reference import golden_vectors

pytestmark = pytest.mark.django_db

GOLDEN = golden_vectors()
NOW = dt.datetime(2026, 8, 24, 4, 0, tzinfo=dt.UTC)
DAY0 = {"seed": DEFAULT_SEED, "rotation_day": "0", "generated_at": "2026-08-24T00:00:00.000Z"}


def save_night(day: int, *, seed: str = DEFAULT_SEED) -> Schedule:
    schedule, _ = schedule_for_night(seed=seed, now=NOW, generated_at=f"2026-08-{24 + day:02d}T04:00:00.000Z")
    return schedule


# --- preview ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vector",
    GOLDEN["schedules"],
    ids=[f"{v['input']['seed']}-day{v['input']['rotationDay']}" for v in GOLDEN["schedules"]],
)
def test_preview_reproduces_the_reference_schedule_exactly(reference_catalog, reader_client, vector):
    given = vector["input"]

    response = reader_client.get(
        "/api/schedules/preview/",
        {"seed": given["seed"], "rotation_day": given["rotationDay"], "generated_at": given["generatedAt"]},
    )

    assert response.status_code == 200
    assert json.dumps(response.json()) == json.dumps(vector["output"])


def test_preview_saves_nothing(reference_catalog, reader_client):
    reader_client.get("/api/schedules/preview/", DAY0)

    assert not Schedule.objects.exists()


def test_preview_seed_defaults_to_the_configured_seed(reference_catalog, reader_client, settings):
    settings.EVALHUB = {**settings.EVALHUB, "SCHEDULE_SEED": "nightly-v1"}
    expected = next(v["output"] for v in GOLDEN["schedules"] if v["input"]["seed"] == "nightly-v1")

    response = reader_client.get("/api/schedules/preview/", {"rotation_day": 0, "generated_at": "2026-08-24T00:00:00.000Z"})

    assert response.json() == expected


@pytest.mark.parametrize("timestamp", list(GOLDEN["rotation_week"]))
def test_preview_derives_the_rotation_day_from_generated_at(reference_catalog, reader_client, timestamp):
    response = reader_client.get("/api/schedules/preview/", {"generated_at": timestamp})

    assert response.json()["rotationDay"] == GOLDEN["rotation_week"][timestamp]
    assert response.json()["generatedAt"] == timestamp


def test_preview_without_parameters_is_tonight(reference_catalog, reader_client):
    body = reader_client.get("/api/schedules/preview/").json()

    assert body["seed"] == DEFAULT_SEED
    assert body["rotationDay"] == rotation_day(body["generatedAt"])
    assert body["generatedAt"].endswith("Z")


def test_preview_selects_a_candidate_with_a_limit(reference_catalog, reader_client):
    body = reader_client.get("/api/schedules/preview/", {**DAY0, "candidate": "codex-luna", "limit": "2"}).json()

    assert [entry["executionId"] for entry in body["entries"]] == ["rwe-453d278ebeaabe66", "rwe-f90426516d8ad456"]
    assert [candidate["id"] for candidate in body["candidates"]] == ["codex-luna"]
    assert body["expectedExecutions"] == 2


def test_preview_ids_may_be_repeated_or_comma_separated(reference_catalog, reader_client):
    repeated = reader_client.get("/api/schedules/preview/?rotation_day=0&case=final-response&case=trace-lineage").json()
    listed = reader_client.get("/api/schedules/preview/?rotation_day=0&case=final-response,%20trace-lineage").json()

    assert repeated["entries"] == listed["entries"]
    assert {entry["caseId"] for entry in listed["entries"]} == {"final-response", "trace-lineage"}


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        ({"rotation_day": "7"}, {"rotation_day": ["rotation day must be a whole number from 0 to 6, not '7'"]}),
        ({"rotation_day": "-1"}, {"rotation_day": ["rotation day must be a whole number from 0 to 6, not '-1'"]}),
        ({"rotation_day": "one"}, {"rotation_day": ["rotation day must be a whole number from 0 to 6, not 'one'"]}),
        (
            {"generated_at": "2026-08-24T00:00:00"},
            {"generated_at": ["generated_at '2026-08-24T00:00:00' needs a UTC offset such as Z or +02:00"]},
        ),
        (
            {"generated_at": "yesterday"},
            {
                "generated_at": [
                    "generated_at 'yesterday' is not an ISO 8601 timestamp such as 2026-08-24T00:00:00Z, "
                    "2026-08-24T02:00:00+02:00 or 2026-08-24"
                ]
            },
        ),
        ({"limit": "0"}, {"limit": ["limit must be a positive whole number, such as 10."]}),
        ({"limit": "-3"}, {"limit": ["limit must be a positive whole number, such as 10."]}),
        ({"limit": "2.5"}, {"limit": ["limit must be a positive whole number, such as 10."]}),
        (
            {"candidates": "codex-luna"},
            {"candidates": ["Unknown query parameter. Accepted: seed, rotation_day, generated_at, candidate, case, limit."]},
        ),
    ],
)
def test_bad_preview_parameters_are_field_errors(reference_catalog, reader_client, params, errors):
    response = reader_client.get("/api/schedules/preview/", params)

    assert response.status_code == 400
    assert response.json() == errors


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        (
            {"candidate": "opencode-glm"},
            "candidate opencode-glm does not play on rotation day 0: its slot plays another of its candidates this week "
            "(the line-up: codex-luna, opencode-kimi, opencode-gpt-oss, acpx-claude-sonnet, acpx-codex-sol); "
            "it plays on rotation days 1, 3, 5: select one of this week's, or preview or run one of those days",
        ),
        ({"case": "no-such-case"}, "unknown Runner live eval case: no-such-case"),
        ({"seed": "x" * 201}, "schedule seed must be at most 200 characters, not 201"),
    ],
)
def test_a_selection_the_schedule_cannot_serve_is_a_400_detail(reference_catalog, reader_client, params, detail):
    response = reader_client.get("/api/schedules/preview/", {"rotation_day": "0", **params})

    assert response.status_code == 400
    assert response.json() == {"detail": detail}


def test_preview_of_an_empty_catalog_says_what_is_missing(reader_client, db):
    response = reader_client.get("/api/schedules/preview/")

    assert response.status_code == 400
    assert response.json() == {"detail": "a schedule needs at least one workflow case"}


def test_preview_needs_a_signed_in_user(reference_catalog, client):
    assert client.get("/api/schedules/preview/").status_code == 401


def test_preview_query_count_does_not_depend_on_the_selection(reference_catalog, reader_client, django_assert_num_queries):
    # Session, user, slots, their candidates, cases.
    with django_assert_num_queries(5):
        reader_client.get("/api/schedules/preview/", DAY0)
    with django_assert_num_queries(5):
        reader_client.get("/api/schedules/preview/", {**DAY0, "candidate": "codex-luna", "limit": "1"})


# --- coverage -----------------------------------------------------------------------------------


def test_coverage_of_the_reference_catalog_holds_on_every_invariant(reference_catalog, reader_client):
    response = reader_client.get("/api/coverage/")

    assert response.status_code == 200
    assert response.json() == {
        "seed": DEFAULT_SEED,
        "coverage": GOLDEN["coverage_default_seed"],
        "failed": [],
        "matrix": catalog_coverage_matrix(seed=DEFAULT_SEED),
    }
    assert list(response.json()["coverage"]) == list(COVERAGE_INVARIANTS)


def test_coverage_matrix_lists_each_cases_slots_for_seven_days(reference_catalog, reader_client):
    matrix = reader_client.get("/api/coverage/").json()["matrix"]

    slot_ids = list(Slot.objects.order_by("position").values_list("key", flat=True))
    assert len(matrix) == 12
    assert all(len(days) == 7 for days in matrix.values())
    # final-response is case 0: day 0 meets slots 0 and 3 (the second slot is three further on).
    assert matrix["final-response"][0] == [slot_ids[0], slot_ids[3]]


def test_coverage_names_the_invariants_that_fail(reference_catalog, reader_client):
    Candidate.objects.update(tier="strong")

    body = reader_client.get("/api/coverage/", {"seed": "nightly-v1"}).json()

    assert body["seed"] == "nightly-v1"
    assert body["failed"] == ["strongAndInexpensiveNightly"]
    assert body["coverage"]["strongAndInexpensiveNightly"] is False


def test_coverage_of_an_empty_catalog_is_a_400(reader_client, db):
    response = reader_client.get("/api/coverage/")

    assert response.status_code == 400
    assert response.json() == {"detail": "a schedule needs at least one workflow case"}


def test_coverage_refuses_unknown_parameters(reference_catalog, reader_client):
    response = reader_client.get("/api/coverage/", {"sead": "x"})

    assert response.status_code == 400
    assert response.json() == {"sead": ["Unknown query parameter. Accepted: seed."]}


# --- saved schedules ----------------------------------------------------------------------------


def test_a_saved_schedule_reads_as_the_reference_document_with_id_and_night(reference_catalog, reader_client):
    schedule = save_night(0)

    body = reader_client.get(f"/api/schedules/{schedule.pk}/").json()

    assert body == {"id": schedule.pk, "night": "2026-08-24", **schedule.to_document()}
    preview = reader_client.get(
        "/api/schedules/preview/", {"rotation_day": schedule.rotation_day, "generated_at": schedule.generated_at}
    ).json()
    assert {key: value for key, value in body.items() if key not in ("id", "night")} == preview


def test_schedules_list_newest_night_first_without_entries(reference_catalog, reader_client):
    first, second = save_night(0), save_night(1)

    body = reader_client.get("/api/schedules/").json()

    assert body["count"] == 2
    assert [s["id"] for s in body["results"]] == [second.pk, first.pk]
    summary = body["results"][0]
    assert set(summary) == {"id", "seed", "rotationDay", "night", "generatedAt", "expectedExecutions", "createdAt"}
    assert summary["night"] == "2026-08-25"
    assert summary["expectedExecutions"] == second.entries.count()


def test_schedules_filter_by_seed_night_and_rotation_day(reference_catalog, reader_client):
    nights = [save_night(day) for day in range(3)]
    other = save_night(0, seed="nightly-v1")

    def ids(params: dict[str, Any]) -> list[int]:
        return [s["id"] for s in reader_client.get("/api/schedules/", params).json()["results"]]

    assert ids({"seed": "nightly-v1"}) == [other.pk]
    assert ids({"night": "2026-08-25"}) == [nights[1].pk]
    assert ids({"night_after": "2026-08-25", "seed": DEFAULT_SEED}) == [nights[2].pk, nights[1].pk]
    assert ids({"rotation_day": nights[0].rotation_day, "seed": DEFAULT_SEED}) == [
        s.pk for s in reversed(nights) if s.rotation_day == nights[0].rotation_day
    ]


def test_a_bad_night_filter_is_a_400(reader_client, db):
    response = reader_client.get("/api/schedules/", {"night": "yesterday"})

    assert response.status_code == 400
    assert response.json() == {"night": ["Enter a valid date."]}


def test_saved_schedules_are_read_only(reference_catalog, staff_client):
    schedule = save_night(0)

    assert staff_client.post("/api/schedules/", data="{}", content_type="application/json").status_code == 405
    assert staff_client.delete(f"/api/schedules/{schedule.pk}/").status_code == 405


def test_a_schedule_id_that_is_not_a_number_is_a_404(reader_client, db):
    assert reader_client.get("/api/schedules/tonight/").status_code == 404


@pytest.mark.parametrize("nights", [1, 6])
def test_schedule_list_and_detail_query_counts_do_not_grow(reference_catalog, reader_client, django_assert_num_queries, nights):
    saved = [save_night(day) for day in range(nights)]

    with django_assert_num_queries(4):  # session, user, count, page
        assert reader_client.get("/api/schedules/").json()["count"] == nights
    with django_assert_num_queries(4):  # session, user, schedule, entries
        assert reader_client.get(f"/api/schedules/{saved[-1].pk}/").status_code == 200


@pytest.mark.django_db
def test_a_blank_whole_number_filter_is_a_400_not_every_row(reader_client) -> None:
    """``?rotation_day=`` is not a whole number (the schema says integer): refused, not read as "not given"."""
    response = reader_client.get("/api/schedules/", {"rotation_day": ""})
    assert response.status_code == 400
    assert response.json() == {"rotation_day": ["Give a whole number, or leave the parameter out."]}
    assert reader_client.get("/api/schedules/").status_code == 200
