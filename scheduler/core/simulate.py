"""Trace replay: run a GPU job trace through the real ``schedule()`` and measure it.

A discrete-event simulator. Nothing sleeps and nothing reads the clock: time is the
trace's own seconds, and at every instant where something happens (jobs submitted,
jobs ended) the simulator builds a :class:`~scheduler.core.types.Snapshot`, calls the
very ``schedule(snapshot, policy, now)`` the live scheduler calls, and applies the
starts it returns. What comes out is one record per job (when it started, where, when it
ended) and the quality figures of :class:`Metrics`.

Usage::

    python -m scheduler.core.simulate TRACE.csv --nodes 88 --gpus-per-node 8 \\
        --policy fifo [--policy ...] [--limit N] [--window-start S] [--window-end S]

prints one JSON object per figure and line (see :func:`run`).

Modelling rules (each is a decision a reader of the figures needs to know):

1. **Cluster**: ``N`` identical nodes of ``G`` GPUs, or the node groups of a JSON
   cluster file (``--cluster``, :func:`load_cluster_file`); GPUs are model ``"GPU"``,
   80 GiB, compute capability 9.0 unless the file says otherwise. GPUs are the only
   resource: jobs ask for no CPUs and no memory; ``G`` below is the largest node's GPUs.
2. **Request shape**: a job of ``g <= G`` GPUs asks for 1 node x ``g`` GPUs; a job of
   ``g > G`` GPUs is a gang of ``ceil(g / G)`` whole nodes x ``G`` GPUs. When ``g`` is
   not a multiple of ``G`` (Philly has 7 jobs of 12 GPUs) it is rounded UP to whole
   nodes, as the Helios "consolidate" placement does: the job holds all
   ``ceil(g / G) * G`` GPUs, but utilization counts only the ``g`` it uses (so it stays
   under :attr:`Bounds.utilization_bound`). A job no schedulable node set could
   ever hold (more nodes than the cluster has) is not replayed; it is counted in
   ``Metrics.unplaceable``.
3. **Walltime**: a trace without requested limits gets :func:`standard_walltime`, the
   duration rounded up to the next of 1, 4, 12, 24, 72, 168 hours (beyond 168 h, up to
   a multiple of 168 h). ``walltime_noise`` > 0 first multiplies the duration by a
   log-normal factor ``exp(N(0, noise))`` drawn from a generator seeded by
   ``(seed, job id)``, so the same job gets the same walltime whatever else is in the
   trace, and users who underestimate get killed (TIMEOUT).
4. **Run time**: a job that starts at ``t`` ends at ``t + min(duration, walltime)``;
   when ``duration > walltime`` it is killed at the walltime and counted as a timeout.
5. **Order**: jobs keep the trace's row order for equal submit times (the simulator's
   job ids are positions in submission order, so ``schedule()``'s ``(submitted_at, id)``
   order is arrival order); ``submitted_at`` is ``EPOCH + submit_s``.
6. **Cycles**: events at the same second are applied together (ends first, then
   submissions), then ``schedule()`` is called once if any job is pending. A cycle is
   never skipped for any other reason, so policies that look at ``now`` (ages,
   reservations) see every change.

The module is pure apart from :func:`load_philly_csv`, :func:`run` and :func:`main`, which read a
file and write lines; it imports only the standard library and the core.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from scheduler.core.carry import Carry
from scheduler.core.cycle import schedule
from scheduler.core.fairshare import AccountNode, FairShareTree, UsageInterval, UsagePolicy, charge, decay_usage_map
from scheduler.core.placement import IdleCluster
from scheduler.core.priority import PriorityWeights
from scheduler.core.types import Allocation, GpuView, Limits, NodeView, PendingJob, Policy, RunningJob, Snapshot

#: ``submit_s`` 0 of every trace.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

HOUR = 3600
#: Standard walltime limits in seconds: 1 h, 4 h, 12 h, 1 day, 3 days, 1 week.
STANDARD_LIMITS_S: tuple[int, ...] = (1 * HOUR, 4 * HOUR, 12 * HOUR, 24 * HOUR, 72 * HOUR, 168 * HOUR)

#: Bounded slowdown treats runs shorter than this as this long (the usual 10 s).
SLOWDOWN_FLOOR_S = 10

GPU_MODEL = "GPU"
GPU_MEMORY_MIB = 80 * 1024
GPU_COMPUTE_CAPABILITY = (9, 0)

#: Policies by name: strict-order FIFO, FIFO with EASY backfill, multifactor priority
#: with Fair Tree fair-share (each trace account one association, equal shares) plus
#: backfill, and the same with guarantees that are reclaimed by preemption (see
#: :data:`GUARANTEED`); all with pack placement. Replays need no blockers, so
#: ``explain`` is off.
POLICIES: dict[str, Policy] = {
    "fifo": Policy(explain=False),
    "fifo-backfill": Policy(backfill=True, explain=False),
    "fairshare-backfill": Policy(backfill=True, priority=PriorityWeights(), explain=False),
    "fairshare-backfill-preempt": Policy(backfill=True, priority=PriorityWeights(), explain=False, reclaim=True),
}

#: Policies replayed with guarantees (see :func:`guarantees_for`): accounts borrow idle
#: GPUs beyond them and reclaim them by preemption, as Philly's virtual clusters did
#: with their quotas.
GUARANTEED = frozenset({"fairshare-backfill-preempt"})

#: How often (simulated seconds) fair-share usage is brought up to date, as Slurm's
#: ``PriorityCalcPeriod`` (5 minutes by default).
USAGE_PERIOD_S = 300


class SimulationError(ValueError):
    """A trace, a cluster or a policy name the simulator cannot work with."""


# --- Trace ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: when it arrived, how long it really ran, what it asked for.

    Times are whole seconds. ``walltime_s`` is the limit the scheduler is told (and
    that kills the job); ``duration_s`` is what the job would run if nothing stopped it.
    """

    id: int
    submit_s: int
    duration_s: int
    gpus: int
    account: str
    walltime_s: int

    def __post_init__(self) -> None:
        if self.submit_s < 0 or self.duration_s < 0:
            raise SimulationError(f"job {self.id}: submit_s and duration_s must be >= 0")
        if self.gpus < 1:
            raise SimulationError(f"job {self.id}: gpus must be >= 1, got {self.gpus}")
        if self.walltime_s < 1:
            raise SimulationError(f"job {self.id}: walltime_s must be >= 1, got {self.walltime_s}")

    @property
    def run_s(self) -> int:
        """How long the job holds its GPUs once started: killed at the walltime."""
        return min(self.duration_s, self.walltime_s)

    @property
    def times_out(self) -> bool:
        return self.duration_s > self.walltime_s


