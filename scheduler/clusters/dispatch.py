"""Hand a claimed job to its workload manager: the one place a job becomes RUNNING by dispatch."""

from __future__ import annotations

from django.utils import timezone

from portal.models import ClusterIdentity
from scheduler.backends.base import ArrayTask, BackendError, JobSpec, Placement, RunAs
from scheduler.choices import EventKind, JobState
from scheduler.clusters.failpoints import failpoint
from scheduler.jobs import allocations
from scheduler.jobs.remote import backend_for
from scheduler.jobs.transitions import record_event, transition
from scheduler.models import Job


def run_as(user: object) -> RunAs | None:
    """The cluster identity of a portal user, as backends take it (None without one)."""
    try:
        identity = user.cluster_identity  # type: ignore[attr-defined]
    except ClusterIdentity.DoesNotExist:
        return None
    return RunAs(identity.username, identity.uid, identity.gid)


def job_spec(job: Job) -> JobSpec:
    """What the backend needs for the job's current attempt, run as its owner's cluster
    identity (a backend that runs jobs as their owners refuses it without one)."""
    return JobSpec(
        key=job.backend_key,
        name=job.name,
        owner=job.owner.get_username(),
        account=job.account.name,
        command=job.command,
        script=job.script,
        walltime_seconds=job.walltime_seconds,
        placements=tuple(
            Placement(node=a.node, gpu_indices=a.gpu_indices) for a in allocations.decode(job.allocations)
        ),
        cpus_per_node=job.cpus_per_node,
        memory_mib_per_node=job.memory_mib_per_node,
        image=job.image,
        env={str(k): str(v) for k, v in (job.env or {}).items()},
        workdir=job.workdir,
        files={str(k): str(v) for k, v in (job.files or {}).items()},
        run_as=run_as(job.owner),
        array=(
            ArrayTask(job.array_job_id, job.array_task_id or 0, job.array_task_count)
            if job.array_job_id is not None
            else None
        ),
    )


def dispatch_job(job_id: int) -> None:
    """Hand a DISPATCHING job to its backend and mark it RUNNING.

    Safe to call again for the same job (after a worker crash or a transient error):
    ``submit`` is idempotent per attempt key, and the state moves only if the job is
    still DISPATCHING. If the job was cancelled while we submitted, the fresh remote job
    is cancelled too. A permanent backend error fails the job; a transient one is
    re-raised so the caller retries.
    """
    job = Job.objects.select_related("cluster", "owner__cluster_identity", "account").filter(pk=job_id).first()
    if job is None or job.state != JobState.DISPATCHING or job.cluster is None:
        return
    try:
        backend = backend_for(job.cluster)
        external_id = backend.submit(job_spec(job))
    except BackendError as exc:
        if exc.permanent:
            transition(
                job.id,
                [JobState.DISPATCHING],
                JobState.FAILED,
                message=f"backend refused: {exc.message}",
                state_reason=exc.message[:500],
                ended_at=timezone.now(),
            )
            return
        record_event(job.id, EventKind.DISPATCH_RETRY, f"dispatch failed, will retry: {exc.message}")
        raise
    failpoint("dispatch.after_submit")
    moved = transition(
        job.id,
        [JobState.DISPATCHING],
        JobState.RUNNING,
        where={"attempt": job.attempt},
        event=EventKind.DISPATCHED,
        message=f"running on {job.cluster.name} as {external_id}",
        external_id=external_id,
        started_at=timezone.now(),
    )
    if not moved:
        # Cancelled, or requeued as a new attempt, while we were submitting: do not
        # leave this attempt running.
        backend.cancel(external_id)
