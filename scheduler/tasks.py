"""Thin Celery tasks: take ids, call a service, return.

``acks_late`` (set globally) means a task whose worker dies is redelivered; every
service called here is safe to run twice.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from scheduler import advice, backtests, simulations
from scheduler.backends.base import BackendError
from scheduler.clusters import dispatch, poll
from scheduler.jobs import files, remote
from scheduler.sessions import idle
from scheduler.tick import estimates
from scheduler.tick.run import run_tick


@shared_task(name="scheduler.tick", ignore_result=True)
def tick() -> dict[str, Any]:
    """One scheduling cycle; a concurrent second tick returns at once (single-flight)."""
    result = run_tick()
    return {"ran": result.ran, "started": len(result.started), "pending": result.pending}


@shared_task(
    name="scheduler.dispatch_job",
    ignore_result=True,
    autoretry_for=(BackendError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=10,
)
def dispatch_job(job_id: int) -> None:
    """One job (the tick and the poll loop send batches, ``scheduler.dispatch_jobs``; kept
    for messages queued by an earlier version during an upgrade)."""
    dispatch.dispatch_job(job_id)


@shared_task(name="scheduler.dispatch_jobs", ignore_result=True)
def dispatch_jobs(job_ids: list[int]) -> int:
    """A tick's starts in one batch. No retry of the whole batch: a job whose hand-off
    failed stays DISPATCHING and the poll loop hands it off again."""
    return len(dispatch.dispatch_jobs(job_ids))


@shared_task(
    name="scheduler.cancel_remote",
    ignore_result=True,
    autoretry_for=(BackendError,),
    retry_backoff=True,
    max_retries=10,
)
def cancel_remote(job_id: int) -> None:
    remote.cancel_remote(job_id)


@shared_task(name="scheduler.poll_backends", ignore_result=True)
def poll_backends() -> dict[str, dict[str, int]]:
    return poll.poll_backends()


@shared_task(name="scheduler.refresh_estimates", ignore_result=True)
def refresh_estimates() -> int:
    """Store every pending job's start estimate (beat runs it every SCHEDULER_ESTIMATE_SECONDS)."""
    return estimates.refresh_estimates()


@shared_task(name="scheduler.backtest_starts", ignore_result=True)
def backtest_starts() -> int:
    """Replay the last SCHEDULER_BACKTEST_DAYS and store how often jobs started before
    their p50 and p90 starts (beat runs it every SCHEDULER_BACKTEST_SECONDS); returns
    the stored row's id."""
    return backtests.run_backtest(timezone.now(), settings.SCHEDULER_BACKTEST_DAYS).pk


@shared_task(name="scheduler.expire_job_files", ignore_result=True)
def expire_job_files() -> dict[str, int]:
    """Drop the files of jobs ended more than JOB_FILES_RETENTION_DAYS ago (hourly)."""
    return files.expire_files(timezone.now())


@shared_task(name="scheduler.end_idle_sessions", ignore_result=True)
def end_idle_sessions() -> int:
    """Cancel the interactive sessions nobody used for SESSION_IDLE_MINUTES (every minute)."""
    return len(idle.end_idle_sessions(timezone.now()))


@shared_task(
    name="scheduler.run_simulation",
    ignore_result=True,
    soft_time_limit=settings.PREVIEW_TIME_LIMIT_SECONDS,
    time_limit=settings.PREVIEW_TIME_LIMIT_SECONDS + 30,
)
def run_simulation(simulation_id: int) -> None:
    """A recorded preview or replay (``scheduler.simulations``)."""
    simulations.run_simulation(simulation_id)


@shared_task(
    name="scheduler.advise",
    ignore_result=True,
    soft_time_limit=settings.PREVIEW_TIME_LIMIT_SECONDS,
    time_limit=settings.PREVIEW_TIME_LIMIT_SECONDS + 30,
)
def advise(request: dict[str, Any]) -> None:
    """Measure and cache one right-sizing advice (``scheduler.advice``): a user and a shape."""
    advice.measure(request)
