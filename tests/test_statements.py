"""Writes compiled once (``evalhub.statements``): for real values, the SQL and parameters a compiled
write executes are exactly what the ORM compiles for the same statement; a slot declared with the
wrong field, or a statement with a join, is refused when it is compiled. A compiled read builds
the instance its queryset builds."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db import models
from django.db.models import F

from evalhub.statements import Write, update_sql
from runs import reporting, services
from runs.models import Execution, Run
from schedules import services as schedule_services

NOW = dt.datetime(2026, 8, 19, 4, 0, 12, 345678, tzinfo=dt.UTC)
OBSERVATION = {"classification": "completed", "metrics": {"costUsd": 0.01, "settlementMs": 12}, "note": "ü"}


def typed(params: Any) -> list[tuple[type, Any]]:
    return [(type(value), value) for value in params]


def settle_values(**changes: Any) -> dict[str, Any]:
    values = {
        "pk": 7,
        "owner": "host:42",
        "classification": "completed",
        "failure_code": "",
        "failure_category": "",
        "failure_retryable": None,
        "failure_message": "",
        "observation": OBSERVATION,
        "settlement_ms": 12,
        "add_cost": Decimal("0.010000"),
        "cost_known": True,
        "duration_ms": 1234,
        "now": NOW,
    }
    return {**values, **changes}


CASES = [
    ("claim", services._CLAIM, (), {"pk": 7, "owner": "host:42", "until": NOW + dt.timedelta(seconds=90), "now": NOW}),
    ("reserve", services._RESERVE, (), {"run": 3, "fit": Decimal("1.4999995"), "reserve": Decimal("1.5")}),
    (
        "open attempt",
        services._OPEN_ATTEMPT,
        (),
        {"execution": 7, "number": 2, "reserved": Decimal("1.5"), "owner": "host:42", "started": NOW},
    ),
    (
        "finish attempt, unknown cost",
        services._FINISH_ATTEMPT,
        (),
        {
            "pk": 11,
            "outcome": "observation",
            "code": "",
            "retryable": None,
            "message": "",
            "cost": None,
            "counted": Decimal("1.5"),
            "duration_ms": 0,
            "finished_at": NOW,
        },
    ),
    (
        "finish attempt, priced",
        services._FINISH_ATTEMPT,
        (),
        {
            "pk": 11,
            "outcome": "infrastructure_error",
            "code": "provider_http_503",
            "retryable": True,
            "message": "try again",
            "cost": Decimal("0.02"),
            "counted": Decimal("0.02"),
            "duration_ms": 5,
            "finished_at": NOW,
        },
    ),
    ("spend", services._SPEND, False, {"run": 3, "counted": Decimal("0.01"), "reserved": Decimal("1.5")}),
    ("spend, unpriced", services._SPEND, True, {"run": 3, "counted": Decimal("1.5"), "reserved": Decimal("1.5")}),
    ("settle", services._SETTLE, False, settle_values()),
    ("settle, any owner", services._SETTLE, False, settle_values(owner=None, settlement_ms=None, failure_retryable=False)),
    ("settle and claim", services._SETTLE, True, settle_values(classification="skipped", failure_code="run_cancelled")),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "write", "variant", "values"), CASES, ids=[case[0] for case in CASES])
def test_a_compiled_write_executes_what_the_orm_compiles_for_the_same_values(name: str, write: Write, variant: Any, values: dict) -> None:
    sql, params = write.sql(variant, **values)
    orm_sql, orm_params = write.build(values, variant)
    assert sql == orm_sql
    assert typed(params) == typed(orm_params)


@pytest.mark.django_db
def test_values_that_are_none_compile_a_statement_of_their_own() -> None:
    with_owner, _ = services._SETTLE.sql(False, **settle_values())
    any_owner, _ = services._SETTLE.sql(False, **settle_values(owner=None))
    assert '"owner" = %s' in with_owner.split("WHERE")[1]
    assert '"owner"' not in any_owner.split("WHERE")[1]


@pytest.mark.django_db
def test_a_slot_declared_with_a_field_that_prepares_its_value_otherwise_is_refused() -> None:
    # The amount is written into spent_usd, but declared as an integer: its made-up values would
    # reach the statement as integers, not as the decimals the ORM prepares.
    wrong = Write(
        "spend, declared wrong",
        lambda values, variant: update_sql(Run.objects.filter(pk=values["run"]), spent_usd=values["amount"]),
        {"run": Run._meta.get_field("id"), "amount": models.IntegerField()},
    )
    with pytest.raises(RuntimeError, match="does not prepare its value as the ORM does"):
        wrong.sql(run=1, amount=Decimal("0.5"))


@pytest.mark.django_db
def test_every_slot_must_be_given() -> None:
    with pytest.raises(TypeError, match=r"slots \['counted', 'reserved', 'run'\] expected"):
        services._SPEND.sql(False, run=3, counted=Decimal(1))


@pytest.mark.django_db
def test_a_write_whose_value_changes_its_sql_is_refused() -> None:
    shifty = Write(
        "shifty",
        lambda values, variant: update_sql(
            Execution.objects.filter(pk=values["pk"]),
            **({"owner": "x"} if values["duration_ms"] > 1_000_001 else {"duration_ms": F("duration_ms")}),
        ),
        {"pk": Execution._meta.get_field("id"), "duration_ms": Execution._meta.get_field("duration_ms")},
    )
    with pytest.raises(RuntimeError, match="changes the statement's SQL"):
        shifty.sql(pk=1, duration_ms=5)


@pytest.mark.django_db
def test_an_update_with_a_join_is_refused() -> None:
    with pytest.raises(ValueError, match="use Exists"):
        update_sql(Execution.objects.filter(run__status="running"), owner="x")


@pytest.mark.django_db
def test_a_row_with_a_field_filled_in_at_save_is_not_inserted_by_a_compiled_write() -> None:
    from evalhub.statements import insert_sql
    from runs.models import Scorecard

    with pytest.raises(ValueError, match="auto_now or auto_now_add"):
        insert_sql(Scorecard(execution_id=1, scoring_version="v", document={}))


def _fields(row: Any) -> dict[str, Any]:
    return {name: value for name, value in vars(row).items() if name != "_state"}


@pytest.mark.django_db
def test_a_compiled_read_builds_the_instance_the_queryset_builds(reference_catalog: None) -> None:
    """The execution a worker reads, with its entry, run and schedule and ``has_attempts``, and
    its case: as the ORM's own querysets read them; a row that is not there is None."""
    from runs.services import create_run
    from schedules.models import WorkflowCase
    from schedules.services import schedule_for_night

    schedule, _ = schedule_for_night(seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC))
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    for execution in run.executions.order_by("position")[:3]:
        expected = services._claimable(execution.pk).get()
        read = services._READ_CLAIMABLE.first(pk=execution.pk)
        assert _fields(read) == _fields(expected)
        assert read.has_attempts is False
        assert _fields(read.entry) == _fields(expected.entry)
        assert _fields(read.run) == _fields(expected.run)
        assert _fields(read.run.schedule) == _fields(expected.run.schedule)
        assert read._state.adding is False
        assert _fields(services._READ_CASE.first(key=execution.case_key)) == _fields(WorkflowCase.objects.get(key=execution.case_key))
    assert services._READ_CLAIMABLE.first(pk=-5) is None
    assert services._READ_CASE.first(key="no-such-case") is None
    assert services._READ_UNSETTLED.found(run=run.pk) is True
    run.executions.update(status="finished")
    assert services._READ_UNSETTLED.found(run=run.pk) is False


