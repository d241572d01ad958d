"""The candidate spec: every stored snapshot shape reads, one set of defaults, a clear error for a
shape it cannot read, and the orchestration refuses such a snapshot instead of crashing on it."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from runs.executors.candidate import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_LATENCY_MS,
    Budget,
    CandidateSpec,
    CandidateSpecError,
    environment_names,
)

REFERENCE_DATA = Path(__file__).resolve().parents[1] / "evalhub" / "reference_data"


def reference_candidates() -> list[dict[str, Any]]:
    manifest = json.loads((REFERENCE_DATA / "candidate-manifest.json").read_text())
    return [candidate for slot in manifest["slots"] for candidate in slot["candidates"]]


@pytest.mark.database_free
@pytest.mark.parametrize("document", reference_candidates(), ids=lambda document: document["id"])
def test_every_reference_candidate_reads_with_its_four_limits_side_by_side(document: dict[str, Any]) -> None:
    spec = CandidateSpec.from_snapshot(document)
    budget = document["budget"]
    assert (spec.id, spec.adapter, spec.provider, spec.model, spec.slot_id) == (
        document["id"],
        document["adapter"],
        document["provider"],
        document["model"],
        document["slotId"],
    )
    assert spec.required_environment == tuple(document["qualification"]["requiredEnvironment"])
    assert spec.profile == (document["qualification"].get("profile") or None)
    assert spec.budget == Budget(
        max_latency_ms=budget["maxLatencyMs"],
        max_attempts=budget["maxAttempts"],
        max_cost_usd=budget["maxCostUsd"],
        max_total_tokens=budget["maxTotalTokens"],
    )
    assert dict(spec.document) == document  # the snapshot itself, as stored


@pytest.mark.database_free
def test_absent_fields_take_the_one_set_of_defaults() -> None:
    spec = CandidateSpec.from_snapshot({"id": "codex-luna"})
    assert spec.budget == Budget() == Budget.from_document(None) == Budget.from_document({})
    assert (spec.budget.max_latency_ms, spec.budget.max_attempts) == (DEFAULT_MAX_LATENCY_MS, DEFAULT_MAX_ATTEMPTS) == (180_000, 2)
    assert (spec.budget.max_cost_usd, spec.budget.max_total_tokens) == (None, None)  # no limit, never $0
    assert (spec.required_environment, spec.profile, spec.reasoning_effort, spec.model) == ((), None, None, "")


@pytest.mark.database_free
@pytest.mark.parametrize("bad", [True, "3", 0, -1, float("nan"), float("inf"), None])
def test_a_limit_that_is_not_a_usable_number_takes_its_default_as_every_reader_did(bad: Any) -> None:
    budget = Budget.from_document({"maxLatencyMs": bad, "maxAttempts": bad, "maxCostUsd": bad, "maxTotalTokens": bad})
    assert (budget.max_latency_ms, budget.max_attempts) == (DEFAULT_MAX_LATENCY_MS, DEFAULT_MAX_ATTEMPTS)
    if bad != 0:  # a cost or token limit of 0 is a limit
        assert (budget.max_cost_usd, budget.max_total_tokens) == (None, None)


@pytest.mark.database_free
@pytest.mark.parametrize(
    ("document", "message"),
    [
        (["codex-luna"], "a candidate snapshot must be an object, not list"),
        ({"model": "gpt-5.6-luna"}, "a candidate snapshot needs an id"),
        ({"id": "c", "budget": [1, 2]}, "candidate c: budget must be an object of limits, not list"),
        ({"id": "c", "qualification": "OPENAI_API_KEY"}, "candidate c: qualification must be an object"),
        ({"id": "c", "qualification": {"requiredEnvironment": "OPENAI_API_KEY"}}, "requiredEnvironment must be a list"),
        ({"id": "c", "qualification": {"profile": 7}}, "candidate c: qualification.profile must be text, not int"),
        ({"id": "c", "model": ["a"]}, "candidate c: model must be text, not list"),
    ],
)
def test_a_shape_the_spec_cannot_read_is_a_clear_error(document: Any, message: str) -> None:
    with pytest.raises(CandidateSpecError, match=message.replace("(", r"\(")):
        CandidateSpec.from_snapshot(document)


@pytest.mark.database_free
def test_environment_names_read_every_snapshot_for_redaction() -> None:
    assert environment_names({"id": "c", "qualification": {"requiredEnvironment": ["A_KEY", 7, "B_KEY"]}}) == ["A_KEY", "B_KEY"]
    assert environment_names({"qualification": "A_KEY"}) == environment_names(None) == []


@pytest.mark.django_db
def test_a_snapshot_the_spec_refuses_is_skipped_as_an_invalid_configuration(reference_catalog, replay_executors) -> None:
    """A schedule entry saved around validation with a profile that is not text: its execution is
    refused, saying why, and the run goes on."""
    from django.utils import timezone

    from runs.creation import create_run
    from runs.dispatch import execute_run
    from runs.models import Execution
    from schedules.models import ScheduleEntry
    from schedules.services import Selection, schedule_for_night

    schedule, _ = schedule_for_night(seed="runner-live-seven-week-v1", now=timezone.now())
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(candidate_ids=("codex-luna",), limit=1))
    (execution,) = run.executions.all()
    ScheduleEntry.objects.filter(pk=execution.entry_id).update(
        candidate={**execution.entry.candidate, "qualification": {"requiredEnvironment": ["OPENAI_API_KEY"], "profile": 7}}
    )
    execute_run(run, environ={"OPENAI_API_KEY": "x-openai-value-123"})
    execution = Execution.objects.get(pk=execution.pk)
    assert (execution.classification, execution.failure_code) == ("skipped", "candidate_configuration_invalid")
    assert "candidate codex-luna: qualification.profile must be text, not int" in execution.failure_message
