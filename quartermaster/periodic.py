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


def periodic_jobs(settings: Any) -> tuple[PeriodicJob, ...]:
    """Every periodic job under ``settings`` (Django's, or the settings module while it
    loads), in the order the embedded loop runs the due ones: the poll first (a job that
    just ended frees its GPUs for this tick), then the tick. Read on each call, so a
    changed setting (``MONITORING_SIMULATE``, a period) takes effect where it is read."""
    jobs = [
        PeriodicJob("scheduler-poll-backends", "scheduler.poll_backends", settings.SCHEDULER_POLL_SECONDS),
        PeriodicJob("scheduler-tick", "scheduler.tick", settings.SCHEDULER_TICK_SECONDS),
        PeriodicJob("scheduler-refresh-estimates", "scheduler.refresh_estimates", settings.SCHEDULER_ESTIMATE_SECONDS),
        PeriodicJob("scheduler-backtest-starts", "scheduler.backtest_starts", settings.SCHEDULER_BACKTEST_SECONDS),
        # Every minute: SESSION_IDLE_MINUTES counts whole minutes (it returns at once when 0).
        PeriodicJob("scheduler-end-idle-sessions", "scheduler.end_idle_sessions", 60.0),
        # Hourly: a retention counted in days (JOB_FILES_RETENTION_DAYS).
        PeriodicJob("scheduler-expire-job-files", "scheduler.expire_job_files", 3600.0),
        PeriodicJob("monitoring-simulate", "monitoring.simulate", settings.MONITORING_SAMPLE_SECONDS)
        if settings.MONITORING_SIMULATE
        else None,
        PeriodicJob("monitoring-record-queue", "monitoring.record_queue", 60.0),
        PeriodicJob("monitoring-rollup", "monitoring.rollup", settings.MONITORING_ROLLUP_SECONDS),
        PeriodicJob("monitoring-prune", "monitoring.prune", 3600.0),
        PeriodicJob("monitoring-record-efficiencies", "monitoring.record_efficiencies", 60.0),
        PeriodicJob("monitoring-enforce-idle", "monitoring.enforce_idle", 60.0),
        # The last day's fairness moves slowly; it returns at once when FAIRNESS_WATCH_BELOW is 0.
        PeriodicJob("monitoring-fairness-watch", "monitoring.fairness_watch", 300.0),
        PeriodicJob("monitoring-audit-gpu-processes", "monitoring.audit_gpu_processes", 60.0),
        PeriodicJob("notifications-pump", "notifications.pump", settings.NOTIFY_SECONDS),
        PeriodicJob("portal-sync-directory", "portal.sync_directory", settings.LDAP_SYNC_SECONDS)
        if settings.LDAP_SERVER_URI
        else None,
    ]
    return tuple(job for job in jobs if job is not None)


def beat_schedule(jobs: tuple[PeriodicJob, ...]) -> dict[str, dict[str, Any]]:
    """``CELERY_BEAT_SCHEDULE`` for ``jobs``."""
    return {
        job.name: {"task": job.task, "schedule": job.every_seconds, "options": {"expires": job.every_seconds}}
        for job in jobs
    }
