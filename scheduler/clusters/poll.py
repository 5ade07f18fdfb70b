"""Poll each cluster: inventory, finished jobs, stuck dispatches, then reconcile.

One cluster's outage never stops the others; an unreachable cluster is marked so, and
the tick then places nothing on its nodes (waiting jobs say why).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from common.db.bulk import update_matching_rows
from scheduler.backends.base import BackendError, PollResult, RemoteState
from scheduler.choices import JobState
from scheduler.clusters import reconcile
from scheduler.clusters.dispatch import dispatch_jobs
from scheduler.clusters.sync import sync_nodes
from scheduler.config import SchedulerConfig, current_config
from scheduler.jobs.remote import after_commit, backend_for
from scheduler.jobs.transitions import transition
from scheduler.models import Cluster, Job
from scheduler.sessions.ready import refresh_starting

log = logging.getLogger(__name__)

#: A polled start this close to the recorded one is the same start (clock rounding:
#: Slurm reports whole seconds); only a larger difference is written.
START_TOLERANCE_SECONDS = 0.5


_REMOTE_TO_JOB = {
    RemoteState.COMPLETED: JobState.COMPLETED,
    RemoteState.FAILED: JobState.FAILED,
    RemoteState.CANCELLED: JobState.CANCELLED,
    RemoteState.TIMEOUT: JobState.TIMEOUT,
    RemoteState.NODE_FAIL: JobState.NODE_FAIL,
    RemoteState.PREEMPTED: JobState.PREEMPTED,
    RemoteState.UNKNOWN: JobState.NODE_FAIL,
}


def _apply_poll_result(job_id: int, result: PollResult, external_id: str, config: SchedulerConfig) -> bool:
    """Record a polled end on the job, if it still runs as the attempt that was polled.

    A node failure requeues the job (``reconcile.lost``). A job the backend no longer
    knows ends NODE_FAIL without a requeue: it may well have finished while nobody
    looked (purged from slurmctld's memory without accounting, a Job deleted by a TTL),
    and running it again would repeat its effects.
    """
    if not result.state.is_terminal:
        return False
    started: dict[str, Any] = {"started_at": result.started_at} if result.started_at is not None else {}
    reason = result.reason or ("the backend no longer knows this job" if result.state is RemoteState.UNKNOWN else "")
    if result.state is RemoteState.NODE_FAIL:
        return reconcile.lost(
            job_id, reason or "its node failed", result.ended_at or timezone.now(), config, external_id
        )
    return transition(
        job_id,
        [JobState.RUNNING],
        _REMOTE_TO_JOB[result.state],
        message=f"{result.state} (exit code {result.exit_code})" if result.exit_code is not None else str(result.state),
        exit_code=result.exit_code,
        ended_at=result.ended_at or timezone.now(),
        state_reason=reason[:500],
        where={"external_id": external_id},
        **started,
    )


#: What the poll read of each running job, by backend id: (job id, attempt, started_at).
Running = dict[str, tuple[int, int, datetime | None]]


def _record_starts(running: Running, results: dict[str, PollResult]) -> int:
    """Set each running job's ``started_at`` to when its workload manager says it started
    (Slurm's StartTime, the pod's start, the local runner's record), where that differs
    from what the portal wrote at dispatch (the dispatch batch's time, or a re-dispatch's
    after a worker died). Accounting, fair-share usage and estimates then count from the
    real start. One statement for them all (``common.db.bulk``), each row only while the
    job still runs as the attempt and backend id polled; returns how many were corrected."""
    ids, attempts, external_ids, starts = [], [], [], []
    for external_id, (job_id, attempt, stored) in running.items():
        result = results.get(external_id)
        if result is None or result.started_at is None or result.state is not RemoteState.RUNNING:
            continue
        if stored is not None and abs((result.started_at - stored).total_seconds()) < START_TOLERANCE_SECONDS:
            continue
        ids.append(job_id)
        attempts.append(attempt)
        external_ids.append(external_id)
        starts.append(result.started_at)
    corrected = update_matching_rows(
        Job,
        ids,
        {"started_at": starts},
        match={"attempt": attempts, "external_id": external_ids},
        where={"state": JobState.RUNNING},
    )
    return len(corrected)


def poll_cluster(cluster: Cluster, now: datetime | None = None) -> dict[str, int]:
    """Refresh one cluster: inventory, finished jobs, stuck dispatches.

    Steps:
    1. Sync nodes (heartbeats, new hardware, down nodes).
    2. Poll every RUNNING job of the cluster in one backend call; record ends.
    3. Re-dispatch jobs stuck in DISPATCHING longer than ``redispatch_seconds``
       (their worker died mid-submit; submit is idempotent so this cannot duplicate).
    4. Interactive sessions still starting: whether their servers answer now
       (``scheduler.sessions.ready``).
    5. Reconcile (``scheduler.clusters.reconcile``): silent nodes, jobs on down nodes, orphans.
    """
    now = now or timezone.now()
    config = current_config()
    backend = backend_for(cluster)
    nodes_seen = sync_nodes(cluster, backend, now)
    running: Running = {
        external_id: (job_id, attempt, started)
        for external_id, job_id, attempt, started in Job.objects.filter(cluster=cluster, state=JobState.RUNNING)
        .exclude(external_id="")
        .values_list("external_id", "id", "attempt", "started_at")
    }
    ended = 0
    if running:
        results = backend.poll(list(running))
        _record_starts(running, results)
        for external_id, (job_id, _, _) in running.items():
            result = results.get(external_id)
            if result is not None and _apply_poll_result(job_id, result, external_id, config):
                ended += 1
    stale = now - timedelta(seconds=config.redispatch_seconds)
    stuck = list(
        Job.objects.filter(cluster=cluster, state=JobState.DISPATCHING, dispatched_at__lt=stale).values_list(
            "id", flat=True
        )
    )
    if stuck:
        Job.objects.filter(pk__in=stuck, state=JobState.DISPATCHING).update(dispatched_at=now)
        after_commit("scheduler.dispatch_jobs", dispatch_jobs, stuck)
    sessions_ready = refresh_starting(cluster, backend, now) if running else 0
    report = {
        "nodes": nodes_seen,
        "running": len(running),
        "ended": ended,
        "redispatched": len(stuck),
        "sessions_ready": sessions_ready,
    }
    return report | reconcile.reconcile(cluster, backend, now, config)


def poll_backends(now: datetime | None = None) -> dict[str, dict[str, int]]:
    """Poll every enabled cluster; one cluster's outage does not stop the others.

    A cluster whose backend cannot be reached is marked unreachable with the error
    (the tick then places nothing on its nodes, and waiting jobs say why); the next
    successful poll marks it reachable again.
    """
    now = now or timezone.now()
    report: dict[str, dict[str, int]] = {}
    for cluster in Cluster.objects.filter(enabled=True):
        try:
            report[cluster.name] = poll_cluster(cluster, now)
        except BackendError as exc:
            log.warning("polling cluster %s failed: %s", cluster.name, exc)
            report[cluster.name] = {"error": 1}
            Cluster.objects.filter(pk=cluster.pk).update(reachable=False, last_error=exc.message[:500])
        else:
            Cluster.objects.filter(pk=cluster.pk).update(reachable=True, last_error="", last_contact_at=now)
    return report
