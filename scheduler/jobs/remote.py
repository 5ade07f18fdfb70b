"""Work handed to a job's workload manager once the database has committed.

A backend command can take seconds and must never run for a change that is then rolled
back, so every call here waits for ``transaction.on_commit``. With a Celery broker the
work goes to a worker by task name; in the embedded mode it runs inline, so a single
process with no Redis still works end to end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from celery import current_app as celery_app
from django.conf import settings
from django.db import transaction

from scheduler.backends import load_backend
from scheduler.backends.base import Backend, BackendError
from scheduler.models import Cluster, Job

log = logging.getLogger(__name__)


def backend_for(cluster: Cluster) -> Backend:
    """The adapter of one cluster row (its kind, configuration and instance id)."""
    return load_backend(
        cluster.kind, cluster.name, cluster.config, work_dir=settings.QM_WORK_DIR, instance=cluster.instance.hex[:12]
    )


def after_commit(task_name: str, func: Callable[[Any], object], job_id: Any) -> None:
    """Run ``func(job_id)`` after the surrounding transaction commits: as Celery task
    ``task_name`` with a broker (``SCHEDULER_DISPATCH=celery``), else inline. ``job_id``
    may be a list of ids for a task that takes a batch (``scheduler.dispatch_jobs``)."""

    def run() -> None:
        if settings.SCHEDULER_DISPATCH == "celery":
            celery_app.send_task(task_name, args=[job_id])
        else:
            try:
                func(job_id)
            except BackendError as exc:  # transient: the poll loop retries later
                log.warning("%s for job %s failed: %s", task_name, job_id, exc)

    # robust: one failed hand-off (broker down) must not stop the others; the job stays
    # where it is (DISPATCHING, say) and the poll loop hands it off again later.
    transaction.on_commit(run, robust=True)


def cancel_remote(job_id: int) -> None:
    """Cancel a job's current attempt at its backend. Idempotent (backend cancel is)."""
    job = Job.objects.select_related("cluster").filter(pk=job_id).first()
    if job is None or job.cluster is None or not job.external_id:
        return
    backend_for(job.cluster).cancel(job.external_id)


def cancel_remote_after_commit(cluster_id: int | None, external_id: str, grace_seconds: float | None = None) -> None:
    """Once the surrounding transaction commits, cancel a remote job (errors are logged:
    the orphan sweep in ``scheduler.clusters.reconcile`` catches a cancel that did not
    happen)."""
    transaction.on_commit(partial(_cancel_quietly, cluster_id, external_id, grace_seconds), robust=True)


def _cancel_quietly(cluster_id: int | None, external_id: str, grace_seconds: float | None = None) -> None:
    cluster = Cluster.objects.filter(pk=cluster_id).first() if cluster_id is not None else None
    if cluster is None:
        return
    try:
        backend_for(cluster).cancel(external_id, grace_seconds=grace_seconds)
    except BackendError as exc:
        log.warning("cancel of %s on %s failed: %s", external_id, cluster, exc)
