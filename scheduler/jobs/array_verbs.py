"""What a person asks of a whole job array: ``scancel 42``, ``scontrol hold|release|requeue 42``.

Each verb moves every task it applies to and leaves the others (cancelling an array
whose tasks partly ended cancels the rest). Queued and ended tasks move in bulk
(``transition_many``: a 10,000-task array is a handful of statements); running tasks go
one by one through the single-job verbs, which charge their attempt and tell the
backend. One task alone is addressed as the job it is (``scheduler.jobs.verbs``).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, QuerySet

from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, TERMINAL_STATES, EventKind, JobState
from scheduler.jobs import verbs
from scheduler.jobs.files import refuse_if_expired
from scheduler.jobs.transitions import FRESH_ATTEMPT, JobStateConflict, transition_many
from scheduler.jobs.verbs import RELEASED_FIELDS, cancelled_fields, held_fields
from scheduler.models import Job


def _one_by_one(tasks: QuerySet[Job], states: frozenset[str], verb: str, by: str) -> int:
    moved = 0
    for job in tasks.filter(state__in=states).order_by("id"):
        try:
            getattr(verbs, f"{verb}_job")(job, by=by)
            moved += 1
        except JobStateConflict:
            continue  # it moved on by itself meanwhile (ended, say): nothing to do for it
    return moved


def _nothing_to(verb: str, array_job: int, states: frozenset[str]) -> JobStateConflict:
    return JobStateConflict(f"No task of array {array_job} can be {verb}: only {', '.join(sorted(states))} tasks can.")


def cancel_array(tasks: QuerySet[Job], array_job: int, *, by: str) -> int:
    """Cancel every queued and active task; returns how many were cancelled."""
    message = f"cancelled by {by} (the whole array)"
    moved = transition_many(
        tasks, QUEUED_STATES, JobState.CANCELLED, event=EventKind.CANCELLED, message=message, **cancelled_fields()
    )
    count = len(moved) + _one_by_one(tasks, ACTIVE_STATES, "cancel", by)
    if not count:
        raise _nothing_to("cancelled", array_job, QUEUED_STATES | ACTIVE_STATES)
    return count


def hold_array(tasks: QuerySet[Job], array_job: int, *, by: str) -> int:
    message = f"held by {by} (the whole array)"
    moved = transition_many(
        tasks, [JobState.PENDING], JobState.HELD, event=EventKind.HELD, message=message, **held_fields(by)
    )
    if not moved:
        raise _nothing_to("held", array_job, frozenset({JobState.PENDING}))
    return len(moved)


def release_array(tasks: QuerySet[Job], array_job: int, *, by: str) -> int:
    message = f"released by {by} (the whole array)"
    moved = transition_many(
        tasks, [JobState.HELD], JobState.PENDING, event=EventKind.RELEASED, message=message, **RELEASED_FIELDS
    )
    if not moved:
        raise _nothing_to("released", array_job, frozenset({JobState.HELD}))
    return len(moved)


def requeue_array(tasks: QuerySet[Job], array_job: int, *, by: str) -> int:
    """Every active and ended task back in the queue as a new attempt; refused
    (``JobStateConflict``) once the array's files expired."""
    with transaction.atomic():
        refuse_if_expired(tasks, f"Array {array_job}")
        moved = transition_many(
            tasks,
            TERMINAL_STATES,
            JobState.PENDING,
            event=EventKind.REQUEUED,
            message=f"requeued by {by} (the whole array)",
            **{**FRESH_ATTEMPT, "attempt": F("attempt") + 1},
        )
    count = len(moved) + _one_by_one(tasks, ACTIVE_STATES, "requeue", by)
    if not count:
        raise _nothing_to("requeued", array_job, ACTIVE_STATES | TERMINAL_STATES)
    return count


def set_throttle(tasks: QuerySet[Job], throttle: int) -> int:
    """How many tasks may run at once from now on (``scontrol update
    ArrayTaskThrottle=``; 0: no limit). Running tasks beyond a lowered limit run on."""
    return tasks.update(array_throttle=throttle)


#: Verb name -> what it does, for the API and the pages.
ARRAY_VERBS = {
    "cancel": cancel_array,
    "hold": hold_array,
    "release": release_array,
    "requeue": requeue_array,
}
