"""What a replay measured: per-job waits and slowdowns, fairness, utilization, and the bounds no policy beats.

Jain's index and slowdowns are ``scheduler.core.fairness``'s."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler.core.fairness import account_fairness
from scheduler.replay.simulator import JobRecord, Replay
from scheduler.replay.trace import SimulationError, TraceJob

# --- Metrics --------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation (numpy's default)."""
    if not values:
        raise SimulationError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _unit(unit: str) -> dict[str, str]:
    return {"unit": unit}


@dataclass(frozen=True, slots=True)
class Metrics:
    """Quality of one replay. Each field's ``unit`` is in its dataclass metadata.

    - JCT (job completion time) is ``end - submit``; queueing delay (wait) is
      ``start - submit``. Percentiles interpolate linearly.
    - Bounded slowdown of a job is ``max(1, (wait + run) / max(run, 10 s))``; averaged
      (``scheduler.core.fairness``, which the live fairness watch reads too).
    - ``makespan_s`` is from the first submission to the last end.
    - ``utilization`` is GPU-seconds used (the trace's GPUs x run time; the idle rest
      of a rounded-up gang's nodes is not use) over ``capacity x makespan``.
    - ``jain_fairness`` is Jain's index over accounts of each account's average bounded
      slowdown: 1.0 when every account waits, relative to its jobs' lengths, alike.
      (A GPU-share-versus-demand index would be 1.0 on any replay that runs every job
      to completion, so it would not tell policies apart.)
    - ``worst_account_slowdown_ratio``: the highest account's average bounded slowdown
      over the cluster's: how far the worst-treated team is from the rest.
    - ``unplaceable`` jobs (bigger than the cluster) are not in any other figure.
    - ``preemptions`` counts evictions; ``lost_gpu_s`` what they cost (work since the
      last checkpoint and the restart, see ``RestartCost``). A job's wait is its JCT
      less its run time: with evictions, the time lost and reloading counts as waiting.
    """

    jobs: int = field(metadata=_unit("jobs"))
    timeouts: int = field(metadata=_unit("jobs"))
    unplaceable: int = field(metadata=_unit("jobs"))
    avg_jct_s: float = field(metadata=_unit("s"))
    median_jct_s: float = field(metadata=_unit("s"))
    p95_jct_s: float = field(metadata=_unit("s"))
    p99_jct_s: float = field(metadata=_unit("s"))
    avg_wait_s: float = field(metadata=_unit("s"))
    median_wait_s: float = field(metadata=_unit("s"))
    p95_wait_s: float = field(metadata=_unit("s"))
    p99_wait_s: float = field(metadata=_unit("s"))
    max_wait_s: float = field(metadata=_unit("s"))
    avg_bounded_slowdown: float = field(metadata=_unit("ratio"))
    makespan_s: float = field(metadata=_unit("s"))
    utilization: float = field(metadata=_unit("ratio"))
    jain_fairness: float = field(metadata=_unit("ratio"))
    worst_account_slowdown_ratio: float = field(metadata=_unit("ratio"))
    preemptions: int = field(default=0, metadata=_unit("evictions"))
    lost_gpu_s: float = field(default=0.0, metadata=_unit("GPU-s"))


def measure(result: Replay) -> Metrics:
    """The :class:`Metrics` of a replay. Raises :class:`SimulationError` if no job ran."""
    records = result.records
    if not records:
        raise SimulationError("no job was replayed: nothing to measure")
    jcts = [float(r.jct_s) for r in records]
    waits = [float(r.wait_s) for r in records]
    slowdowns = [r.bounded_slowdown for r in records]
    first_submit = min(r.job.submit_s for r in records)
    makespan = max(r.end_s for r in records) - first_submit
    gpu_seconds = sum(r.job.gpus * r.run_s for r in records)
    fairness = account_fairness(zip((r.job.account for r in records), slowdowns, strict=True))
    return Metrics(
        jobs=len(records),
        timeouts=sum(1 for r in records if r.timed_out),
        unplaceable=len(result.unplaceable),
        avg_jct_s=statistics.fmean(jcts),
        median_jct_s=percentile(jcts, 50),
        p95_jct_s=percentile(jcts, 95),
        p99_jct_s=percentile(jcts, 99),
        avg_wait_s=statistics.fmean(waits),
        median_wait_s=percentile(waits, 50),
        p95_wait_s=percentile(waits, 95),
        p99_wait_s=percentile(waits, 99),
        max_wait_s=max(waits),
        avg_bounded_slowdown=statistics.fmean(slowdowns),
        makespan_s=float(makespan),
        utilization=gpu_seconds / (result.capacity_gpus * makespan) if makespan > 0 else 1.0,
        jain_fairness=fairness.jain,
        worst_account_slowdown_ratio=fairness.worst_ratio,
        preemptions=result.preemptions,
        lost_gpu_s=float(result.lost_gpu_s),
    )


