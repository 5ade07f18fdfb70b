"""Changing a job that has not started (``scontrol update``): the fields Slurm lets a user
update while a job waits, applied only while it still waits.

What may change, and why only these: the name, the walltime (researchers may only lower
it, as in Slurm, so that an edit never buys a longer reservation than was asked for), the
QOS, the nice value, the dependencies, the node labels and the GPU model. The shape of the
request (nodes, GPUs, CPUs, memory, shares) and what it runs stay: a job that needs
another shape is another job (cancel and resubmit, or "resubmit as copy").

The caller validates the new values like a submission (``scheduler.api.job_edit``); this
module applies them in one statement conditioned on the job still waiting, so a job the
scheduler started meanwhile is refused (409), never changed under its allocation.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from common.labels import field_labels
from scheduler.choices import EventKind, JobState
from scheduler.jobs.transitions import JobStateConflict, record_event
from scheduler.models import Job, no_estimates

#: The fields an edit may change, in the order they are reported.
EDITABLE_FIELDS: tuple[str, ...] = (
    "name",
    "walltime_seconds",
    "qos",
    "nice",
    "dependencies",
    "node_labels",
    "gpu_model",
)
#: The states in which a job may be edited.
EDITABLE_STATES = (JobState.PENDING, JobState.HELD)


def edit_job(job: Job, changes: dict[str, Any], *, by: str) -> dict[str, list[Any]]:
    """Apply ``changes`` (validated model values, only :data:`EDITABLE_FIELDS`) to ``job``
    if it still waits, and record an ``edited`` event with each field's old and new value.
    Returns those (``{}`` when nothing differs). Raises ``JobStateConflict`` if the job no
    longer waits."""
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")
    if job.state not in EDITABLE_STATES:
        raise JobStateConflict(f"Job {job.id} is {job.state}; only PENDING or HELD jobs can be edited.")
    differ = {field: value for field, value in changes.items() if getattr(job, field) != value}
    if not differ:
        return {}
    report = {field: [_plain(getattr(job, field)), _plain(value)] for field, value in differ.items()}
    with transaction.atomic():
        # The tick recomputes the reason and the estimate from the new request.
        if not Job.objects.filter(pk=job.id, state__in=EDITABLE_STATES).update(**differ, **no_estimates()):
            raise JobStateConflict(f"Job {job.id} started or ended meanwhile; it can no longer be edited.")
        names = field_labels([field for field in EDITABLE_FIELDS if field in differ])
        record_event(job.id, EventKind.EDITED, f"edited by {by}: {names}", {"changes": report})
    for field, value in differ.items():
        setattr(job, field, value)
    return report


def _plain(value: Any) -> Any:
    """A value as the event's JSON keeps it (a QOS by name)."""
    return getattr(value, "name", value)
