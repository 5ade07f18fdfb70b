"""Hand a claimed job to its workload manager: the one place a job becomes RUNNING by dispatch."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from portal.models import ClusterIdentity
from scheduler.backends.base import ArrayTask, Backend, BackendError, JobSpec, Placement, RunAs
from scheduler.choices import EventKind, JobState
from scheduler.clusters.failpoints import failpoint
from scheduler.clusters.reservations import backend_name
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
        reservation=backend_name(job.reservation) if job.reservation else "",
    )


def dispatch_job(job_id: int) -> None:
    """Hand one DISPATCHING job to its backend and mark it RUNNING (see
    :func:`dispatch_jobs`); a transient backend error is re-raised, so that the caller
    (a Celery task) retries."""
    failures = dispatch_jobs([job_id])
    if failures:
        raise failures[0]


def dispatch_jobs(job_ids: Sequence[int]) -> list[BackendError]:
    """Hand DISPATCHING jobs to their backends, a cluster's jobs in one batch
    (``Backend.submit_many``: on Slurm one lookup and concurrent sbatch calls), and mark
    each RUNNING. Returns the transient errors met (those jobs stay DISPATCHING and are
    handed off again by the poll loop).

    Safe to call again for the same jobs (after a worker crash or a transient error):
    ``submit`` is idempotent per attempt key, and a state moves only if the job is
    still DISPATCHING. If a job was cancelled while we submitted, its fresh remote job
    is cancelled too. A permanent backend error fails that job alone.
    """
    jobs = list(
        Job.objects.select_related("cluster", "owner__cluster_identity", "account")
        .filter(pk__in=job_ids, state=JobState.DISPATCHING, cluster__isnull=False)
        .order_by("id")
    )
    by_cluster: dict[int, list[Job]] = {}
    for job in jobs:
        by_cluster.setdefault(job.cluster_id or 0, []).append(job)
    transient: list[BackendError] = []
    for batch in by_cluster.values():
        cluster = batch[0].cluster
        assert cluster is not None  # filtered above
        try:
            backend = backend_for(cluster)
        except BackendError as exc:
            outcomes: list[str | BackendError] = [exc for _ in batch]
        else:
            outcomes = backend.submit_many([job_spec(job) for job in batch])
        for job, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BackendError):
                if _failed(job, outcome):
                    transient.append(outcome)
                continue
            failpoint("dispatch.after_submit")
            _running(job, backend, outcome)
    return transient


def _failed(job: Job, exc: BackendError) -> bool:
    """Record a backend's refusal: a permanent one fails the job; a transient one is an
    event and the job stays DISPATCHING. Returns whether it was transient."""
    if exc.permanent:
        transition(
            job.id,
            [JobState.DISPATCHING],
            JobState.FAILED,
            message=f"backend refused: {exc.message}",
            state_reason=exc.message[:500],
            ended_at=timezone.now(),
        )
        return False
    record_event(job.id, EventKind.DISPATCH_RETRY, f"dispatch failed, will retry: {exc.message}")
    return True


def _running(job: Job, backend: Backend, external_id: str) -> None:
    """The backend took the job: RUNNING, unless it was cancelled or requeued meanwhile."""
    assert job.cluster is not None
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
