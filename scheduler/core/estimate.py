"""Start-time estimates for the whole queue: ``squeue --start``, for every job.

Assume nothing new arrives and every job runs to its walltime limit. Jobs the cycle
would start now start now; every other job, in queue order, gets the earliest start at
which it fits without overlapping any job placed before it (a conservative-backfill
plan of the queue; under a strict-order policy, no earlier than the job ahead of it).
Jobs waiting on a dependency, a quota limit or hardware that is not up get no
estimate: their start does not depend on the queue alone.

The plan is a product of the cycle itself (``Policy.estimates``): it starts from the
cycle's own final ledger and releases, so no second cycle is run.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from scheduler.core.cycle import queue_order, schedule
from scheduler.core.types import Decisions, Policy, Snapshot


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
