"""Keep the portal's view true when the cluster's differs: lost jobs, silent nodes, orphans.

Each poll of a cluster ends with a reconciliation (see ``scheduler.clusters.poll``), under
one :class:`~scheduler.config.SchedulerConfig`:

1. **Node-failed jobs** (the backend reports NODE_FAIL) are requeued as a new attempt,
   as Slurm requeues batch jobs on node failure, up to ``max_requeues``
   attempts; after that, or with requeue off, they end NODE_FAIL. A job the backend no
   longer knows at all ends NODE_FAIL without a requeue (see ``scheduler.clusters.poll``).
2. **Silent nodes**: an UP node without a heartbeat for ``node_timeout_seconds``
   is marked DOWN with the reason; jobs on nodes DOWN for longer than
   ``node_down_grace_seconds`` are requeued (or end NODE_FAIL) and their
   remote jobs cancelled.
3. **Orphans**: jobs at the backend that carry our key (``<uuid>.<attempt>``) but whose
   attempt is not an active job (a cancel whose hand-off failed, a database restored
   from backup) are recorded on the cluster and, with ``cancel_orphans``,
   cancelled: left alone they would hold GPUs the scheduler believes free. Keys, not
   backend ids, are compared: a job being dispatched has no backend id yet, but its key
   is known. Backends list their live jobs with an optional ``list_jobs()`` (key ->
   backend id); one without it is not swept.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q

from scheduler.backends.base import Backend, BackendError
from scheduler.choices import ACTIVE_STATES, EventKind, JobState, NodeState
from scheduler.config import SchedulerConfig
from scheduler.jobs.allocations import decode
from scheduler.jobs.remote import cancel_remote_after_commit
from scheduler.jobs.transitions import FRESH_ATTEMPT, transition
from scheduler.models import Cluster, Job, Node

log = logging.getLogger(__name__)


def lost(job_id: int, reason: str, now: datetime, config: SchedulerConfig, external_id: str | None = None) -> bool:
    """A running job whose node failed: requeue it or end it NODE_FAIL.

    ``external_id``: the backend id the news is about; the job moves only if it still
    runs as that attempt. Returns whether the job moved.
    """
    where = {"external_id": external_id} if external_id is not None else {}
    job = Job.objects.filter(pk=job_id, state__in=ACTIVE_STATES).values("attempt", "cluster_id", "external_id").first()
    if job is None:
        return False
    if config.requeue_on_node_fail and job["attempt"] < config.max_requeues:
        moved = transition(
            job_id,
            ACTIVE_STATES,
            JobState.PENDING,
            where=where,
            event=EventKind.REQUEUED,
            message=f"{reason}; requeued as attempt {job['attempt'] + 1}",
            data={"reason": reason},
            **{**FRESH_ATTEMPT, "attempt": job["attempt"] + 1},
        )
    else:
        moved = transition(
            job_id,
            ACTIVE_STATES,
            JobState.NODE_FAIL,
            where=where,
            message=reason,
            ended_at=now,
            state_reason=reason[:500],
        )
    if moved and job["external_id"]:
        cancel_remote_after_commit(job["cluster_id"], job["external_id"])
    return moved


def mark_silent_nodes(cluster: Cluster, now: datetime, config: SchedulerConfig) -> list[str]:
    """Mark UP nodes without a recent heartbeat DOWN; returns their names."""
    cutoff = now - timedelta(seconds=config.node_timeout_seconds)
    silent = Node.objects.filter(cluster=cluster, state=NodeState.UP).filter(
        Q(last_heartbeat__lt=cutoff) | Q(last_heartbeat__isnull=True)
    )
    names = list(silent.values_list("name", flat=True))
    if names:
        # Down since it was last heard of: the heartbeat timeout already was its grace.
        silent.update(
            state=NodeState.DOWN,
            reason=f"no heartbeat for {config.node_timeout_seconds}s",
            down_since=F("last_heartbeat"),
        )
        log.warning("cluster %s: nodes stopped heartbeating: %s", cluster.name, ", ".join(names))
    return names


def jobs_on_down_nodes(cluster: Cluster, now: datetime, config: SchedulerConfig) -> list[int]:
    """Requeue (or fail) every active job that holds a GPU on a node of ``cluster`` that
    has been DOWN for ``node_down_grace_seconds``.

    The grace matters: right after a workload manager restarts, it reports its nodes
    down until their daemons register again, and their jobs are fine.
    """
    settled = now - timedelta(seconds=config.node_down_grace_seconds)
    down = dict(
        Node.objects.filter(cluster=cluster, state=NodeState.DOWN)
        .filter(Q(down_since__lte=settled) | Q(down_since__isnull=True))
        .values_list("name", "reason")
    )
    if not down:
        return []
    moved = []
    for job_id, allocations in Job.objects.filter(cluster=cluster, state__in=ACTIVE_STATES).values_list(
        "id", "allocations"
    ):
        hit = next((a.node for a in decode(allocations) if a.node in down), None)
        if hit is not None and lost(job_id, f"node {hit} is down ({down[hit] or 'no reason given'})", now, config):
            moved.append(job_id)
    return moved


def sweep_orphans(cluster: Cluster, backend: Backend, config: SchedulerConfig) -> list[str]:
    """Record (and, if configured, cancel) backend jobs with our key that no active job holds."""
    list_jobs: Any = getattr(backend, "list_jobs", None)
    if list_jobs is None:
        return []
    try:
        remote: dict[str, str] = dict(list_jobs())
    except BackendError as exc:  # a sweep that cannot list (RBAC, say) must not take the cluster down
        log.warning("cluster %s: cannot list jobs for the orphan sweep: %s", cluster.name, exc)
        return []
    known = {
        f"{uuid}.{attempt}"
        for uuid, attempt in Job.objects.filter(state__in=ACTIVE_STATES).values_list("uuid", "attempt")
    }
    orphans = sorted(set(remote) - known)
    Cluster.objects.filter(pk=cluster.pk).update(orphans=orphans[:1000])
    if orphans:
        log.warning("cluster %s: %d orphaned backend job(s): %s", cluster.name, len(orphans), ", ".join(orphans[:10]))
    if orphans and config.cancel_orphans:
        for key in orphans:
            try:
                backend.cancel(remote[key])
            except BackendError as exc:
                log.warning("cluster %s: cancelling orphan %s failed: %s", cluster.name, key, exc)
    return orphans


def reconcile(cluster: Cluster, backend: Backend, now: datetime, config: SchedulerConfig) -> dict[str, int]:
    """Steps 2 and 3 of the module docstring for one cluster (step 1 happens as polls
    come in). Returns counts for the poll report."""
    with transaction.atomic():
        silent = mark_silent_nodes(cluster, now, config)
        requeued = jobs_on_down_nodes(cluster, now, config)
    orphans = sweep_orphans(cluster, backend, config)
    return {"silent_nodes": len(silent), "requeued_from_down_nodes": len(requeued), "orphans": len(orphans)}
