"""An observation checked when it is stored is not checked again when its row is scored — only
when the row holds, to the byte, the document that was checked: a row changed since (an admin, an
update around the services) is checked in full, and a document that only compares equal in Python
(``0 == False``) is not the same document."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.utils import timezone

from runs.evaluation import observation_schema
from runs.evaluation.observation_schema import (
    WORKFLOW_CASE_IDS,
    ObservationError,
    check_decoded_observation,
    check_observation,
    remember_valid_observation,
    validate_observation,
)
from tests.builders import completed_observation

SEED = "runner-live-seven-week-v1"
ENVIRON = {"OPENAI_API_KEY": "x-openai-value-123", "OPENROUTER_API_KEY": "x-openrouter-value-123", "ANTHROPIC_API_KEY": "x-a-123"}


def _observation(execution_id: str) -> dict:
    return completed_observation({"caseId": WORKFLOW_CASE_IDS[0], "candidateId": "codex-a", "executionId": execution_id})


@pytest.fixture
def full_checks(monkeypatch) -> list[dict]:
    """The documents ``check_observation`` checked in full."""
    checked: list[dict] = []

    def spy(observation, *, case_ids=None):
        checked.append(observation)
        return check_observation(observation, case_ids=case_ids)

    monkeypatch.setattr(observation_schema, "check_observation", spy)
    return checked


def test_a_remembered_document_read_back_is_not_checked_again(full_checks) -> None:
    document = _observation("rwe-checked0000001")
    assert validate_observation(document) == []
    remember_valid_observation(document)
    assert check_decoded_observation(json.loads(json.dumps(document))) == []
    assert full_checks == []


def test_a_document_not_remembered_is_checked_in_full(full_checks) -> None:
    document = json.loads(json.dumps(_observation("rwe-checked0000002")))
    assert check_decoded_observation(document) == check_observation(document)
    assert full_checks == [document]


def test_a_changed_document_is_checked_in_full_even_when_python_calls_it_equal(full_checks) -> None:
    document = _observation("rwe-checked0000003")
    remember_valid_observation(document)
    changed = json.loads(json.dumps(document))
    changed["base"]["controlPlaneOwned"] = 0  # == False in Python, not a boolean in JSON
    assert changed == document
    with pytest.raises(ObservationError):
        check_observation(changed)
    with pytest.raises(ObservationError):
        check_decoded_observation(changed)
    assert full_checks == [changed]


def test_a_case_id_the_check_does_not_know_is_checked_in_full(full_checks) -> None:
    document = completed_observation({"caseId": "own-case", "candidateId": "codex-a", "executionId": "rwe-checked0000004"})
    assert validate_observation(document, case_ids=["own-case"]) == []
    remember_valid_observation(document)
    with pytest.raises(ObservationError):
        check_decoded_observation(json.loads(json.dumps(document)))
    assert len(full_checks) == 1
    assert check_decoded_observation(json.loads(json.dumps(document)), case_ids=["own-case"]) == []


@pytest.mark.django_db
def test_a_row_changed_after_it_was_stored_is_checked_when_scored(reference_catalog, replay_executors, full_checks) -> None:
    from runs.executors.replay import REPLAY_STORE
    from runs.models import Execution, Scorecard
    from runs.nightly import start_nightly
    from runs.reporting import score_run

    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=False)
    for execution in outcome.schedule.entries.all():
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.to_document())
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=True)
    run = outcome.run
    scored = Scorecard.objects.filter(execution__run=run).count()
    assert scored > 0
    assert full_checks == []  # each was checked once, when stored

    first, second = list(run.executions.filter(scorecard__isnull=False).order_by("position")[:2])
    Scorecard.objects.filter(execution__in=[first, second]).delete()
    # Unchanged: scored again without a second check.
    assert score_run(run) == 2
    assert full_checks == []

    Scorecard.objects.filter(execution=first).delete()
    changed = Execution.objects.get(pk=first.pk).observation
    changed["base"]["controlPlaneOwned"] = 0
    Execution.objects.filter(pk=first.pk).update(observation=changed)
    with pytest.raises(ObservationError):
        score_run(run)
    assert len(full_checks) == 1


def test_an_encoded_document_is_written_as_it_is_and_any_other_value_encoded() -> None:
    from evalhub.fields import DocumentField, EncodedDocument

    field = DocumentField()
    assert field.get_prep_value(EncodedDocument('{"a": 1}')) == '{"a": 1}'
    assert field.get_prep_value('{"a": 1}') == '"{\\"a\\": 1}"'  # a text is a document like any other
    assert field.get_prep_value({"note": "ü", "n": 1.0}) == '{"note": "ü", "n": 1.0}'


def test_the_checked_text_is_the_stored_form_s_only_when_the_scorer_left_nothing_out() -> None:
    from runs.stored_observations import checked_stored_form

    document = _observation("rwe-0000000000000001")
    document["note"] = "ü"
    stored, problems, text = checked_stored_form(document, [])
    assert problems == [] and text == json.dumps(stored, ensure_ascii=False, allow_nan=False)
    # A non-finite latency is stored as null, which the scorer leaves out: its text is not the row's.
    document["metrics"]["latencyMs"] = float("nan")
    stored, problems, text = checked_stored_form(document, [])
    assert problems == [] and stored["metrics"]["latencyMs"] is None and text is None
    assert checked_stored_form({**document, "classification": "nonsense"}, [])[::2] == (None, None)


@pytest.mark.django_db
def test_every_row_holds_the_text_of_its_stored_observation(reference_catalog, replay_executors) -> None:
    """Written from the text the check encoded, or encoded by the column when the scorer's copy
    differs (a null metric): either way the column holds the stored document's JSON text."""
    from django.db import connection

    from runs.executors.replay import REPLAY_STORE
    from runs.nightly import start_nightly

    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=False)
    for index, entry in enumerate(outcome.schedule.entries.all()):
        observation = completed_observation(entry.to_document())
        if index % 2:
            observation["metrics"]["latencyMs"] = float("inf")
        REPLAY_STORE[entry.execution_id] = observation
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT observation FROM runs_execution WHERE run_id = %s ORDER BY position", [outcome.run.pk])
        texts = [row[0] for row in cursor.fetchall()]
    documents = [json.loads(text) for text in texts]
    assert len(texts) == 40 and all(document["classification"] == "completed" for document in documents)
    assert [text == json.dumps(document, ensure_ascii=False, allow_nan=False) for text, document in zip(texts, documents, strict=True)] == [
        True
    ] * 40
    assert [document["metrics"].get("latencyMs", "absent") is None for document in documents] == [bool(i % 2) for i in range(40)]


