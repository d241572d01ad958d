"""The reference catalog for the ``reference_catalog`` fixture (``tests/conftest.py``), loaded once per
test process and inserted again, row for row, in every later test that asks for it.

``manage.py load_reference`` validates every budget, slot, candidate, case and chaos scenario
(``full_clean``, each constraint checked by a query, each case's steps against their schema): about
0.2 s of CPU and some 230 statements, in close to a thousand tests. On empty tables its outcome is
always the same 35 rows of five tables, so the first load in a process is recorded
(:func:`load_catalog`) and every later one inserts those rows with one ``bulk_create`` per table:
the database gives the keys (as ``load_reference``'s own inserts would get them, in the same
order), and each candidate's slot and budget point at the rows inserted for them.

Only on empty tables: a test that put a budget, a slot, a candidate, a case or a chaos scenario in
the database before asking for the catalog gets the real ``load_reference``, as it did before. Each
test still gets its own rows (the rows are inserted in the test's transaction, or flushed after a
transactional test): nothing carries over from one test to the next but the recorded values.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, models

from tests.builders import load_reference_catalog

#: The tables ``load_reference`` fills, each after the tables its rows point at.
_LABELS = ("candidates.Budget", "candidates.Slot", "candidates.Candidate", "schedules.WorkflowCase", "schedules.ChaosScenario")
#: Per table, in key order, every column of every row the first load on empty tables wrote.
_RECORDED: list[tuple[type[models.Model], list[dict[str, Any]]]] = []


def _tables() -> list[type[models.Model]]:
    from django.apps import apps

    return [apps.get_model(label) for label in _LABELS]


def load_catalog() -> None:
    """The reference catalog in the database: recorded rows inserted again when the catalog's tables
    are empty and a load was recorded in this process, else ``load_reference`` (recorded when it
    ran on empty tables and the database can give back the keys of a bulk insert)."""
    tables = _tables()
    empty = not any(table._base_manager.exists() for table in tables)
    if empty and _RECORDED:
        _insert_recorded()
        return
    load_reference_catalog()
    if empty and connection.features.can_return_rows_from_bulk_insert:
        _record(tables)


def _record(tables: list[type[models.Model]]) -> None:
    recorded = []
    for table in tables:
        columns = [field.attname for field in table._meta.concrete_fields]
        recorded.append((table, list(table._base_manager.order_by("pk").values(*columns))))
    _RECORDED[:] = recorded


def _insert_recorded() -> None:
    keys: dict[type[models.Model], dict[Any, Any]] = {}
    for table, rows in _RECORDED:
        pk = table._meta.pk.attname
        pointers = [field for field in table._meta.concrete_fields if field.is_relation]
        objects = []
        for row in rows:
            values = {name: value for name, value in row.items() if name != pk}
            for field in pointers:
                values[field.attname] = keys[field.related_model][row[field.attname]]
            objects.append(table(**values))
        table._base_manager.bulk_create(objects)
        keys[table] = {row[pk]: inserted.pk for row, inserted in zip(rows, objects, strict=True)}
