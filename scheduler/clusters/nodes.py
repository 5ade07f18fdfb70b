"""Drain and resume nodes (``scontrol update state=drain|resume``), here and in the backend."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from django.db import transaction

from scheduler.backends.base import BackendError, NodeAdmin
from scheduler.choices import NodeState
from scheduler.jobs.remote import backend_for
from scheduler.models import Cluster, Node

log = logging.getLogger(__name__)


def drain_node(node: Node, *, reason: str) -> None:
    """Stop placing new jobs on a node; running jobs finish (``scontrol update state=drain``).

    A backend with its own drain state (:class:`NodeAdmin`, e.g. Slurm) is told too;
    if it cannot be reached the portal's drain still holds and a warning is logged.
    """
    Node.objects.filter(pk=node.pk).update(state=NodeState.DRAIN, reason=reason[:200])
    _tell_backend(node, lambda admin: admin.drain_node(node.name, reason[:200]))


def resume_node(node: Node) -> None:
    """Make a drained or down node schedulable again (in the backend too, as for drain)."""
    Node.objects.filter(pk=node.pk).update(state=NodeState.UP, reason="", down_since=None)
    _tell_backend(node, lambda admin: admin.resume_node(node.name))


def _tell_backend(node: Node, action: Callable[[NodeAdmin], None]) -> None:
    """After the caller's transaction commits (a backend command can take seconds, and
    must not run for a change that is then rolled back), tell the backend."""
    transaction.on_commit(partial(_tell_backend_now, node, action), robust=True)


def _tell_backend_now(node: Node, action: Callable[[NodeAdmin], None]) -> None:
    cluster = Cluster.objects.filter(pk=node.cluster_id).first()
    if cluster is None:
        return
    try:
        backend = backend_for(cluster)
        if isinstance(backend, NodeAdmin):
            action(backend)
    except BackendError as exc:
        log.warning("node %s on %s: backend not updated: %s", node.name, cluster.name, exc)
