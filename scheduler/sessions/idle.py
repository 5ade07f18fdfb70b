"""The idle rule: a session nobody used for ``SESSION_IDLE_MINUTES`` gives its GPUs back.

Its clock is the last request the proxy passed to it (``last_activity_at``), else the
moment it became ready: a session launched and never opened ends as an abandoned one
does. A session still starting is not idle (its walltime bounds it). The job is
cancelled as its owner would (``scheduler.jobs.verbs.cancel_job``), with the reason
``idle for N minutes``, which its owner is told through the usual notifications.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from scheduler.choices import JobState
from scheduler.jobs.transitions import JobStateConflict
from scheduler.jobs.verbs import cancel_job
from scheduler.models import InteractiveSession

#: Who the idle rule cancels as, in the job's events and its owner's message.
BY = "the portal"
#: The most sessions one run ends (the next run takes the rest).
BATCH = 500


def idle_reason(minutes: int) -> str:
    """The words a session ended by the idle rule keeps as its state reason."""
    return f"idle for {minutes} minutes"


def end_idle_sessions(now: datetime) -> list[int]:
    """Cancel every running session idle for ``SESSION_IDLE_MINUTES`` at ``now`` (none
    when it is 0); returns their job ids. Safe to run twice: a job that ended
    meanwhile is skipped."""
    minutes = settings.SESSION_IDLE_MINUTES
    if not minutes:
        return []
    since = now - timedelta(minutes=minutes)
    idle = (
        InteractiveSession.objects.filter(job__state=JobState.RUNNING, ready_at__isnull=False)
        .filter(Q(last_activity_at__lt=since) | Q(last_activity_at__isnull=True, ready_at__lt=since))
        .select_related("job")
        .order_by("job_id")[:BATCH]
    )
    ended = []
    for session in idle:
        try:
            cancel_job(session.job, by=BY, reason=idle_reason(minutes))
        except JobStateConflict:
            continue
        ended.append(session.job_id)
    return ended