ENTRY = {
    "schedule": 5,
    "position": 3,
    "execution_id": "rwe-0123456789abcdef",
    "case_key": "final-response",
    "case_version": 2,
    "candidate_key": "codex-luna",
    "slot_key": "codex-strong",
    "repetition": 1,
    "candidate": {"id": "codex-luna", "model": "luna", "note": "ü"},
    "budget": {"maxAttempts": 2, "maxCostUsd": 1.5},
}
SCORECARD = {
    "execution": 7,
    "scoring_version": "v2",
    "document": {"overall": {"score": 0.75, "gatePassed": True, "passed": False}, "note": "ü"},
    "overall_score": 0.75,
    "gate_passed": True,
    "passed": False,
    "created_at": NOW,
}
INSERTS = [
    (
        "executions",
        services._INSERT_EXECUTIONS,
        {
            "run": 3,
            "entry": 9,
            "position": 0,
            "execution_id": "rwe-0123456789abcdef",
            "case_key": "final-response",
            "candidate_key": "codex-luna",
            "slot_key": "codex-strong",
            "repetition": 2,
        },
    ),
    ("schedule entries", schedule_services._INSERT_ENTRIES, ENTRY),
    ("scorecards", reporting._INSERT_SCORECARDS, SCORECARD),
    (
        "scorecards, unscored",
        reporting._INSERT_SCORECARDS,
        {**SCORECARD, "document": {"overall": {"score": None}}, "overall_score": None, "gate_passed": None, "passed": None},
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "write", "values"), INSERTS, ids=[case[0] for case in INSERTS])
def test_a_compiled_insert_executes_for_each_row_what_the_orm_compiles_for_it(name: str, write: Write, values: dict) -> None:
    other = {**values, "position": 4} if "position" in values else {**values, "execution": 8}
    sql, params = write.sql_many([values, other])
    for row, row_params in zip([values, other], params, strict=True):
        orm_sql, orm_params = write.build(row, ())
        assert sql == orm_sql
        assert typed(row_params) == typed(orm_params)
    assert params[0] != params[1]


