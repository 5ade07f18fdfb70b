"""Hand-written SQL for the statements every request runs: quoted names, model
instances read with their related ones (:class:`JoinedRows`), rows inserted
(:class:`Inserts`), and the cursor that has PostgreSQL prepare them
(:func:`prepared_cursor`).

Why by hand at all: the ORM compiles a queryset to SQL anew each time it runs, about
0.4 ms of CPU for a query with two joins, three times what PostgreSQL takes to answer
it, and PostgreSQL plans each statement anew too. On the path every API request takes
(its token) and on submission's (the default account, its QOS, the quotas, the job and
its event) that was most of the CPU a request cost. These write each statement once per
database and give the same instances ``select_related`` and ``Model.save`` would, with
the same conversions (aware datetimes, JSON, decimals); tests compare them with the ORM's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import ForeignKey, ForeignObjectRel, Model

M = TypeVar("M", bound=Model)

Converter = Callable[[Any, Any, Any], Any]


@functools.cache
def _preparing_cursor() -> type:
    """psycopg's server-binding cursor, preparing every statement it runs."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):  # type: ignore[misc]  # psycopg's class, typed loosely by Django
        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None) -> Any:
            return super().execute(query, params, prepare=True, binary=binary)  # type: ignore[misc]

        def _send_query_prepared(self, name: bytes, pgq: Any, *, binary: Any = None) -> None:
            # psycopg records the statement only when it runs one unprepared; Django logs
            # (and tests count) what it records.
            self._query = pgq
            super()._send_query_prepared(name, pgq, binary=binary)  # type: ignore[misc]

    return PreparingCursor


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """A cursor (Django's, so errors, query counts and debug logging are as usual) whose
    statements PostgreSQL parses and plans once per connection and then runs by name
    with new values: for the few statements every request runs, planning was as much
    of PostgreSQL's CPU as running them (a submission: 1.9 -> 1.0 ms). Django binds
    values into the SQL text itself and never prepares, which suits the many one-off
    and bulk statements elsewhere (a bound statement takes at most 65,535 values).
    Elsewhere than PostgreSQL, the plain cursor."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql":
        with db.cursor() as cursor:
            yield cursor
        return
    db.ensure_connection()
    raw = db.connection
    previous = raw.cursor_factory
    raw.cursor_factory = _preparing_cursor()  # this thread's connection, for this one cursor
    try:
        cursor = db.cursor()  # (a failed health check reconnects: a plain cursor then, as correct)
    finally:
        raw.cursor_factory = previous
    with cursor:
        yield cursor


def quoted_table(model: type[Model]) -> str:
    """``model``'s table name, quoted for raw SQL."""
    return connection.ops.quote_name(model._meta.db_table)


def quoted_pk(model: type[Model]) -> str:
    """``model``'s primary key column, quoted for raw SQL."""
    meta = model._meta
    return connection.ops.quote_name(meta.pk.column if meta.pk and meta.pk.column else "id")


@dataclass(frozen=True, slots=True)
class _Part:
    """One model of the join: its alias, how it joins the part it hangs from, and how
    its instance is cached on that part's instance (as ``select_related`` caches it)."""

    model: type[Model]
    alias: str
    parent: int  # index of the part it hangs from; -1 for the first
    outer: bool  # LEFT JOIN: may be missing (None)
    local_column: str  # the parent's column of the join
    remote_column: str  # this part's column of the join
    cache: Callable[[Model, Model | None], None] | None
    fields: tuple[Any, ...]
    attnames: tuple[str, ...]
    key_index: int  # of its primary key among its fields


def _part(
    model: type[Model],
    alias: str,
    parent: int,
    outer: bool,
    local_column: str,
    remote_column: str,
    cache: Callable[[Model, Model | None], None] | None,
) -> _Part:
    fields = tuple(model._meta.concrete_fields)
    attnames = tuple(str(f.attname) for f in fields)
    key_index = fields.index(model._meta.pk)
    return _Part(model, alias, parent, outer, local_column, remote_column, cache, fields, attnames, key_index)


def _column(field: Any) -> str:
    return str(field.column)


def _parts(model: type[Model], paths: Sequence[str]) -> list[_Part]:
    parts = [_part(model, "t0", -1, False, "", "", None)]
    by_path = {"": 0}
    for path in paths:
        names = path.split("__")
        parent_path = "__".join(names[:-1])
        if parent_path not in by_path:
            raise ValueError(f"{path!r}: list {parent_path!r} before it")
        parent = parts[by_path[parent_path]]
        field = parent.model._meta.get_field(names[-1])
        related = field.related_model
        if not isinstance(related, type) or not (field.many_to_one or field.one_to_one):
            raise ValueError(f"{path!r} is not a single related object")
        if isinstance(field, ForeignObjectRel):  # the other side of a one-to-one: a row that may not exist
            outer, local, remote = True, _column(parent.model._meta.pk), _column(field.field)
        else:  # a foreign key or one-to-one of the parent's
            outer = bool(field.null) or parent.outer
            local, remote = _column(field), _column(related._meta.pk)
        by_path[path] = len(parts)
        cache = field.set_cached_value  # type: ignore[union-attr]  # a relation's, as select_related caches it
        parts.append(_part(related, f"t{len(parts)}", by_path[parent_path], outer, local, remote, cache))
    return parts


