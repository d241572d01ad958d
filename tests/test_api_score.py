"""``POST /api/score/``: observations scored as ``manage.py score FILE`` scores them, nothing stored
(an invalid observation is a 400 listing every problem)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from runs.evaluation.observation_schema import validate_observation
from runs.models import Execution, Report, Run, Scorecard
from tests.reference import scoring_vectors

pytestmark = pytest.mark.django_db

URL = "/api/score/"
# Synthetic, built by concatenation so no secret-shaped literal sits in the source.
SYNTHETIC_KEY = "sk-" + "A1b2" * 5
NO_BUNDLE_ID = "scoring options need a bundleId (text), e.g. runner-live-v2-<16 hex>"


def observation_vectors() -> list[dict[str, Any]]:
    return scoring_vectors()["observations"]


def post(client, body: Any, **query: str):
    url = URL + ("?" + "&".join(f"{key}={value}" for key, value in query.items()) if query else "")
    return client.post(url, data=json.dumps(body), content_type="application/json")


def valid_vector() -> dict[str, Any]:
    return next(vector for vector in observation_vectors() if "scorecard" in vector)


def test_every_vector_in_one_array_scores_as_the_reference(reader_client):
    vectors = observation_vectors()
    assert any("error" in vector for vector in vectors) and any("scorecard" in vector for vector in vectors)

    response = post(reader_client, [{"observation": v["observation"], "options": v["options"]} for v in vectors])

    assert response.status_code == 400
    body = response.json()
    assert len(body["results"]) == len(vectors)
    invalid = [index for index, vector in enumerate(vectors) if "error" in vector]
    assert [error["index"] for error in body["errors"]] == invalid
    problems = {error["index"]: error["problems"] for error in body["errors"]}
    for index, (vector, result) in enumerate(zip(vectors, body["results"], strict=True)):
        if "error" in vector:
            # The message is the reference's error text; the problems are every schema/rule problem.
            assert result == {"error": vector["error"]}, vector["id"]
            assert problems[index] == validate_observation(vector["observation"]) != [], vector["id"]
        else:
            assert result == vector["scorecard"], vector["id"]
    assert not (Run.objects.exists() or Execution.objects.exists() or Scorecard.objects.exists() or Report.objects.exists())


def test_valid_vectors_alone_give_200_and_exactly_the_reference_scorecards(reader_client):
    vectors = [vector for vector in observation_vectors() if "scorecard" in vector]

    response = post(reader_client, [{"observation": v["observation"], "options": v["options"]} for v in vectors])

    assert response.status_code == 200
    assert response.json() == [vector["scorecard"] for vector in vectors]
    # Float for float: 0.8999999999999999 stays 0.8999999999999999.
    assert json.loads(response.content) == [vector["scorecard"] for vector in vectors]


def test_staff_may_score_too_and_an_empty_array_is_empty(staff_client):
    assert post(staff_client, []).json() == []
    vector = valid_vector()
    response = post(staff_client, [{"observation": vector["observation"], "options": vector["options"]}])
    assert response.status_code == 200
    assert response.json() == [vector["scorecard"]]


@pytest.mark.parametrize("body", [{"observation": {}, "options": {}}, "score me", 3, None])
def test_a_body_that_is_not_an_array_says_what_to_send(reader_client, body):
    response = post(reader_client, body)

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "JSON array" in detail and "observation" in detail and "bundleId" in detail


def test_an_item_that_is_not_an_object_says_what_to_send(reader_client):
    vector = valid_vector()
    response = post(reader_client, [{"observation": vector["observation"], "options": vector["options"]}, [1, 2]])

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "Item 1 is not an object" in detail and "JSON array" in detail


def test_malformed_json_is_a_400(reader_client):
    response = reader_client.post(URL, data='[{"observation": NaN}]', content_type="application/json")

    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


def test_more_than_500_items_is_refused_before_scoring(reader_client):
    response = post(reader_client, [{}] * 501)

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "501" in detail and "500" in detail


def test_500_items_is_allowed(reader_client):
    vector = valid_vector()
    item = {"observation": vector["observation"], "options": vector["options"]}

    response = post(reader_client, [item] * 500)

    assert response.status_code == 200
    assert response.json() == [vector["scorecard"]] * 500


def test_anonymous_is_refused(client):
    vector = valid_vector()
    response = post(client, [{"observation": vector["observation"], "options": vector["options"]}])

    # 401 with the token challenge: token authentication comes first (evalhub/settings.py).
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_every_problem_is_listed_and_options_problems_come_first(reader_client):
    vector = valid_vector()
    observation = copy.deepcopy(vector["observation"])
    observation["metrics"]["totalTokens"] = -1
    observation["presentation"]["checks"].append(copy.deepcopy(observation["presentation"]["checks"][0]))
    expected = validate_observation(observation)
    assert len(expected) >= 2

    response = post(
        reader_client,
        [
            {"observation": vector["observation"], "options": vector["options"]},
            {"observation": observation, "options": vector["options"]},
            {"observation": observation, "options": {}},
            {"options": vector["options"]},
            {"observation": vector["observation"], "options": {}},
        ],
    )

    assert response.status_code == 400
    body = response.json()
    assert body["results"][0] == vector["scorecard"]
    assert body["results"][4] == {"error": NO_BUNDLE_ID}
    assert body["errors"] == [
        {"index": 1, "problems": expected},
        {"index": 2, "problems": [NO_BUNDLE_ID, *expected]},
        {"index": 3, "problems": ["item 3 must be an object with observation and options"]},
        {"index": 4, "problems": [NO_BUNDLE_ID]},
    ]
    # The observation is checked first, as the reference does: its message is the error.
    repeated = f"{observation['caseId']} presentation checks must be non-empty and unique"
    assert body["results"][1] == body["results"][2] == {"error": repeated}
    assert body["notes"] == []
    assert body["results"][3] == {"error": "item 3 must be an object with observation and options"}


def test_secret_shaped_data_never_comes_back(reader_client):
    vector = valid_vector()
    observation = copy.deepcopy(vector["observation"])
    observation["classification"] = "candidate_failure"
    observation["failure"] = {
        "code": "x",
        "category": "candidate",
        "retryable": False,
        "message": f"provider said: invalid key {SYNTHETIC_KEY}",
    }
    options = {**vector["options"], "weights": {SYNTHETIC_KEY: 1}}

    response = post(
        reader_client,
        [{"observation": observation, "options": vector["options"]}, {"observation": observation, "options": options}],
    )

    assert response.status_code == 400
    assert SYNTHETIC_KEY not in response.content.decode()
    body = response.json()
    assert body["results"][0] == {"error": f"{observation['caseId']} failure metadata contains secret-shaped data"}
    assert [error["index"] for error in body["errors"]] == [0, 1]


def test_an_ignored_option_named_like_a_secret_is_noted_redacted(reader_client):
    vector = valid_vector()
    options = {**vector["options"], "weights": {SYNTHETIC_KEY: 1}, SYNTHETIC_KEY: True}

    response = post(reader_client, [{"observation": vector["observation"], "options": options}], notes="true")

    assert response.status_code == 200
    assert SYNTHETIC_KEY not in response.content.decode()
    body = response.json()
    assert body["results"] == [vector["scorecard"]]
    # The unknown key and dimension are echoed in the notes: redacted, not dropped.
    [item] = body["notes"]
    assert item["index"] == 0 and len(item["notes"]) == 2
    assert all("[REDACTED]" in note for note in item["notes"])


def test_notes_come_beside_the_scorecards_only_when_asked_for(reader_client):
    vector = valid_vector()
    options = {**vector["options"], "weights": {"hard_invariants": 3}}
    item = [{"observation": vector["observation"], "options": options}]

    assert post(reader_client, item).json() == [vector["scorecard"]]
    assert post(reader_client, item, notes="false").json() == [vector["scorecard"]]
    assert post(reader_client, item, notes="true").json() == {
        "results": [vector["scorecard"]],
        "notes": [{"index": 0, "notes": ["weights.hard_invariants ignored: a gate dimension always weighs 0"]}],
    }
    refused = post(reader_client, item, notes="maybe")
    assert refused.status_code == 400
    assert refused.json() == {"detail": "The notes parameter must be true or false, not 'maybe'."}


def test_a_secret_shaped_candidate_id_is_never_echoed(reader_client):
    pasted = "sk-" + "proj-" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd"
    vector = copy.deepcopy(valid_vector())
    vector["observation"]["candidateId"] = pasted
    response = post(reader_client, [{"observation": vector["observation"], "options": vector["options"]}])
    assert pasted not in response.content.decode()
    assert response.status_code in (200, 400)
