"""Every move of ``Job.state``: a conditional update that reports whether it won, and
the event that records it.

Two workers (or a worker and a user clicking cancel) can never both move one job: the
``UPDATE ... WHERE state IN (...)`` changes one row or none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from common.api.errors import StateConflict
from common.db.bulk import update_matching_rows, update_rows
from common.db.sql import Inserts
from scheduler.choices import ACTIVE_STATES, EventKind, JobState
from scheduler.jobs import attempts, hours
from scheduler.models import Job, JobEvent


class JobStateConflict(StateConflict):
    """The job is not in a state that allows the requested action."""


#: What a job forgets when it goes back to the queue as a new attempt.
FRESH_ATTEMPT: dict[str, Any] = {
    "allocations": [],
    "cluster": None,
    "external_id": "",
    "handoffs": 0,
    "exit_code": None,
    "dispatched_at": None,
    "started_at": None,
    "ended_at": None,
    "pending_reason": "",
    "pending_blockers": [],
    "state_reason": "",
    "borrowed": False,
}


#: The INSERT of one job event (``record_event``; a submission writes its job and event
#: together, ``scheduler.jobs.submit``).
EVENTS = Inserts(JobEvent)


def record_event(
    job_id: int, kind: str, message: str, data: dict[str, Any] | None = None, *, at: datetime | None = None
) -> None:
    """One event of the job, at ``at`` (when it happened; now unless told)."""
    EVENTS.save(JobEvent(job_id=job_id, at=at or timezone.now(), kind=kind, message=message, data=data or {}))


def record_events(kind: str, events: Iterable[tuple[int, str, dict[str, Any]]], *, at: datetime) -> None:
    """One event of ``kind`` per (job id, message, data), at one time, in one INSERT."""
    JobEvent.objects.bulk_create(
        [JobEvent(job_id=job_id, at=at, kind=kind, message=message, data=data) for job_id, message, data in events],
        batch_size=2000,
    )


def attempt_end(started: datetime | None, ended: datetime) -> datetime:
    """When an attempt ended, as charged: never before it started (clocks of a workload
    manager and of the portal differ; a job that failed at once may read as ending first)."""
    return max(started, ended) if started is not None else ended


def transition(
    job_id: int,
    from_states: Iterable[str],
    to_state: str,
    *,
    event: str = EventKind.STATE,
    message: str = "",
    data: dict[str, Any] | None = None,
    where: dict[str, Any] | None = None,
    at: datetime | None = None,
    **fields: Any,
) -> bool:
    """Move one job from any of ``from_states`` to ``to_state`` if it is still there.

    ``at`` is when the move happened: now, unless the caller writes one that happened
    before (the demo's history of finished jobs); its event carries it, and an attempt
    it ends without an ``ended_at`` ends then.

    ``where`` pins more of what the caller saw (the attempt, the backend id), so news
    about an old attempt never moves the job's new one. Returns ``True`` when this call
    made the change (exactly one row updated), ``False`` when someone else moved the job
    first. Records a ``JobEvent`` only on success.

    A move out of an active state ends the running attempt: in the same transaction its
    GPU time and wait are added to its account's hour rollups (``scheduler.jobs.hours``),
    so an attempt is counted once, when the move that ended it wins, and never when it
    rolls back. The row is locked and read first, as the move may clear its start time.
    """
    sources = list(from_states)
    matching = Job.objects.filter(pk=job_id, state__in=sources, **(where or {}))
    ends_attempt = to_state not in ACTIVE_STATES and not ACTIVE_STATES.isdisjoint(sources)
    with transaction.atomic():
        fields_read = tuple(dict.fromkeys((*hours.ATTEMPT_FIELDS, *attempts.FIELDS)))
        before = matching.select_for_update().values(*fields_read).first() if ends_attempt else None
        if ends_attempt and before is None:
            return False
        if before is not None:
            if fields.get("started_at") is not None:  # the workload manager's own word
                before = {**before, "started_at": fields["started_at"]}
            if fields.get("ended_at") is not None:
                fields["ended_at"] = attempt_end(before["started_at"], fields["ended_at"])
        changed = matching.update(state=to_state, **fields)
        if changed:
            record_event(job_id, event, message or f"-> {to_state}", {"to": to_state, **(data or {})}, at=at)
            if before is not None and before["state"] in ACTIVE_STATES:
                ended = attempt_end(before["started_at"], fields.get("ended_at") or at or timezone.now())
                hours.record_attempt(before, ended)
                attempts.record(before, before["started_at"], ended)
    return changed == 1


def transition_many(
    jobs: QuerySet[Job], from_states: Iterable[str], to_state: str, *, event: str, message: str, **fields: Any
) -> list[int]:
    """Move every job of ``jobs`` still in ``from_states`` to ``to_state``, as
    :func:`transition` moves one, in three statements whatever their number: the tasks of
    a job array are held, released or cancelled together. Returns the ids moved.

    Only for moves that end no attempt (queued jobs, ended ones): an active job's move
    charges its attempt, one by one with :func:`transition`.
    """
    sources = list(from_states)
    if not ACTIVE_STATES.isdisjoint(sources):
        raise ValueError("transition_many moves no active job: its attempt must be charged by transition()")
    with transaction.atomic():
        ids = list(jobs.filter(state__in=sources).select_for_update().values_list("id", flat=True))
        if ids:
            Job.objects.filter(pk__in=ids, state__in=sources).update(state=to_state, **fields)
            record_events(event, [(i, message, {"to": to_state}) for i in ids], at=timezone.now())
    return ids


def claim_many(
    job_ids: Sequence[int],
    columns: Mapping[str, Sequence[Any]],
    events: Iterable[tuple[int, str, dict[str, Any]]],
    *,
    now: datetime,
) -> None:
    """PENDING -> DISPATCHING for the jobs a tick started, in one UPDATE and one INSERT of
    their events whatever their number. The caller holds them locked and still PENDING
    (``SELECT ... FOR UPDATE`` in its transaction), so no guard is needed here.

    ``columns`` are what differs per job (cluster, allocations, borrowed), one list each
    in the order of ``job_ids``; what only a waiting job has (its pending reason,
    blockers and start estimate) is cleared.
    """
    update_rows(
        Job,
        list(job_ids),
        dict(columns),
        same={
            "state": JobState.DISPATCHING,
            "dispatched_at": now,
            "pending_reason": "",
            "pending_blockers": [],
            "estimated_start_at": None,
            "updated_at": now,
        },
    )
    record_events(EventKind.STARTED, events, at=now)


def mark_running_many(cluster: str, taken: Sequence[tuple[int, int, str]], *, now: datetime) -> set[int]:
    """DISPATCHING -> RUNNING for the jobs a backend took, ``(job id, attempt, external
    id)`` each, in one statement and one transaction with their events; each moves only if
    it is still DISPATCHING at the attempt handed off (one cancelled or requeued meanwhile
    does not). Returns the ids moved. ``started_at`` is this mark's time until the poll
    reads the workload manager's own start (``scheduler.clusters.poll``)."""
    with transaction.atomic():
        moved = set(
            update_matching_rows(
                Job,
                [job_id for job_id, _, _ in taken],
                {"external_id": [external_id for _, _, external_id in taken]},
                match={"attempt": [attempt for _, attempt, _ in taken]},
                same={"state": JobState.RUNNING, "started_at": now},
                where={"state": JobState.DISPATCHING},
            )
        )
        record_events(
            EventKind.DISPATCHED,
            [
                (job_id, f"running on {cluster} as {external_id}", {"to": JobState.RUNNING})
                for job_id, _, external_id in taken
                if job_id in moved
            ],
            at=now,
        )
    return moved
