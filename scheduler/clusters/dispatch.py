"""Hand a claimed job to its workload manager: the one place a job becomes RUNNING by dispatch."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from people.models import ClusterIdentity
from scheduler.backends.base import ArrayTask, Backend, BackendError, JobOutput, JobSpec, Placement, RunAs
from scheduler.choices import EventKind, JobState
from scheduler.clusters.failpoints import failpoint
from scheduler.clusters.reservations import backend_name
from scheduler.jobs import allocations
from scheduler.jobs.output_paths import Names, filled
from scheduler.jobs.remote import backend_for
from scheduler.jobs.transitions import mark_running_many, record_event, transition
from scheduler.jobs.workdir import workdir_bounds
from scheduler.models import InteractiveSession, Job
from scheduler.sessions.script import SECRET_ENV


def run_as(user: object) -> RunAs | None:
    """The cluster identity of a portal user, as backends take it (None without one)."""
    try:
        identity = user.cluster_identity  # type: ignore[attr-defined]
    except ClusterIdentity.DoesNotExist:
        return None
    return RunAs(identity.username, identity.uid, identity.gid)


def job_spec(job: Job, *, first_handoff: bool = False) -> JobSpec:
    """What the backend needs for the job's current attempt, run as its owner's cluster
    identity (a backend that runs jobs as their owners refuses it without one).
    ``first_handoff``: the caller counted this hand-off and read back 1 (see
    :func:`_count_handoff`); never guess it, as it lets the backend skip its lookup."""
    identity = run_as(job.owner)
    user = identity.user if identity else job.owner.get_username()
    output = job_output(job, user)
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
        env={**{str(k): str(v) for k, v in (job.env or {}).items()}, **session_env(job)},
        workdir=job.workdir,
        workdir_bounds=workdir_bounds(user) if job.workdir or output else None,
        output=output,
        files={str(k): str(v) for k, v in (job.files or {}).items()},
        run_as=identity,
        array=(
            ArrayTask(job.array_job_id, job.array_task_id or 0, job.array_task_count)
            if job.array_job_id is not None
            else None
        ),
        reservation=backend_name(job.reservation) if job.reservation else "",
        first_handoff=first_handoff,
    )


def session_env(job: Job) -> dict[str, str]:
    """The environment an interactive session's job gets at dispatch and from nowhere
    else: its secret (``QM_SESSION_SECRET``), which is never stored in the job's script
    or env, so neither the API nor a page can show it. ``{}`` for any other job."""
    try:
        session = job.session
    except InteractiveSession.DoesNotExist:
        return {}
    return {SECRET_ENV: session.secret}


def output_of(job: Job) -> JobOutput | None:
    """:func:`job_output` for its owner's cluster user (what the job's page shows)."""
    identity = run_as(job.owner)
    return job_output(job, identity.user if identity else job.owner.get_username())


def job_output(job: Job, user: str) -> JobOutput | None:
    """The files the job's output is also written to, as sbatch names them: ``-o`` takes
    stdout, and stderr too unless ``-e`` names a file of its own; ``/dev/null`` is none
    (the portal's log alone). Patterns are filled in for this job (each task of an array
    its own, ``%u`` as ``user``) and a relative path is put in its workdir. None when no
    file is named. A later attempt (a requeue) appends."""
    names = Names(job.id, job.name, user, job.array_job_id, job.array_task_id)
    stdout = filled(job.output_path, names, job.workdir)
    stderr = filled(job.error_path, names, job.workdir) if job.error_path else stdout
    if not (stdout or stderr):
        return None
    return JobOutput(stdout=stdout, stderr=stderr, append=job.attempt > 0)


def dispatch_job(job_id: int) -> None:
    """Hand one DISPATCHING job to its backend and mark it RUNNING (see
    :func:`dispatch_jobs`); a transient backend error is re-raised, so that the caller
    (a Celery task) retries."""
    failures = dispatch_jobs([job_id])
    if failures:
        raise failures[0]


def dispatch_jobs(job_ids: Sequence[int]) -> list[BackendError]:
    """Hand DISPATCHING jobs to their backends, a cluster's jobs in one batch
    (``Backend.submit_many``: on Slurm concurrent sbatch calls), and mark those taken
    RUNNING in one statement. Returns the transient errors met (those jobs stay
    DISPATCHING and are handed off again by the poll loop).

    Safe to call again for the same jobs (after a worker crash or a transient error):
    each hand-off is counted (``Job.handoffs``) before the backend sees it, so only an
    attempt's first hand-off skips the backend's lookup by key, and ``submit`` is
    idempotent per attempt key; a state moves only if the job is still DISPATCHING at
    the attempt we handed off. If a job was cancelled or requeued while we submitted,
    its fresh remote job is cancelled too. A permanent backend error fails that job alone.
    """
    jobs = _count_handoff(job_ids)
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
            outcomes = backend.submit_many([job_spec(job, first_handoff=job.handoffs == 1) for job in batch])
        taken: list[tuple[Job, str]] = []
        for job, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BackendError):
                if _failed(job, outcome):
                    transient.append(outcome)
            else:
                taken.append((job, outcome))
        if taken:
            failpoint("dispatch.after_submit")
            _running(cluster.name, backend, taken)
    return transient


def _count_handoff(job_ids: Sequence[int]) -> list[Job]:
    """Count one more hand-off of each DISPATCHING job, then read the jobs back (by id).

    The count commits before any backend sees the jobs, so a job read back at 1 was
    handed to no backend before, by this worker or any other: a crash after sbatch
    leaves 1 behind it, and the retry reads 2. Two workers counting at once both read
    2, or one reads 1 and the other 2; neither mistakes a retry for a first hand-off.
    Hence ``durable``: called inside a transaction, whose rollback could forget a
    count after the backend took the job, it raises instead. An interactive session's
    readiness of an earlier attempt is forgotten with the same commit.
    """
    dispatching = Job.objects.filter(pk__in=job_ids, state=JobState.DISPATCHING, cluster__isnull=False)
    with transaction.atomic(durable=True):
        dispatching.update(handoffs=F("handoffs") + 1)
        # A session's server is looked for afresh in each attempt (requeued, preempted):
        # where an earlier one listened is no longer where the proxy may go.
        InteractiveSession.objects.filter(job_id__in=list(job_ids), ready_at__isnull=False).update(
            host="", port=None, ready_at=None
        )
    # The files in one query, each file set once however many of an array's tasks share
    # it; a session's secret with its job.
    related = dispatching.select_related("cluster", "owner__cluster_identity", "account", "session")
    related = related.prefetch_related("file_set")
    return list(related.order_by("id"))


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


def _running(cluster: str, backend: Backend, taken: Sequence[tuple[Job, str]]) -> None:
    """The backend took these jobs: RUNNING, in one statement and one transaction with
    their events, each only if it is still DISPATCHING at the attempt handed off; one
    cancelled or requeued meanwhile has its fresh remote job cancelled, so that no
    attempt is left running that the portal does not track."""
    moved = mark_running_many(
        cluster, [(job.id, job.attempt, external_id) for job, external_id in taken], now=timezone.now()
    )
    for job, external_id in taken:
        if job.id not in moved:
            backend.cancel(external_id)
