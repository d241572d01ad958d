"""The writes that record an execution (``runs.settlement``), each one conditional update: a
claim takes a pending execution of a running, uncancelled run or writes nothing; a reservation
fits under the run's ceiling or writes nothing; an attempt is finished, and an execution
settled, only by the process that still holds it. And a new run's executions are stored as the
model builds them."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.creation import claim_run, create_run
from runs.executors.base import ArtifactSink
from runs.models import Attempt, AttemptOutcome, Execution, ExecutionStatus, Run
from runs.settlement import Call, NotClaimed, Stale, begin_attempt, finish_attempt, settle
from schedules.services import Selection, schedule_for_night

SEED = "runner-live-seven-week-v1"
NOW = dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC)


@pytest.fixture
def a_run(reference_catalog: None) -> Run:
    """A running run of two pending executions under a $1 ceiling."""
    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(1), selection=Selection(limit=2))
    assert claim_run(run)
    return run


def first_execution(run: Run) -> Execution:
    return run.executions.select_related("entry", "run").order_by("position").first()


def observation(execution: Execution) -> dict:
    return {"classification": "skipped", "failure": {"code": "x", "category": "orchestration", "retryable": False, "message": "m"}}


@pytest.mark.django_db
def test_a_reservation_that_fits_under_the_ceiling_is_made_and_one_that_does_not_writes_nothing(a_run: Run) -> None:
    execution = first_execution(a_run)
    attempt = begin_attempt(a_run, execution, 1, Decimal("0.6"), "host:1")
    assert attempt is not None and (attempt.number, attempt.outcome, attempt.reserved_usd) == (1, "running", Decimal("0.6"))
    # 0.6 reserved + 0.6 more > $1: refused, no attempt row, nothing more reserved.
    assert begin_attempt(a_run, execution, 2, Decimal("0.6"), "host:1") is None
    assert Attempt.objects.filter(execution=execution).count() == 1
    assert Run.objects.get(pk=a_run.pk).reserved_usd == Decimal("0.6")
    # Exactly up to the ceiling fits.
    assert begin_attempt(a_run, execution, 2, Decimal("0.4"), "host:1") is not None
    assert Run.objects.get(pk=a_run.pk).reserved_usd == Decimal("1")


@pytest.mark.django_db
def test_an_attempt_number_made_twice_is_refused_and_a_claiming_one_writes_nothing(a_run: Run) -> None:
    execution = first_execution(a_run)
    assert begin_attempt(a_run, execution, 1, Decimal("0.1"), "host:1") is not None
    with pytest.raises(IntegrityError), transaction.atomic():
        begin_attempt(a_run, execution, 1, Decimal("0.1"), "host:1")
    Execution.objects.filter(pk=execution.pk).update(status=ExecutionStatus.PENDING)
    with pytest.raises(NotClaimed):
        begin_attempt(a_run, execution, 1, Decimal("0.1"), "host:2", claim=True)
    row = Execution.objects.get(pk=execution.pk)
    assert (row.status, row.owner) == (ExecutionStatus.PENDING, "")
    assert Run.objects.get(pk=a_run.pk).reserved_usd == Decimal("0.1")


@pytest.mark.django_db
def test_a_claim_takes_only_a_pending_execution_of_an_uncancelled_run(a_run: Run) -> None:
    first, second = a_run.executions.select_related("entry", "run").order_by("position")
    Run.objects.filter(pk=a_run.pk).update(cancel_requested_at=timezone.now())
    with pytest.raises(NotClaimed):
        begin_attempt(a_run, first, 1, Decimal("0.1"), "host:1", claim=True)
    with pytest.raises(Stale):
        settle(first, observation(first), started=time.monotonic(), owner="host:1", cost_known=True, claim=True)
    assert set(Execution.objects.filter(run=a_run).values_list("status", flat=True)) == {ExecutionStatus.PENDING}
    assert not Attempt.objects.exists()
    Run.objects.filter(pk=a_run.pk).update(cancel_requested_at=None)
    attempt = begin_attempt(a_run, second, 1, Decimal("0.1"), "host:1", claim=True)
    assert attempt is not None
    row = Execution.objects.get(pk=second.pk)
    assert (row.status, row.owner) == (ExecutionStatus.RUNNING, "host:1") and row.lease_expires_at is not None


@pytest.mark.django_db
def test_only_the_process_holding_an_attempt_finishes_it_and_settles_its_execution(a_run: Run) -> None:
    execution = first_execution(a_run)
    attempt = begin_attempt(a_run, execution, 1, Decimal("0.5"), "host:1", claim=True)
    call = Call(AttemptOutcome.OBSERVATION, cost=Decimal("0.2"))
    # Another worker took the execution over: nothing of this attempt's finish is written.
    Execution.objects.filter(pk=execution.pk).update(owner="reaper:host:2")
    with pytest.raises(Stale):
        finish_attempt(
            attempt,
            call,
            artifacts=ArtifactSink(),
            secrets=[],
            observation=observation(execution),
            started=time.monotonic(),
            owner="host:1",
        )
    assert Attempt.objects.get(pk=attempt.pk).outcome == AttemptOutcome.RUNNING
    run = Run.objects.get(pk=a_run.pk)
    assert (run.spent_usd, run.reserved_usd) == (Decimal(0), Decimal("0.5"))
    # Held again: the attempt is finished, its cost counted and the reservation released, the execution settled.
    Execution.objects.filter(pk=execution.pk).update(owner="host:1")
    assert not finish_attempt(
        attempt, call, artifacts=ArtifactSink(), secrets=[], observation=observation(execution), started=time.monotonic(), owner="host:1"
    )
    run = Run.objects.get(pk=a_run.pk)
    assert (run.spent_usd, run.reserved_usd) == (Decimal("0.2"), Decimal(0))
    row = Execution.objects.get(pk=execution.pk)
    assert (row.status, row.classification, row.cost_usd, row.cost_known) == ("finished", "skipped", Decimal("0.2"), True)
    # A finished attempt is not finished again.
    with pytest.raises(Stale):
        finish_attempt(attempt, call, artifacts=ArtifactSink(), secrets=[], observation=None, started=time.monotonic(), owner="host:1")


@pytest.mark.django_db
def test_an_unknown_cost_counts_the_reservation_and_flags_the_run(a_run: Run) -> None:
    execution = first_execution(a_run)
    attempt = begin_attempt(a_run, execution, 1, Decimal("0.5"), "host:1", claim=True)
    unpriced = finish_attempt(
        attempt,
        Call(AttemptOutcome.OBSERVATION),
        artifacts=ArtifactSink(),
        secrets=[],
        observation=observation(execution),
        cost_known=False,
        started=time.monotonic(),
        owner="host:1",
    )
    assert unpriced
    run = Run.objects.get(pk=a_run.pk)
    assert (run.spent_usd, run.reserved_usd, run.has_unpriced) == (Decimal("0.5"), Decimal(0), True)
    row = Execution.objects.get(pk=execution.pk)
    assert (row.cost_usd, row.cost_known) == (Decimal("0.5"), False)


@pytest.mark.django_db
def test_a_run_s_executions_are_stored_as_the_model_builds_them(reference_catalog: None) -> None:
    """Every column of every new execution holds what the model's own defaults give the row the
    ORM would have built, in the entries' order; every entry's columns what the schedule says."""
    schedule, _ = schedule_for_night(seed=SEED, now=NOW)
    entries = list(schedule.entries.order_by("pk"))
    assert [entry.position for entry in entries] == list(range(len(entries)))
    document = schedule.to_document()
    assert [entry.to_document() for entry in entries] == document["entries"]
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    rows = list(Execution.objects.filter(run=run).order_by("pk"))
    assert len(rows) == len(entries)
    for position, (row, entry) in enumerate(zip(rows, entries, strict=True)):
        expected = Execution(
            run=run,
            entry=entry,
            position=position,
            execution_id=entry.execution_id,
            case_key=entry.case_key,
            candidate_key=entry.candidate_key,
            slot_key=entry.slot_key,
            repetition=entry.repetition,
        )
        for field in Execution._meta.concrete_fields:
            if field.name != "id":
                assert getattr(row, field.attname) == getattr(expected, field.attname), field.name
