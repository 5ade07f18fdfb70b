"""Start-time estimates, stored for every pending job.

They plan the whole queue with the tick's own policy and inputs
(:func:`scheduler.reports.planning_snapshot`) through the core's ``estimate_starts``:
nothing new arrives and every job runs to its walltime limit, so an estimate is a
latest start, as ``squeue --start`` gives.

- :func:`refresh_estimates` is the periodic pass (Celery task
  ``scheduler.refresh_estimates`` and ``run_scheduler``). It stores each pending job's
  estimate in ``Job.estimated_start_at``, so showing estimates never plans the queue
  per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from django.db import transaction
from django.db.models import Case, DateTimeField, Value, When
from django.utils import timezone

from scheduler import services
from scheduler.choices import JobState
from scheduler.core.estimate import estimate_starts
from scheduler.models import Job
from scheduler.reports import planning_snapshot

#: Rows per ``UPDATE`` of the refresh pass (bounds the statement's parameters).
BATCH = 500


def refresh_estimates(now: datetime | None = None) -> int:
    """Store every pending job's latest expected start; clear every other stored one.

    Idempotent; returns the number of rows written. Queries do not grow with the queue
    (one ``UPDATE`` per ``BATCH`` changed rows).

    Steps:
    1. Plan the queue on a fresh snapshot, outside any transaction: on SQLite a
       transaction holds the write lock, and planning must not stall the tick.
    2. In one short transaction, read the stored estimates and write only those that
       changed, with one ``UPDATE ... CASE`` per batch and only on jobs still PENDING (a
       job the tick started meanwhile keeps the ``NULL`` its claim wrote).
    3. In the same transaction, clear the estimates of jobs that have none now: they
       left the queue, or wait on a dependency, a quota or hardware.
    """
    now = now or timezone.now()
    policy = services.current_policy()
    estimates = estimate_starts(planning_snapshot(now, policy), policy, now)
    written = 0
    with transaction.atomic():
        stored = dict(Job.objects.filter(estimated_start_at__isnull=False).values_list("id", "estimated_start_at"))
        changed = [(job_id, at) for job_id, at in sorted(estimates.items()) if stored.get(job_id) != at]
        for batch in _batches(changed):
            at_of_job = Case(
                *(When(pk=job_id, then=Value(at, output_field=DateTimeField())) for job_id, at in batch),
                output_field=DateTimeField(),
            )
            ids = [job_id for job_id, _ in batch]
            written += Job.objects.filter(pk__in=ids, state=JobState.PENDING).update(estimated_start_at=at_of_job)
        for gone in _batches(sorted(set(stored) - set(estimates))):
            written += Job.objects.filter(pk__in=gone).update(estimated_start_at=None)
    return written


T = TypeVar("T")


def _batches(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
