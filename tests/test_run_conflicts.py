"""The same work is never started twice at once: a second re-run of a run while an earlier one is
pending or running is refused (409 in the API, a message in the admin, an error in the CLI), and
so is a second ``nightly --execute`` over the same selection while the first one's run is
unfinished. Both hold when the two requests race (a constraint, a locked read)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction

from runs import actions, creation, dispatch, nightly
from runs.actions import RunActionError, rerun_run
from runs.creation import create_run
from runs.executors.replay import REPLAY_STORE
from runs.models import Run, RunStatus
from runs.nightly import start_nightly
from schedules.services import Selection, schedule_for_night
from tests.builders import completed_observation

pytestmark = pytest.mark.django_db

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)
DAY0 = "2026-08-24T00:00:00.000Z"
ENVIRON = {"OPENAI_API_KEY": "x" * 20, "OPENROUTER_API_KEY": "y" * 20, "ANTHROPIC_API_KEY": "z" * 20}


@pytest.fixture
def cancelled(reference_catalog, replay_executors) -> Run:
    """A run of three codex-luna executions, cancelled before any ran: three skipped to re-run."""
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(candidate_ids=("codex-luna",), limit=3))
    actions.cancel_run(run)
    run.refresh_from_db()
    return run


def busy_message(run: Run, rerun: Run) -> str:
    return (
        f"run {run.pk} is already being re-run by run {rerun.pk}, which is still {rerun.status}: wait for it to end "
        f"(or cancel it: `manage.py cancel_run {rerun.pk}`) before re-running run {run.pk} again"
    )


def test_a_second_rerun_while_the_first_is_pending_is_refused(cancelled) -> None:
    first = rerun_run(cancelled, scope="skipped")
    with pytest.raises(RunActionError) as caught:
        rerun_run(cancelled, scope="skipped")
    assert str(caught.value) == busy_message(cancelled, first)
    with pytest.raises(RunActionError, match=f"already being re-run by run {first.pk}"):
        rerun_run(cancelled, scope="failed")  # any scope: the executions would overlap
    assert Run.objects.filter(repeat_of=cancelled).count() == 1


def test_once_the_first_rerun_ended_the_run_can_be_re_run_again(cancelled) -> None:
    first = rerun_run(cancelled, scope="skipped")
    for execution in first.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document())
    dispatch.execute_run(first, environ=ENVIRON)
    assert Run.objects.get(pk=first.pk).status == RunStatus.FINISHED
    second = rerun_run(cancelled, scope="skipped")
    assert second.pk != first.pk and second.status == RunStatus.PENDING


def test_two_unfinished_reruns_of_one_run_cannot_be_stored(cancelled) -> None:
    """The database holds the rule, whatever writes the row."""
    first = rerun_run(cancelled, scope="skipped")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(schedule=first.schedule, repeat_of=cancelled, repeat_scope="skipped", cost_ceiling_usd=Decimal(12))


def test_two_reruns_racing_past_the_check_get_one_run_and_a_clear_refusal(cancelled, monkeypatch) -> None:
    """Both requests see no earlier re-run (the check ran before either wrote): the constraint
    lets one insert in, the other is refused with the same message, and nothing half-made stays."""
    first = rerun_run(cancelled, scope="skipped")
    real = actions._unfinished_rerun_problem
    calls = iter([None])
    monkeypatch.setattr(actions, "_unfinished_rerun_problem", lambda run: next(calls, None) or real(run))
    with pytest.raises(RunActionError) as caught:
        rerun_run(cancelled, scope="skipped")
    assert str(caught.value) == busy_message(cancelled, first)
    assert Run.objects.filter(repeat_of=cancelled).count() == 1
    assert Run.objects.count() == 2


def test_the_api_answers_409_to_the_second_rerun(cancelled, staff_client, django_capture_on_commit_callbacks) -> None:
    url = f"/api/runs/{cancelled.pk}/rerun/"
    with django_capture_on_commit_callbacks(execute=True):
        first = staff_client.post(url, {"scope": "skipped"}, content_type="application/json")
    assert first.status_code == 201, first.content
    rerun = Run.objects.get(pk=first.json()["run"])
    second = staff_client.post(url, {"scope": "skipped"}, content_type="application/json")
    assert second.status_code == 409
    assert second.json() == {"detail": busy_message(cancelled, rerun)}
    assert Run.objects.filter(repeat_of=cancelled).count() == 1


def test_the_admin_double_click_makes_one_rerun_and_says_why_not_two(cancelled, staff_client, django_capture_on_commit_callbacks) -> None:
    data = {"action": "rerun_skipped", "_selected_action": [cancelled.pk], "index": 0}
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post("/admin/runs/run/", data, follow=True)
    page = staff_client.post("/admin/runs/run/", data, follow=True).content.decode()
    rerun = Run.objects.get(repeat_of=cancelled)
    assert f'<li class="error">Run {cancelled.pk} is already being re-run by run {rerun.pk}, which is still {rerun.status}' in page
    assert Run.objects.filter(repeat_of=cancelled).count() == 1


def test_the_cli_refuses_the_second_rerun(cancelled) -> None:
    call_command("rerun", str(cancelled.pk), "--skipped", "--queue", stdout=StringIO())
    rerun = Run.objects.get(repeat_of=cancelled)
    with pytest.raises(CommandError) as caught:
        call_command("rerun", str(cancelled.pk), "--skipped", "--queue", stdout=StringIO())
    assert str(caught.value) == busy_message(cancelled, Run.objects.get(pk=rerun.pk))


# --- nightly --execute over a selection ------------------------------------------------------------


def selection_night(selection: Selection, **kwargs) -> nightly.NightlyOutcome:
    return start_nightly(
        seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ=ENVIRON, execute=True, generated_at=DAY0, selection=selection, **kwargs
    )


def held_selection_run(selection: Selection) -> Run:
    """What the first ``nightly --execute --candidate ...`` holds while it executes: its manual run, claimed just now."""
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    run, created = nightly._selection_run(schedule, cost_ceiling_usd=Decimal(12), selection=selection)
    assert created and creation.claim_run(run)
    return run


def test_a_second_nightly_over_the_same_selection_is_refused_naming_the_running_run(reference_catalog, replay_executors) -> None:
    selection = Selection(candidate_ids=("codex-luna",), limit=2)
    first = held_selection_run(selection)
    with pytest.raises(RunActionError) as caught:
        selection_night(selection)
    assert str(caught.value) == (
        f"run {first.pk} over the same selection of this night's schedule is still running (another `nightly --execute` is "
        f"executing it): wait for it to end, or cancel it (`manage.py cancel_run {first.pk}`), before running this selection again"
    )
    assert Run.objects.count() == 1
    with pytest.raises(CommandError, match=f"^run {first.pk} over the same selection of this night's schedule is still running"):
        call_command("nightly", "--execute", "--generated-at", "2026-08-24", "--candidate", "codex-luna", "--limit", "2", stdout=StringIO())
    assert Run.objects.count() == 1


def test_another_selection_or_a_finished_run_does_not_block(reference_catalog, replay_executors) -> None:
    first = held_selection_run(Selection(candidate_ids=("codex-luna",), limit=2))
    other = selection_night(Selection(candidate_ids=("codex-luna",), limit=1))
    assert other.run_created and other.run.pk != first.pk
    Run.objects.filter(pk=first.pk).update(status=RunStatus.FINISHED)
    again = selection_night(Selection(candidate_ids=("codex-luna",), limit=2))
    assert again.run_created and again.run.pk not in (first.pk, other.run.pk)


def test_a_pending_selection_run_nobody_claimed_is_executed_not_duplicated(reference_catalog, replay_executors) -> None:
    """As the plain nightly does with its one run: a run created but never claimed (the process
    died in between) is claimed and executed by the next delivery."""
    schedule, _ = schedule_for_night(seed=SEED, now=NOW, generated_at=DAY0)
    selection = Selection(candidate_ids=("codex-luna",), limit=2)
    left, _ = nightly._selection_run(schedule, cost_ceiling_usd=Decimal(12), selection=selection)
    for execution in left.executions.select_related("entry"):
        REPLAY_STORE[execution.execution_id] = completed_observation(execution.entry.to_document())
    outcome = selection_night(selection)
    assert (outcome.run.pk, outcome.run_created, outcome.executed) == (left.pk, False, True)
    assert Run.objects.count() == 1


def test_another_rotation_day_of_the_night_is_a_manual_run_beside_its_nightly(reference_catalog, replay_executors) -> None:
    """``nightly --execute --rotation-day D``: a manual run of that day's schedule, never a second
    nightly of the same night (the leaderboard and histories count nightly runs)."""
    from runs.models import Trigger
    from schedules.building import rotation_day

    own = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=True).run
    other_day = (own.schedule.rotation_day + 1) % 7
    assert own.trigger == Trigger.NIGHTLY and own.schedule.rotation_day == rotation_day(own.schedule.generated_at)
    first = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=True, rotation_day=other_day).run
    second = start_nightly(seed=SEED, cost_ceiling_usd=Decimal(12), now=NOW, environ={}, execute=True, rotation_day=other_day).run
    assert first.trigger == second.trigger == Trigger.MANUAL
    assert first.schedule.rotation_day == other_day and first.status == second.status == RunStatus.FINISHED
    assert first.pk != second.pk  # each asked for by hand is its own run, as a selection's is once finished
    assert list(Run.objects.filter(trigger=Trigger.NIGHTLY).values_list("pk", flat=True)) == [own.pk]
