"""What a session's card and the sessions API show: its phase (queued -> starting ->
running -> ended), its time left, where Connect goes, and why it ended. Reads only;
never the secret, the host or the port (the proxy alone uses those)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from scheduler.choices import ACTIVE_STATES, QUEUED_STATES, JobState
from scheduler.core.limits import duration_text
from scheduler.models import InteractiveSession

#: A session's phases, as its card shows them.
QUEUED, STARTING, RUNNING, ENDED = "queued", "starting", "running", "ended"

#: Where Connect opens an app below its base URL, where its root is not the page to
#: open (JupyterLab's own is ``lab``; its root redirects to the classic tree).
CONNECT_PATHS = {"jupyterlab": "lab"}


@dataclass(frozen=True, slots=True)
class SessionView:
    """One session as its owner's card shows it."""

    session: InteractiveSession
    phase: str
    #: Seconds until its walltime ends it (running or starting), else None.
    seconds_left: int | None
    #: Where Connect goes, once running; '' before.
    connect_url: str
    #: Why it ended ('' while it has not).
    ended_why: str


def phase_of(session: InteractiveSession) -> str:
    """``queued`` (waiting for GPUs), ``starting`` (its job runs, its server does not
    answer yet), ``running`` (Connect works) or ``ended``."""
    state = session.job.state
    if state in QUEUED_STATES:
        return QUEUED
    if state in ACTIVE_STATES:
        return RUNNING if state == JobState.RUNNING and session.ready_at is not None else STARTING
    return ENDED


def connect_url(session: InteractiveSession) -> str:
    """The page Connect opens, on the portal's own origin (the proxy's prefix)."""
    return session.base_url + CONNECT_PATHS.get(session.app.slug, "")


def ended_why(session: InteractiveSession) -> str:
    """Why a session ended, in a person's words: the idle rule's or a staff's reason,
    its walltime, a Delete, or its server's exit."""
    job = session.job
    if job.state_reason:
        return job.state_reason
    if job.state == JobState.TIMEOUT:
        return f"it reached its walltime ({duration_text(job.walltime_seconds)})"
    if job.state == JobState.CANCELLED:
        return "deleted"
    if job.state == JobState.COMPLETED:
        return "its server exited"
    if job.state == JobState.FAILED:
        code = f" with exit code {job.exit_code}" if job.exit_code is not None else ""
        return f"its server failed{code}: see the job's log"
    return str(job.get_state_display()).lower()


def session_view(session: InteractiveSession, now: datetime) -> SessionView:
    phase = phase_of(session)
    job = session.job
    left = None
    if phase in (STARTING, RUNNING) and job.started_at is not None:
        left = max(0, int(job.walltime_seconds - (now - job.started_at).total_seconds()))
    return SessionView(
        session=session,
        phase=phase,
        seconds_left=left,
        connect_url=connect_url(session) if phase == RUNNING else "",
        ended_why=ended_why(session) if phase == ENDED else "",
    )


def sessions_of(user: Any, *, ended_limit: int = 10) -> QuerySet[InteractiveSession]:
    """``user``'s own sessions: every one not ended and the last ``ended_limit`` ended,
    newest first (the interactive page's cards)."""
    base = InteractiveSession.objects.filter(job__owner=user).select_related("job", "job__account", "app")
    live = base.filter(job__state__in=QUEUED_STATES | ACTIVE_STATES)
    ended = base.exclude(job__state__in=QUEUED_STATES | ACTIVE_STATES).order_by("-job_id")[:ended_limit]
    ids = [*live.values_list("job_id", flat=True), *ended.values_list("job_id", flat=True)]
    return base.filter(job_id__in=ids).order_by("-job_id")
