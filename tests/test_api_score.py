"""``POST /api/score/``: observations scored as ``manage.py score FILE`` scores them, nothing stored
(issue 3 §1: an invalid observation is a 400 listing every problem)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from runs.models import Execution, Report, Run, Scorecard
from runs.observation_schema import validate_observation
from tests.reference import reference_dir

pytestmark = pytest.mark.django_db

URL = "/api/score/"
# Synthetic, built by concatenation so no secret-shaped literal sits in the source.
SYNTHETIC_KEY = "sk-" + "A1b2" * 5


def scoring_vectors() -> list[dict[str, Any]]:
    return json.loads((reference_dir() / "scoring-vectors.json").read_text(encoding="utf-8"))["observations"]


def post(client, body: Any):
    return client.post(URL, data=json.dumps(body), content_type="application/json")


def valid_vector() -> dict[str, Any]:
    return next(vector for vector in scoring_vectors() if "scorecard" in vector)


def test_every_vector_in_one_array_scores_as_the_reference(reader_client):
    vectors = scoring_vectors()
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
    vectors = [vector for vector in scoring_vectors() if "scorecard" in vector]

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

    # 403, not 401: session authentication comes first and sends no WWW-Authenticate challenge.
    assert response.status_code == 403


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
        ],
    )

    assert response.status_code == 400
    body = response.json()
    assert body["results"][0] == vector["scorecard"]
    assert body["errors"] == [
        {"index": 1, "problems": expected},
        {"index": 2, "problems": ["scoring options need a non-empty bundleId", *expected]},
        {"index": 3, "problems": ["item 3 must be an object with observation and options"]},
    ]
    assert body["results"][2] == {"error": "scoring options need a non-empty bundleId"}
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
    # The unknown-dimension message echoes the key: it is redacted, not dropped.
    assert "[REDACTED]" in body["results"][1]["error"]
    assert "[REDACTED]" in body["errors"][1]["problems"][0]