@dataclass(frozen=True, slots=True)
class AccountFigures:
    """One account's side of a replay: its jobs, the GPU-hours they ran, how long they
    waited (mean and 95th percentile) and their mean bounded slowdown."""

    account: str
    jobs: int
    gpu_hours: float
    avg_wait_s: float
    p95_wait_s: float
    avg_bounded_slowdown: float


def by_account(result: Replay) -> dict[str, AccountFigures]:
    """Each account's :class:`AccountFigures` in a replay, by name (the accounts whose
    jobs ran). Their slowdowns are what :attr:`Metrics.jain_fairness` compares."""
    grouped: dict[str, list[JobRecord]] = {}
    for record in result.records:
        grouped.setdefault(record.job.account, []).append(record)
    return {
        account: AccountFigures(
            account=account,
            jobs=len(records),
            gpu_hours=sum(r.job.gpus * r.run_s for r in records) / 3600,
            avg_wait_s=statistics.fmean(float(r.wait_s) for r in records),
            p95_wait_s=percentile([float(r.wait_s) for r in records], 95),
            avg_bounded_slowdown=statistics.fmean(r.bounded_slowdown for r in records),
        )
        for account, records in sorted(grouped.items())
    }


@dataclass(frozen=True, slots=True)
class Bounds:
    """What no policy can beat on this trace and cluster (computed from the trace alone).

    - ``offered_load``: demand GPU-seconds / (capacity x submission span).
    - ``utilization_bound``: demand / (capacity x the shortest possible makespan), that
      makespan being at least the latest ``submit + duration`` and at least
      ``demand / capacity`` (both from the first submission). This is the upper bound
      for :attr:`Metrics.utilization`, which is measured over the makespan; the offered
      load is not a bound when the work spills past the submission window.
    - ``jct_lower_bound_s``: the mean duration (every job starting at once).

    Demand is ``gpus x duration`` as the trace states it (no walltime kill, no
    rounding to whole nodes), over every selected job, unplaceable ones included.
    """

    jobs: int = field(metadata=_unit("jobs"))
    demand_gpu_s: float = field(metadata=_unit("GPU-s"))
    offered_load: float = field(metadata=_unit("ratio"))
    utilization_bound: float = field(metadata=_unit("ratio"))
    jct_lower_bound_s: float = field(metadata=_unit("s"))


def bounds(trace: Sequence[TraceJob], capacity_gpus: int) -> Bounds:
    """The :class:`Bounds` of ``trace`` on ``capacity_gpus`` GPUs."""
    if not trace:
        raise SimulationError("an empty trace has no bounds")
    if capacity_gpus < 1:
        raise SimulationError(f"capacity must be >= 1 GPU, got {capacity_gpus}")
    demand = float(sum(j.gpus * j.duration_s for j in trace))
    first = min(j.submit_s for j in trace)
    span = max(j.submit_s for j in trace) - first
    shortest_makespan = max(max(j.submit_s + j.duration_s for j in trace) - first, demand / capacity_gpus)
    return Bounds(
        jobs=len(trace),
        demand_gpu_s=demand,
        offered_load=demand / (capacity_gpus * span) if span > 0 else math.inf,
        utilization_bound=demand / (capacity_gpus * shortest_makespan) if shortest_makespan > 0 else 1.0,
        jct_lower_bound_s=statistics.fmean(j.duration_s for j in trace),
    )
