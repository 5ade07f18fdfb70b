"""Whether a message is wanted: the one rule, which the outbox asks of every message.

A job's own choice (``sbatch --mail-type``, kept as ``Job.mail_events``, see
``scheduler.jobs.mail_type``) stands, for that job, in place of its owner's choice of the
events Slurm's mail types name: its start, its end and its requeues (:data:`COVERS`).
The events no mail type names (held by someone else, idle GPUs, an estimate that moved,
an account near its quota) stay the owner's choice (``Preference.events``), as does a
job that chose nothing (``None``). Where a wanted message goes (e-mail, webhook) is
always the owner's choice, and so are the notices to staff about the site
(``STAFF_EVENTS``: an account starving, a GPU process no job accounts for).

Slurm's meanings, kept: END is any end, a cancellation by someone else included; FAIL
only an end that is a failure (failed, timed out, node failure: not completed, not
cancelled); TIME_LIMIT an end at the time limit (TIMEOUT); REQUEUE a preemption or
requeue; ALL is BEGIN, END, FAIL and REQUEUE; NONE (``[]``) none of them. ARRAY_TASKS
makes no message itself: it tells an array's tasks one by one (``notifications.facts``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from notifications.models import Event
from scheduler.choices import JobState

#: The ends that are failures to Slurm's FAIL.
FAILURES: frozenset[str] = frozenset({JobState.FAILED, JobState.TIMEOUT, JobState.NODE_FAIL})

#: Whether a message (its event, and the states it ended in) is one a mail type asks for.
Covers = Callable[[str, Collection[str]], bool]

#: Each mail type the portal applies (``scheduler.jobs.mail_type.APPLIED``) and what it asks for.
COVERS: dict[str, Covers] = {
    "BEGIN": lambda event, ended: event == Event.STARTED,
    "END": lambda event, ended: event == Event.ENDED,
    "FAIL": lambda event, ended: event == Event.ENDED and bool(FAILURES.intersection(ended)),
    "REQUEUE": lambda event, ended: event == Event.PREEMPTED,
    "TIME_LIMIT": lambda event, ended: event == Event.ENDED and JobState.TIMEOUT in ended,
    "ALL": lambda event, ended: event in (Event.STARTED, Event.ENDED, Event.PREEMPTED),
    "ARRAY_TASKS": lambda event, ended: False,
}

#: The events a job's mail types decide for it; the owner's choice decides the others.
JOB_CHOSEN: frozenset[str] = frozenset({Event.STARTED, Event.ENDED, Event.PREEMPTED})


def wanted(
    event: str,
    user_events: Collection[str],
    *,
    mail_types: Sequence[str] | None = None,
    ended: Collection[str] = (),
) -> bool:
    """Whether a message of ``event`` is made for its user: ``user_events`` are the user's
    chosen events (``Preference.events``, or its defaults); ``mail_types`` the job's own
    choice (``Job.mail_events``; ``None``: it made none); ``ended`` the state(s) its job,
    or an array's tasks, ended in (``FAILED``), which FAIL and TIME_LIMIT look at."""
    if mail_types is None or event not in JOB_CHOSEN:
        return event in user_events
    return any(COVERS[kind](event, ended) for kind in mail_types if kind in COVERS)


#: What each mail type makes, in words (ARRAY_TASKS says how, not what).
_WORDS: dict[str, str] = {
    "BEGIN": "its start",
    "END": "any end",
    "FAIL": "an end that failed",
    "TIME_LIMIT": "an end at its time limit",
    "REQUEUE": "a requeue",
    "ALL": "its start, any end, a requeue",
}


def told_of(mail_types: Sequence[str] | None) -> str:
    """What a job's mail types make, in words, for its page ("a message of its start,
    any end"); empty for ``None`` (its owner's settings decide)."""
    if mail_types is None:
        return ""
    said = ", ".join(_WORDS[kind] for kind in mail_types if kind in _WORDS)
    if not said:
        return "no message of its start, end or requeue"
    return f"a message of {said}" + ("; for each task of its array apart" if "ARRAY_TASKS" in mail_types else "")