def standard_walltime(duration_s: float) -> int:
    """The walltime a user would have asked for: the next standard limit >= duration.

    Limits are 1, 4, 12, 24, 72 and 168 hours; a duration above 168 h is rounded up to a
    multiple of 168 h. A duration exactly on a limit gets that limit (it is not killed).

    >>> standard_walltime(3600), standard_walltime(3601), standard_walltime(169 * 3600) // 3600
    (3600, 14400, 336)
    """
    for limit in STANDARD_LIMITS_S:
        if duration_s <= limit:
            return limit
    week = STANDARD_LIMITS_S[-1]
    return math.ceil(duration_s / week) * week


def noisy_walltime(duration_s: int, job_id: int, *, noise: float, seed: int) -> int:
    """:func:`standard_walltime` of the duration times ``exp(N(0, noise))``.

    The factor is drawn from a generator seeded by ``(seed, job_id)``: deterministic,
    and independent of which other jobs are in the trace. ``noise == 0`` is the exact
    rule. Underestimates (factor < 1) can land below the duration: a timeout.
    """
    if noise < 0:
        raise SimulationError(f"walltime noise must be >= 0, got {noise}")
    if noise == 0:
        return standard_walltime(duration_s)
    factor = math.exp(random.Random(f"{seed}:{job_id}").gauss(0.0, noise))
    return standard_walltime(duration_s * factor)


