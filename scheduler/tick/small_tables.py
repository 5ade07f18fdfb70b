"""Loads over the small tables the tick reads whole every cycle, kept across ticks while
those tables are unchanged.

QOS, accounts, memberships, quotas, users, clusters and GPUs are read in full by every
tick although people write them rarely; at a small site those dozen queries were most
of a tick. On PostgreSQL one query per tick reads a digest of every row version of each
table (``scheduler.tick.kept.table_digest``, all at once), and a load over some of them
runs again only when one of those changed. SQLite has no row versions: there every load
runs every time. A kept result is shared by the ticks of this process: callers read it
and never change it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model

from people.models import Account, Membership, Qos, Quota
from scheduler.models import Cluster, Gpu
from scheduler.tick.kept import table_digest_sql, versioned

T = TypeVar("T")


def _tables() -> tuple[type[Model], ...]:
    """The tables whose digests each tick reads."""
    return (Qos, Qos.may_preempt.through, Account, Membership, Quota, get_user_model(), Cluster, Gpu)


#: load -> (the digests of its tables it was run at, its result).
_kept: dict[Callable[[], Any], tuple[tuple[str, ...], Any]] = {}


@dataclass(frozen=True, slots=True)
class TableDigests:
    """One reading of the small tables' digests (``None``: no row versions here)."""

    digests: Mapping[type[Model], str] | None

    @classmethod
    def read(cls) -> TableDigests:
        """The digests now, in one query (PostgreSQL); none elsewhere."""
        if not versioned():
            return UNVERSIONED
        tables = _tables()
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(table_digest_sql(model) for model in tables))
            row = cursor.fetchone()
        return cls(dict(zip(tables, (str(digest) for digest in row), strict=True)))

    def kept(self, load: Callable[[], T], *tables: type[Model]) -> T:
        """``load()``'s result as of this reading: the one kept from an earlier call if
        none of ``tables`` (every table ``load`` reads) changed since, else a fresh one."""
        if self.digests is None:
            return load()
        key = tuple(self.digests[model] for model in tables)
        entry = _kept.get(load)
        if entry is not None and entry[0] == key:
            return entry[1]  # type: ignore[no-any-return]
        value = load()
        _kept[load] = (key, value)
        return value

    def digest(self, model: type[Model]) -> str | None:
        return None if self.digests is None else self.digests[model]


#: No digests: every load runs (SQLite, or a caller outside a tick).
UNVERSIONED = TableDigests(None)
