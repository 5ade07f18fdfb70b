"""A finished job's efficiency (Slurm's ``seff``, for GPUs): GPU-hours, mean and peak
utilization and memory of its GPUs over its run, elapsed against its walltime.

Why a pass shortly after the end, not at the end itself: node agents post samples in
batches, so the last ones of a run arrive after the backend has said it ended; the pass
waits ``GRACE`` past the end (a few sample intervals) and then writes one row per
attempt, which the job page, the API, ``qm show`` and the job list's sort read.

Where the samples come from: raw samples while the run lies within their retention
(``MONITORING_RAW_RETENTION_HOURS``), the minute rollups (weighted by their sample
counts) for longer runs. A pass reads its jobs' GPUs in one query, then one aggregate
per job, for at most ``BATCH`` jobs, the oldest first, so a backlog drains over a few
passes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Avg, Count, F, Max, Q, QuerySet, Sum
from django.utils import timezone

from monitoring.models import GpuRollup, GpuSample, JobEfficiency, Resolution
from monitoring.readings import IDLE_BELOW_PCT, job_gpu_ids, jobs_gpu_ids
from scheduler.core.hours import job_gpus
from scheduler.models import Gpu, Job

#: How far back the pass looks for ended jobs without figures.
LOOKBACK = timedelta(days=7)
BATCH = 500


def grace() -> timedelta:
    """How long after a job's end its last samples may still arrive."""
    return timedelta(seconds=max(60.0, 3 * settings.MONITORING_SAMPLE_SECONDS))


def due(now: datetime) -> QuerySet[Job]:
    """Ended attempts with no figures yet (or figures of an earlier attempt)."""
    return (
        Job.objects.filter(ended_at__lte=now - grace(), ended_at__gte=now - LOOKBACK, started_at__isnull=False)
        .filter(Q(efficiency__isnull=True) | ~Q(efficiency__attempt=F("attempt")))
        .order_by("ended_at", "id")
    )


def measure(job: Job, now: datetime, ids: list[int] | None = None) -> dict[str, float | int | None]:
    """The figures of ``job``'s last attempt (see the module docstring)."""
    assert job.started_at is not None and job.ended_at is not None
    elapsed = max(0, int((job.ended_at - job.started_at).total_seconds()))
    figures: dict[str, float | int | None] = {
        "gpu_hours": job_gpus(job.nodes, job.gpus_per_node, job.gpu_share) * elapsed / 3600,
        "elapsed_seconds": elapsed,
        "samples": 0,
        "gpu_util_mean": None,
        "gpu_util_peak": None,
        "memory_used_mean_mib": None,
        "memory_used_peak_mib": None,
        "memory_total_mib": None,
        "gpus_busy": None,
    }
    ids = job_gpu_ids(job) if ids is None else ids  # its GPUs, when the caller has not read them
    if not ids:
        return figures
    raw = job.started_at >= now - timedelta(hours=settings.MONITORING_RAW_RETENTION_HOURS)
    if raw:
        row = GpuSample.objects.filter(gpu_id__in=ids, at__gte=job.started_at, at__lte=job.ended_at).aggregate(
            count=Count("utilization_pct"),  # samples that measured it (not MIG's nulls)
            util_mean=Avg("utilization_pct"),
            util_peak=Max("utilization_pct"),
            memory_mean=Avg("memory_used_mib"),
            memory_peak=Max("memory_used_mib"),
        )
    else:
        rollups = GpuRollup.objects.filter(
            gpu_id__in=ids, period=Resolution.MINUTE, at__gte=job.started_at, at__lte=job.ended_at
        )
        # Each mean over the samples that measured it, as Avg does on raw samples: a
        # rollup of a GPU that reports no utilization (MIG) has a null utilization mean.
        sums = rollups.aggregate(
            count=Sum("samples", filter=Q(utilization_mean__isnull=False)),
            util_sum=Sum(F("utilization_mean") * F("samples")),
            util_peak=Max("utilization_max"),
            memory_count=Sum("samples", filter=Q(memory_used_mean__isnull=False)),
            memory_sum=Sum(F("memory_used_mean") * F("samples")),
            memory_peak=Max("memory_used_max"),
        )
        count, memory_count = sums["count"] or 0, sums["memory_count"] or 0
        row = {
            "count": count,
            "util_mean": sums["util_sum"] / count if count else None,
            "util_peak": sums["util_peak"],
            "memory_mean": sums["memory_sum"] / memory_count if memory_count else None,
            "memory_peak": sums["memory_peak"],
        }
    if not row["count"]:
        return figures
    total = Gpu.objects.filter(id__in=ids).aggregate(total=Max("memory_mib"))["total"]
    figures.update(
        samples=row["count"],
        gpu_util_mean=row["util_mean"],
        gpu_util_peak=row["util_peak"],
        memory_used_mean_mib=row["memory_mean"],
        memory_used_peak_mib=row["memory_peak"],
        memory_total_mib=total,
        gpus_busy=busy_gpus(job, ids, raw=raw),
    )
    return figures


def busy_gpus(job: Job, ids: list[int], *, raw: bool) -> int | None:
    """How many of ``ids`` (the job's GPUs) were busy over its run: a mean utilization of
    at least ``IDLE_BELOW_PCT`` (the GPU grid's idle line). What the right-sizing advice
    (``scheduler.advice``) reads as "GPUs used": an 8-GPU job that kept two busy needed
    two. ``None`` when no sample measured utilization. One query, grouped by GPU."""
    window = {"gpu_id__in": ids, "at__gte": job.started_at, "at__lte": job.ended_at}
    if raw:
        rows = GpuSample.objects.filter(**window).values("gpu_id").annotate(mean=Avg("utilization_pct"))
        means = [row["mean"] for row in rows]
    else:
        rollups = (
            GpuRollup.objects.filter(period=Resolution.MINUTE, utilization_mean__isnull=False, **window)
            .values("gpu_id")
            .annotate(mean=Sum(F("utilization_mean") * F("samples")) / Sum("samples"))
        )
        means = [row["mean"] for row in rollups]
    measured = [mean for mean in means if mean is not None]
    return sum(mean >= IDLE_BELOW_PCT for mean in measured) if measured else None


def record_efficiencies(now: datetime | None = None) -> int:
    """Measure every due job (at most ``BATCH``); returns how many."""
    now = now or timezone.now()
    jobs = list(due(now)[:BATCH])
    gpus = jobs_gpu_ids(jobs)
    for job in jobs:
        JobEfficiency.objects.update_or_create(
            job=job, defaults={"attempt": job.attempt, "computed_at": now, **measure(job, now, gpus[job.id])}
        )
    return len(jobs)
