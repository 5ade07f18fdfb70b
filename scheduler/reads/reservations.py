"""Reservations for the pages (the tick reads them itself, as the core's windows:
``scheduler.tick.snapshot.load_windows``; whether a submission may ask for one is an
admission rule, ``scheduler.jobs.admission.reservation_problem``)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db.models import QuerySet

from scheduler.choices import NodeState
from scheduler.jobs.allocations import held_gpus
from scheduler.models import Gpu, Node, Reservation


def ahead(now: datetime) -> QuerySet[Reservation]:
    """The reservations that have not ended, with what the pages show of them."""
    return Reservation.objects.filter(end_at__gt=now).prefetch_related("nodes", "accounts", "users")


def by_node(now: datetime) -> dict[str, list[Reservation]]:
    """Node name -> the reservations ahead on it, soonest first (for the nodes page)."""
    found: dict[str, list[Reservation]] = {}
    for reservation in ahead(now):
        for node in reservation.nodes.all():
            found.setdefault(node.name, []).append(reservation)
    return found


def nodes_for_gpus(model: str, count: int, start: datetime, end: datetime, *, keep: int | None = None) -> list[Node]:
    """Up nodes holding together at least ``count`` GPUs of ``model`` and no other
    reservation overlapping ``[start, end)`` (``keep``: a reservation being changed, whose
    own nodes count as free), the least busy first: the nodes a reservation of "N GPUs of
    a model" takes, as Slurm picks nodes for ``TRES=gres/gpu:N``. Raises ``ValueError``
    saying how many there are when there are too few."""
    taken = Reservation.objects.filter(start_at__lt=end, end_at__gt=start)
    if keep is not None:
        taken = taken.exclude(pk=keep)
    busy = set(taken.values_list("nodes", flat=True))
    per_node: dict[int, int] = {}
    for node_id in Gpu.objects.filter(
        model=model, mig_profile="", node__state=NodeState.UP, node__cluster__enabled=True
    ).values_list("node_id", flat=True):
        if node_id not in busy:
            per_node[node_id] = per_node.get(node_id, 0) + 1
    held = Counter(node for node, _ in held_gpus())  # GPUs busy per node
    nodes = sorted(Node.objects.filter(pk__in=per_node), key=lambda n: (held[n.name], n.name))
    chosen: list[Node] = []
    total = 0
    for node in nodes:
        if total >= count:
            break
        chosen.append(node)
        total += per_node[node.pk]
    if total < count:
        raise ValueError(
            f"Only {total} GPUs of {model} are on up nodes free of other reservations then; {count} asked."
        )
    return chosen
