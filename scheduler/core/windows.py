"""Reservations and maintenance windows (``scontrol create reservation``) in the cycle.

A :class:`~scheduler.core.types.Window` sets nodes aside from its start to its end. The
cycle, the backfill reservations and the start estimates all ask this module one
question: for this job, starting at ``t`` and holding its resources until ``t`` plus
its walltime, which nodes are out? They are given back as whole-node holds, the same
shape as what backfill reservations hold back (``scheduler.core.backfill.held_back``),
so the placement needs nothing new:

- a job a window does not admit may not use its nodes if its run would overlap the
  window at all (a job ending before the window starts is fine there, as in Slurm);
- a job that asks for a reservation may use only that window's nodes, and only if its
  whole run lies inside the window (before it begins the job waits, reason
  ``Reservation``; nothing is planned to cross its end).

Maintenance windows admit no job. A window on a node where jobs still run when it
begins does not stop them (Slurm's ``IGNORE_JOBS``): it only keeps new work off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from scheduler.core.types import Allocation, Blocker, NodeView, PendingJob, PendingReason, Window

Holds = Mapping[str, Allocation]


class WindowBook:
    """The windows of one cycle and the whole-node holds they make, built once."""

    __slots__ = ("_everywhere_but", "_whole", "by_name", "now", "windows")

    def __init__(self, windows: Iterable[Window], nodes: Sequence[NodeView], now: datetime) -> None:
        self.now = now
        self.windows = tuple(w for w in windows if w.end_at > now)
        self.by_name = {w.name: w for w in self.windows}
        # Whole nodes: those windows name, and every node once a reservation's jobs
        # must be kept off all but its own.
        everywhere = any(not w.maintenance for w in self.windows)
        named = {n for w in self.windows for n in w.nodes}
        self._whole: dict[str, Allocation] = {
            node.name: Allocation(node.name, tuple(g.index for g in node.gpus), node.cpu_millis, node.memory_mib)
            for node in nodes
            if everywhere or node.name in named
        }
        self._everywhere_but: dict[str, dict[str, Allocation]] = {
            w.name: {name: a for name, a in self._whole.items() if name not in w.nodes}
            for w in self.windows
            if not w.maintenance
        }

    def __bool__(self) -> bool:
        return bool(self.windows)

    def in_the_way(self, job: PendingJob, start: datetime) -> list[Window]:
        """The windows that keep ``job``, started at ``start``, off their nodes."""
        end = start + timedelta(seconds=job.walltime_seconds)
        return [w for w in self.windows if w.start_at < end and w.end_at > start and not w.admits(job)]

    def holds(self, job: PendingJob, start: datetime) -> Holds | None:
        """The nodes out for ``job`` started at ``start``, as whole-node holds; ``None``
        when it may not start then at all (a reservation job outside its window)."""
        if job.reservation:
            window = self.by_name.get(job.reservation)
            end = start + timedelta(seconds=job.walltime_seconds)
            if window is None or not window.admits(job) or start < window.start_at or end > window.end_at:
                return None
            outside = self._everywhere_but[window.name]
            inside = self._whole_nodes([w for w in self.in_the_way(job, start) if w is not window])
            return merge_holds(outside, inside) if inside else outside
        return self._whole_nodes(self.in_the_way(job, start))

    def _whole_nodes(self, windows: Iterable[Window]) -> dict[str, Allocation]:
        return {name: self._whole[name] for w in windows for name in w.nodes if name in self._whole}


def merge_holds(first: Holds, second: Holds) -> Holds:
    """Both holds: per node, what either keeps back (a node either holds whole stays whole)."""
    if not first:
        return second
    if not second:
        return first
    merged = dict(first)
    for node, a in second.items():
        prior = merged.get(node)
        merged[node] = a if prior is None else prior.joined(a)
    return merged


def reservation_blocker(job: PendingJob, window: Window | None) -> Blocker:
    """Why a job that asks for a reservation does not start now: the reservation is gone,
    not for it, not begun, or too short for the rest of its walltime."""
    if window is None:
        return Blocker(
            PendingReason.NODES_UNAVAILABLE,
            f"reservation {job.reservation} does not exist or has ended",
            {"reservation": job.reservation},
        )
    span = f"from {window.start_at:%Y-%m-%d %H:%M} to {window.end_at:%Y-%m-%d %H:%M} UTC"
    if not window.admits(job):
        message = f"reservation {window.name} ({span}) is not for this job's account or owner"
    else:
        message = f"runs in reservation {window.name}, {span}, once its walltime fits inside it"
    return Blocker(PendingReason.RESERVATION, message, {"reservation": window.name})


def window_text(windows: Sequence[Window]) -> str:
    """``"reserved for maintenance from 2026-03-01 06:00 to 10:00 UTC on n1, n2"`` (the
    day of the end too when it is another)."""
    parts = []
    for w in windows:
        what = "reserved for maintenance" if w.maintenance else f"reserved ({w.name})"
        nodes = ", ".join(sorted(w.nodes)[:5]) + (f" and {len(w.nodes) - 5} more" if len(w.nodes) > 5 else "")
        until = f"{w.end_at:%H:%M}" if w.end_at.date() == w.start_at.date() else f"{w.end_at:%Y-%m-%d %H:%M}"
        parts.append(f"{what} from {w.start_at:%Y-%m-%d %H:%M} to {until} UTC on {nodes}")
    return "; ".join(parts)
