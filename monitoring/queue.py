"""The queue's history: one row per account per minute, for the "queue over time" chart.

``record_queue`` runs each minute (beat's ``monitoring.record_queue``, or the embedded
scheduler loop); ``queue_history`` reads a range back in one grouped query.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Avg, Count, Q, Sum
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from common.db.dbfunctions import job_gpus
from monitoring.charts import QueueRow
from monitoring.models import QueueSample
from monitoring.services import floor_time
from scheduler.choices import ACTIVE_STATES, QUEUED_STATES
from scheduler.models import Job

MINUTE = 60


def record_queue(now: datetime | None = None) -> int:
    """Store each account's pending and running jobs (and the GPUs those hold) at the
    minute of ``now``: one grouped read, one bulk upsert. Idempotent within a minute (the
    later call's counts win). Returns the number of rows written."""
    now = now or timezone.now()
    at = floor_time(now, MINUTE)
    active = Q(state__in=ACTIVE_STATES)
    counts = (
        Job.objects.filter(state__in=QUEUED_STATES | ACTIVE_STATES)
        .values("account_id")
        .annotate(
            pending=Count("id", filter=Q(state__in=QUEUED_STATES)),
            running=Count("id", filter=active),
            gpus=Sum(job_gpus(), filter=active, default=0.0),
        )
        .order_by()
    )
    rows = [
        QueueSample(at=at, account_id=c["account_id"], pending=c["pending"], running=c["running"], gpus=c["gpus"])
        for c in counts
    ]
    QueueSample.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["at", "account"], update_fields=["pending", "running", "gpus"]
    )
    return len(rows)


def queue_history(start: datetime, end: datetime, max_points: int) -> list[QueueRow]:
    """Each account's queue over ``[start, end)``: per minute when the range has at most
    ``max_points`` minutes, else the hourly mean. One grouped query; its size depends on
    the range and the number of accounts, not on the number of jobs."""
    per_minute = (end - start) <= timedelta(minutes=max_points)
    bucket = TruncMinute("at") if per_minute else TruncHour("at")
    rows = (
        QueueSample.objects.filter(at__gte=start, at__lt=end)
        .annotate(bucket=bucket)
        .values("bucket", "account__name")
        .annotate(pending=Avg("pending"), running=Avg("running"))
        .order_by("bucket", "account__name")
    )
    return [QueueRow(r["bucket"], r["account__name"], r["pending"], r["running"]) for r in rows]