@pytest.mark.django_db
def test_the_insert_of_a_row_is_the_one_bulk_create_compiles_for_it() -> None:
    """Raw (no pre_save) and without RETURNING, but otherwise bulk_create's own statement for a
    row of a model with no field filled in at save."""
    from django.db import connection
    from django.db.models.sql.subqueries import InsertQuery

    from schedules.models import ScheduleEntry

    row = ScheduleEntry(**{ScheduleEntry._meta.get_field(name).attname: value for name, value in ENTRY.items()})
    query = InsertQuery(ScheduleEntry)
    query.insert_values([field for field in ScheduleEntry._meta.concrete_fields if field.name != "id"], [row])
    ((orm_sql, orm_params),) = query.get_compiler(connection=connection).as_sql()
    sql, (params,) = schedule_services._INSERT_ENTRIES.sql_many([ENTRY])
    assert sql == orm_sql
    assert typed(params) == typed(orm_params)


@pytest.mark.django_db
def test_a_run_s_executions_are_stored_as_bulk_create_stored_them(reference_catalog: None) -> None:
    """Every column of every new execution holds what the model's own defaults give the row the
    ORM would have built, in the entries' order; every entry's columns what the schedule says."""
    from runs.services import create_run
    from schedules.services import schedule_for_night

    schedule, _ = schedule_for_night(seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC))
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


@pytest.mark.django_db
def test_a_scorecard_a_concurrent_scorer_stored_first_stands(reference_catalog: None) -> None:
    from runs.models import Scorecard
    from runs.services import create_run
    from schedules.services import schedule_for_night

    schedule, _ = schedule_for_night(seed="runner-live-seven-week-v1", now=dt.datetime(2026, 8, 19, 4, 0, tzinfo=dt.UTC))
    run, _ = create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), trigger="nightly")
    first, second = run.executions.order_by("position")[:2]
    reporting._INSERT_SCORECARDS.insert_many([{**SCORECARD, "execution": first.pk}])
    reporting._INSERT_SCORECARDS.insert_many(
        [{**SCORECARD, "execution": first.pk, "scoring_version": "later"}, {**SCORECARD, "execution": second.pk}]
    )
    stored = {card.execution_id: card for card in Scorecard.objects.filter(execution__run=run)}
    assert sorted(stored) == [first.pk, second.pk]
    assert stored[first.pk].scoring_version == "v2"
    assert stored[first.pk].document == SCORECARD["document"]
    assert stored[first.pk].created_at == NOW


# --- executing a compiled statement ------------------------------------------------------------------


@pytest.fixture
def a_run(reference_catalog: None) -> Run:
    from runs.services import create_run
    from schedules.services import Selection, schedule_for_night

    schedule, _ = schedule_for_night(seed="runner-live-seven-week-v1", now=NOW)
    return create_run(schedule=schedule, cost_ceiling_usd=Decimal(12), selection=Selection(limit=2))[0]


