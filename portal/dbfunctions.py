"""Database functions the ORM lacks, written in each database's native arithmetic."""

from __future__ import annotations

from typing import Any

from django.db.models import Case, F, FloatField, Func, When


class EpochSeconds(Func):
    """Seconds since the epoch of a datetime expression, as a float.

    Django's own datetime subtraction runs a Python function per row on SQLite (over
    100k jobs: seconds); ``julianday`` is native there. On PostgreSQL ``date_part``
    returns a double, where ``EXTRACT`` (since 14) returns a numeric whose arithmetic
    made the overview's job query several times slower. Subtract two of these for a
    duration in seconds.
    """

    template = "date_part('epoch', %(expressions)s)"
    output_field = FloatField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)")


def job_gpus() -> Case:
    """The GPUs a job holds (or held), as its allocations count them: ``nodes x
    gpus_per_node`` whole GPUs, or ``nodes x gpu_share`` for a share of one GPU per node."""
    return Case(
        When(gpu_share__gt=0, then=F("nodes") * F("gpu_share")),
        default=F("nodes") * F("gpus_per_node"),
        output_field=FloatField(),
    )
