"""Create, change and delete reservations and maintenance windows (``scontrol create
reservation``): the row, its audit entry and, after commit, the workload managers that
keep reservations of their own (Slurm, :class:`~scheduler.backends.base.ReservationAdmin`).

The scheduler enforces a reservation on every cluster by itself (``scheduler.core.windows``);
Slurm is told so that jobs submitted to it directly stay off the nodes too, and the
portal's own jobs in a reservation are submitted into Slurm's (``--reservation``). If
Slurm cannot be reached the portal's reservation still holds and a warning is logged,
as for a drain.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction

from people.models import Account, ClusterIdentity, Membership
from people.services import field_changes, record_audit
from scheduler.backends.base import BackendError, ReservationAdmin
from scheduler.jobs.remote import backend_for
from scheduler.models import Cluster, Node, Reservation

log = logging.getLogger(__name__)


def backend_name(name: str) -> str:
    """The reservation's name in the workload manager: prefixed, so that the portal's
    never collide with reservations the site makes there itself."""
    return f"qm-{name}"


def save_reservation(
    actor: Any,
    reservation: Reservation | None,
    *,
    name: str,
    kind: str,
    start_at: datetime,
    end_at: datetime,
    nodes: Iterable[Node],
    accounts: Iterable[Account] = (),
    users: Iterable[Any] = (),
    gpus: int = 0,
    gpu_model: str = "",
) -> Reservation:
    """Create ``reservation`` (``None``) or change it, audited, and tell the backends
    after commit (a renamed one is deleted there under its old name)."""
    with transaction.atomic():
        before = _state(reservation) if reservation is not None else {}
        old_name = reservation.name if reservation is not None else None
        old_clusters = _clusters_of(reservation) if reservation is not None else []
        if reservation is None:
            reservation = Reservation(created_by=actor if getattr(actor, "pk", None) else None)
        reservation.name, reservation.kind, reservation.start_at, reservation.end_at = name, kind, start_at, end_at
        reservation.gpus, reservation.gpu_model = gpus, gpu_model
        reservation.save()
        reservation.nodes.set(list(nodes))
        reservation.accounts.set(list(accounts))
        reservation.users.set(list(users))
        action = "change reservation" if before else "reserve"
        record_audit(actor, action, reservation, field_changes(before, _state(reservation)))
        transaction.on_commit(partial(_sync, reservation.pk, old_name, old_clusters), robust=True)
    return reservation


def delete_reservation(actor: Any, reservation: Reservation) -> None:
    """Delete ``reservation``, audited; after commit, in the backends too."""
    with transaction.atomic():
        clusters = _clusters_of(reservation)
        record_audit(actor, "delete reservation", reservation, field_changes(_state(reservation), {}))
        name = reservation.name
        reservation.delete()
        transaction.on_commit(partial(_unreserve, name, clusters), robust=True)


def _state(reservation: Reservation) -> dict[str, Any]:
    """What the audit records of a reservation (JSON-safe)."""
    return {
        "name": reservation.name,
        "kind": reservation.kind,
        "start_at": reservation.start_at.isoformat(),
        "end_at": reservation.end_at.isoformat(),
        "nodes": sorted(reservation.nodes.values_list("name", flat=True)),
        "gpus": f"{reservation.gpus} x {reservation.gpu_model}" if reservation.gpus else "",
        "accounts": sorted(reservation.accounts.values_list("name", flat=True)),
        "users": sorted(u.get_username() for u in reservation.users.all()),
    }


def _clusters_of(reservation: Reservation) -> list[int]:
    return sorted(set(reservation.nodes.values_list("cluster_id", flat=True)))


def _admins(cluster_ids: Iterable[int]) -> list[tuple[Cluster, ReservationAdmin]]:
    """The clusters among ``cluster_ids`` whose backend keeps reservations, with it."""
    found: list[tuple[Cluster, ReservationAdmin]] = []
    for cluster in Cluster.objects.filter(pk__in=list(cluster_ids), enabled=True):
        try:
            backend = backend_for(cluster)
        except BackendError as exc:
            log.warning("reservations on %s: no backend: %s", cluster.name, exc)
            continue
        if isinstance(backend, ReservationAdmin):
            found.append((cluster, backend))
    return found


def _usernames(reservation: Reservation) -> list[str]:
    """The cluster usernames of everyone a reservation admits: its users and the
    members of its accounts."""
    people = set(reservation.users.values_list("pk", flat=True)) | set(
        Membership.objects.filter(account__in=reservation.accounts.all()).values_list("user_id", flat=True)
    )
    return sorted(ClusterIdentity.objects.filter(user_id__in=people).values_list("username", flat=True))


def _sync(pk: int, old_name: str | None, old_clusters: list[int]) -> None:
    """Make the backends' copy of reservation ``pk`` match it (after commit): made or
    replaced where its nodes are, deleted where they no longer are."""
    reservation = Reservation.objects.filter(pk=pk).first()
    if reservation is None:
        return
    clusters = _clusters_of(reservation)
    if old_name is not None:
        _unreserve(old_name, [c for c in old_clusters if c not in clusters])
    users = _usernames(reservation)
    for cluster, admin in _admins(clusters):
        nodes = list(reservation.nodes.filter(cluster=cluster).values_list("name", flat=True))
        try:
            if old_name is not None and old_name != reservation.name:
                admin.unreserve(backend_name(old_name))
            admin.reserve(
                backend_name(reservation.name),
                nodes,
                reservation.start_at,
                reservation.end_at,
                maintenance=reservation.kind == Reservation.Kind.MAINTENANCE,
                users=users,
            )
        except BackendError as exc:
            log.warning("reservation %s on %s: backend not updated: %s", reservation.name, cluster.name, exc)


def _unreserve(name: str, cluster_ids: list[int]) -> None:
    for cluster, admin in _admins(cluster_ids):
        try:
            admin.unreserve(backend_name(name))
        except BackendError as exc:
            log.warning("reservation %s on %s: not deleted there: %s", name, cluster.name, exc)
