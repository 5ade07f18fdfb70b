"""Write a cycle's decisions back: evict the preempted, claim the started, store why the
rest wait and who borrows.

Everything here runs inside the tick's transaction, under its lock, and writes only
what changed since the snapshot: reasons and blockers in one statement (see
``common.db.bulk``: a waiting job's blockers change on most ticks, as the jobs ahead of
it start), and only on jobs still in the state the cycle saw (a job cancelled
meanwhile keeps what its cancel wrote).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any

from common.db.bulk import update_rows, update_versioned_rows
from scheduler.choices import ACTIVE_STATES, EventKind, JobState
from scheduler.config import SchedulerConfig
from scheduler.core.types import Decisions, Eviction, PendingReason, Start
from scheduler.jobs import allocations
from scheduler.jobs.blockers import blockers_to_json
from scheduler.jobs.remote import cancel_remote_after_commit
from scheduler.jobs.transitions import FRESH_ATTEMPT, claim_many, transition
from scheduler.models import Cluster, Job
from scheduler.tick.snapshot import LoadedSnapshot, waiting_versions, waiting_written


def evict(evictions: list[Eviction], now: datetime, config: SchedulerConfig) -> None:
    """Stop preempted jobs: requeue them (``preempt_mode="requeue"``) or end them PREEMPTED.

    Each victim records who preempted it and why; its backend job is cancelled after
    commit with ``preempt_grace_seconds`` between SIGTERM and SIGKILL (time to
    checkpoint), before the preemptor is dispatched.
    """
    if not evictions:
        return
    victims = {j.id: j for j in Job.objects.filter(pk__in=[e.victim_id for e in evictions])}
    requeue = config.preempt_mode == "requeue"
    for eviction in evictions:
        victim = victims.get(eviction.victim_id)
        if victim is None:
            continue
        data = {"by": eviction.by}
        if requeue:
            fields: dict[str, Any] = {**FRESH_ATTEMPT, "attempt": victim.attempt + 1}
            moved = transition(
                victim.id,
                ACTIVE_STATES,
                JobState.PENDING,
                event=EventKind.PREEMPTED,
                message=f"{eviction.reason}; requeued",
                data=data,
                **fields,
            )
        else:
            moved = transition(
                victim.id,
                ACTIVE_STATES,
                JobState.PREEMPTED,
                event=EventKind.PREEMPTED,
                message=eviction.reason,
                data=data,
                ended_at=now,
                state_reason=eviction.reason,
            )
        if moved and victim.external_id:
            cancel_remote_after_commit(
                victim.cluster_id, victim.external_id, grace_seconds=config.preempt_grace_seconds
            )


def claim(starts: list[Start], now: datetime, borrowed: set[int]) -> list[int]:
    """Move started jobs PENDING -> DISPATCHING with their allocations, in bulk.

    The still-pending rows are locked first (``SELECT ... FOR UPDATE``), so a job
    cancelled or held since the snapshot is skipped and one that is cancelled now waits
    for this commit; then one UPDATE writes every claim (``common.db.bulk``; and clears
    the claimed jobs' start estimates: they no longer wait). Returns the claimed ids.
    """
    if not starts:
        return []
    ids = [s.job_id for s in starts]
    pending = set(
        Job.objects.select_for_update().filter(pk__in=ids, state=JobState.PENDING).values_list("id", flat=True)
    )
    starts = [start for start in starts if start.job_id in pending]
    clusters = dict(Cluster.objects.values_list("name", "id"))
    claim_many(
        [start.job_id for start in starts],
        {
            "cluster": [clusters[start.cluster] for start in starts],
            "allocations": [allocations.encode(start.allocations) for start in starts],
            "borrowed": [start.job_id in borrowed for start in starts],
        },
        [
            (
                start.job_id,
                "scheduled on "
                + ", ".join(f"{a.node}[{','.join(map(str, a.gpu_indices))}]" for a in start.allocations),
                {"allocations": allocations.encode(start.allocations)},
            )
            for start in starts
        ],
        now=now,
    )
    return [start.job_id for start in starts]


#: Reasons a job waiting its turn may keep while a cycle hits its start limit before it.
_IN_LINE = frozenset({PendingReason.PRIORITY.value, PendingReason.RESOURCES.value})


def store_waiting(decisions: Decisions, loaded: LoadedSnapshot) -> int:
    """Write changed pending reasons and blockers of still-PENDING jobs; returns the count.

    A job the cycle did not look at because it had started as many jobs as it may
    (``SchedCycleLimit``) keeps a stored ``Priority`` or ``Resources``: what the last
    look at it found still stands, as Slurm leaves a job's reason alone when its
    scheduler stops short. Rewriting them moved ~8,000 rows from one reason to the other
    and back on every other tick of a 10,000-job queue (the tick's costliest write).

    On PostgreSQL a row is written only if it is still the version the snapshot read
    (``scheduler.tick.kept``), and the new versions are noted so the next load need not
    read these jobs again: a job changed meanwhile (its QOS, its nice, a hold) keeps
    its stored reason until the next tick, which looks at it as it is now."""
    changed: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    for job_id, reason in decisions.pending_reasons.items():
        if reason is PendingReason.CYCLE_LIMIT and loaded.pending_reasons.get(job_id) in _IN_LINE:
            continue
        stored = blockers_to_json(decisions.blockers.get(job_id, ()))
        if loaded.pending_reasons.get(job_id) != reason or loaded.pending_blockers.get(job_id) != stored:
            changed[job_id] = (str(reason), stored)
    ids = list(changed)
    columns: dict[str, Sequence[object]] = {
        "pending_reason": [changed[i][0] for i in ids],
        "pending_blockers": [changed[i][1] for i in ids],
    }
    versions = waiting_versions(ids)
    if versions is None:
        update_rows(Job, ids, columns, where={"state": JobState.PENDING})
    else:
        waiting_written(update_versioned_rows(Job, ids, versions, columns, where={"state": JobState.PENDING}))
    return len(ids)


def store_borrowed(decisions: Decisions, loaded: LoadedSnapshot, started: Iterable[int]) -> None:
    """Mark running jobs that now run on borrowed GPUs, and unmark those that no longer do
    (older jobs of their account ended). Jobs started by this cycle are marked by the claim."""
    running = decisions.borrowed - set(started)
    _set_flag(running - loaded.borrowed, True)
    _set_flag(loaded.borrowed - decisions.borrowed, False)


def _set_flag(ids: AbstractSet[int], value: bool) -> None:
    if ids:
        Job.objects.filter(pk__in=ids, state__in=ACTIVE_STATES).update(borrowed=value)
