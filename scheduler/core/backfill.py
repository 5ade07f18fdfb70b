"""EASY backfill: reservations for blocked jobs, and the rule for jumping ahead.

When the highest-priority waiting job cannot start, it gets a *reservation*: the
earliest time enough resources free up for it, found by replaying the ends of running
jobs (their start plus walltime limit, the latest they can end) on a copy of the
free-capacity ledger, and the concrete GPUs it would get then. A lower-priority job may
start now only if it cannot delay any reservation: it either ends (by its walltime)
before the reservation starts, or it fits without touching what the reservation
holds back. With ``reservations > 1`` the first K blocked jobs get one each
(conservative backfill toward the head of the queue).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from scheduler.core.placement import Ledger
from scheduler.core.types import Allocation, PendingJob, PlacementStrategy, Reservation
from scheduler.core.windows import WindowBook, merge_holds


class Release(NamedTuple):
    """Resources that come back at ``at`` (a running job's latest end).

    A named tuple, not a dataclass: a cycle that plans ahead makes one per running job,
    and a replay runs tens of thousands of cycles.
    """

    at: datetime
    allocations: tuple[Allocation, ...]
    job_id: int | None = None


def plan_reservation(
    job: PendingJob,
    ledger: Ledger,
    releases: Iterable[Release],
    earlier: Iterable[Reservation] = (),
    strategy: PlacementStrategy | None = None,
    *,
    ordered: Iterable[tuple[datetime, int, tuple[Allocation, ...]]] = (),
    windows: WindowBook | None = None,
) -> Reservation | None:
    """The earliest start for ``job`` as running jobs end, or ``None`` if never.

    ``earlier`` reservations hold their resources from their start to their end, so a
    new reservation never overlaps one made before it. ``ordered`` are more releases,
    ``(instant, sequence, allocations)`` already in time order (a replay keeps its
    running jobs' ends sorted, see ``scheduler.core.carry.Carry``): they are
    merged in as the walk goes, so a reservation found early never looks at the rest.

    Steps:
    1. Turn releases and earlier reservations into events on a copy of the ledger:
       at each instant, resources given back first, then reservations starting then
       take theirs.
    2. After each instant that gave something back, try to place the job, leaving
       alone what earlier reservations starting before it would end will need.

    Within one instant the order of the events given back does not matter (GPUs, shares
    in integer units, CPUs and memory are given back exactly, in any order), so merging
    ``ordered`` by instant alone finds what sorting everything would.

    ``windows`` (admin reservations, maintenance) keep the job off their nodes for any
    start whose run would reach into them, and a job asking for one inside it; their
    ends are instants to try too, when they free nodes.
    """
    earlier = list(earlier)
    # (instant, kind, sequence): given back before taken at one instant, else in order
    events: list[tuple[datetime, int, int, tuple[Allocation, ...]]] = [
        (r.at, 0, i, r.allocations) for i, r in enumerate(releases)
    ]
    for r in earlier:
        events.append((r.start_at, 1, len(events), r.allocations))
        events.append((r.end_at, 0, len(events), r.allocations))
    if windows:
        # Nothing is given back when a window begins or ends, but the job may fit then.
        for w in windows.windows:
            for instant in (w.start_at, w.end_at):
                if instant > windows.now:
                    events.append((instant, 0, len(events), ()))
    events.sort()
    more = [(at, 0, len(events) + k, allocations) for k, (at, _, allocations) in enumerate(ordered)]
    merged = heapq.merge(events, more)
    trial = ledger.copy()
    event = next(merged, None)
    while event is not None:
        at = event[0]
        touched: set[str] = set()
        boundary = False
        while event is not None and event[0] == at:
            _, kind, _, allocations = event
            if kind == 0:
                trial.release(allocations)
                touched.update(a.node for a in allocations)
                boundary = boundary or not allocations
            else:
                trial.take(allocations)
            event = next(merged, None)
        if not boundary and not any(
            n in trial.by_name and trial.by_name[n].free_count >= job.gpus_per_node for n in touched
        ):
            continue
        ends = at + timedelta(seconds=job.walltime_seconds)
        upcoming = [r for r in earlier if at < r.start_at < ends]
        held = held_back(upcoming) if upcoming else None
        if windows:
            window_held = windows.holds(job, at)
            if window_held is None:
                continue
            held = merge_holds(held or {}, window_held) or None
        start = trial.place(job, held, strategy)
        if start is not None:
            return Reservation(job.id, at, ends, start.allocations)
    return None


def delayed_by(job: PendingJob, reservations: Iterable[Reservation], now: datetime) -> list[Reservation]:
    """The reservations ``job`` could delay if it started now.

    A job that ends (by its walltime) before a reservation starts cannot delay it.
    """
    ends = now + timedelta(seconds=job.walltime_seconds)
    return [r for r in reservations if ends > r.start_at]


def held_back(reservations: Iterable[Reservation]) -> Mapping[str, Allocation]:
    """Per node, the GPUs, CPUs and memory these reservations keep back."""
    held: dict[str, Allocation] = {}
    for reservation in reservations:
        for a in reservation.allocations:
            prior = held.get(a.node)
            held[a.node] = a if prior is None else prior.joined(a)
    return held
