"""Every write to jobs, nodes and clusters goes through these verb-first functions.

Views, admin actions, Celery tasks and management commands call them; none of them
``.save()`` a job themselves. Job state only moves through :func:`transition`, a
conditional ``UPDATE ... WHERE state IN (...)`` that reports whether it won, so two
workers (or a worker and a user clicking cancel) can never both move one job.
Backend calls happen after the database commit, never inside a transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from portal.models import Account, Qos, Quota
from scheduler import hours, reconcile
from scheduler.backends import load_backend
from scheduler.backends.base import (
    Backend,
    BackendError,
    GpuInfo,
    JobSpec,
    NodeAdmin,
    NodeInfo,
    Placement,
    PollResult,
    RemoteState,
)
from scheduler.bulk import update_rows
from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, TERMINAL_STATES, EventKind, JobState, NodeState
from scheduler.core import Policy, Start, schedule
from scheduler.core.priority import PriorityWeights
from scheduler.core.types import Eviction, PendingReason, PlacementStrategy
from scheduler.failpoints import failpoint
from scheduler.models import Cluster, Gpu, Job, JobEvent, Node, TickState
from scheduler.snapshot import (
    allocations_to_json,
    load_snapshot,
    with_policy_inputs,
)
from scheduler.usage import update_usage, usage_policy
from scheduler.waiting import held_blockers, store_borrowed, store_waiting

log = logging.getLogger(__name__)

#: Advisory lock key for the scheduling tick on PostgreSQL ("QMTICK" in ASCII).
TICK_LOCK_KEY = 0x514D5449434B


class JobStateConflict(Exception):
    """The job is not in a state that allows the requested action."""


# --- Events and transitions --------------------------------------------------------


def record_event(job_id: int, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
    JobEvent.objects.create(job_id=job_id, at=timezone.now(), kind=kind, message=message, data=data or {})


def transition(
    job_id: int,
    from_states: Iterable[str],
    to_state: str,
    *,
    event: str = EventKind.STATE,
    message: str = "",
    data: dict[str, Any] | None = None,
    where: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move one job from any of ``from_states`` to ``to_state`` if it is still there.

    ``where`` pins more of what the caller saw (the attempt, the backend id), so news
    about an old attempt never moves the job's new one. Returns ``True`` when this call
    made the change (exactly one row updated), ``False`` when someone else moved the job
    first. Records a ``JobEvent`` only on success.

    A move out of an active state ends the running attempt: in the same transaction its
    GPU time and wait are added to its account's hour rollups (``scheduler.hours``), so
    an attempt is counted once, when the move that ended it wins, and never when it
    rolls back. The row is locked and read first, as the move may clear its start time.
    """
    sources = list(from_states)
    matching = Job.objects.filter(pk=job_id, state__in=sources, **(where or {}))
    ends_attempt = to_state not in ACTIVE_STATES and not ACTIVE_STATES.isdisjoint(sources)
    with transaction.atomic():
        before = matching.select_for_update().values(*hours.ATTEMPT_FIELDS).first() if ends_attempt else None
        if ends_attempt and before is None:
            return False
        changed = matching.update(state=to_state, **fields)
        if changed:
            record_event(job_id, event, message or f"-> {to_state}", {"to": to_state, **(data or {})})
            if before is not None and before["state"] in ACTIVE_STATES:
                hours.record_attempt(before, fields.get("ended_at") or timezone.now())
    return changed == 1


# --- Work after commit: dispatch and remote cancel ----------------------------------


def _after_commit(task_name: str, func: Callable[[int], object], job_id: int) -> None:
    """Run ``func(job_id)`` after the surrounding transaction commits.

    With a Celery broker the work goes to a worker (task ``task_name``); in the embedded
    mode it runs inline, so a single process with no Redis still works end to end.
    """

    def run() -> None:
        if settings.SCHEDULER_DISPATCH == "celery":
            from portal.celery import app

            app.send_task(task_name, args=[job_id])
        else:
            try:
                func(job_id)
            except BackendError as exc:  # transient: the poll loop retries later
                log.warning("%s for job %s failed: %s", task_name, job_id, exc)

    # robust: one failed hand-off (broker down) must not stop the others; the job stays
    # DISPATCHING and the poll loop dispatches it again later.
    transaction.on_commit(run, robust=True)


