"""One scheduling cycle: ``schedule(snapshot, policy, now) -> Decisions``.

This is the FIFO first-fit policy: jobs are considered in submit order and each is
placed on the first nodes that can hold it. It is the base the multifactor and
backfill policies build on, and it already guarantees the invariants every policy
must keep (no GPU given twice, gang all-or-nothing, only matching GPUs).
"""

from __future__ import annotations

from datetime import datetime

from scheduler.core.placement import Ledger, fits_when_idle
from scheduler.core.types import Decisions, PendingJob, PendingReason, Policy, Snapshot


def _shape(job: PendingJob) -> tuple[object, ...]:
    """The part of a request that decides where it can fit."""
    return (
        job.nodes,
        job.gpus_per_node,
        job.cpus_per_node,
        job.memory_mib_per_node,
        job.gpu_model,
        job.min_gpu_memory_mib,
        job.min_compute_capability,
    )


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
    tried again: this keeps a cycle over 10,000 pending jobs cheap.

    ``now`` is unused by FIFO but part of every policy's signature (ages, estimates).
    """
    del now
    decisions = Decisions()
    ledger = Ledger.from_snapshot(snapshot)
    feasible: dict[tuple[object, ...], bool] = {}
    failed_shapes: set[tuple[object, ...]] = set()
    blocked = False

    for job in sorted(snapshot.pending, key=lambda j: (j.submitted_at, j.id)):
        shape = _shape(job)
        if shape not in feasible:
            feasible[shape] = fits_when_idle(job, snapshot.nodes)
        if not feasible[shape]:
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
