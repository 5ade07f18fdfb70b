"""Drain and resume nodes (``scontrol update state=drain|resume``), here and in the backend."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from django.db import transaction

from people.services import field_changes, record_audit
from scheduler.backends.base import BackendError, NodeAdmin
from scheduler.choices import NodeState
from scheduler.jobs.remote import backend_for
from scheduler.models import Cluster, Node

log = logging.getLogger(__name__)


def drain_node(node: Node, *, reason: str, by: Any) -> None:
    """Stop placing new jobs on a node; running jobs finish (``scontrol update state=drain``),
    and audit it. ``by``: the user, or the name of the part of the system that drains it
    (``"monitoring"``), as :func:`people.services.record_audit` takes it.

    A backend with its own drain state (:class:`NodeAdmin`, e.g. Slurm) is told too;
    if it cannot be reached the portal's drain still holds and a warning is logged.
    """
    reason = reason[:200]
    with transaction.atomic():
        _set_state(node, by, "drain", state=NodeState.DRAIN, reason=reason)
        _tell_backend(node, lambda admin: admin.drain_node(node.name, reason))


def resume_node(node: Node, *, by: Any) -> None:
    """Make a drained or down node schedulable again (in the backend too, as for drain),
    and audit it; ``by`` as for :func:`drain_node`."""
    with transaction.atomic():
        _set_state(node, by, "resume", state=NodeState.UP, reason="", down_since=None)
        _tell_backend(node, lambda admin: admin.resume_node(node.name))


def _set_state(node: Node, by: Any, action: str, **values: Any) -> None:
    """Update the node's row and record ``action`` with its old and new state and reason."""
    before = dict(Node.objects.select_for_update().filter(pk=node.pk).values("state", "reason").first() or {})
    Node.objects.filter(pk=node.pk).update(**values)
    after = {"state": str(values["state"]), "reason": values["reason"]}
    record_audit(by, action, node, field_changes(before, after))


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
