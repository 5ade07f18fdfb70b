"""Start-time estimates for the whole queue: ``squeue --start``, for every job.

Assume nothing new arrives and every job runs to its walltime limit. Jobs the cycle
would start now start now; every other job, in queue order, gets the earliest start at
which it fits without overlapping any job placed before it (a conservative-backfill
plan of the queue). A job running shorter than its limit only makes starts earlier, so
each estimate is a latest start under those assumptions. Jobs waiting on a dependency,
a quota limit or hardware that is not up get no estimate: their start does not depend
on the queue alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.core.backfill import Release, plan_reservation
from scheduler.core.cycle import latest_end, queue_order, schedule
from scheduler.core.placement import Ledger
from scheduler.core.types import Decisions, PendingReason, Policy, Reservation, Snapshot

#: Reasons under which the queue alone does not decide when a job starts.
_NOT_ESTIMATED = frozenset(
    {
        PendingReason.NODES_UNAVAILABLE,
        PendingReason.DEPENDENCY,
        PendingReason.DEPENDENCY_NEVER,
        PendingReason.ACCOUNT_GPU_LIMIT,
        PendingReason.ACCOUNT_JOB_LIMIT,
        PendingReason.USER_GPU_LIMIT,
        PendingReason.USER_JOB_LIMIT,
    }
)


def estimate_starts(snapshot: Snapshot, policy: Policy, now: datetime, horizon: int = 500) -> dict[int, datetime]:
    """Job id -> latest expected start, for the first ``horizon`` waiting jobs in queue order.

    Steps:
    1. Run the cycle: what it starts, starts ``now``; evicted jobs free their resources.
    2. Replay the ends of running and just-started jobs at their walltime limits.
    3. Walk the rest of the queue in order, planning each job at the earliest instant it
       fits alongside every job planned before it.
    """
    decisions = schedule(snapshot, policy, now)
    estimates = {start.job_id: now for start in decisions.starts}
    evicted = {e.victim_id for e in decisions.evictions}
    ledger = Ledger.from_snapshot(snapshot, policy.sharing_overhead)
    for victim in snapshot.running:
        if victim.id in evicted:
            ledger.release(victim.allocations)
    by_id = {job.id: job for job in snapshot.pending}
    releases = [Release(latest_end(r, now), r.allocations, r.id) for r in snapshot.running if r.id not in evicted]
    for start in decisions.starts:
        ledger.commit(start)
        walltime = timedelta(seconds=by_id[start.job_id].walltime_seconds)
        releases.append(Release(now + walltime, start.allocations, start.job_id))

    planned: list[Reservation] = []
    for job in queue_order(snapshot, policy, now, Decisions()):
        if len(planned) >= horizon:
            break
        if job.id in estimates or decisions.pending_reasons.get(job.id) in _NOT_ESTIMATED:
            continue
        reservation = plan_reservation(job, ledger, releases, planned, policy.placement)
        if reservation is not None:
            planned.append(reservation)
            estimates[job.id] = reservation.start_at
    return estimates
