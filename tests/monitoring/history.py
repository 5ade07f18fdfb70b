"""A job's past as monitoring sees it: where and when it ran, and its GPUs' samples."""

from __future__ import annotations

from datetime import timedelta

from monitoring.services import insert_samples
from scheduler.models import Gpu, Job


def gpu(node: str, index: int) -> Gpu:
    return Gpu.objects.get(node__name=node, index=index)


def ran(job: Job, start, end, *gpus: tuple[str, int]) -> Job:
    """Mark ``job`` as having run on ``gpus`` from ``start`` to ``end`` (None: still running)."""
    allocations: dict[str, list[int]] = {}
    for node, index in gpus:
        allocations.setdefault(node, []).append(index)
    Job.objects.filter(pk=job.pk).update(
        state="COMPLETED" if end else "RUNNING",
        started_at=start,
        ended_at=end,
        allocations=[{"node": n, "gpu_indices": i, "cpus": 1, "memory_mib": 0} for n, i in allocations.items()],
    )
    job.refresh_from_db()
    return job


def samples(gpu_ids, start, count, utilization=80.0, step=timedelta(seconds=10)):
    insert_samples(
        [
            (gpu_id, start + i * step, {"utilization_pct": utilization, "memory_used_mib": 1000, "power_w": 300.0})
            for gpu_id in gpu_ids
            for i in range(count)
        ]
    )
