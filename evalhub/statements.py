"""Writes (and a worker's reads) the ORM compiles once per process, then executes with new values.

The ORM compiles a statement's SQL every time it runs it: for a conditional update with a
subquery about a millisecond on a loaded two-core machine, where SQLite answers the write in
tens of µs. A write made for every execution of a night is described here once, as the ORM
query it is (:func:`update_sql`, :func:`insert_sql`), and compiled by the ORM itself, per
database alias and *shape* — which of its values are None (``= NULL`` and ``IS NULL`` are not
parameters) and the caller's own variants (an optional column, an extra condition) — for
made-up values of its *slots*, the values that change from one call to the next. Each call
then fills its values in, prepared for the database by the slot's model field as the ORM
prepares them, and executes the statement the ORM compiled.

Which parameters a slot fills is found by compiling once with every slot's made-up value and
once more per slot with only that slot's value changed: the parameters that change are that
slot's (one value may fill several, ``now`` in two columns). A compiled write is checked before
it is used: its made-up values, prepared by the slots' fields, must give back exactly the
parameters the ORM compiled, else :class:`RuntimeError` (a slot declared with the wrong field).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection, connections, models, transaction
from django.db.backends.sqlite3.base import Database as SQLite
from django.db.backends.sqlite3.base import SQLiteCursorWrapper
from django.db.models.constants import OnConflict
from django.db.models.query import get_related_populators
from django.db.models.sql.subqueries import InsertQuery, UpdateQuery

#: ``build(values, variant)`` → the ORM's ``(sql, params)`` for those slot values.
Build = Callable[[Mapping[str, Any], Hashable], tuple[str, Sequence[Any]]]


@dataclass(frozen=True)
class Compiled:
    """One shape of a write as the ORM compiled it: its SQL, its parameters for the made-up
    values, and the parameter positions each slot fills."""

    sql: str
    params: tuple[Any, ...]
    slots: tuple[tuple[int, str], ...]

    def fill(self, prepared: Mapping[str, Any]) -> list[Any]:
        params = list(self.params)
        for index, name in self.slots:
            params[index] = prepared[name]
        return params


class Write:
    """A write compiled once per database alias and shape (see the module's docstring).

    ``build(values, variant)`` makes the ORM statement for the slot values (a mapping of every
    slot's name to its value); ``slots`` names each slot's model field, which prepares its value
    for the database (a value inside an expression, ``F("spent_usd") + amount``, is prepared by
    the field the expression's value has: ``models.DecimalField()`` for a ``Decimal``).
    """

    def __init__(self, name: str, build: Build, slots: Mapping[str, models.Field]) -> None:
        self.name = name
        self.build = build
        self.slots = dict(slots)
        self._compiled: dict[tuple[str, Hashable, frozenset[str]], Compiled] = {}
        self._lock = threading.Lock()

    def sql(self, variant: Hashable = (), **values: Any) -> tuple[str, list[Any]]:
        """The statement and its parameters for ``values`` (every slot, by name)."""
        if values.keys() != self.slots.keys():
            raise TypeError(f"{self.name}: slots {sorted(self.slots)} expected, got {sorted(values)}")
        nulls = frozenset(name for name, value in values.items() if value is None)
        # The connection itself, not the proxy, which looks the thread's connection up at every use.
        database = connections[connection.alias]
        compiled = self._compiled.get((database.alias, variant, nulls)) or self._compiled_for(database, variant, nulls)
        return compiled.sql, compiled.fill(self._prepare(values, nulls, database))

    def prepare(self, variant: Hashable = (), nulls: Iterable[str] = ()) -> None:
        """Compile the shape ``variant`` with the slots ``nulls`` None for the current database
        now rather than at its first use (a worker prepares its executions' statements when it
        starts, ``runs.services.prepare_worker_statements``). Raises as a compile does
        (:class:`RuntimeError`, :class:`TypeError`)."""
        unknown = set(nulls) - self.slots.keys()
        if unknown:
            raise TypeError(f"{self.name}: no slots {sorted(unknown)}")
        self._compiled_for(connections[connection.alias], variant, frozenset(nulls))

    def _compiled_for(self, database: Any, variant: Hashable, nulls: frozenset[str]) -> Compiled:
        """The shape's statement for ``database``, compiled the first time it is asked for."""
        key = (database.alias, variant, nulls)
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is None:
                compiled = self._compiled[key] = self._compile(variant, nulls)
        return compiled

    def execute(self, variant: Hashable = (), **values: Any) -> int:
        """Execute the write; the number of rows it changed."""
        return run_statement(self.sql(variant, **values))

    def insert(self, variant: Hashable = (), **values: Any) -> Any:
        """Execute an insert compiled by :func:`insert_sql`; the new row's primary key."""
        return run_insert_statement(self.sql(variant, **values))

    def sql_many(self, rows: Sequence[Mapping[str, Any]], variant: Hashable = ()) -> tuple[str, list[list[Any]]]:
        """The statement and each row's parameters, for an insert compiled by :func:`insert_rows_sql`
        (``rows``: every slot of each row, by name). A None value is a parameter like any other in
        an insert (the SQL has no ``IS NULL``), so every row fills the statement compiled without nulls."""
        database = connections[connection.alias]
        compiled = self._compiled.get((database.alias, variant, frozenset())) or self._compiled_for(database, variant, frozenset())
        slots = self.slots
        params = []
        for values in rows:
            if values.keys() != slots.keys():
                raise TypeError(f"{self.name}: slots {sorted(slots)} expected, got {sorted(values)}")
            params.append(compiled.fill({name: slots[name].get_db_prep_save(value, database) for name, value in values.items()}))
        return compiled.sql, params

    def insert_many(self, rows: Sequence[Mapping[str, Any]], variant: Hashable = ()) -> None:
        """Insert ``rows`` with one ``executemany`` of an insert compiled by :func:`insert_rows_sql`,
        in their order and in one transaction, as ``bulk_create`` inserts them (their primary keys
        are not read back)."""
        if not rows:
            return
        sql, params = self.sql_many(rows, variant)
        with transaction.atomic(savepoint=False), connection.cursor() as cursor:
            cursor.executemany(sql, params)

    def _prepare(self, values: Mapping[str, Any], nulls: frozenset[str], database: Any) -> dict[str, Any]:
        return {name: self.slots[name].get_db_prep_save(value, database) for name, value in values.items() if name not in nulls}

    def _compile(self, variant: Hashable, nulls: frozenset[str]) -> Compiled:
        base = {name: None if name in nulls else _made_up(field, 0) for name, field in self.slots.items()}
        sql, params = self.build(base, variant)
        params = tuple(params)
        slots: list[tuple[int, str]] = []
        for name, field in self.slots.items():
            if name in nulls:
                continue
            other_sql, other = self.build({**base, name: _made_up(field, 1)}, variant)
            if other_sql != sql or len(other) != len(params):
                raise RuntimeError(f"{self.name}: the slot {name!r} changes the statement's SQL, not only its parameters")
            found = [index for index, (a, b) in enumerate(zip(params, other, strict=True)) if not _same(a, b)]
            if not found:
                raise RuntimeError(f"{self.name}: the slot {name!r} fills no parameter")
            slots.extend((index, name) for index in found)
        if len({index for index, _ in slots}) != len(slots):
            raise RuntimeError(f"{self.name}: two slots fill the same parameter")
        compiled = Compiled(sql, params, tuple(sorted(slots)))
        filled = compiled.fill(self._prepare(base, nulls, connections[connection.alias]))
        if not all(_same(a, b) for a, b in zip(filled, params, strict=True)):
            raise RuntimeError(f"{self.name}: a slot's field does not prepare its value as the ORM does")
        return compiled


class Read(Write):
    """A read compiled once per database alias and shape, as a :class:`Write` is.

    ``build(values, variant)`` makes the ORM queryset for the slot values; :meth:`first` runs the
    compiled SELECT and builds the model instance from its first row as the queryset itself
    would (``select_related`` rows and annotations set, the columns' converters applied), and
    :meth:`found` says whether there is a row. Compiling a read with joins and an ``Exists``
    costs the ORM about ten times what running it costs the database.
    """

    def __init__(
        self, name: str, build: Callable[[Mapping[str, Any], Hashable], models.QuerySet], slots: Mapping[str, models.Field]
    ) -> None:
        super().__init__(name, lambda values, variant: _select_sql(build(values, variant)), slots)
        self.queryset = build
        self._readers: dict[tuple[str, Hashable], _Reader] = {}

    def found(self, variant: Hashable = (), **values: Any) -> bool:
        """Whether the read finds a row."""
        return _first_row(self.sql(variant, **values)) is not None

    def first(self, variant: Hashable = (), **values: Any) -> Any:
        """The first row the read finds as a model instance, or None."""
        sql, params = self.sql(variant, **values)
        database = connections[connection.alias]
        reader = self._readers.get((database.alias, variant)) or self._reader_for(database, variant, values)
        row = _first_row((sql, params))
        if row is None:
            return None
        # As django.db.models.query.ModelIterable builds each instance (what it finds per query found once).
        if reader.converters:
            (row,) = reader.compiler.apply_converters([row], reader.converters)
        instance = reader.model.from_db(database.alias, reader.names, row[reader.start : reader.end])
        for populator in reader.related:
            populator.populate(row, instance)
        for name, position in reader.annotations:
            setattr(instance, name, row[position])
        return instance

    def prepare(self, variant: Hashable = (), nulls: Iterable[str] = ()) -> None:
        """:meth:`Write.prepare`, and what :meth:`first` builds its instances with."""
        super().prepare(variant, nulls)
        database = connections[connection.alias]
        made_up = {name: None if name in nulls else _made_up(field, 0) for name, field in self.slots.items()}
        self._reader_for(database, variant, made_up)

    def _reader_for(self, database: Any, variant: Hashable, values: Mapping[str, Any]) -> _Reader:
        """The compiler whose columns :meth:`first` reads (the model, its related rows, its
        annotations), their converters and the related rows' populators, found once per database
        and variant (the values only fill the compiled query)."""
        key = (database.alias, variant)
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                compiler = self.queryset(values, variant).query.get_compiler(connection=database)
                compiler.as_sql()  # fills in what its columns are: the model, its related rows, its annotations
                klass_info = compiler.klass_info
                start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
                reader = self._readers[key] = _Reader(
                    compiler=compiler,
                    converters=compiler.get_converters([column[0] for column in compiler.select[: compiler.col_count]]),
                    related=get_related_populators(klass_info, compiler.select, database.alias),
                    model=klass_info["model"],
                    names=[column[0].target.attname for column in compiler.select[start:end]],
                    start=start,
                    end=end,
                    annotations=tuple(compiler.annotation_col_map.items()),
                )
        return reader


@dataclass(frozen=True)
class _Reader:
    """What :meth:`Read.first` builds an instance from a row with, found once per database and
    variant: the compiler and its columns' converters, the related rows' populators, the model,
    its columns' attribute names and where they are in the row, and each annotation's position."""

    compiler: Any
    converters: dict[int, Any]
    related: list[Any]
    model: type[models.Model]
    names: list[str]
    start: int
    end: int
    annotations: tuple[tuple[str, int], ...]


def _executed(sql: str, params: Sequence[Any]) -> Any:
    """A cursor that has executed ``sql``: the caller reads it and closes it.

    A compiled statement is executed on the backend's cursor (``create_cursor``: SQLite's
    placeholders converted, PostgreSQL's types adapted, as Django's own cursor does) with
    Django's checks around it — the connection opened or renewed after a failed health check,
    not shared across threads, no statement inside a transaction that must roll back, the
    driver's errors as Django's (``IntegrityError``…) — but without Django's cursor wrapper,
    which cost as much again as SQLite's own execution of an execution's small writes. When the
    connection's statements are watched — a query log (``DEBUG``, a test counting queries) or an
    execute wrapper — it runs on Django's cursor, so every statement is seen."""
    database = connections[connection.alias]
    if database.queries_logged or database.execute_wrappers:
        cursor = database.cursor()
    else:
        database.close_if_health_check_failed()
        database.ensure_connection()
        database.validate_thread_sharing()
        database.validate_no_broken_transaction()
        with database.wrap_database_errors:
            cursor = database.create_cursor()
    try:
        with database.wrap_database_errors:
            if isinstance(cursor, SQLiteCursorWrapper):
                # SQLite's own cursor, given the statement in its ``?`` form: Django's wrapper
                # converts ``%s`` with a regular expression over the whole text at every execute,
                # about 30 µs for an execution's longer statements, 0.4 ms for its twelve.
                SQLite.Cursor.execute(cursor, _sqlite_form(cursor, sql), params)
            else:
                cursor.execute(sql, params)
    except BaseException:
        cursor.close()
        raise
    return cursor


#: Each compiled statement in SQLite's ``?`` form, converted once by Django's own cursor
#: (:func:`_sqlite_form`); a process compiles a few dozen statements.
_SQLITE_FORMS: dict[str, str] = {}
_SQLITE_FORMS_KEPT = 512


def _sqlite_form(cursor: SQLiteCursorWrapper, sql: str) -> str:
    """``sql`` as SQLite executes it (``%s`` → ``?``, ``%%`` → ``%``), converted by the backend's
    ``convert_query`` the first time and kept (up to ``_SQLITE_FORMS_KEPT`` statements)."""
    form = _SQLITE_FORMS.get(sql)
    if form is None:
        form = cursor.convert_query(sql)
        if len(_SQLITE_FORMS) < _SQLITE_FORMS_KEPT:
            _SQLITE_FORMS[sql] = form
    return form


def _read(statement: tuple[str, Sequence[Any]], read: Callable[[Any], Any]) -> Any:
    """``read(cursor)`` of a cursor that executed ``statement`` (:func:`_executed`), then closed."""
    cursor = _executed(*statement)
    try:
        with connections[connection.alias].wrap_database_errors:
            return read(cursor)
    finally:
        cursor.close()


def _first_row(statement: tuple[str, Sequence[Any]]) -> Any:
    """The first row a compiled read finds, or None."""
    return _read(statement, lambda cursor: cursor.fetchone())


def run_statement(statement: tuple[str, Sequence[Any]]) -> int:
    """Execute a statement :meth:`Write.sql` made; the number of rows it changed.

    A transaction's statements made before it opens (compiled the first time, their values
    prepared — an observation's JSON encoded — every time) leave it holding SQLite's one write
    lock only while they run."""
    return _read(statement, lambda cursor: cursor.rowcount)


def run_insert_statement(statement: tuple[str, Sequence[Any]]) -> Any:
    """Execute an insert :meth:`Write.sql` made from :func:`insert_sql`; the new row's primary key."""
    if connection.features.can_return_columns_from_insert:
        return _read(statement, lambda cursor: cursor.fetchone()[0])
    return _read(statement, lambda cursor: cursor.lastrowid)


def _select_sql(queryset: models.QuerySet) -> tuple[str, Sequence[Any]]:
    return queryset.query.get_compiler(connection=connection).as_sql()


def update_sql(queryset: models.QuerySet, **values: Any) -> tuple[str, Sequence[Any]]:
    """The ``(sql, params)`` of ``queryset.update(**values)``, compiled as ``update`` compiles it.

    Only an update of one table: one with a join makes the ORM read the ids first (a query
    while compiling), which a compiled write cannot repeat."""
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.annotations = {}
    if query.related_updates or query.count_active_tables() != 1:
        raise ValueError("a compiled write updates one table: use Exists() rather than a join")
    return query.get_compiler(queryset.db).as_sql()


def insert_sql(row: models.Model) -> tuple[str, Sequence[Any]]:
    """The ``(sql, params)`` of inserting ``row`` (its primary key left to the database and
    returned where the database can), as ``save`` compiles it.

    Every value is the row's as built, so a value filled in when the row is saved (``auto_now``,
    ``auto_now_add``) would be the compile's: such a model cannot be inserted this way (a
    :class:`Write` refuses it: the value changes with every compile)."""
    if any(getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False) for field in row._meta.concrete_fields):
        raise ValueError(f"{type(row).__name__} has a field filled in at save (auto_now or auto_now_add): insert it with the ORM")
    opts = row._meta
    fields = [field for field in opts.local_concrete_fields if field is not opts.auto_field and not field.generated]
    query = InsertQuery(type(row))
    query.insert_values(fields, [row])
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [opts.pk]
    ((sql, params),) = compiler.as_sql()
    return sql, params


def insert_rows_sql(row: models.Model, *, ignore_conflicts: bool = False) -> tuple[str, Sequence[Any]]:
    """The ``(sql, params)`` of ``bulk_create`` inserting ``row`` as one of its rows (its primary
    key left to the database and not returned; with ``ignore_conflicts`` a row a unique constraint
    refuses is left out), for :meth:`Write.insert_many`.

    Every value is the row's own, a field filled in at save included: the insert is compiled as
    a raw one (``bulk_create`` itself calls ``pre_save``, which sets an ``auto_now_add`` field to
    the clock), so such a field must be a slot and the caller gives it the time, as ``pre_save``
    would have."""
    opts = row._meta
    fields = [field for field in opts.concrete_fields if not field.generated and not isinstance(field, models.AutoField)]
    query = InsertQuery(type(row), on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    query.insert_values(fields, [row], raw=True)
    ((sql, params),) = query.get_compiler(connection=connection).as_sql()
    return sql, params


def _made_up(field: models.Field, tag: int) -> Any:
    """A made-up value for ``field`` (two different ones, by ``tag``), never written anywhere."""
    if isinstance(field, models.BooleanField):
        return tag == 0
    if isinstance(field, models.DecimalField):
        return Decimal(f"0.00010{tag + 1}")
    if isinstance(field, models.FloatField):
        return 0.25 + tag
    if isinstance(field, models.DateTimeField):
        return dt.datetime(2000, 1, 1 + tag, 1, 2, 3, tzinfo=dt.UTC)
    if isinstance(field, (models.IntegerField, models.AutoField, models.ForeignKey)):
        return 1_000_001 + tag
    if isinstance(field, (models.CharField, models.TextField)):
        return f"made-up-{tag}"
    if isinstance(field, models.JSONField):
        return {"madeUp": tag}
    raise TypeError(f"no made-up value for a {type(field).__name__}")


def _same(a: Any, b: Any) -> bool:
    """Whether two prepared parameters are the same value of the same type (a driver's JSON
    wrapper compares what it wraps)."""
    if type(a) is not type(b):
        return False
    if hasattr(a, "obj") and not isinstance(a, (str, int, float, Decimal, dt.datetime)):
        return a.obj == b.obj
    return a == b
