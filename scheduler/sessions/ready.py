"""Readiness: when a session's server answers, and where the proxy reaches it.

A session is "starting" from its job's start until its script's ready line
(``QM-SESSION-READY port=N``) is in the job's log. The portal reads the port from the
log (only one inside ``SESSION_PORTS``) and the host from the workload manager
(``Backend.session_host``), never from the job, then writes ``host``, ``port`` and
``ready_at`` once. The cluster poll asks for every starting session of its cluster; a
session's card asks for its own when it refreshes, so Connect shows as soon as the
server answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from scheduler.backends.base import Backend, BackendError, Placement
from scheduler.choices import JobState
from scheduler.jobs import allocations
from scheduler.jobs.remote import backend_for
from scheduler.models import Cluster, InteractiveSession, Job
from scheduler.sessions.script import reported_port

log = logging.getLogger(__name__)

#: How much of a starting session's log is read for its ready line (the line comes
#: early, but a chatty server may have written much after it before a poll looks).
READY_LOG_BYTES = 1 << 20


def refresh_readiness(
    session: InteractiveSession, *, backend: Backend | None = None, now: datetime | None = None
) -> bool:
    """Whether ``session`` is ready, after reading its job's log once more if it was
    not: on its ready line, ``host``, ``port`` and ``ready_at`` are written (on the row
    and on ``session``), only while its job still runs as the attempt read. Idempotent.

    Raises ``BackendError`` when the workload manager cannot be read, or cannot say
    where the session runs (a backend without ``session_host``: permanent, saying so).
    """
    if session.ready_at is not None:
        return True
    job = session.job
    if job.state != JobState.RUNNING or not job.external_id or job.cluster is None:
        return False
    backend = backend or backend_for(job.cluster)
    port = reported_port(backend.read_log(job.external_id, READY_LOG_BYTES), settings.SESSION_PORTS)
    if port is None:
        return False
    host = _host_of(backend, job)
    now = now or timezone.now()
    written = InteractiveSession.objects.filter(
        pk=job.pk,
        ready_at__isnull=True,
        job__state=JobState.RUNNING,
        job__external_id=job.external_id,
        job__attempt=job.attempt,
    ).update(host=host, port=port, ready_at=now)
    if written:
        session.host, session.port, session.ready_at = host, port, now
    return bool(written)


def _host_of(backend: Backend, job: Job) -> str:
    """Where the workload manager placed the job's server (``Backend.session_host``)."""
    ask: Callable[[str, tuple[Placement, ...]], str] | None = getattr(backend, "session_host", None)
    if ask is None:
        raise BackendError(
            f"cluster {job.cluster} ({backend.kind}) cannot run interactive sessions: its backend cannot say "
            "which host a session's server listens on (no session_host)",
            permanent=True,
        )
    placements = tuple(Placement(node=a.node, gpu_indices=a.gpu_indices) for a in allocations.decode(job.allocations))
    host = ask(job.external_id, placements)
    if not host:
        raise BackendError(f"cluster {job.cluster} gave no host for job {job.external_id}", permanent=False)
    return host


def refresh_starting(cluster: Cluster, backend: Backend, now: datetime) -> int:
    """Ask :func:`refresh_readiness` for every running, not yet ready session of
    ``cluster``; returns how many became ready. One session's trouble never stops the
    others (it is logged; the session stays starting and is asked again next poll)."""
    starting = InteractiveSession.objects.filter(
        job__cluster=cluster, job__state=JobState.RUNNING, ready_at__isnull=True
    ).select_related("job", "job__cluster")
    ready = 0
    for session in starting:
        try:
            ready += refresh_readiness(session, backend=backend, now=now)
        except BackendError as exc:
            log.warning("session of job %s: %s", session.job_id, exc)
    return ready
