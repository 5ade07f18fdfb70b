"""Database functions the ORM lacks, written in each database's native arithmetic."""

from __future__ import annotations

from typing import Any

from django.db.models import FloatField, Func


class EpochSeconds(Func):
    """Seconds since the epoch of a datetime expression, as a float.

    Django's own datetime subtraction runs a Python function per row on SQLite (over
    100k jobs: seconds); ``julianday`` is native there, ``EXTRACT(EPOCH ...)`` on
    PostgreSQL. Subtract two of these for a duration in seconds.
    """

    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)")
