"""Which clusters run every job as its owner, for the submit-time check that the owner
has a cluster identity (a job then never waits for a cluster it could not run on)."""

from __future__ import annotations

from scheduler.backends.base import BackendError
from scheduler.jobs.remote import backend_for
from scheduler.models import Cluster


def clusters_requiring_identity() -> list[str]:
    """Names of the enabled clusters whose backend runs each job as its owner's POSIX
    user (``Backend.requires_identity``). A cluster whose config does not load is left
    out: dispatch reports that problem, and its backend refuses a spec without one."""
    names = []
    for cluster in Cluster.objects.filter(enabled=True).only("name", "kind", "config", "instance"):
        try:
            if backend_for(cluster).requires_identity:
                names.append(cluster.name)
        except BackendError:
            continue
    return names
