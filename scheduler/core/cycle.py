"""One scheduling cycle: ``schedule(snapshot, policy, now) -> Decisions``.

This is the FIFO first-fit policy: jobs are considered in submit order and each is
placed on the first nodes that can hold it. It is the base the multifactor and
backfill policies build on, and it already guarantees the invariants every policy
must keep (no GPU given twice, gang all-or-nothing, only matching GPUs).
"""

from __future__ import annotations

from datetime import datetime

from scheduler.core.placement import IdleCluster, Ledger, request_shape
from scheduler.core.types import Decisions, PendingReason, Policy, Snapshot


def schedule(snapshot: Snapshot, policy: Policy, now: datetime) -> Decisions:
    """Decide which pending jobs start now and where; give every other job a reason.

    Steps:
    1. Build the free-capacity ledger (node capacity minus running allocations).
    2. Walk pending jobs oldest first (ties by id).
    3. A job no schedulable node could ever hold gets ``ReqNodeNotAvail`` and does not
       block others; a job that fits the cluster but not the free capacity gets
       ``Resources`` and, under ``strict_order``, every later job waits (``Priority``).
    4. A placed job is committed to the ledger before the next job is tried.

    Capacity only shrinks during a cycle, so a request shape that failed once is not
    tried again, and feasibility on the idle cluster is computed once per shape.

    ``now`` is unused by FIFO but part of every policy's signature (ages, estimates).
    """
    del now
    decisions = Decisions()
    ledger = Ledger.from_snapshot(snapshot)
    idle = IdleCluster(snapshot.nodes)
    failed_shapes: set[tuple[object, ...]] = set()
    blocked = False

    for job in sorted(snapshot.pending, key=lambda j: (j.submitted_at, j.id)):
        shape = request_shape(job)
        if not idle.fits(job):
            decisions.pending_reasons[job.id] = PendingReason.NODES_UNAVAILABLE
            continue
        if blocked:
            decisions.pending_reasons[job.id] = PendingReason.PRIORITY
            continue
        if len(decisions.starts) >= policy.max_starts:
            decisions.pending_reasons[job.id] = PendingReason.CYCLE_LIMIT
            continue
        start = None if shape in failed_shapes else ledger.first_fit(job)
        if start is None:
            failed_shapes.add(shape)
            decisions.pending_reasons[job.id] = PendingReason.RESOURCES
            blocked = policy.strict_order
            continue
        ledger.commit(start)
        decisions.starts.append(start)
    return decisions
