"""One UPDATE for many rows that each get their own values, which the ORM makes costly.

Django's ``bulk_update`` writes ``CASE WHEN id = ... THEN ...`` for every row and field
and builds those expressions in Python first: for the tick's 10,000 waiting jobs that
was ~8 s before the database saw the statement, for its 500 claims ~1 s. Here
PostgreSQL gets one array per column in a single ``UPDATE ... FROM unnest(...)``, and
SQLite, in-process, one prepared statement run per row. A JSON column goes to
PostgreSQL as one JSON document (``jsonb_array_elements``), not as an array of texts. Values go through each field's
own conversion (``get_db_prep_save``), so what is stored is what the ORM would store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, models

from common.db.sql import quoted_pk, quoted_table


def update_rows(
    model: type[models.Model],
    ids: Sequence[int],
    columns: Mapping[str, Sequence[object]],
    *,
    same: Mapping[str, object] | None = None,
    where: Mapping[str, object] | None = None,
) -> int:
    """Set, on the rows of ``model`` with these primary keys, each field of ``columns``
    to the value at the row's position, and each field of ``same`` to one value for all;
    only where the fields of ``where`` equal the values given (e.g. a state the rows
    must still be in). Returns the number of rows updated."""
    if not ids:
        return 0
    if not columns:  # one value for all: the ORM's own UPDATE is as good
        return model._default_manager.filter(pk__in=ids, **(where or {})).update(**(same or {}))
    update = _Update(model, ids, columns, same, where)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql, params = update.postgres()
            cursor.execute(sql, params)
            return int(cursor.rowcount)
        sql, rows = update.per_row()
        cursor.executemany(sql, rows)
        return int(cursor.rowcount)  # summed over the rows by sqlite3


def update_matching_rows(
    model: type[models.Model],
    ids: Sequence[int],
    columns: Mapping[str, Sequence[object]],
    *,
    match: Mapping[str, Sequence[object]],
    same: Mapping[str, object] | None = None,
    where: Mapping[str, object] | None = None,
) -> list[int]:
    """:func:`update_rows`, only on the rows that still hold, in each field of ``match``,
    their own value at the row's position (e.g. the attempt a worker saw). Returns the
    ids of the rows updated, in no particular order: the caller learns which rows someone
    else changed first."""
    if not ids:
        return []
    update = _Update(model, ids, columns, same, where, match)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql, params = update.postgres()
            cursor.execute(f"{sql} RETURNING t.{update.pk}", params)
            return [int(row[0]) for row in cursor.fetchall()]
        sql, rows = update.per_row()
        updated = []
        for row_id, row in zip(ids, rows, strict=True):
            cursor.execute(sql, row)
            if cursor.rowcount == 1:
                updated.append(int(row_id))
        return updated


def update_versioned_rows(
    model: type[models.Model],
    ids: Sequence[int],
    versions: Sequence[str],
    columns: Mapping[str, Sequence[object]],
    *,
    where: Mapping[str, object] | None = None,
) -> list[tuple[int, str, *tuple[Any, ...]]]:
    """:func:`update_rows` on PostgreSQL, only on the rows still at the version given
    for each (``scheduler.tick.kept.row_version``: a row written since, by anyone, is
    left alone). Returns, per row updated, its id, its new version and the new values
    of ``columns`` as the database prints them (text)."""
    if not ids:
        return []
    if len(versions) != len(ids):
        raise ValueError(f"{len(versions)} versions for {len(ids)} rows")
    update = _Update(model, ids, columns, None, where)
    sql, params = update.postgres(versions)
    sql += f" RETURNING t.{update.pk}, {_VERSION}, " + ", ".join(f"t.{update.column(name)}::text" for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]


def row_version_sql(table: str) -> str:
    """A row's version on PostgreSQL, as text: ``xmin:ctid`` (which transaction wrote
    this version of the row, and where it lies; see ``scheduler.tick.kept`` for why the
    pair). ``table``: the table's name or alias in the statement, quoted as needed."""
    return f"{table}.xmin::text || ':' || {table}.ctid::text"


_VERSION = row_version_sql("t")


