"""Start-time estimates for the whole queue: ``squeue --start``, for every job.

Assume nothing new arrives and every job runs to its walltime limit. Jobs the cycle
would start now start now; every other job, in queue order, gets the earliest start at
which it fits without overlapping any job placed before it (a conservative-backfill
plan of the queue; under a strict-order policy, no earlier than the job ahead of it).
Jobs waiting on a dependency, a quota limit or hardware that is not up get no
estimate: their start does not depend on the queue alone.

The plan is a product of the cycle itself (``Policy.estimates``): it starts from the
cycle's own final ledger and releases, so no second cycle is run.

Calibrated starts (:func:`calibrated_starts`) plan the same queue again with every
job's run time taken as a quantile of what its kind of job runs of its walltime
(``scheduler.core.prediction``) instead of the walltime: the p50 start is when the
job starts if every job runs its median, the p90 start if every job runs its 90th
percentile. They are predictions, not bounds; the backtest
(``scheduler.replay.backtest``) measures how often jobs did start before them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

from scheduler.core.cycle import queue_order, schedule
from scheduler.core.prediction import RatioSamples, ratio_quantile
from scheduler.core.types import Decisions, PendingJob, Policy, RunningJob, Snapshot

#: The run-time quantiles the p50 and p90 starts plan with.
P50 = 0.5
P90 = 0.9


def estimate_starts(
    snapshot: Snapshot, policy: Policy, now: datetime, horizon: int | None = None
) -> dict[int, datetime]:
    """Job id -> latest expected start: the jobs the cycle starts (``now``) and the
    waiting jobs it can estimate, all of them, or only the first ``horizon`` waiting
    ones in queue order.

    Cutting the plan at ``horizon`` changes no estimate: jobs are planned in queue
    order, so a job's estimate never depends on the jobs behind it.
    """
    decisions = schedule(snapshot, replace(policy, estimates=True), now)
    estimates = decisions.estimates
    if horizon is None:
        return estimates
    started = {start.job_id for start in decisions.starts}
    kept: dict[int, datetime] = {job_id: estimates[job_id] for job_id in started}
    for job in queue_order(snapshot, policy, now, Decisions()):
        if len(kept) - len(started) >= horizon:
            break
        if job.id in estimates and job.id not in started:
            kept[job.id] = estimates[job.id]
    return kept


@dataclass(frozen=True, slots=True)
class CalibratedStarts:
    """Job id -> predicted start, when jobs run their median (``p50``) and their 90th
    percentile (``p90``); a job in one is in the other, and ``p50 <= p90``."""

    p50: dict[int, datetime]
    p90: dict[int, datetime]


def calibrated_starts(
    snapshot: Snapshot, policy: Policy, now: datetime, samples: RatioSamples, horizon: int | None = None
) -> CalibratedStarts:
    """The p50 and p90 starts of the jobs :func:`estimate_starts` estimates, from the
    run-time ratios ``samples`` (``RuntimePredictor.samples``).

    Steps:
    1. Per quantile, shorten every running job to the quantile of its ratios that it
       has not already outrun, and every pending job to the quantile of its ratios
       (:func:`predicted_snapshot`), and plan the queue as :func:`estimate_starts` does.
    2. Keep the jobs both plans estimate, and take the earlier start as the p50 where
       the plans cross: planning is not monotonic in run times (a job that ends sooner
       can let a later one backfill into the hole another job was to start in), and a
       p50 after the p90 would say nothing anyone could use.
    """
    p50 = estimate_starts(predicted_snapshot(snapshot, samples, P50, now), policy, now, horizon)
    p90 = estimate_starts(predicted_snapshot(snapshot, samples, P90, now), policy, now, horizon)
    both = p50.keys() & p90.keys()
    return CalibratedStarts(
        {job_id: min(p50[job_id], p90[job_id]) for job_id in both}, {job_id: p90[job_id] for job_id in both}
    )


def predicted_snapshot(snapshot: Snapshot, samples: RatioSamples, q: float, now: datetime) -> Snapshot:
    """``snapshot`` with every job's walltime cut to the ``q`` quantile of its run time
    (never below 1 s, never below what a running job has already run). The pending
    jobs are those of ``snapshot.pending``: a kept queue (``Snapshot.queue``) is not
    read, and neither is a carry (its books are of the walltimes)."""
    if snapshot.queue is not None:
        raise ValueError("calibrated starts plan snapshot.pending; pass the queue's jobs there")
    running = tuple(_predicted_running(job, samples, q, now) for job in snapshot.running)
    pending = tuple(_predicted_pending(job, samples, q) for job in snapshot.pending)
    return replace(snapshot, running=running, pending=pending, carry=None)


def _predicted_running(job: RunningJob, samples: RatioSamples, q: float, now: datetime) -> RunningJob:
    walltime = job.walltime_seconds
    if walltime <= 0 or job.started_at is None:
        return job
    ran = max((now - job.started_at).total_seconds(), 0.0)
    ratio = ratio_quantile(samples, job.account, job.user, q, min(ran / walltime, 1.0))
    return replace(job, walltime_seconds=max(math.ceil(walltime * ratio), math.ceil(ran), 1))


def _predicted_pending(job: PendingJob, samples: RatioSamples, q: float) -> PendingJob:
    ratio = ratio_quantile(samples, job.account, job.user, q)
    return replace(job, walltime_seconds=max(math.ceil(job.walltime_seconds * ratio), 1))