@pytest.mark.django_db
@pytest.mark.parametrize("watched", [False, True], ids=["driver cursor", "django cursor"])
def test_a_compiled_statement_runs_alike_watched_or_not(a_run: Run, watched: bool) -> None:
    """Not watched, a compiled statement runs on the backend's own cursor; watched (a query log,
    as every query-count pin is), on Django's, which logs it. The same rows change either way, a
    refused write is Django's ``IntegrityError``, and a read finds the same row."""
    import contextlib

    from django.db import IntegrityError, connection, transaction
    from django.test.utils import CaptureQueriesContext

    from evalhub.statements import run_insert_statement, run_statement
    from runs.models import Attempt

    execution = a_run.executions.order_by("position").first()
    watching = CaptureQueriesContext(connection) if watched else contextlib.nullcontext()
    with watching as seen:
        assert connection.queries_logged is watched
        assert run_statement(services._RESERVE.sql(run=a_run.pk, fit=Decimal("0.4999995"), reserve=Decimal("0.5"))) == 1
        assert run_statement(services._RESERVE.sql(run=a_run.pk, fit=Decimal("99"), reserve=Decimal("99"))) == 0
        opening = services._OPEN_ATTEMPT.sql(execution=execution.pk, number=1, reserved=Decimal("0.5"), owner="host:1", started=NOW)
        pk = run_insert_statement(opening)
        with pytest.raises(IntegrityError), transaction.atomic():
            run_insert_statement(opening)  # the same (execution, number) again
        assert services._READ_CASE.first(key=execution.case_key).key == execution.case_key
    if watched:
        logged = [query["sql"] for query in seen.captured_queries]
        assert sum('UPDATE "runs_run"' in sql for sql in logged) == 2
        assert sum('INSERT INTO "runs_attempt"' in sql for sql in logged) == 2
        assert sum('FROM "schedules_workflowcase"' in sql for sql in logged) == 1
    assert Attempt.objects.get(pk=pk).number == 1
    a_run.refresh_from_db()
    assert a_run.reserved_usd == Decimal("0.5")


@pytest.mark.django_db
def test_sqlite_is_given_each_statement_in_the_form_django_converts_it_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """On SQLite a compiled statement reaches the driver in its ``?`` form, converted once by
    Django's own cursor and kept: a literal ``%%`` is one ``%`` and the values bind as Django's
    cursor binds them. Past the bound a statement is converted at every run rather than kept."""
    from django.db import connection

    from evalhub import statements

    if connection.vendor != "sqlite":
        pytest.skip("only SQLite's placeholders differ from Django's")
    monkeypatch.setattr(statements, "_SQLITE_FORMS", {})
    sql = "SELECT %s || 'a%%b', %s + 1"
    assert statements._first_row((sql, ["x", 1])) == ("xa%b", 2)
    assert statements._first_row((sql, ["y", 2])) == ("ya%b", 3)
    kept = statements._SQLITE_FORMS
    assert kept == {sql: "SELECT ? || 'a%b', ? + 1"}
    monkeypatch.setattr(statements, "_SQLITE_FORMS_KEPT", 1)
    other = "SELECT %s * 2"
    assert statements._first_row((other, [21])) == (42,)
    assert list(statements._SQLITE_FORMS) == [sql]


@pytest.mark.django_db
def test_a_compiled_statement_is_refused_inside_a_transaction_that_must_roll_back(a_run: Run) -> None:
    from django.db import DatabaseError, transaction
    from django.db.transaction import TransactionManagementError

    from evalhub.statements import run_statement

    statement = services._RESERVE.sql(run=a_run.pk, fit=Decimal("0.4999995"), reserve=Decimal("0.5"))
    with transaction.atomic():
        with pytest.raises(DatabaseError), transaction.atomic(savepoint=False):
            run_statement(("SELECT * FROM no_such_table_here WHERE 1 = %s", [1]))
        with pytest.raises(TransactionManagementError):
            run_statement(statement)
        transaction.set_rollback(True)
