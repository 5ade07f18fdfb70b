"""What the chart pages read of the GPUs, each in a fixed number of queries: a job's GPUs
and their series over its lifetime, every GPU's allocation and recent utilization. (The
overview's job figures, GPU-hours and waits, are ``web.figures.jobs_in_range``.)

None of it reads raw samples over long ranges: ``series`` picks rollups for long spans,
and the GPU grid reads only the last ``RECENT`` of samples.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Avg
from django.utils import timezone

from monitoring.charts import CellRow
from monitoring.gpu_health import unhealthy_gpu_ids
from monitoring.models import GpuSample
from monitoring.series import METRICS, Series, series
from scheduler.jobs.allocations import decode
from scheduler.models import Gpu, Job
from scheduler.reads.occupancy import Occupancy, read_occupancy

#: An allocated GPU whose mean utilization over the recent window is below this is idle.
IDLE_BELOW_PCT = 5.0


def recent_window() -> timedelta:
    """How far back "recent utilization" looks: six sample intervals, at least a minute."""
    return timedelta(seconds=max(60.0, 6 * settings.MONITORING_SAMPLE_SECONDS))


# --- One job -----------------------------------------------------------------------------


def job_gpu_ids(job: Job) -> list[int]:
    """Ids of the GPUs in the job's allocations (node name + GPU indices). One query."""
    return jobs_gpu_ids([job]).get(job.id, [])


def jobs_gpu_ids(jobs: list[Job]) -> dict[int, list[int]]:
    """Each job's GPU ids, sorted, from its allocations: one query for all of them."""
    wanted = {(a.node, i) for job in jobs for a in decode(job.allocations) for i in a.gpu_indices}
    if not wanted:
        return {job.id: [] for job in jobs}
    rows = Gpu.objects.filter(node__name__in={node for node, _ in wanted}).values_list("id", "node__name", "index")
    ids = {(node, index): gpu_id for gpu_id, node, index in rows}
    return {
        job.id: sorted(ids[(a.node, i)] for a in decode(job.allocations) for i in a.gpu_indices if (a.node, i) in ids)
        for job in jobs
    }


def job_series(job: Job, now: datetime | None = None) -> list[Series]:
    """Every chartable metric of the job's GPUs from its start to its end (or ``now``), at
    the resolution that fits the span; ``[]`` if it never started or holds no GPUs.
    One query for the GPUs, one per metric."""
    if job.started_at is None:
        return []
    end = job.ended_at or now or timezone.now()
    ids = job_gpu_ids(job)
    if not ids or end <= job.started_at:
        return []
    return [series(ids, job.started_at, end, metric) for metric in METRICS]


# --- The cluster -------------------------------------------------------------------------


def gpu_grid(now: datetime, occupancy: Occupancy | None = None) -> tuple[list[str], list[CellRow]]:
    """Node names (by cluster, then name) and one cell per schedulable unit (a GPU, or each
    MIG slice of a split one, with its GPU's index): who holds it, its mean utilization over the recent window,
    and its state. Two queries (the samples grouped by GPU in the database, the unhealthy
    GPUs) on the page's ``occupancy``, four more to read it when not given.

    An allocated GPU is "allocated, idle" below ``IDLE_BELOW_PCT`` (with samples to say
    so); a free one is "unavailable" where no job may be placed on it: on a node that is
    not up or on a disabled cluster (as the free-GPU counts leave it out), or while
    unhealthy."""
    occupancy = occupancy or read_occupancy()
    schedulable = occupancy.schedulable()
    recent = recent_utilization(now)
    unhealthy = unhealthy_gpu_ids(now)
    cells: list[CellRow] = []
    parents = occupancy.slice_parents
    for gpu_id, node, index, _, holder in occupancy.gpus:
        utilization = recent.get(gpu_id)
        if holder is not None:
            job, account = holder
            idle = utilization is not None and utilization < IDLE_BELOW_PCT
            state = "allocated, idle" if idle else "allocated"
            cells.append((node, index, state, utilization, job, account, parents.get(gpu_id)))
        else:
            state = "unavailable" if node not in schedulable or gpu_id in unhealthy else "free"
            cells.append((node, index, state, utilization, None, "", parents.get(gpu_id)))
    return [name for name, _ in occupancy.nodes], cells


def recent_utilization(now: datetime) -> dict[int, float]:
    """GPU id -> its mean utilization (%) over the recent window up to ``now``, for the
    GPUs with samples in it. One query, grouped by GPU in the database.

    Read through the cursor rather than the queryset: the database already returns
    floats, and the queryset would convert each of 8,000 rows again."""
    grouped = (
        GpuSample.objects.filter(at__gte=now - recent_window(), at__lte=now, utilization_pct__isnull=False)
        .values("gpu_id")
        .annotate(u=Avg("utilization_pct"))
        .order_by()
        .values_list("gpu_id", "u")
    )
    sql, params = grouped.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return dict(cursor.fetchall())
