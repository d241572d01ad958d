"""The stored form of an observation (``runs.stored_observations.stored_form``): redacted and with
non-finite numbers as null, exactly ``finite_json(redact_data(...))`` whatever the document, in
one walk for plain JSON and in the two walks for anything else."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from evalhub.secrets import REDACTION, redact_data
from runs import stored_observations
from runs.evaluation.observations import finite_json
from tests.builders import completed_observation

pytestmark = pytest.mark.database_free

SECRET_VALUE = "x-bench-secret-1234"
OPENAI = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
ENTRY = {"executionId": "rwe-0123456789abcdef", "caseId": "final-response", "candidateId": "codex-luna", "budget": {"maxCostUsd": 1}}


class Level(enum.IntEnum):
    HIGH = 3


def typed(value: Any) -> Any:
    """``value`` with every container's and scalar's type beside it (so a tuple is not a list,
    ``1`` not ``True``, ``nan`` comparable)."""
    if isinstance(value, dict):
        return ("dict", [(typed(key), typed(child)) for key, child in value.items()])
    if isinstance(value, (list, tuple, set, frozenset)):
        return (type(value).__name__, [typed(child) for child in value])
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


def nested(depth: int) -> Any:
    value: Any = {"leaf": OPENAI}
    for _ in range(depth):
        value = {"down": [value]}
    return value


DOCUMENTS = {
    "completed": completed_observation(ENTRY, cost_usd=0.01),
    "secrets in values and keys": {"note": f"key {OPENAI} and {SECRET_VALUE}", AWS: [1, 2.5, {"deep": SECRET_VALUE}]},
    "non-finite numbers": {"metrics": {"costUsd": float("nan"), "latencyMs": float("inf"), "n": -float("inf")}, "ok": 1.5},
    "scalars": {"t": True, "f": False, "n": None, "i": 0, "big": 2**70, "s": ""},
    "an int beyond 1e308": {"n": 10**400, "m": -(10**400), "edge": int(1e308)},
    "a tuple": {"steps": ("a", OPENAI, float("nan"))},
    "a set": {"tags": {"x"}},
    "a key that is not text": {1: "one", "two": 2.0},
    "keys redacted alike": {f"a {OPENAI}": 1, f"a {AWS}": 2, f"a {REDACTION}": 3},
    "an int subclass": {"level": Level.HIGH},
    "a str subclass": {"kind": enum.StrEnum("Kind", {"A": "sk"}).A},
    "nested 31 deep": nested(31),
    "nested 100 deep": nested(100),
}


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_the_stored_form_is_the_two_walks_result(name: str) -> None:
    document = DOCUMENTS[name]
    expected = finite_json(redact_data(document, extra_values=[SECRET_VALUE]))
    assert typed(stored_observations.stored_form(document, [SECRET_VALUE])) == typed(expected)


def test_the_stored_form_is_a_copy_that_leaves_the_document_alone() -> None:
    document = completed_observation(ENTRY, cost_usd=float("nan"))
    document["note"] = OPENAI
    before = typed(document)
    stored = stored_observations.stored_form(document, [])
    assert typed(document) == before
    assert stored["note"] == REDACTION and stored["metrics"].get("costUsd", "absent") in (None, "absent")
    assert stored["metrics"] is not document["metrics"]


def test_a_plain_document_takes_one_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the two walks were taken")

    monkeypatch.setattr(stored_observations, "redact_data", refuse)
    stored_observations.stored_form(DOCUMENTS["completed"], [SECRET_VALUE])
    stored_observations.stored_form(DOCUMENTS["secrets in values and keys"], [SECRET_VALUE])
    with pytest.raises(AssertionError, match="two walks"):
        stored_observations.stored_form(DOCUMENTS["a tuple"], [SECRET_VALUE])


def _invalid_observations() -> dict[str, Any]:
    """Observations of plain JSON values the reference refuses, each in its own way."""
    base = completed_observation(ENTRY, cost_usd=0.01)
    unknown_case = {**base, "caseId": "no-such-case"}
    blank_candidate = {**base, "candidateId": "   "}
    bad_metric = {**base, "metrics": {**base["metrics"], "latencyMs": "slow"}}
    missing_base = {key: value for key, value in base.items() if key != "base"}
    odd_base = {**base, "base": {**base["base"], "controlPlaneOwned": 0}}
    return {
        "valid": base,
        "unknown case": unknown_case,
        "blank candidate": blank_candidate,
        "a metric that is text": bad_metric,
        "no base": missing_base,
        "a base flag that is a number": odd_base,
    }


@pytest.mark.parametrize("name", list(_invalid_observations()))
def test_checking_a_plain_document_without_its_walk_finds_what_the_full_check_finds(name: str) -> None:
    from runs.evaluation.observation_schema import validate_observation, validate_plain_observation

    document = _invalid_observations()[name]
    assert validate_plain_observation(document) == validate_observation(document)
    assert validate_plain_observation(document, case_ids=["own-case"]) == validate_observation(document, case_ids=["own-case"])


def test_a_document_the_one_walk_leaves_is_checked_with_its_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """An int beyond ±1e308 or a tuple goes to the two walks, and so to the check that walks it:
    its problems are named as before (not a JSON number, not JSON)."""
    from runs.evaluation import observation_schema

    plain_checks: list[Any] = []
    original = observation_schema.validate_plain_observation

    def spy(document: Any, **kwargs: Any) -> list[str]:
        plain_checks.append(document)
        return original(document, **kwargs)

    monkeypatch.setattr(stored_observations, "validate_plain_observation", spy)
    document = completed_observation(ENTRY, cost_usd=0.01)
    assert stored_observations.checked_stored_form(document, [])[1] == []
    assert len(plain_checks) == 1
    huge = {**document, "metrics": {**document["metrics"], "latencyMs": 10**400}}
    stored, problems, text = stored_observations.checked_stored_form(huge, [])
    assert stored is None and text is None and problems == observation_schema.validate_observation(huge)
    assert any("latencyMs" in problem for problem in problems)
    assert len(plain_checks) == 1
