"""Every observation vector of ``scoring-vectors.json`` is scored exactly as the reference did.

Scorecards are compared both as data (``==``) and as JSON text (``json.dumps``), so an integral
score printed ``1.0`` instead of ``1``, a key out of order or a float one bit off all fail.
Invalid observations must fail with the reference's error text, word for word.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from runs.evaluation.observation_schema import reference_validation_error, validate_observation
from runs.evaluation.scoring import ObservationError, score_observation
from tests.reference import scoring_vectors

pytestmark = pytest.mark.database_free

OBSERVATION_VECTORS = scoring_vectors()["observations"]
SCORECARD_VECTORS = [vector for vector in OBSERVATION_VECTORS if "scorecard" in vector]
ERROR_VECTORS = [vector for vector in OBSERVATION_VECTORS if "error" in vector]


def _vector_id(vector: dict[str, Any]) -> str:
    return vector["id"]


def test_the_vectors_cover_scorecards_and_errors_and_nothing_else() -> None:
    ids = [vector["id"] for vector in OBSERVATION_VECTORS]
    assert len(ids) == len(set(ids))
    assert len(SCORECARD_VECTORS) >= 13 and len(ERROR_VECTORS) >= 5
    assert len(SCORECARD_VECTORS) + len(ERROR_VECTORS) == len(OBSERVATION_VECTORS)
    classifications = {vector["scorecard"]["classification"] for vector in SCORECARD_VECTORS}
    assert classifications == {"completed", "candidate_failure", "infrastructure_failure", "skipped"}


@pytest.mark.parametrize("vector", OBSERVATION_VECTORS, ids=_vector_id)
def test_vector_is_reproduced_exactly(vector: dict[str, Any]) -> None:
    observation, options = copy.deepcopy(vector["observation"]), copy.deepcopy(vector["options"])
    if "scorecard" in vector:
        scorecard = score_observation(observation, options)
        assert scorecard == vector["scorecard"]
        assert json.dumps(scorecard) == json.dumps(vector["scorecard"])
    else:
        assert vector["errorName"] == "RunnerWorkflowContractError"
        with pytest.raises(ObservationError) as raised:
            score_observation(observation, options)
        assert str(raised.value) == vector["error"]
        assert raised.value.problems
    assert observation == vector["observation"] and options == vector["options"]  # inputs untouched


@pytest.mark.parametrize("vector", OBSERVATION_VECTORS, ids=_vector_id)
def test_validation_agrees_with_the_reference_on_vector(vector: dict[str, Any]) -> None:
    observation = vector["observation"]
    assert reference_validation_error(observation) == vector.get("error")
    if "error" in vector:
        assert validate_observation(observation) != []
    else:
        assert validate_observation(observation) == []


def test_scorecards_inside_the_report_vectors_are_reproduced() -> None:
    vectors = scoring_vectors()
    reports = [vector["report"] for vector in vectors["reports"]] + list(vectors["reportPool"].values())
    rows = [(report["bundle"]["id"], row) for report in reports for row in report["results"]]
    assert rows
    for bundle_id, row in rows:
        scorecard = score_observation(row["observation"], {"bundleId": bundle_id})
        assert json.dumps(scorecard) == json.dumps(row["scorecard"]), row["scenarioId"]
