"""Database functions the ORM lacks, written in each database's native arithmetic."""

from __future__ import annotations

from django.db.models import Case, F, FloatField, When


def job_gpus() -> Case:
    """The GPUs a job holds (or held), as its allocations count them: ``nodes x
    gpus_per_node`` whole GPUs, or ``nodes x gpu_share`` for a share of one GPU per node.

    The same rule as ``scheduler.core.hours.job_gpus`` (and ``Job.total_gpus``, which
    calls it), written in SQL so that sums run in the database; common may not import the
    scheduler, so ``tests/scheduler/jobs/test_job_gpus.py`` holds the two together."""
    return Case(
        When(gpu_share__gt=0, then=F("nodes") * F("gpu_share")),
        default=F("nodes") * F("gpus_per_node"),
        output_field=FloatField(),
    )