class JoinedRows(Generic[M]):
    """Rows of ``model`` with the single related objects ``related`` names (paths as
    ``select_related`` takes them: ``"user"``, ``"user__cluster_identity"``). The base
    table is ``t0`` in the ``where`` clause given to :meth:`read`; the related ones
    ``t1``, ``t2``, ... in the order given."""

    def __init__(self, model: type[M], *related: str) -> None:
        self.model = model
        self._parts = _parts(model, related)
        self._width = sum(len(part.fields) for part in self._parts)  # columns before the extra ones
        self._sql: dict[str, tuple[str, str]] = {}
        self._converters: dict[str, list[tuple[int, Any, list[Converter]]]] = {}

    def _select(self, db: Any) -> tuple[str, str]:
        """The select list and the FROM clause (tables and joins), for this database."""
        if db.vendor not in self._sql:
            quote = db.ops.quote_name
            columns = ", ".join(f"{p.alias}.{quote(f.column)}" for p in self._parts for f in p.fields)
            tables = [f"{quoted_table(self.model)} t0"]
            for part in self._parts[1:]:
                parent = self._parts[part.parent]
                tables.append(
                    f"{'LEFT JOIN' if part.outer else 'JOIN'} {quoted_table(part.model)} {part.alias} "
                    f"ON {part.alias}.{quote(part.remote_column)} = {parent.alias}.{quote(part.local_column)}"
                )
            self._sql[db.vendor] = (columns, " ".join(tables))
        return self._sql[db.vendor]

    def _converters_for(self, db: Any) -> list[tuple[int, Any, list[Converter]]]:
        """The columns whose values need converting into the field's (as the ORM's
        compiler converts them: the database's converters first, then the field's):
        their position, their expression and the converters."""
        if db.vendor not in self._converters:
            columns = [f.get_col(part.alias) for part in self._parts for f in part.fields]
            converting = [
                (i, col, db.ops.get_db_converters(col) + col.get_db_converters(db)) for i, col in enumerate(columns)
            ]
            self._converters[db.vendor] = [entry for entry in converting if entry[2]]
        return self._converters[db.vendor]

    def read(
        self,
        where: str = "",
        params: Sequence[Any] = (),
        tail: str = "",
        *,
        before: str = "",
        join: str = "",
        extra: Mapping[str, str] | None = None,
    ) -> list[M]:
        """The instances of the rows ``<before> SELECT ... FROM <tables> <join> [WHERE
        <where>] <tail>``, each with its related objects cached on it. ``before``: a
        ``WITH`` clause; ``join``: more tables to filter by or read ``extra`` from;
        ``extra``: attribute -> SQL expression, set on each instance as read (as the
        ORM's annotations). ``params`` in the order their placeholders appear."""
        db = connections[DEFAULT_DB_ALIAS]  # once: each `connection.x` looks it up again
        columns, tables = self._select(db)
        added = "".join(f", {sql}" for sql in (extra or {}).values())
        condition = f"WHERE {where}" if where else ""
        with prepared_cursor() as cursor:
            cursor.execute(f"{before} SELECT {columns}{added} FROM {tables} {join} {condition} {tail}", list(params))
            rows = cursor.fetchall()
        converters = self._converters_for(db)
        names = list(extra or {})
        instances = []
        for row in rows:
            instance = self._instance(row, converters, db)
            for name, value in zip(names, row[self._width :], strict=True):
                setattr(instance, name, value)
            instances.append(instance)
        return instances

    def _instance(self, row: Sequence[Any], converters: list[tuple[int, Any, list[Converter]]], db: Any) -> M:
        values = list(row)
        for i, col, column_converters in converters:
            for convert in column_converters:
                values[i] = convert(values[i], col, db)
        built: list[Model | None] = []
        start = 0
        for part in self._parts:
            own = values[start : start + len(part.fields)]
            start += len(part.fields)
            missing = part.outer and own[part.key_index] is None
            instance = None if missing else part.model.from_db(db.alias, part.attnames, own)
            if part.cache is not None:
                parent = built[part.parent]
                if parent is not None:
                    part.cache(parent, instance)
            built.append(instance)
        return built[0]  # type: ignore[return-value]  # the base part is never outer