@pytest.fixture
def encodings(monkeypatch) -> list[object]:
    """The documents the check encoded to look them up."""
    encoded: list[object] = []
    original = observation_schema._json_text

    def spy(observation):
        encoded.append(observation)
        return original(observation)

    monkeypatch.setattr(observation_schema, "_json_text", spy)
    return encoded


def test_a_remembered_text_given_beside_its_document_is_looked_up_without_encoding(full_checks, encodings) -> None:
    document = _observation("rwe-checked0000005")
    text = remember_valid_observation(document)
    encodings.clear()
    assert check_decoded_observation(json.loads(text), text=text) == []
    assert encodings == [] and full_checks == []


def test_a_text_not_remembered_leaves_the_document_to_its_own_text(full_checks, encodings) -> None:
    document = _observation("rwe-checked0000006")
    text = remember_valid_observation(document)
    encodings.clear()
    # The same document written by another encoder (spaces of its own): found by the document's text.
    other = json.dumps(document, ensure_ascii=False, indent=1)
    assert check_decoded_observation(json.loads(other), text=other) == []
    assert len(encodings) == 1 and full_checks == []
    # A changed row: neither its text nor its document's was found valid, so it is checked in full.
    changed = json.loads(text)
    changed["base"]["controlPlaneOwned"] = 0
    changed_text = json.dumps(changed, ensure_ascii=False)
    with pytest.raises(ObservationError):
        check_decoded_observation(changed, text=changed_text)
    assert full_checks == [changed]


@pytest.mark.django_db
def test_the_report_looks_its_rows_up_by_their_column_text(reference_catalog, replay_executors, full_checks, encodings) -> None:
    from runs.executors.replay import REPLAY_STORE
    from runs.models import Scorecard
    from runs.nightly import start_nightly
    from runs.reporting import report_run

    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=False)
    for execution in outcome.schedule.entries.all():
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.to_document())
    run = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=True).run
    scored = Scorecard.objects.filter(execution__run=run).count()
    assert scored > 0
    run.report.delete()
    Scorecard.objects.filter(execution__run=run).delete()
    encodings.clear()
    report = report_run(run, generated_at="2026-12-02T00:00:00.000Z")
    assert report.scoreable == scored
    assert encodings == [] and full_checks == []
