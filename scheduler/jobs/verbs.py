"""What a person asks of a job: cancel, hold, release, requeue (``scancel``,
``scontrol hold|release|requeue``).

Views, serializers, admin actions and the CLI call these; each checks the state the
caller saw (for a clear message), then moves with :func:`~scheduler.jobs.transitions.transition`,
so a job that changed meanwhile is refused rather than clobbered. The backend is told
after the commit (``scheduler.jobs.remote``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, TERMINAL_STATES, EventKind, JobState
from scheduler.core.types import PendingReason
from scheduler.jobs.blockers import held_blockers
from scheduler.jobs.files import refuse_if_expired
from scheduler.jobs.remote import after_commit, cancel_remote, cancel_remote_after_commit
from scheduler.jobs.transitions import FRESH_ATTEMPT, JobStateConflict, transition
from scheduler.models import Job, no_estimates


def _user_transition(
    job: Job, allowed: Iterable[str], to_state: str, *, verb: str, event: str, by: str, **fields: Any
) -> None:
    """Move a job on a user's request, or raise ``JobStateConflict`` saying why not."""
    allowed = list(allowed)
    if job.state not in allowed:
        raise JobStateConflict(f"Job {job.id} is {job.state}; only {', '.join(sorted(allowed))} jobs can be {verb}.")
    if not transition(job.id, [job.state], to_state, event=event, message=f"{verb} by {by}", **fields):
        raise JobStateConflict(f"Job {job.id} changed state meanwhile; reload and retry.")


def cancelled_fields() -> dict[str, Any]:
    """What a job that is cancelled now forgets of its wait (one job or a whole array)."""
    return {"ended_at": timezone.now(), "pending_reason": "", "pending_blockers": [], **no_estimates()}


def held_fields(by: str) -> dict[str, Any]:
    """What a job held by ``by`` shows while it waits to be released."""
    return {"pending_reason": PendingReason.HELD, "pending_blockers": held_blockers(by), **no_estimates()}


#: What a released job forgets: the tick gives it its reasons again.
RELEASED_FIELDS: dict[str, Any] = {"pending_reason": "", "pending_blockers": []}


def cancel_job(job: Job, *, by: str, reason: str = "") -> None:
    """Cancel a queued or active job. Active jobs are also cancelled at the backend.
    ``reason``: why, where it is not its owner's doing (``idle for 120 minutes``): the
    job's state reason and its event's message (``cancelled by the portal: ...``), which
    its owner is told.

    Raises ``JobStateConflict`` if the job already ended (or ends concurrently).
    """
    with transaction.atomic():
        _user_transition(
            job,
            QUEUED_STATES | ACTIVE_STATES,
            JobState.CANCELLED,
            verb="cancelled",
            event=EventKind.CANCELLED,
            by=f"{by}: {reason}" if reason else by,
            **cancelled_fields(),
            **({"state_reason": reason[:500]} if reason else {}),
        )
        if job.state in ACTIVE_STATES and job.external_id:
            after_commit("scheduler.cancel_remote", cancel_remote, job.id)


def hold_job(job: Job, *, by: str) -> None:
    """Keep a pending job from being scheduled until released (``scontrol hold``)."""
    _user_transition(
        job,
        [JobState.PENDING],
        JobState.HELD,
        verb="held",
        event=EventKind.HELD,
        by=by,
        **held_fields(by),
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
        **RELEASED_FIELDS,
    )


def requeue_job(job: Job, *, by: str) -> None:
    """Put an active or ended job back in the queue as a new attempt (``scontrol requeue``).

    The job keeps its id and submit time (so it keeps its place in a FIFO queue); its
    allocation, exit code and backend id are cleared. An active attempt is cancelled at
    the backend first; the new attempt has a new backend key so it is a fresh submission.
    Refused (``JobStateConflict``) once the job's files expired.
    """
    with transaction.atomic():
        if job.file_set_id is not None:
            refuse_if_expired(Job.objects.filter(pk=job.pk), f"Job {job.id}")
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
            cancel_remote_after_commit(job.cluster_id, job.external_id)