class Inserts(Generic[M]):
    """``INSERT``s of ``model`` instances with the statement written once per database:
    each column's value prepared as ``Model.save`` prepares it (``pre_save``, then
    ``get_db_prep_save``), the new primary key set on the instance. Like ``bulk_create``
    it sends no ``pre_save``/``post_save`` signals (nothing here listens to them). For
    the rows every submission and every state change write: a job and its events."""

    def __init__(self, model: type[M]) -> None:
        meta = model._meta
        self.model = model
        key = meta.auto_field
        if key is None:
            raise TypeError(f"{model.__name__} has no auto-incrementing key to read back")
        self._key_column, self._key_attname = _column(key), str(key.attname)
        self._fields = [f for f in meta.local_concrete_fields if f is not key and not f.generated]
        custom = [f.name for f in self._fields if hasattr(f, "get_placeholder") or f.has_db_default()]
        if custom:
            raise TypeError(f"{model.__name__}.{custom[0]} needs its own SQL (a placeholder, a database default)")
        self._sql: dict[str, str] = {}

    def _statement(self, db: Any) -> str:
        if db.vendor not in self._sql:
            quote = db.ops.quote_name
            columns = ", ".join(quote(_column(f)) for f in self._fields)
            returning = f" RETURNING {quote(self._key_column)}" if db.features.can_return_columns_from_insert else ""
            self._sql[db.vendor] = (
                f"INSERT INTO {quoted_table(self.model)} ({columns}) "  # our table and columns
                f"VALUES ({', '.join(['%s'] * len(self._fields))}){returning}"
            )
        return self._sql[db.vendor]

    def save(self, instance: M) -> M:
        """Insert ``instance`` (a new one) and return it, saved: its key set, no longer
        ``adding``, bound to this database."""
        db = connections[DEFAULT_DB_ALIAS]
        values = [self._prepared(f, instance, db) for f in self._fields]
        with prepared_cursor() as cursor:
            cursor.execute(self._statement(db), values)
            if db.features.can_return_columns_from_insert:
                key = cursor.fetchone()[0]
            else:
                key = db.ops.last_insert_id(cursor, self.model._meta.db_table, self._key_column)
        return self._saved(instance, key, db)

    def save_with(self, instance: M, follower: Inserts[Any], row: Model, link: str) -> M:
        """Insert ``instance`` and ``row`` (a ``follower.model`` whose foreign key
        ``link`` is to point at the new ``instance``) together: on PostgreSQL in one
        statement (a data-modifying ``WITH``: one round trip, not two), elsewhere one
        after the other. Returns ``instance``, saved; ``row``'s own key is not read back.
        For a job and the event that records its submission."""
        db = connections[DEFAULT_DB_ALIAS]
        link_field = row._meta.get_field(link)
        if not isinstance(link_field, ForeignKey) or link_field.related_model is not self.model:
            raise TypeError(f"{type(row).__name__}.{link} is no foreign key to {self.model.__name__}")
        if db.vendor != "postgresql":
            self.save(instance)
            setattr(row, link_field.attname, getattr(instance, self._key_attname))
            follower.save(row)
            return instance
        values = [self._prepared(f, instance, db) for f in self._fields]
        sql, row_values = follower._following(db, row, link_field, self._key_column)
        with prepared_cursor() as cursor:
            cursor.execute(f"WITH parent AS ({self._statement(db)}) {sql}", [*values, *row_values])
            key = cursor.fetchone()[0]
        return self._saved(instance, key, db)

    def _following(
        self, db: Any, row: Model, link_field: ForeignKey[Any, Any], parent_key: str
    ) -> tuple[str, list[Any]]:
        """``INSERT INTO`` this table ``row``'s values, its ``link_field`` column taken
        from the ``parent`` of a ``WITH``, returning the parent's key; and the values to bind."""
        quote = db.ops.quote_name
        columns, sources, values = [], [], []
        for f in self._fields:
            columns.append(quote(_column(f)))
            if f is link_field:
                sources.append(f"parent.{quote(parent_key)}")
            else:
                sources.append("%s")
                values.append(self._prepared(f, row, db))
        sql = (
            f"INSERT INTO {quoted_table(self.model)} ({', '.join(columns)}) "  # our table and columns
            f"SELECT {', '.join(sources)} FROM parent RETURNING (SELECT {quote(parent_key)} FROM parent)"
        )
        return sql, values

    @staticmethod
    def _prepared(field: Any, instance: Model, db: Any) -> Any:
        """``field``'s value of a new ``instance``, as ``Model.save`` would send it."""
        return field.get_db_prep_save(field.pre_save(instance, True), db)

    def _saved(self, instance: M, key: Any, db: Any) -> M:
        setattr(instance, self._key_attname, key)
        instance._state.adding = False
        instance._state.db = db.alias
        return instance