def backend_for(cluster: Cluster) -> Backend:
    return load_backend(
        cluster.kind, cluster.name, cluster.config, work_dir=settings.QM_WORK_DIR, instance=cluster.instance.hex[:12]
    )


# --- Submission ----------------------------------------------------------------------


def _check_quota(quota: Quota | None, queued: int, walltime_seconds: int, field: str, who: str) -> dict[str, str]:
    errors: dict[str, str] = {}
    if quota is None:
        return errors
    if quota.max_pending_jobs is not None and queued >= quota.max_pending_jobs:
        errors[field] = f"{who} already has {queued} pending jobs; the quota allows {quota.max_pending_jobs}."
    if quota.max_walltime_seconds is not None and walltime_seconds > quota.max_walltime_seconds:
        errors["walltime_seconds"] = (
            f"{walltime_seconds}s exceeds the {who} quota maximum of {quota.max_walltime_seconds}s."
        )
    return errors


def _queued(quota: Quota, jobs: Any) -> int:
    """Queued jobs, counted only when the quota limits them."""
    return int(jobs.filter(state__in=QUEUED_STATES).count()) if quota.max_pending_jobs is not None else 0


def quota_refusals(owner: Any, account: Account, walltime_seconds: int, *, lock: bool = False) -> dict[str, str]:
    """Field -> message for every quota that would refuse one more job of ``owner`` in
    ``account`` with this walltime; ``{}`` when none would. Reads only.

    With ``lock`` (inside a transaction, as :func:`submit_job` calls it), when a
    pending-jobs quota applies the user's and the account's rows are locked
    (``SELECT ... FOR UPDATE``) while the queue is counted, so concurrent submissions
    cannot overshoot it. A what-if asks without locking: it submits nothing.
    """
    applying = Quota.objects.filter(Q(account=account) | Q(user_id=owner.pk))
    quotas = {("account" if q.account_id else "user"): q for q in applying}
    if lock and any(q.max_pending_jobs is not None for q in quotas.values()):
        # Serialise only the submissions that count the queue.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).exists()
        Account.objects.select_for_update().filter(pk=account.pk).exists()
    errors: dict[str, str] = {}
    if "account" in quotas:
        queued = _queued(quotas["account"], Job.objects.filter(account=account))
        errors.update(_check_quota(quotas["account"], queued, walltime_seconds, "account", f"Account {account.name}"))
    if "user" in quotas:
        queued = _queued(quotas["user"], Job.objects.filter(owner_id=owner.pk))
        errors.update(_check_quota(quotas["user"], queued, walltime_seconds, "account", f"User {owner}"))
    return errors


def submit_job(*, owner: Any, account: Account, qos: Qos | None, **fields: Any) -> Job:
    """Create a PENDING job after checking the quotas that depend on the queue.

    Raises ``ValidationError`` (field -> message) and writes nothing when a quota refuses
    the job (see :func:`quota_refusals`, called here with its row locks).
    """
    now = timezone.now()
    with transaction.atomic():
        errors = quota_refusals(owner, account, int(fields["walltime_seconds"]), lock=True)
        if errors:
            raise ValidationError(errors)
        job = Job.objects.create(owner=owner, account=account, qos=qos, submitted_at=now, **fields)
        record_event(job.id, EventKind.SUBMITTED, f"submitted by {owner}", {"total_gpus": job.total_gpus})
    return job


# --- User actions ---------------------------------------------------------------------


def _user_transition(
    job: Job, allowed: Iterable[str], to_state: str, *, verb: str, event: str, by: str, **fields: Any
) -> None:
    """Move a job on a user's request, or raise ``JobStateConflict`` saying why not.

    Checks the state the caller saw first (for a clear message), then moves with a
    conditional update, so a job that changed meanwhile is refused rather than clobbered.
    """
    allowed = list(allowed)
    if job.state not in allowed:
        raise JobStateConflict(f"Job {job.id} is {job.state}; only {', '.join(sorted(allowed))} jobs can be {verb}.")
    if not transition(job.id, [job.state], to_state, event=event, message=f"{verb} by {by}", **fields):
        raise JobStateConflict(f"Job {job.id} changed state meanwhile; reload and retry.")


