"""Reservations for the pages (the tick reads them itself, as the core's windows:
``scheduler.tick.snapshot.load_windows``; whether a submission may ask for one is an
admission rule, ``scheduler.jobs.admission.reservation_problem``), and what one not
yet saved would cost the queue (:func:`preview_cost`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import QuerySet

from scheduler.choices import NodeState
from scheduler.config import current_config
from scheduler.core.types import Window
from scheduler.core.window_cost import Suggestion, WindowCost, least_costly_start, plan_without, window_cost
from scheduler.jobs.allocations import held_gpus
from scheduler.models import Gpu, Job, Node, Reservation
from scheduler.tick.estimates import planning_snapshot


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


#: The delayed jobs a cost preview names (the longest delays: what a page lists).
NAMED = 50


@dataclass(frozen=True, slots=True)
class CostPreview:
    """What a window not yet saved would cost the queue (``scheduler.core.window_cost``),
    and the least costly start in the range asked, if one was."""

    cost: WindowCost
    suggestion: Suggestion | None
    #: Job id -> (name, owner, account) for the first :data:`NAMED` delayed jobs.
    jobs: dict[int, tuple[str, str, str]]


def suggest_range_problems(earliest: datetime | None, latest: datetime | None) -> dict[str, str]:
    """What is wrong with a range to search for a start (``suggest_from`` to
    ``suggest_until``), by field; empty when it is fine or not given at all. The one rule
    the form and the API both ask."""
    if (earliest is None) != (latest is None):
        missing = "suggest_until" if latest is None else "suggest_from"
        return {missing: "Give both ends of the range to search, or neither."}
    if earliest is not None and latest is not None and latest <= earliest:
        return {"suggest_until": "Must be after suggest_from: the range is empty."}
    return {}


def preview_cost(
    window: Window,
    now: datetime,
    *,
    replacing: str | None = None,
    earliest: datetime | None = None,
    latest: datetime | None = None,
) -> CostPreview:
    """Plan the queue and the running jobs as the tick would now, with and without
    ``window``; with ``earliest`` and ``latest`` also search that range for the start
    that displaces least (the window's nodes and length kept). ``replacing``: the name
    of the reservation being changed, left out of the world the window is measured
    against. Writes nothing.

    Raises ``ValueError`` for a range that ends before it begins."""
    config = current_config()
    world = planning_snapshot(now, config)
    world = replace(world, windows=tuple(w for w in world.windows if w.name != replacing))
    baseline = plan_without(world, config.policy, now)
    cost = window_cost(world, config.policy, now, window, baseline)
    suggestion = None
    if earliest is not None and latest is not None:
        suggestion = least_costly_start(world, config.policy, now, window, earliest, latest, baseline=baseline)
    named = [d.job_id for d in cost.delays[:NAMED]]
    jobs = {
        job_id: (name, owner, account)
        for job_id, name, owner, account in Job.objects.filter(pk__in=named).values_list(
            "id", "name", "owner__username", "account__name"
        )
    }
    return CostPreview(cost, suggestion, jobs)
