"""A catalog row written around validation (``loaddata``, ``objects.update``) with a secret-shaped
value or a required environment that is not a list of names: only that candidate's executions
are refused, and the value is never shown (schedule, API, pages). Synthetic secrets are built by
concatenation so this file holds no key-shaped literal."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from candidates.models import Candidate
from runs.nightly import start_nightly
from schedules.services import preview_schedule

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
SECRET = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
ENVIRON = {"OPENAI_API_KEY": "x-openai-value-123", "OPENROUTER_API_KEY": "x-openrouter-value-123", "ANTHROPIC_API_KEY": "x-a-123"}


def tonight_candidates() -> list[str]:
    return [candidate["id"] for candidate in preview_schedule(seed=SEED, now=timezone.now())["candidates"]]


@pytest.mark.parametrize(
    ("change", "shown"),
    [({"model": f"gpt-5.6 {SECRET}"}, SECRET), ({"required_environment": ["not a name", "OPENAI_API_KEY"]}, None)],
    ids=["secret-shaped-model", "bad-variable-name"],
)
def test_only_the_bad_row_s_executions_are_refused_and_its_value_never_shown(
    reference_catalog, replay_executors, reader_client, change: dict, shown: str | None
) -> None:
    from runs.executors.replay import REPLAY_STORE
    from tests.builders import completed_observation

    bad = tonight_candidates()[0]
    Candidate.objects.filter(key=bad).update(**change)

    document = preview_schedule(seed=SEED, now=timezone.now())
    assert bad in [candidate["id"] for candidate in document["candidates"]]
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=False)
    for execution in outcome.schedule.entries.all():
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.to_document())
    outcome = start_nightly(seed=SEED, cost_ceiling_usd=Decimal("12"), now=timezone.now(), environ=ENVIRON, execute=True)
    executions = list(outcome.run.executions.all())
    refused = {e.candidate_key for e in executions if e.failure_code == "candidate_configuration_invalid"}
    assert refused == {bad}
    assert all(e.classification == "skipped" for e in executions if e.candidate_key == bad)
    assert any(e.classification == "completed" for e in executions if e.candidate_key != bad)
    assert all(SECRET not in e.failure_message for e in executions)

    if shown is not None:
        assert shown not in str(outcome.schedule.to_document(list(outcome.schedule.entries.all())))
        for url in (
            f"/api/candidates/{bad}/",
            "/api/candidates/",
            reverse("pages:candidates"),
            reverse("pages:tonight"),
            "/api/schedules/preview/",
        ):
            response = reader_client.get(url)
            assert response.status_code == 200, url
            assert shown not in response.content.decode(), url


def test_the_admin_never_shows_a_secret_written_around_validation(reference_catalog, staff_client) -> None:
    Candidate.objects.filter(key="codex-luna").update(model=f"gpt-5.6 {SECRET}")
    pk = Candidate.objects.get(key="codex-luna").pk

    for url in (reverse("admin:candidates_candidate_changelist"), reverse("admin:candidates_candidate_change", args=[pk])):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert SECRET not in response.content.decode(), url
