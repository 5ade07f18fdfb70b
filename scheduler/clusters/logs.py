"""A job's output, read from its workload manager."""

from __future__ import annotations

from scheduler.backends.base import BackendError
from scheduler.jobs.remote import backend_for
from scheduler.models import Job


def read_job_log(job: Job, max_bytes: int = 65536) -> str:
    """The job's output so far ('' before it starts or if the backend lost it)."""
    if job.cluster is None or not job.external_id:
        return ""
    try:
        return backend_for(job.cluster).read_log(job.external_id, max_bytes)
    except BackendError as exc:
        return f"[log unavailable: {exc.message}]"
