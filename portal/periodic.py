"""The one table of periodic jobs: what runs how often, for Celery beat and ``run_scheduler``.

Beat's ``CELERY_BEAT_SCHEDULE`` is built from it (each entry expires after its own
period, so a beat that fell behind never queues a backlog of ticks), and the embedded
loop (``manage.py run_scheduler``) runs the same Celery tasks by name, in-process, on
the same clocks. Plain data, no Django: the settings module builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    #: The beat entry's name.
    name: str
    #: The Celery task it runs (``@shared_task(name=...)``).
    task: str
    every_seconds: float


def periodic_jobs(
    *,
    tick_seconds: float,
    poll_seconds: float,
    estimate_seconds: float,
    rollup_seconds: float,
    sample_seconds: float,
    simulate: bool,
) -> tuple[PeriodicJob, ...]:
    """Every periodic job, in the order the embedded loop runs the due ones: the poll
    first (a job that just ended frees its GPUs for this tick), then the tick."""
    jobs = [
        PeriodicJob("scheduler-poll-backends", "scheduler.poll_backends", poll_seconds),
        PeriodicJob("scheduler-tick", "scheduler.tick", tick_seconds),
        PeriodicJob("scheduler-refresh-estimates", "scheduler.refresh_estimates", estimate_seconds),
        PeriodicJob("monitoring-simulate", "monitoring.simulate", sample_seconds) if simulate else None,
        PeriodicJob("monitoring-record-queue", "monitoring.record_queue", 60.0),
        PeriodicJob("monitoring-rollup", "monitoring.rollup", rollup_seconds),
        PeriodicJob("monitoring-prune", "monitoring.prune", 3600.0),
    ]
    return tuple(job for job in jobs if job is not None)


def beat_schedule(jobs: tuple[PeriodicJob, ...]) -> dict[str, dict[str, Any]]:
    """``CELERY_BEAT_SCHEDULE`` for ``jobs``."""
    return {
        job.name: {"task": job.task, "schedule": job.every_seconds, "options": {"expires": job.every_seconds}}
        for job in jobs
    }
