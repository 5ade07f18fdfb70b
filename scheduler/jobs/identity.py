"""Which clusters run every job as its owner, for the admission rule that the owner has
a cluster identity (``scheduler.jobs.admission``: a job then never waits for a cluster it
could not run on)."""

from __future__ import annotations

import time

from django.conf import settings

from people.models import ClusterIdentity
from scheduler.backends.base import BackendError
from scheduler.jobs.remote import backend_for
from scheduler.models import Cluster


def has_cluster_identity(user: object) -> bool:
    """Whether ``user`` has a cluster identity (no query when it was loaded with them)."""
    try:
        return getattr(user, "cluster_identity", None) is not None
    except ClusterIdentity.DoesNotExist:
        return False


def cluster_username(user: object) -> str:
    """The name ``user`` has on the clusters: their cluster identity's, else their own
    (what a job's ``%u`` and the ``{user}`` of ``JOB_WORKDIR_ROOTS`` stand for)."""
    try:
        identity = getattr(user, "cluster_identity", None)
    except ClusterIdentity.DoesNotExist:
        identity = None
    return str(identity.username) if identity is not None else str(user.get_username())  # type: ignore[attr-defined]


_remembered: tuple[float, list[str]] | None = None


def clusters_requiring_identity() -> list[str]:
    """Names of the enabled clusters whose backend runs each job as its owner's POSIX
    user (``Backend.requires_identity``). A cluster whose config does not load is left
    out: dispatch reports that problem, and its backend refuses a spec without one.

    Read again at most every ``SCHEDULER_INVENTORY_RECHECK_SECONDS``, like the hardware:
    submissions of users without an identity ask it every time, and a cluster's config
    rarely changes. Being late is safe: such a backend refuses a job without one.
    """
    global _remembered
    now = time.monotonic()
    if _remembered is not None and now - _remembered[0] < settings.SCHEDULER_INVENTORY_RECHECK_SECONDS:
        return list(_remembered[1])
    names = _read_clusters_requiring_identity()
    _remembered = (now, names)
    return list(names)


def _read_clusters_requiring_identity() -> list[str]:
    names = []
    for cluster in Cluster.objects.filter(enabled=True).only("name", "kind", "config", "instance"):
        try:
            if backend_for(cluster).requires_identity:
                names.append(cluster.name)
        except BackendError:
            continue
    return names