PHILLY_COLUMNS = ("job_id", "submit_s", "duration_s", "num_gpus", "vc")


def parse_philly_csv(
    lines: Iterable[str], *, source: str = "<trace>", walltime_noise: float = 0.0, seed: int = 0
) -> list[TraceJob]:
    """Jobs of a Philly-format CSV (``job_id,submit_s,duration_s,num_gpus,vc``), in row order.

    ``vc`` (the virtual cluster, a team) becomes the account. Walltimes come from
    :func:`noisy_walltime` (the trace has none). Raises :class:`SimulationError` naming
    ``source`` and the line on a missing column or a value that is not a whole number.
    """
    reader = csv.DictReader(lines)
    missing = [c for c in PHILLY_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise SimulationError(f"{source}: missing column(s) {', '.join(missing)}; need {', '.join(PHILLY_COLUMNS)}")
    jobs: list[TraceJob] = []
    for row in reader:
        where = f"{source}:{reader.line_num}"
        try:
            job_id, submit_s, duration_s, gpus = (int(row[c]) for c in ("job_id", "submit_s", "duration_s", "num_gpus"))
        except (TypeError, ValueError):
            raise SimulationError(f"{where}: job_id, submit_s, duration_s and num_gpus must be integers") from None
        try:
            walltime = noisy_walltime(duration_s, job_id, noise=walltime_noise, seed=seed)
            jobs.append(TraceJob(job_id, submit_s, duration_s, gpus, row["vc"] or "", walltime))
        except SimulationError as error:
            raise SimulationError(f"{where}: {error}") from None
    return jobs


def load_philly_csv(path: str | Path, *, walltime_noise: float = 0.0, seed: int = 0) -> list[TraceJob]:
    """:func:`parse_philly_csv` of a file. Raises :class:`SimulationError` if unreadable."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return parse_philly_csv(handle, source=str(path), walltime_noise=walltime_noise, seed=seed)
    except OSError as error:
        raise SimulationError(f"cannot read trace {str(path)!r}: {error.strerror or error}") from None


def select(
    trace: Sequence[TraceJob],
    *,
    window_start: int | None = None,
    window_end: int | None = None,
    limit: int | None = None,
) -> list[TraceJob]:
    """Jobs submitted in ``[window_start, window_end)`` (seconds), then the first ``limit``."""
    chosen = [
        job
        for job in trace
        if (window_start is None or job.submit_s >= window_start) and (window_end is None or job.submit_s < window_end)
    ]
    return chosen if limit is None else chosen[:limit]


# --- Cluster and requests -----------------------------------------------------------


def load_cluster_file(path: str | Path) -> tuple[NodeView, ...]:
    """A heterogeneous cluster from a JSON file: ``{"nodes": [{"name": "big", "count": 4,
    "gpus": 8}, {"name": "small", "count": 10, "gpus": 4, "model": "L4",
    "gpu_memory_mib": 24576}]}``. Each group of ``count`` nodes is named ``<name>-001``...
    Raises :class:`SimulationError` naming the group and field on anything else."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SimulationError(f"cannot read cluster file {str(path)!r}: {exc}") from None
    groups = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(groups, list) or not groups:
        raise SimulationError(f'cluster file {str(path)!r} needs a non-empty list under "nodes"')
    nodes: list[NodeView] = []
    for position, group in enumerate(groups):
        where = f"{path}: nodes[{position}]"
        if not isinstance(group, dict) or set(group) - {"name", "count", "gpus", "model", "gpu_memory_mib"}:
            raise SimulationError(f"{where} must be an object with name, count, gpus[, model, gpu_memory_mib]")
        name, count, gpus = group.get("name"), group.get("count", 1), group.get("gpus")
        memory = group.get("gpu_memory_mib", GPU_MEMORY_MIB)
        for field_name, value in (("count", count), ("gpus", gpus), ("gpu_memory_mib", memory)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SimulationError(f"{where}.{field_name} must be an integer >= 1, got {value!r}")
        assert isinstance(gpus, int) and isinstance(count, int)  # checked just above
        if not isinstance(name, str) or not name:
            raise SimulationError(f"{where}.name must be a non-empty string")
        model = group.get("model", GPU_MODEL)
        gpu_list = tuple(GpuView(i, str(model), memory, GPU_COMPUTE_CAPABILITY) for i in range(gpus))
        nodes.extend(NodeView(f"{name}-{i:03d}", "sim", 0, 0, gpu_list) for i in range(1, count + 1))
    if len({n.name for n in nodes}) != len(nodes):
        raise SimulationError(f"cluster file {str(path)!r} names a node twice")
    return tuple(nodes)


def homogeneous_cluster(nodes: int, gpus_per_node: int, *, name: str = "sim") -> tuple[NodeView, ...]:
    """``nodes`` identical nodes of ``gpus_per_node`` GPUs, named so name order is number order."""
    if nodes < 1 or gpus_per_node < 1:
        raise SimulationError(f"a cluster needs >= 1 node and >= 1 GPU per node, got {nodes} x {gpus_per_node}")
    gpus = tuple(GpuView(i, GPU_MODEL, GPU_MEMORY_MIB, GPU_COMPUTE_CAPABILITY) for i in range(gpus_per_node))
    width = max(3, len(str(nodes)))
    return tuple(
        NodeView(name=f"n{i:0{width}d}", cluster=name, cpus=0, memory_mib=0, gpus=gpus) for i in range(1, nodes + 1)
    )


def request_for(job: TraceJob, gpus_per_node: int, *, sim_id: int) -> PendingJob:
    """The pending job that asks for ``job``'s GPUs (rule 2 of the module docstring)."""
    if job.gpus <= gpus_per_node:
        nodes, per_node = 1, job.gpus
    else:
        nodes, per_node = math.ceil(job.gpus / gpus_per_node), gpus_per_node
    return PendingJob(
        id=sim_id,
        submitted_at=EPOCH + timedelta(seconds=job.submit_s),
        nodes=nodes,
        gpus_per_node=per_node,
        cpus_per_node=0,
        walltime_seconds=job.walltime_s,
        account=job.account,
        user=job.account,  # a trace names teams, not people: each team is one user
    )


def policy_named(name: str) -> Policy:
    """The registered policy ``name``. Raises :class:`SimulationError` listing the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise SimulationError(f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}") from None


# --- Replay ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one replayed job. Times are seconds on the trace's clock."""

    job: TraceJob
    start_s: int
    end_s: int
    allocations: tuple[Allocation, ...]

    @property
    def wait_s(self) -> int:
        return self.start_s - self.job.submit_s

    @property
    def run_s(self) -> int:
        return self.end_s - self.start_s

    @property
    def jct_s(self) -> int:
        return self.end_s - self.job.submit_s

    @property
    def gpus_held(self) -> int:
        return sum(len(a.gpu_indices) for a in self.allocations)

    @property
    def timed_out(self) -> bool:
        return self.job.times_out

    @property
    def bounded_slowdown(self) -> float:
        return max(1.0, self.jct_s / max(self.run_s, SLOWDOWN_FLOOR_S))


@dataclass(frozen=True, slots=True)
class Replay:
    """The outcome of one replay: a record per replayed job, in submission order."""

    records: tuple[JobRecord, ...]
    unplaceable: tuple[TraceJob, ...]
    capacity_gpus: int
    cycles: int
    #: Evictions applied (a job evicted twice counts twice) and the GPU-seconds the
    #: evicted runs had done, which their requeued runs do again.
    preemptions: int = 0
    lost_gpu_s: int = 0


def guarantees_for(trace: Sequence[TraceJob], capacity_gpus: int) -> dict[str, Limits]:
    """Each trace account's guaranteed GPUs: its share of the trace's GPU-seconds times
    the cluster's GPUs, rounded down (so the guarantees never add up to more than the
    cluster). A documented, deterministic rule: a trace carries no quotas."""
    demand: dict[str, float] = {}
    for job in trace:
        demand[job.account] = demand.get(job.account, 0.0) + job.gpus * job.duration_s
    total = sum(demand.values()) or 1.0
    return {a: Limits(guaranteed_gpus=int(capacity_gpus * d / total)) for a, d in sorted(demand.items())}


def replay(
    trace: Sequence[TraceJob],
    cluster: Sequence[NodeView],
    policy: Policy,
    guarantees: Mapping[str, Limits] | None = None,
) -> Replay:
    """Replay ``trace`` on ``cluster`` under ``policy``, calling the real ``schedule()``.

    Steps:
    1. Order jobs by submit time, keeping row order for ties; shape each request
       (rule 2) with ``G`` = the largest GPU count of a node; set aside the jobs no
       idle cluster could hold (``unplaceable``).
    2. Take the next event time ``t``: the earliest pending submission or end.
    3. Release every job ending at ``t``; queue every job submitted at ``t``.
    4. If any job is pending, build the snapshot and call ``schedule()`` with
       ``now = EPOCH + t``; start what it says: the job holds its allocations from
       ``t`` to ``t + min(duration, walltime)``.
    5. Apply the cycle's evictions (with ``guarantees``, reclaims of borrowed GPUs)
       before its starts: a victim stops holding its GPUs
       at ``t``, goes back to pending with its original submission (a requeue) and will
       run its whole duration again; the GPU-seconds it had run are counted as lost.
    6. Repeat from 2 until no event is left.

    Running and pending jobs live in insertion-ordered dicts, so each snapshot costs
    O(running + pending) and no queue is rebuilt from the trace.

    Raises :class:`SimulationError` if the policy starts an unknown or already started
    job, or leaves jobs pending when no event can ever wake it again (a policy bug).
    """
    nodes = tuple(cluster)
    if not nodes:
        raise SimulationError("the cluster has no nodes")
    gpus_per_node = max(len(n.gpus) for n in nodes)
    parents: dict[str, str | None] = {account: None for account in guarantees or {}}
    idle = IdleCluster(nodes)
    carry = Carry()  # consecutive cycles share their books

    # 1. Submission order; the simulator's ids are positions in it.
    ordered = sorted(trace, key=lambda j: j.submit_s)  # stable: row order breaks ties
    jobs: list[TraceJob] = []
    requests: list[PendingJob] = []
    unplaceable: list[TraceJob] = []
    for job in ordered:
        request = request_for(job, gpus_per_node, sim_id=len(jobs))
        if idle.fits(request):
            jobs.append(job)
            requests.append(request)
        else:
            unplaceable.append(job)

    usage = _UsageBook(jobs) if policy.priority is not None else None
    starts: list[int] = [-1] * len(jobs)
    allocations: list[tuple[Allocation, ...]] = [()] * len(jobs)
    pending: dict[int, PendingJob] = {}
    running: dict[int, RunningJob] = {}
    ends: list[tuple[int, int]] = []  # heap of (end_s, sim id); an evicted run's entry is stale
    end_of: dict[int, int] = {}  # sim id -> end of its current run
    next_submit = 0
    cycles = 0
    preemptions = lost_gpu_s = 0

    while next_submit < len(jobs) or ends:
        # 2.
        t = ends[0][0] if ends else jobs[next_submit].submit_s
        if next_submit < len(jobs):
            t = min(t, jobs[next_submit].submit_s)
        # 3.
        while ends and ends[0][0] == t:
            end_s, sim_id = heapq.heappop(ends)
            if end_of.get(sim_id) != end_s or sim_id not in running:
                continue  # the run it ended was evicted
            ended = running.pop(sim_id)
            del end_of[sim_id]
            if usage is not None:
                usage.ended.append((ended, t))
        while next_submit < len(jobs) and jobs[next_submit].submit_s == t:
            pending[next_submit] = requests[next_submit]
            next_submit += 1
        if not pending:
            continue
        # 4.
        now = EPOCH + timedelta(seconds=t)
        snapshot = Snapshot(
            nodes,
            tuple(running.values()),
            tuple(pending.values()),
            account_limits=guarantees or {},
            account_parents=parents,
            carry=carry,
        )
        if usage is not None:
            snapshot = replace(snapshot, fairshare_tree=usage.tree, usage=usage.as_of(t, running.values()))
        decisions = schedule(snapshot, policy, now)
        cycles += 1
        for eviction in decisions.evictions:
            victim = running.pop(eviction.victim_id, None)
            if victim is None:
                raise SimulationError(f"policy evicted job {eviction.victim_id}, which is not running at t={t}")
            del end_of[eviction.victim_id]
            if usage is not None:
                usage.ended.append((victim, t))
            preemptions += 1
            lost_gpu_s += (t - starts[eviction.victim_id]) * victim.gpus
            starts[eviction.victim_id] = -1
            pending[eviction.victim_id] = requests[eviction.victim_id]
        for start in decisions.starts:
            if pending.pop(start.job_id, None) is None:
                raise SimulationError(f"policy started job {start.job_id}, which is not pending at t={t}")
            job = jobs[start.job_id]
            starts[start.job_id] = t
            allocations[start.job_id] = start.allocations
            running[start.job_id] = RunningJob(
                id=start.job_id,
                allocations=start.allocations,
                started_at=now,
                walltime_seconds=job.walltime_s,
                account=job.account,
                user=job.account,
            )
            heapq.heappush(ends, (t + job.run_s, start.job_id))
            end_of[start.job_id] = t + job.run_s

    if pending:
        raise SimulationError(
            f"policy left {len(pending)} job(s) pending with nothing left to happen (first: trace job "
            f"{jobs[next(iter(pending))].id}); a policy must start a job that fits an idle cluster"
        )
    records = tuple(JobRecord(job, starts[i], starts[i] + job.run_s, allocations[i]) for i, job in enumerate(jobs))
    capacity = sum(len(n.gpus) for n in nodes if n.schedulable)
    return Replay(records, tuple(unplaceable), capacity, cycles, preemptions, lost_gpu_s)


class _UsageBook:
    """Fair-share usage during a replay: decayed GPU-seconds per trace account.

    Brought up to date at most every ``USAGE_PERIOD_S`` simulated seconds, charging
    running jobs and those that ended since, with the same functions as the tick.
    """

    def __init__(self, jobs: Sequence[TraceJob]) -> None:
        accounts = sorted({j.account for j in jobs})
        self.tree = FairShareTree.build([AccountNode(a) for a in accounts], [(a, a) for a in accounts])
        self.policy = UsagePolicy()
        self.usage: dict[tuple[str, str], float] = {}
        self.updated_s: int | None = None
        self.ended: list[tuple[RunningJob, int]] = []  # jobs that ended, and when

    def as_of(self, t: int, running: Iterable[RunningJob]) -> dict[tuple[str, str], float]:
        if self.updated_s is not None and t - self.updated_s < USAGE_PERIOD_S:
            return self.usage
        now = EPOCH + timedelta(seconds=t)
        since = EPOCH + timedelta(seconds=self.updated_s) if self.updated_s is not None else None
        if since is not None:
            self.usage = decay_usage_map(self.usage, since, now, self.policy.half_life)
        spans: list[tuple[RunningJob, datetime | None]] = [
            (job, EPOCH + timedelta(seconds=end_s)) for job, end_s in self.ended
        ]
        spans += [(job, None) for job in running]
        for job, end in spans:
            if job.started_at is not None:
                interval = UsageInterval(job.account, job.user, job.started_at, end, job.gpus)
                self.usage = charge(self.usage, interval, now, self.policy, since)
        self.ended.clear()
        self.updated_s = t
        return self.usage


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


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 when all equal, 1/n at worst.

    An empty or all-zero input is perfectly fair (1.0).
    """
    xs = list(values)
    square_sum = sum(x * x for x in xs)
    if not xs or square_sum == 0:
        return 1.0
    return sum(xs) ** 2 / (len(xs) * square_sum)


def _unit(unit: str) -> dict[str, str]:
    return {"unit": unit}


@dataclass(frozen=True, slots=True)
class Metrics:
    """Quality of one replay. Each field's ``unit`` is in its dataclass metadata.

    - JCT (job completion time) is ``end - submit``; queueing delay (wait) is
      ``start - submit``. Percentiles interpolate linearly.
    - Bounded slowdown of a job is ``max(1, (wait + run) / max(run, 10 s))``; averaged.
    - ``makespan_s`` is from the first submission to the last end.
    - ``utilization`` is GPU-seconds used (the trace's GPUs x run time; the idle rest
      of a rounded-up gang's nodes is not use) over ``capacity x makespan``.
    - ``jain_fairness`` is Jain's index over accounts of each account's average bounded
      slowdown: 1.0 when every account waits, relative to its jobs' lengths, alike.
      (A GPU-share-versus-demand index would be 1.0 on any replay that runs every job
      to completion, so it would not tell policies apart.)
    - ``unplaceable`` jobs (bigger than the cluster) are not in any other figure.
    - ``preemptions`` counts evictions; ``lost_gpu_s`` the GPU-seconds the evicted runs
      had done (redone by the requeued run). A record's start is that of its last run.
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
    by_account: dict[str, list[float]] = {}
    for record, slowdown in zip(records, slowdowns, strict=True):
        by_account.setdefault(record.job.account, []).append(slowdown)
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
        jain_fairness=jain_index(statistics.fmean(s) for s in by_account.values()),
        preemptions=result.preemptions,
        lost_gpu_s=float(result.lost_gpu_s),
    )


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


# --- Command line ---------------------------------------------------------------------


class Writer(Protocol):
    """Where figure lines go: a text stream or Django's ``OutputWrapper``."""

    def write(self, text: str, /) -> object: ...


def _int_at_least(minimum: int, unit: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number (of ``unit``) no smaller than ``minimum``."""
    what = f"a whole number of {unit}" if unit else "a whole number"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0, "seconds")


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _policy_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one policy")
    for name in names:
        try:
            policy_named(name)
        except SimulationError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m scheduler.core.simulate`` and ``manage.py simulate``."""
    parser.add_argument("trace", help="a Philly-format CSV: job_id,submit_s,duration_s,num_gpus,vc")
    parser.add_argument(
        "--nodes", type=_positive_int, default=88, metavar="N", help="nodes in the cluster (default 88)"
    )
    parser.add_argument(
        "--gpus-per-node",
        dest="gpus_per_node",
        type=_positive_int,
        default=8,
        metavar="G",
        help="GPUs per node (default 8)",
    )
    parser.add_argument(
        "--cluster",
        dest="cluster_file",
        default=None,
        metavar="FILE",
        help="a JSON cluster file (heterogeneous nodes; see load_cluster_file); replaces --nodes/--gpus-per-node",
    )
    parser.add_argument(
        "--policy",
        dest="policy",
        type=_policy_names,
        action="extend",
        default=None,
        metavar="NAME",
        help=f"policy to replay; repeat or comma-separate to compare (known: {', '.join(sorted(POLICIES))}; "
        "default: all)",
    )
    parser.add_argument(
        "--limit", type=_positive_int, default=None, metavar="N", help="replay only the first N selected jobs"
    )
    parser.add_argument(
        "--window-start",
        dest="window_start",
        type=_non_negative_int,
        default=None,
        metavar="S",
        help="keep jobs submitted at or after this submit_s",
    )
    parser.add_argument(
        "--window-end",
        dest="window_end",
        type=_non_negative_int,
        default=None,
        metavar="S",
        help="keep jobs submitted before this",
    )
    parser.add_argument(
        "--walltime-noise",
        dest="walltime_noise",
        type=_non_negative_float,
        default=0.0,
        metavar="SIGMA",
        help="sigma of the log-normal error on walltime estimates (default 0: exact rule)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the walltime noise (default 0)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.core.simulate",
        description="Replay a GPU job trace through the scheduler and print quality figures as JSON lines.",
    )
    add_arguments(parser)
    return parser


def run(options: argparse.Namespace, out: Writer) -> None:
    """Replay the trace under each policy and write one JSON line per figure.

    Every line is ``{"metric", "value", "unit", "policy", "trace", "nodes",
    "gpus_per_node"}``. The trace's :class:`Bounds` come first with ``"policy": null``;
    then each policy's :class:`Metrics`, its ``schedule_calls`` and its
    ``replay_wall_s`` (the simulator's own run time, not a property of the policy), and
    the headline ``sim_*`` lines (:data:`SUMMARY`).
    Raises :class:`SimulationError` on an unreadable or empty selection.
    """
    start, end = options.window_start, options.window_end
    if start is not None and end is not None and start >= end:
        raise SimulationError(f"--window-start ({start}) must be before --window-end ({end})")
    names = list(dict.fromkeys(options.policy or list(POLICIES)))
    trace = select(
        load_philly_csv(options.trace, walltime_noise=options.walltime_noise, seed=options.seed),
        window_start=start,
        window_end=end,
        limit=options.limit,
    )
    if not trace:
        raise SimulationError(f"no job of {options.trace!r} is in the selection (window/limit)")
    if options.cluster_file:
        cluster = load_cluster_file(options.cluster_file)
        context: dict[str, object] = {
            "trace": options.trace,
            "cluster": options.cluster_file,
            "nodes": len(cluster),
            "gpus_per_node": max(len(n.gpus) for n in cluster),
        }
    else:
        cluster = homogeneous_cluster(options.nodes, options.gpus_per_node)
        context = {"trace": options.trace, "nodes": options.nodes, "gpus_per_node": options.gpus_per_node}
    capacity = sum(len(n.gpus) for n in cluster)

    def emit(metric: str, value: float, unit: str, policy: str | None) -> None:
        line = {"metric": metric, "value": value, "unit": unit, "policy": policy, **context}
        out.write(json.dumps(line) + "\n")

    trace_bounds = bounds(trace, capacity)
    for f in fields(Bounds):
        emit(f.name, getattr(trace_bounds, f.name), f.metadata["unit"], None)
    for name in names:
        began = time.perf_counter()
        result = replay(
            trace,
            cluster,
            policy_named(name),
            guarantees_for(trace, capacity) if name in GUARANTEED else None,
        )
        metrics = measure(result)
        wall = time.perf_counter() - began
        for f in fields(Metrics):
            emit(f.name, getattr(metrics, f.name), f.metadata["unit"], name)
        emit("schedule_calls", result.cycles, "calls", name)
        emit("replay_wall_s", round(wall, 3), "s", name)
        emit("sim_wall_s", round(wall, 3), "s", name)
        for metric, value, unit in _summary(metrics):
            emit(metric, value, unit, name)


#: The headline figures under the names the benchmarks and reports compare
#: (``sim_*``), from :class:`Metrics` fields of the same meaning.
SUMMARY = (
    ("sim_avg_jct_s", "avg_jct_s"),
    ("sim_avg_wait_s", "avg_wait_s"),
    ("sim_p99_wait_s", "p99_wait_s"),
    ("sim_utilization", "utilization"),
    ("sim_jain", "jain_fairness"),
    ("sim_makespan_s", "makespan_s"),
    ("sim_preemptions", "preemptions"),
    ("sim_lost_gpu_s", "lost_gpu_s"),
)


def _summary(metrics: Metrics) -> list[tuple[str, float, str]]:
    """The :data:`SUMMARY` lines. The wall time is not among them: the same replay must
    print the same figures (``benchmarks/replay.py`` adds ``sim_wall_s``)."""
    units = {f.name: f.metadata["unit"] for f in fields(Metrics)}
    return [(metric, float(getattr(metrics, source)), units[source]) for metric, source in SUMMARY]


def main(argv: Sequence[str] | None = None, out: Writer | None = None) -> int:
    """Command-line entry point. Returns 0; bad options or a bad trace exit with status 2."""
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        run(options, out if out is not None else sys.stdout)
    except SimulationError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