def cancel_job(job: Job, *, by: str) -> None:
    """Cancel a queued or active job. Active jobs are also cancelled at the backend.

    Raises ``JobStateConflict`` if the job already ended (or ends concurrently).
    """
    with transaction.atomic():
        _user_transition(
            job,
            QUEUED_STATES | ACTIVE_STATES,
            JobState.CANCELLED,
            verb="cancelled",
            event=EventKind.CANCELLED,
            by=by,
            ended_at=timezone.now(),
            pending_reason="",
            pending_blockers=[],
            estimated_start_at=None,
        )
        if job.state in ACTIVE_STATES and job.external_id:
            _after_commit("scheduler.cancel_remote", cancel_remote, job.id)


def hold_job(job: Job, *, by: str) -> None:
    """Keep a pending job from being scheduled until released (``scontrol hold``)."""
    _user_transition(
        job,
        [JobState.PENDING],
        JobState.HELD,
        verb="held",
        event=EventKind.HELD,
        by=by,
        pending_reason=PendingReason.HELD,
        pending_blockers=held_blockers(by),
        estimated_start_at=None,
    )


def release_job(job: Job, *, by: str) -> None:
    """Return a held job to the queue (``scontrol release``)."""
    _user_transition(
        job,
        [JobState.HELD],
        JobState.PENDING,
        verb="released",
        event=EventKind.RELEASED,
        by=by,
        pending_reason="",
        pending_blockers=[],
    )


#: What a job forgets when it goes back to the queue as a new attempt.
FRESH_ATTEMPT: dict[str, Any] = {
    "allocations": [],
    "cluster": None,
    "external_id": "",
    "exit_code": None,
    "dispatched_at": None,
    "started_at": None,
    "ended_at": None,
    "pending_reason": "",
    "pending_blockers": [],
    "state_reason": "",
    "borrowed": False,
}


def requeue_job(job: Job, *, by: str) -> None:
    """Put an active or ended job back in the queue as a new attempt (``scontrol requeue``).

    The job keeps its id and submit time (so it keeps its place in a FIFO queue); its
    allocation, exit code and backend id are cleared. An active attempt is cancelled at
    the backend first; the new attempt has a new backend key so it is a fresh submission.
    """
    with transaction.atomic():
        _user_transition(
            job,
            ACTIVE_STATES | TERMINAL_STATES,
            JobState.PENDING,
            verb="requeued",
            event=EventKind.REQUEUED,
            by=by,
            **{**FRESH_ATTEMPT, "attempt": job.attempt + 1},
        )
        if job.state in ACTIVE_STATES and job.external_id:
            cluster_id, external_id = job.cluster_id, job.external_id
            cancel_remote_after_commit(cluster_id, external_id)


def cancel_remote_after_commit(cluster_id: int | None, external_id: str, grace_seconds: float | None = None) -> None:
    """Once the surrounding transaction commits, cancel a remote job (errors are logged:
    the orphan sweep in ``scheduler.reconcile`` catches a cancel that did not happen)."""
    transaction.on_commit(partial(_cancel_quietly, cluster_id, external_id, grace_seconds), robust=True)


def _cancel_quietly(cluster_id: int | None, external_id: str, grace_seconds: float | None = None) -> None:
    cluster = Cluster.objects.filter(pk=cluster_id).first() if cluster_id is not None else None
    if cluster is None:
        return
    try:
        backend_for(cluster).cancel(external_id, grace_seconds=grace_seconds)
    except BackendError as exc:
        log.warning("cancel of %s on %s failed: %s", external_id, cluster, exc)


def cancel_remote(job_id: int) -> None:
    """Cancel a job's current attempt at its backend. Idempotent (backend cancel is)."""
    job = Job.objects.select_related("cluster").filter(pk=job_id).first()
    if job is None or job.cluster is None or not job.external_id:
        return
    backend_for(job.cluster).cancel(job.external_id)


# --- The scheduling tick -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TickResult:
    ran: bool
    started: list[int]
    pending: int
    duration_ms: float