class _Update:
    """The statement of one :func:`update_rows` call."""

    def __init__(
        self,
        model: type[models.Model],
        ids: Sequence[int],
        columns: Mapping[str, Sequence[object]],
        same: Mapping[str, object] | None,
        where: Mapping[str, object] | None,
        match: Mapping[str, Sequence[object]] | None = None,
    ) -> None:
        for name, values in [*columns.items(), *(match or {}).items()]:
            if len(values) != len(ids):
                raise ValueError(f"{name}: {len(values)} values for {len(ids)} rows")
        meta = model._meta
        self.ids, self.columns, self.same, self.where = ids, columns, same or {}, where or {}
        self.match = match or {}
        self.table, self.pk = quoted_table(model), quoted_pk(model)
        self.fields: dict[str, models.Field[Any, Any]] = {}
        for name in [*columns, *self.same, *self.where, *self.match]:
            field = meta.get_field(name)
            if not isinstance(field, models.Field) or not field.column:
                raise ValueError(f"{model.__name__}.{name} is not a column")
            self.fields[name] = field
        if any(isinstance(self.fields[name], models.JSONField) for name in self.match):
            raise ValueError("a JSON field cannot be matched: JSON has no equality per row here")
        self.fixed_sql = [f"{self.column(name)} = %s" for name in self.same]
        self.fixed = [self.prepared(name, value) for name, value in self.same.items()]
        self.guard_sql = [f"{self.column(name)} = %s" for name in self.where]
        self.guard = [self.prepared(name, value) for name, value in self.where.items()]

    def column(self, name: str) -> str:
        return connection.ops.quote_name(str(self.fields[name].column))

    def array(self, name: str) -> str:
        """A column's values as one array parameter, a row each (PostgreSQL)."""
        return f"unnest(%s::{self.fields[name].db_type(connection)}[])"

    def prepared(self, name: str, value: object) -> Any:
        return self.fields[name].get_db_prep_save(value, connection)

    def postgres(self, versions: Sequence[str] | None = None) -> tuple[str, list[Any]]:
        """One ``UPDATE ... FROM ROWS FROM (unnest(...), ...)``: an array per column
        (and, with ``versions``, only on rows still at those versions)."""
        sources, sets = ["unnest(%s::bigint[])"], []
        params: list[Any] = [list(self.ids)]
        for i, (name, values) in enumerate(self.columns.items()):
            field = self.fields[name]
            if isinstance(field, models.JSONField):
                # One JSON document for the whole column: a text[] of JSON values made
                # psycopg escape every quote of every value in Python (~50 us a row).
                sources.append("jsonb_array_elements(%s::jsonb)")
                params.append(json.dumps(list(values), cls=field.encoder))
            else:
                sources.append(self.array(name))
                params.append([self.prepared(name, v) for v in values])
            sets.append(f"{self.column(name)} = row.c{i}")
        names = [f"c{i}" for i in range(len(self.columns))]
        guards = [f"t.{g}" for g in self.guard_sql]
        for i, (name, values) in enumerate(self.match.items()):
            sources.append(self.array(name))
            params.append([self.prepared(name, v) for v in values])
            names.append(f"m{i}")
            guards.append(f"t.{self.column(name)} = row.m{i}")
        if versions is not None:
            sources.append("unnest(%s::text[])")
            params.append(list(versions))
            names.append("version")
            guards.append(f"({_VERSION}) = row.version")
        sql = (
            f"UPDATE {self.table} AS t SET {', '.join(sets + self.fixed_sql)} "
            f"FROM ROWS FROM ({', '.join(sources)}) AS row(id, {', '.join(names)}) "
            f"WHERE t.{self.pk} = row.id" + "".join(f" AND {g}" for g in guards)
        )
        return sql, [*self.fixed, *params, *self.guard]  # in the order of the placeholders

    def per_row(self) -> tuple[str, list[tuple[Any, ...]]]:
        """One prepared statement, and its parameters per row (SQLite, in-process)."""
        sets = [f"{self.column(name)} = %s" for name in self.columns] + self.fixed_sql
        matches = [f"{self.column(name)} = %s" for name in self.match]
        sql = f"UPDATE {self.table} SET {', '.join(sets)} WHERE {self.pk} = %s" + "".join(
            f" AND {g}" for g in [*self.guard_sql, *matches]
        )
        values = self._per_row(self.columns)
        matched = self._per_row(self.match)
        return sql, [
            (*row, *self.fixed, row_id, *self.guard, *held)
            for row_id, row, held in zip(self.ids, values, matched, strict=True)
        ]

    def _per_row(self, columns: Mapping[str, Sequence[object]]) -> list[tuple[Any, ...]]:
        """Each row's prepared values of ``columns``, in their order (empty tuples when
        there are none)."""
        if not columns:
            return [() for _ in self.ids]
        return list(zip(*([self.prepared(name, v) for v in values] for name, values in columns.items()), strict=True))
