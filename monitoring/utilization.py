"""How busy finished attempts kept their GPUs: the second thing the scheduler reads
from monitoring, for the utilization-weighted chargeback (``scheduler.reads.usage``)
and the right-sizing advice (``scheduler.reads.advice``).

A leaf module (``monitoring.models`` only), like ``monitoring.gpu_health``, so the
scheduler's reads can import it while monitoring, above the scheduler, imports the
scheduler freely.
"""

from __future__ import annotations

from collections.abc import Iterable

from monitoring.models import JobEfficiency


def measured_utilization(job_ids: Iterable[int]) -> dict[tuple[int, int], float]:
    """``(job id, attempt) -> mean GPU utilization %`` of the attempts the efficiency
    pass measured (``monitoring.efficiency``: a job's last attempt, shortly after it
    ended). Attempts without samples are absent: unmeasured, never 0%. One query."""
    return {
        (job, attempt): float(util or 0.0)  # never None: filtered out below
        for job, attempt, util in JobEfficiency.objects.filter(
            job_id__in=set(job_ids), samples__gt=0, gpu_util_mean__isnull=False
        ).values_list("job_id", "attempt", "gpu_util_mean")
    }


def measured_busy_gpus(job_ids: Iterable[int]) -> dict[int, int]:
    """``job id -> GPUs it kept busy`` over its last measured attempt (see
    ``monitoring.efficiency.busy_gpus``), for the right-sizing advice. Jobs whose GPUs
    reported no utilization are absent: unmeasured, never 0 GPUs. One query."""
    rows = JobEfficiency.objects.filter(job_id__in=set(job_ids), gpus_busy__isnull=False)
    return {job: busy for job, busy in rows.values_list("job_id", "gpus_busy") if busy is not None}