def _try_tick_lock() -> bool:
    """Take the single-flight tick lock for the current transaction.

    PostgreSQL: a transaction-scoped advisory lock; a second tick returns at once.
    SQLite: writing the tick row takes the database write lock, which serialises
    ticks (the second waits, then schedules on fresh state).
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [TICK_LOCK_KEY])
            return bool(cursor.fetchone()[0])
    _record_tick(started_at=timezone.now())
    return True


def _record_tick(**fields: Any) -> None:
    """Update the single TickState row in one statement (create it the first time)."""
    if not TickState.objects.filter(pk=1).update(**fields):
        TickState.objects.create(pk=1, **fields)


def current_policy() -> Policy:
    """The scheduling policy the settings ask for."""
    return Policy(
        max_starts=settings.SCHEDULER_MAX_STARTS_PER_TICK,
        backfill=settings.SCHEDULER_BACKFILL,
        reservations=settings.SCHEDULER_RESERVATIONS,
        placement=PlacementStrategy(settings.SCHEDULER_PLACEMENT),
        preemption=settings.SCHEDULER_PREEMPTION,
        preempt_min_runtime_seconds=settings.SCHEDULER_PREEMPT_MIN_RUNTIME_SECONDS,
        reclaim=settings.SCHEDULER_RECLAIM,
        sharing_overhead=settings.SCHEDULER_SHARING_OVERHEAD,
        priority=PriorityWeights(
            age=settings.PRIORITY_WEIGHT_AGE,
            fairshare=settings.PRIORITY_WEIGHT_FAIRSHARE,
            jobsize=settings.PRIORITY_WEIGHT_JOBSIZE,
            qos=settings.PRIORITY_WEIGHT_QOS,
            max_age=timedelta(days=settings.PRIORITY_MAX_AGE_DAYS),
            favor_small=settings.PRIORITY_FAVOR_SMALL,
        )
        if settings.SCHEDULER_PRIORITY == "multifactor"
        else None,
    )


def run_tick(now: datetime | None = None, policy: Policy | None = None) -> TickResult:
    """One scheduling cycle: lock, snapshot, decide, apply, then dispatch after commit.

    Steps:
    1. Take the tick lock; if another tick holds it, return ``ran=False``.
    2. Load the snapshot in bulk.
    3. Call the pure core.
    4. Claim the started jobs that are still PENDING (see ``_claim``) and store their
       allocations; store pending reasons, blockers and borrowing that changed
       (see ``scheduler.waiting``).
    5. After commit, dispatch each claimed job (Celery task or inline).
    """
    began = time.perf_counter()
    now = now or timezone.now()
    policy = policy or current_policy()
    with transaction.atomic():
        if not _try_tick_lock():
            return TickResult(ran=False, started=[], pending=0, duration_ms=0.0)
        loaded = load_snapshot()
        snapshot = with_policy_inputs(
            loaded.snapshot,
            policy,
            lambda: update_usage(
                now,
                loaded.snapshot.nodes,
                usage_policy(settings.SCHEDULER_USAGE_HALF_LIFE_DAYS, settings.SCHEDULER_SHARING_OVERHEAD),
            ),
        )
        decisions = schedule(snapshot, policy, now)
        _evict(decisions.evictions, now)
        started = _claim(decisions.starts, now, decisions.borrowed)
        store_waiting(decisions, loaded)
        store_borrowed(decisions, loaded, started)
        duration = (time.perf_counter() - began) * 1000
        _record_tick(
            finished_at=timezone.now(),
            duration_ms=duration,
            started_jobs=len(started),
            pending_jobs=len(loaded.snapshot.pending),
        )
        for job_id in started:
            _after_commit("scheduler.dispatch_job", dispatch_job, job_id)
    return TickResult(ran=True, started=started, pending=len(loaded.snapshot.pending), duration_ms=duration)


def _evict(evictions: list[Eviction], now: datetime) -> None:
    """Stop preempted jobs: requeue them (default) or end them as PREEMPTED.

    Each victim records who preempted it and why; its backend job is cancelled after
    commit with ``SCHEDULER_PREEMPT_GRACE_SECONDS`` between SIGTERM and SIGKILL (time to
    checkpoint), before the preemptor is dispatched.
    """
    if not evictions:
        return
    victims = {j.id: j for j in Job.objects.filter(pk__in=[e.victim_id for e in evictions])}
    requeue = settings.SCHEDULER_PREEMPT_MODE == "requeue"
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
                victim.cluster_id, victim.external_id, grace_seconds=settings.SCHEDULER_PREEMPT_GRACE_SECONDS
            )


def _claim(starts: list[Start], now: datetime, borrowed: set[int]) -> list[int]:
    """Move started jobs PENDING -> DISPATCHING with their allocations, in bulk.

    The still-pending rows are locked first (``SELECT ... FOR UPDATE``), so a job
    cancelled or held since the snapshot is skipped and one that is cancelled now waits
    for this commit; then one UPDATE writes every claim (``scheduler.bulk``; and clears
    the claimed jobs' start estimates: they no longer wait).
    """
    if not starts:
        return []
    ids = [s.job_id for s in starts]
    pending = set(
        Job.objects.select_for_update().filter(pk__in=ids, state=JobState.PENDING).values_list("id", flat=True)
    )
    starts = [start for start in starts if start.job_id in pending]
    clusters = dict(Cluster.objects.values_list("name", "id"))
    update_rows(
        Job,
        [start.job_id for start in starts],
        {
            "cluster": [clusters[start.cluster] for start in starts],
            "allocations": [allocations_to_json(start.allocations) for start in starts],
            "borrowed": [start.job_id in borrowed for start in starts],
        },
        same={
            "state": JobState.DISPATCHING,
            "dispatched_at": now,
            "pending_reason": "",
            "pending_blockers": [],
            "estimated_start_at": None,
            "updated_at": now,
        },
    )
    JobEvent.objects.bulk_create(
        [
            JobEvent(
                job_id=start.job_id,
                at=now,
                kind=EventKind.STARTED,
                message="scheduled on "
                + ", ".join(f"{a.node}[{','.join(map(str, a.gpu_indices))}]" for a in start.allocations),
                data={"allocations": allocations_to_json(start.allocations)},
            )
            for start in starts
        ]
    )
    return [start.job_id for start in starts]


# --- Dispatch --------------------------------------------------------------------------


def job_spec(job: Job) -> JobSpec:
    """What the backend needs for the job's current attempt."""
    return JobSpec(
        key=job.backend_key,
        name=job.name,
        owner=job.owner.get_username(),
        account=job.account.name,
        command=job.command,
        script=job.script,
        walltime_seconds=job.walltime_seconds,
        placements=tuple(
            Placement(node=str(a["node"]), gpu_indices=tuple(int(i) for i in a.get("gpu_indices", [])))
            for a in job.allocations
        ),
        cpus_per_node=job.cpus_per_node,
        memory_mib_per_node=job.memory_mib_per_node,
        image=job.image,
        env={str(k): str(v) for k, v in (job.env or {}).items()},
    )


def dispatch_job(job_id: int) -> None:
    """Hand a DISPATCHING job to its backend and mark it RUNNING.

    Safe to call again for the same job (after a worker crash or a transient error):
    ``submit`` is idempotent per attempt key, and the state moves only if the job is
    still DISPATCHING. If the job was cancelled while we submitted, the fresh remote job
    is cancelled too. A permanent backend error fails the job; a transient one is
    re-raised so the caller retries.
    """
    job = Job.objects.select_related("cluster", "owner", "account").filter(pk=job_id).first()
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


# --- Polling and node inventory ----------------------------------------------------------

_REMOTE_TO_JOB = {
    RemoteState.COMPLETED: JobState.COMPLETED,
    RemoteState.FAILED: JobState.FAILED,
    RemoteState.CANCELLED: JobState.CANCELLED,
    RemoteState.TIMEOUT: JobState.TIMEOUT,
    RemoteState.NODE_FAIL: JobState.NODE_FAIL,
    RemoteState.PREEMPTED: JobState.PREEMPTED,
    RemoteState.UNKNOWN: JobState.NODE_FAIL,
}


def _apply_poll_result(job_id: int, result: PollResult, external_id: str) -> bool:
    """Record a polled end on the job, if it still runs as the attempt that was polled.

    A node failure requeues the job (``reconcile.lost``). A job the backend no longer
    knows ends NODE_FAIL without a requeue: it may well have finished while nobody
    looked (purged from slurmctld's memory without accounting, a Job deleted by a TTL),
    and running it again would repeat its effects.
    """
    if not result.state.is_terminal:
        return False
    reason = result.reason or ("the backend no longer knows this job" if result.state is RemoteState.UNKNOWN else "")
    if result.state is RemoteState.NODE_FAIL:
        return reconcile.lost(job_id, reason or "its node failed", result.ended_at or timezone.now(), external_id)
    return transition(
        job_id,
        [JobState.RUNNING],
        _REMOTE_TO_JOB[result.state],
        message=f"{result.state} (exit code {result.exit_code})" if result.exit_code is not None else str(result.state),
        exit_code=result.exit_code,
        ended_at=result.ended_at or timezone.now(),
        state_reason=reason[:500],
        where={"external_id": external_id},
    )


def sync_nodes(cluster: Cluster, backend: Backend, now: datetime) -> int:
    """Bring the cluster's nodes and GPUs in line with the backend's inventory.

    Raises ``BackendError(permanent=True)`` if the backend reports a node name that
    another cluster already has (node names are unique across clusters).

    New nodes and GPUs are created in bulk; seen nodes get a heartbeat; a node the
    backend reports down is marked down, and comes back up when the backend reports it
    up again, as does one marked down for a missing heartbeat (an admin's drain is left
    alone). Likewise a node drained in the backend (``scontrol update state=drain``) is
    drained here with the backend's reason, and resumed when the backend resumes it.
    Returns the number of nodes seen.
    """
    infos = backend.list_nodes()
    taken = dict(
        Node.objects.filter(name__in=[i.name for i in infos])
        .exclude(cluster=cluster)
        .values_list("name", "cluster__name")
    )
    if taken:
        name, owner = next(iter(taken.items()))
        raise BackendError(f"node {name} already belongs to cluster {owner}; node names must be unique", permanent=True)
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    with transaction.atomic():
        new_nodes = [
            Node(
                cluster=cluster,
                name=info.name,
                cpus=info.cpus,
                memory_mib=info.memory_mib,
                labels=dict(info.labels),
                state=_NODE_STATES.get(info.state, NodeState.UP),
                reason=_backend_drain_reason(info) if info.state == "drain" else info.reason,
                last_heartbeat=now,
            )
            for info in infos
            if info.name not in existing
        ]
        Node.objects.bulk_create(new_nodes)
        if new_nodes:
            existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
            _create_gpus([(existing[info.name], info) for info in infos if info.name in {n.name for n in new_nodes}])
        Node.objects.filter(cluster=cluster, name__in=[i.name for i in infos]).update(last_heartbeat=now)
        down = [i.name for i in infos if i.state == "down"]
        Node.objects.filter(cluster=cluster, name__in=down).exclude(state=NodeState.DOWN).update(
            state=NodeState.DOWN, reason="reported down by backend", down_since=now
        )
        for info in infos:
            if info.state == "drain":
                Node.objects.filter(cluster=cluster, name=info.name, state=NodeState.UP).update(
                    state=NodeState.DRAIN, reason=_backend_drain_reason(info)
                )
        up = [i.name for i in infos if i.state == "up"]
        Node.objects.filter(cluster=cluster, name__in=up).filter(
            Q(state=NodeState.DOWN, reason="reported down by backend")
            | Q(state=NodeState.DOWN, reason__startswith="no heartbeat")
            | Q(state=NodeState.DRAIN, reason__startswith=_BACKEND_DRAIN)
        ).update(state=NodeState.UP, reason="", down_since=None)
    return len(infos)


_NODE_STATES = {"up": NodeState.UP, "drain": NodeState.DRAIN, "down": NodeState.DOWN}
#: The reason of a node drained because the backend reports it drained (and only then
#: resumed when the backend does).
_BACKEND_DRAIN = "drained in backend"


def _backend_drain_reason(info: NodeInfo) -> str:
    return f"{_BACKEND_DRAIN}: {info.reason}"[:200] if info.reason else _BACKEND_DRAIN


def _create_gpus(pairs: list[tuple[Node, NodeInfo]]) -> None:
    """Create GPUs for new nodes: physical GPUs first, then MIG slices pointing at them."""

    def row(node: Node, info: GpuInfo, parent_id: int | None = None) -> Gpu:
        return Gpu(
            node=node,
            index=info.index,
            uuid=info.uuid,
            model=info.model,
            memory_mib=info.memory_mib,
            compute_capability=info.compute_capability,
            mig_profile=info.mig_profile,
            parent_id=parent_id,
            shared=info.shared,
        )

    Gpu.objects.bulk_create([row(node, g) for node, info in pairs for g in info.gpus if g.parent_index is None])
    parents = {(g.node_id, g.index): g.id for g in Gpu.objects.filter(node__in=[n for n, _ in pairs])}
    Gpu.objects.bulk_create(
        [
            row(node, g, parents[(node.id, g.parent_index)])
            for node, info in pairs
            for g in info.gpus
            if g.parent_index is not None
        ]
    )


def poll_cluster(cluster: Cluster, now: datetime | None = None) -> dict[str, int]:
    """Refresh one cluster: inventory, finished jobs, stuck dispatches.

    Steps:
    1. Sync nodes (heartbeats, new hardware, down nodes).
    2. Poll every RUNNING job of the cluster in one backend call; record ends.
    3. Re-dispatch jobs stuck in DISPATCHING longer than ``SCHEDULER_REDISPATCH_SECONDS``
       (their worker died mid-submit; submit is idempotent so this cannot duplicate).
    4. Reconcile (``scheduler.reconcile``): silent nodes, jobs on down nodes, orphans.
    """
    now = now or timezone.now()
    backend = backend_for(cluster)
    nodes_seen = sync_nodes(cluster, backend, now)
    running = dict(
        Job.objects.filter(cluster=cluster, state=JobState.RUNNING)
        .exclude(external_id="")
        .values_list("external_id", "id")
    )
    ended = 0
    if running:
        results = backend.poll(list(running))
        for external_id, job_id in running.items():
            result = results.get(external_id)
            if result is not None and _apply_poll_result(job_id, result, external_id):
                ended += 1
    stale = now - timedelta(seconds=settings.SCHEDULER_REDISPATCH_SECONDS)
    stuck = list(
        Job.objects.filter(cluster=cluster, state=JobState.DISPATCHING, dispatched_at__lt=stale).values_list(
            "id", flat=True
        )
    )
    for job_id in stuck:
        Job.objects.filter(pk=job_id, state=JobState.DISPATCHING).update(dispatched_at=now)
        _after_commit("scheduler.dispatch_job", dispatch_job, job_id)
    report = {"nodes": nodes_seen, "running": len(running), "ended": ended, "redispatched": len(stuck)}
    return report | reconcile.reconcile(cluster, backend, now)


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


def read_job_log(job: Job, max_bytes: int = 65536) -> str:
    """The job's output so far ('' before it starts or if the backend lost it)."""
    if job.cluster is None or not job.external_id:
        return ""
    try:
        return backend_for(job.cluster).read_log(job.external_id, max_bytes)
    except BackendError as exc:
        return f"[log unavailable: {exc.message}]"


# --- Nodes -------------------------------------------------------------------------------


def drain_node(node: Node, *, reason: str) -> None:
    """Stop placing new jobs on a node; running jobs finish (``scontrol update state=drain``).

    A backend with its own drain state (:class:`NodeAdmin`, e.g. Slurm) is told too;
    if it cannot be reached the portal's drain still holds and a warning is logged.
    """
    Node.objects.filter(pk=node.pk).update(state=NodeState.DRAIN, reason=reason[:200])
    _tell_backend(node, lambda admin: admin.drain_node(node.name, reason[:200]))


def resume_node(node: Node) -> None:
    """Make a drained or down node schedulable again (in the backend too, as for drain)."""
    Node.objects.filter(pk=node.pk).update(state=NodeState.UP, reason="", down_since=None)
    _tell_backend(node, lambda admin: admin.resume_node(node.name))


def _tell_backend(node: Node, action: Callable[[NodeAdmin], None]) -> None:
    """After the caller's transaction commits (a backend command can take seconds, and
    must not run for a change that is then rolled back), tell the backend."""
    transaction.on_commit(partial(_tell_backend_now, node, action), robust=True)


def _tell_backend_now(node: Node, action: Callable[[NodeAdmin], None]) -> None:
    cluster = Cluster.objects.filter(pk=node.cluster_id).first()
    if cluster is None:
        return
    try:
        backend = backend_for(cluster)
        if isinstance(backend, NodeAdmin):
            action(backend)
    except BackendError as exc:
        log.warning("node %s on %s: backend not updated: %s", node.name, cluster.name, exc)
