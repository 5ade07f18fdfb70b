"""What a scheduler process keeps from one tick to the next, and how it knows it is current.

A tick at site scale reads 10,000 waiting jobs, thousands of running ones and 8,000
GPUs, and between two ticks a few hundred of those rows change. Building the core's view
of every row again each time was a third of the tick; building the node views again
also threw away the core's answers per request shape on the idle cluster
(``IdleCluster.shared`` keeps them while it is handed the same node tuple), another
third of the decision.

So the views are kept per process, and each tick asks the database only *which rows
changed*, by their **row version**: on PostgreSQL the pair ``(xmin, ctid)`` of the row
(the transaction that wrote this version and where it lies). Every write of a row makes
a new version with a new pair, whoever writes it (the tick, an API call, a cluster
poll, a hand-typed ``UPDATE``), so nothing has to remember to bump a counter: ``xmin``
alone would not do, since a transaction that writes a row twice gives both versions its
own id, and those differ in ``ctid`` (the older one cannot be vacuumed away while that
transaction runs). A row whose version is the one kept is not read again; a changed,
new or vanished row is. Joined names (the job's account, owner, QOS) are part of a job's
key, so a renamed account reaches its jobs too.

Elsewhere (SQLite, the embedded default) there is no such version: everything is read
each time, as before. Decisions never depend on the keeping: the views are the ones a
full read would build (``tests/scheduler/tick/test_kept_rows.py`` changes rows every way a
writer can and compares).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from django.db import connection
from django.db.models import Model, QuerySet, TextField
from django.db.models.expressions import RawSQL

from common.db.bulk import row_version_sql
from common.db.sql import quoted_pk, quoted_table

V = TypeVar("V")

#: The annotation holding a row's version.
VERSION = "row_version"


def versioned() -> bool:
    """Whether the database gives row versions (PostgreSQL)."""
    return connection.vendor == "postgresql"


def row_version(model: type[Model]) -> RawSQL:
    """The row version of ``model``'s rows in a query (PostgreSQL only)."""
    return RawSQL(row_version_sql(quoted_table(model)), (), output_field=TextField())


class KeptRows(Generic[V]):
    """Views of the rows of one query, kept by row version across calls of :meth:`read`.

    ``columns`` are ``values_list`` names starting with the primary key; ``key`` names
    the joined columns whose values a view also depends on (they join the version);
    ``build`` makes a view from one row of ``columns``. ``read`` returns the views of the
    rows the query finds now, in the query's order, building only those of changed or
    new rows.
    """

    def __init__(self, columns: Sequence[str], key: Sequence[str], build: Callable[[Sequence[Any]], V]) -> None:
        self.columns = tuple(columns)
        self.key = tuple(key)
        self.build = build
        self._kept: dict[int, tuple[tuple[object, ...], V]] = {}
        #: How many rows the last ``read`` built (the rest were kept): for tests and the benchmark.
        self.built = 0

    def read(self, queryset: QuerySet[Any], **annotations: Any) -> list[V]:
        """The views of ``queryset``'s rows (``annotations`` as for ``annotate``, for
        computed ``columns``)."""
        if not versioned():
            self._kept = {}
            rows = queryset.annotate(**annotations).values_list(*self.columns)
            views = [self.build(row) for row in rows]
            self.built = len(views)
            return views
        version = row_version(queryset.model)
        keyed = list(queryset.annotate(**{VERSION: version}).values_list("pk", VERSION, *self.key))
        kept = self._kept
        current: dict[int, tuple[tuple[object, ...], V]] = {}
        stale: list[int] = []
        for row_id, *key in keyed:
            entry = kept.get(row_id)
            if entry is not None and entry[0] == tuple(key):
                current[row_id] = entry
            else:
                stale.append(row_id)
        self.built = 0
        if stale:
            # Most rows changed (the first read): one read of the query beats a long IN list.
            source = queryset if len(stale) * 2 > len(keyed) else queryset.filter(pk__in=stale)
            width = 1 + len(self.key)
            for row in source.annotate(**annotations, **{VERSION: version}).values_list(
                VERSION, *self.key, *self.columns
            ):
                values = row[width:]
                if values[0] in current:
                    continue  # unchanged, read along with the changed ones
                current[values[0]] = (tuple(row[:width]), self.build(values))
                self.built += 1
        self._kept = current
        # A row that changed between the two reads comes with its newer version; one that
        # left the query meanwhile is not there.
        return [current[row[0]][1] for row in keyed if row[0] in current]

    def version(self, row_id: int) -> str | None:
        """The version of the row as last read or written (``None``: not kept)."""
        entry = self._kept.get(row_id)
        return None if entry is None else str(entry[0][0])

    def written(self, rows: Iterable[Sequence[Any]], change: Callable[[V, Sequence[Any]], V]) -> None:
        """Note rows this process wrote (``common.db.bulk.update_versioned_rows``: id,
        new version, new values): each kept view becomes ``change(view, values)`` under
        the new version, so the next read does not read them again. Only rows written
        at the version kept may be noted (the update checked it): any other change
        would be missed."""
        kept = self._kept
        for row_id, version, *values in rows:
            entry = kept.get(row_id)
            if entry is not None:
                kept[row_id] = ((version, *entry[0][1:]), change(entry[1], values))


def table_digest(model: type[Model]) -> str:
    """A digest of every row version of ``model``'s table (PostgreSQL only): it changes
    whenever a row is written, added or removed. For small tables written rarely, such
    as the GPUs (8,000 rows: ~4 ms)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {table_digest_sql(model)}")
        return str(cursor.fetchone()[0])


def table_digest_sql(model: type[Model]) -> str:
    """:func:`table_digest` as a scalar subquery, to read several tables' in one query."""
    table, pk = quoted_table(model), quoted_pk(model)
    version = row_version_sql(table)
    return f"(SELECT md5(string_agg({pk}::text || '@' || {version}, ',' ORDER BY {pk})) FROM {table})"
