"""Thin Celery tasks for monitoring; beat runs them (see ``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from monitoring import audit, efficiency, fairness, idle, queue, services


@shared_task(name="monitoring.rollup", ignore_result=True)
def rollup() -> dict[str, int]:
    """Recompute the minute and hour rollups of the recent window (idempotent)."""
    return services.rollup_recent()


@shared_task(name="monitoring.prune", ignore_result=True)
def prune() -> dict[str, int]:
    """Delete samples and rollups past their retention."""
    return services.prune()


@shared_task(name="monitoring.simulate", ignore_result=True)
def simulate() -> int:
    """One simulated sample per GPU of the local clusters (the demo's telemetry)."""
    return services.record_simulated_samples()


@shared_task(name="monitoring.record_queue", ignore_result=True)
def record_queue() -> int:
    """Each account's pending and running jobs at this minute (the queue's history)."""
    return queue.record_queue()


@shared_task(name="monitoring.record_efficiencies", ignore_result=True)
def record_efficiencies() -> int:
    """How well each job that ended lately used its GPUs (``monitoring.efficiency``)."""
    return efficiency.record_efficiencies()


@shared_task(name="monitoring.enforce_idle", ignore_result=True)
def enforce_idle() -> dict[str, int]:
    """Flag running jobs holding idle GPUs, and requeue or cancel them as their account
    asks (``monitoring.idle``)."""
    return idle.enforce()


@shared_task(name="monitoring.fairness_watch", ignore_result=True)
def fairness_watch() -> str:
    """Check how evenly accounts were treated over the last day, opening or closing a
    starvation episode (``monitoring.fairness``)."""
    return fairness.watch(timezone.now())


@shared_task(name="monitoring.audit_gpu_processes", ignore_result=True)
def audit_gpu_processes() -> dict[str, int]:
    """Find processes on GPUs that no job accounts for, and clear those gone
    (``monitoring.audit``)."""
    return audit.audit_processes()
