"""Previews: what a change to an account's shares or limits would have done, measured on the
site's own recent history: the jobs that ran in the last days (when they were
submitted, what they asked for, how long they really ran, their walltime limits as
submitted) replayed through the trace simulator twice, with the accounts as they are
and with the change, on the cluster as it is now, under the site's own policy.

Modelling, stated so the figures are read for what they are: a job asks for its GPUs
(a share of a GPU counts as one GPU, a CPU-only job is left out) of any model; the
replay's users are the accounts (user quotas are left out); the fair-share usage starts
from nothing at the window's start. The two replays differ only in the change, so their
difference is the change's effect on that history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from scheduler.config import current_policy
from scheduler.core.fairshare import AccountNode
from scheduler.core.types import Limits, NodeView, Policy
from scheduler.models import Job
from scheduler.replay.metrics import AccountFigures, by_account, measure
from scheduler.replay.simulator import replay
from scheduler.replay.trace import TraceJob
from scheduler.tick.snapshot import load_accounts, load_hardware, load_limits

#: Fewer jobs than this in the window say nothing about a change.
MIN_JOBS = 20
#: The windows a preview may replay, in days.
WINDOWS = (7, 30)


class TooLittleHistory(ValueError):
    """The window holds too few jobs that ran to replay."""


@dataclass(frozen=True, slots=True)
class Side:
    """One account under one of the two replays."""

    jobs: int
    gpu_hours: float
    avg_wait_s: float
    p95_wait_s: float


@dataclass(frozen=True, slots=True)
class PreviewRow:
    account: str
    today: Side
    proposed: Side

    @property
    def wait_change_s(self) -> float:
        """How much longer (negative: shorter) its jobs would have waited on average."""
        return self.proposed.avg_wait_s - self.today.avg_wait_s


@dataclass(frozen=True, slots=True)
class ImpossibleJob:
    """A job of the history that the change would never let start, and why in words."""

    job_id: int
    account: str
    gpus: int
    why: str
    #: Whether the limits as they are already keep it out (then both replays leave it out).
    also_today: bool = False


@dataclass(frozen=True, slots=True)
class Preview:
    days: int
    jobs: int
    rows: tuple[PreviewRow, ...]
    jain_today: float
    jain_proposed: float
    #: The history's jobs the change would never let start: left out of the replay with
    #: the change (their account's ``proposed`` figures are of the rest), listed here.
    impossible: tuple[ImpossibleJob, ...] = ()


def site_history(now: datetime, days: float) -> list[TraceJob]:
    """The jobs submitted in the ``days`` before ``now`` that ran and ended, as a trace
    whose clock starts at the first submission (two queries)."""
    rows = list(
        Job.objects.filter(
            submitted_at__gte=now - timedelta(days=days),
            started_at__isnull=False,
            ended_at__isnull=False,
            gpus_per_node__gt=0,
        )
        .order_by("submitted_at", "id")
        .values_list(
            "id",
            "submitted_at",
            "started_at",
            "ended_at",
            "nodes",
            "gpus_per_node",
            "account__name",
            "walltime_seconds",
        )
    )
    if not rows:
        return []
    origin: datetime = rows[0][1]
    trace = []
    for job_id, submitted, started, ended, nodes, per_node, account, walltime in rows:
        if started is None or ended is None:  # excluded by the query; keeps the types honest
            continue
        trace.append(
            TraceJob(
                id=job_id,
                submit_s=int((submitted - origin).total_seconds()),
                duration_s=max(0, int((ended - started).total_seconds())),
                gpus=nodes * per_node,  # GPUs placed: the replay places whole GPUs, a share sits on one
                account=account,
                walltime_s=max(1, walltime),
            )
        )
    return trace


def site_as_now() -> tuple[tuple[NodeView, ...], Policy, list[AccountNode], dict[str, Limits]]:
    """What a replay of the site's history runs on: the hardware as it is (every GPU
    healthy), the site's policy without explanations or estimates, the accounts and
    their limits as they are. Four queries."""
    policy = replace(current_policy(), explain=False, estimates=False)
    return load_hardware(), policy, load_accounts(), load_limits()[0]


def preview(
    account: str,
    *,
    shares: int | None,
    limits: Mapping[str, Any] | None,
    days: int,
    now: datetime,
    progress: Callable[[float], None] | None = None,
) -> Preview:
    """Replay the last ``days`` twice: as the accounts are, and with ``account`` given
    ``shares`` and its quota changed by ``limits`` (``Limits`` fields to set, ``None``
    for no limit; the rest as they are; ``None``: unchanged). ``progress`` is told the
    fraction done after each replay. Raises :class:`TooLittleHistory` below
    :data:`MIN_JOBS`."""
    trace = site_history(now, days)
    if len(trace) < MIN_JOBS:
        raise TooLittleHistory(f"{len(trace)} jobs ran in the last {days} days; a preview needs at least {MIN_JOBS}.")
    cluster, policy, accounts, account_limits = site_as_now()
    changed_accounts = [replace(a, shares=shares) if a.name == account and shares is not None else a for a in accounts]
    changed_limits = dict(account_limits)
    if limits is not None:
        changed_limits[account] = replace(account_limits.get(account, Limits()), **limits)
    results = []
    for tree, caps in ((accounts, account_limits), (changed_accounts, changed_limits)):
        results.append(replay(trace, cluster, policy, caps, tree))
        if progress is not None:
            progress(len(results) / 2)
    today, proposed = (by_account(r) for r in results)
    rows = tuple(
        PreviewRow(name, _side(today.get(name)), _side(proposed.get(name)))
        for name in sorted(today.keys() | proposed.keys())
    )
    today_out = {job.id for job, _ in results[0].refused}
    impossible = tuple(
        ImpossibleJob(job.id, job.account, job.gpus, why, job.id in today_out) for job, why in results[1].refused
    )
    jain_today, jain_proposed = (measure(r).jain_fairness for r in results)
    return Preview(days, len(trace), rows, jain_today, jain_proposed, impossible)


def _side(figures: AccountFigures | None) -> Side:
    if figures is None:
        return Side(0, 0.0, 0.0, 0.0)
    return Side(figures.jobs, figures.gpu_hours, figures.avg_wait_s, figures.p95_wait_s)
