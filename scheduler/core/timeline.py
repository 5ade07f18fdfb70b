"""Planning the queue forward: per-node availability profiles (Slurm's ``node_space``).

A start-time estimate asks "when is the earliest instant this job fits, for its whole
walltime, alongside every job planned before it?". Copying the ledger and replaying
every release for each job (what :func:`scheduler.core.backfill.plan_reservation`
does for one reservation) costs O(nodes + running) per job; for a queue of 10,000 jobs
on 1,000 nodes that is far too slow. Here each node keeps a step function of what is
free on it from ``now`` on, and two facts keep the search short:

1. **Nothing planned ever frees capacity.** Planning a job only takes resources on
   ``[start, end)``, so the set of instants at which a given request (its shape and
   walltime) fits only shrinks. The search for an identical request resumes where the
   previous one ended (a per-request cursor), never from ``now``.
2. **Only releases open room.** Between two instants at which something is released
   (a running job's walltime limit, a planned job's end), a node's availability for a
   window ``[t, t + walltime)`` can only shrink as ``t`` grows. So when the search moves
   to the next release instant, the nodes that fit there are those that still fit among
   the ones that fitted before, plus the nodes something was released on.

The placement chosen at the start instant is the one ``Ledger.place`` would choose on
the free capacity at that instant, GPUs used by later-planned jobs held back: same
node order for pack, spread and first, same GPUs (lowest positions first).

Times are integer microseconds after ``now``, so arithmetic is exact.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler.core.placement import Ledger, request_shape
from scheduler.core.types import Allocation, Decisions, NodeView, PendingJob, PendingReason, PlacementStrategy, Policy

_US = timedelta(microseconds=1)


def to_us(at: datetime, now: datetime) -> int:
    """``at`` as whole microseconds after ``now`` (negative if before)."""
    return (at - now) // _US


@dataclass(slots=True)
class NodeTimeline:
    """What is free on one node from ``now`` on, as a step function.

    Segment ``i`` runs from ``times[i]`` to ``times[i + 1]`` (the last one forever) and
    has ``masks[i]`` free GPUs (bit ``p`` is ``node.gpus[p]``), ``cpus[i]`` free CPUs and
    ``memory[i]`` free MiB. ``times[0]`` is 0 (``now``).
    """

    node: NodeView
    position: int  # in (cluster, name) order: the ledger's order
    bits: dict[int, int]  # GPU index -> bit
    times: list[int] = field(default_factory=lambda: [0])
    masks: list[int] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)
    memory: list[int] = field(default_factory=list)

    def _split(self, at: int) -> int:
        """The index of the segment that starts at ``at``, splitting one if needed."""
        i = bisect.bisect_right(self.times, at) - 1
        if self.times[i] == at:
            return i
        i += 1
        self.times.insert(i, at)
        self.masks.insert(i, self.masks[i - 1])
        self.cpus.insert(i, self.cpus[i - 1])
        self.memory.insert(i, self.memory[i - 1])
        return i

    def change(self, start: int, end: int | None, mask: int, cpus: int, memory: int, sign: int) -> None:
        """Give back (``sign`` 1) or take (``sign`` -1) resources on ``[start, end)``."""
        i = self._split(max(start, 0))
        stop = self._split(end) if end is not None else len(self.times)
        for j in range(i, stop):
            self.masks[j] = self.masks[j] | mask if sign > 0 else self.masks[j] & ~mask
            self.cpus[j] += sign * cpus
            self.memory[j] += sign * memory

    def window(self, start: int, end: int) -> tuple[int, int, int]:
        """GPUs free during all of ``[start, end)``, and the least free CPUs and memory."""
        times = self.times
        i = bisect.bisect_right(times, start) - 1
        mask, cpus, memory = self.masks[i], self.cpus[i], self.memory[i]
        i += 1
        while i < len(times) and times[i] < end:
            mask &= self.masks[i]
            cpus = min(cpus, self.cpus[i])
            memory = min(memory, self.memory[i])
            i += 1
        return mask, cpus, memory

    def free_count(self, at: int) -> int:
        return self.masks[bisect.bisect_right(self.times, at) - 1].bit_count()


@dataclass(slots=True)
class _Releases:
    """Release instants in order, and the nodes something is released on at each."""

    at: list[int] = field(default_factory=list)
    nodes: dict[int, set[int]] = field(default_factory=dict)

    def add(self, at: int, position: int) -> None:
        touched = self.nodes.get(at)
        if touched is None:
            touched = self.nodes[at] = set()
            bisect.insort(self.at, at)
        touched.add(position)

    def copy(self) -> _Releases:
        return _Releases(list(self.at), {at: set(nodes) for at, nodes in self.nodes.items()})


@dataclass(slots=True)
class _Cursor:
    """Where the last search for one request ended: its instant and the nodes that fit."""

    at: int
    fitting: list[NodeTimeline]


class Planner:
    """Plans jobs one after another at their earliest start, each holding its resources
    for its whole walltime (a conservative-backfill plan of the queue).

    Built from a ledger (what is free now) and the releases to come; never modifies
    the ledger.
    """

    def __init__(
        self,
        ledger: Ledger,
        releases: Iterable[tuple[datetime, tuple[Allocation, ...]]],
        now: datetime,
        strategy: PlacementStrategy,
    ) -> None:
        self.now = now
        self.strategy = strategy
        self.lines: list[NodeTimeline] = []
        self.by_name: dict[str, NodeTimeline] = {}
        self.clusters: dict[str, list[NodeTimeline]] = {}
        for cluster, capacities in ledger.by_cluster.items():
            for capacity in capacities:
                bits = {gpu.index: p for p, gpu in enumerate(capacity.node.gpus)}
                mask = sum(1 << bits[i] for i, free in capacity.free_gpus.items() if free and i in bits)
                line = NodeTimeline(capacity.node, len(self.lines), bits)
                line.masks.append(mask)
                line.cpus.append(capacity.free_cpus)
                line.memory.append(capacity.free_memory_mib)
                self.lines.append(line)
                self.by_name[capacity.node.name] = line
                self.clusters.setdefault(cluster, []).append(line)
        #: Per GPU count ``g`` asked per node: the release instants, sorted, and the nodes
        #: released on then that had at least ``g`` free GPUs the last time we looked.
        #: Planning only takes, so a node with fewer is dropped for good (see ``_released``).
        self._releases: dict[int, _Releases] = {-1: _Releases()}
        for at, allocations in releases:
            self._give_back(max(to_us(at, now), 0), allocations)
        self._accepting: dict[tuple[object, ...], list[int]] = {}
        self._cursors: dict[tuple[object, ...], _Cursor] = {}

    def _give_back(self, at: int, allocations: Iterable[Allocation]) -> None:
        for allocation in allocations:
            line = self.by_name.get(allocation.node)
            if line is None:
                continue
            mask = sum(1 << line.bits[i] for i in allocation.gpu_indices if i in line.bits)
            line.change(at, None, mask, allocation.cpus, allocation.memory_mib, 1)
            self._note_release(at, line)

    def _note_release(self, at: int, line: NodeTimeline) -> None:
        for index in self._releases.values():
            index.add(at, line.position)

    def _released(self, wanted: int) -> _Releases:
        """The release index for jobs asking ``wanted`` GPUs per node (built on first use)."""
        index = self._releases.get(wanted)
        if index is None:
            index = self._releases[wanted] = self._releases[-1].copy()
        return index

    def _accepts(self, job: PendingJob) -> list[int]:
        """Per node, the mask of GPUs that satisfy the job's per-GPU constraints."""
        key = (
            job.gpu_model,
            job.min_gpu_memory_mib,
            job.min_compute_capability,
            job.gpu_share > 0,
            job.gpu_memory_mib_share,
            job.node_labels,
        )
        masks = self._accepting.get(key)
        if masks is None:
            masks = self._accepting[key] = [
                sum(1 << p for p, gpu in enumerate(line.node.gpus) if job.accepts(gpu))
                if job.fits_node(line.node)
                else 0
                for line in self.lines
            ]
        return masks

    def plan(self, job: PendingJob) -> tuple[datetime, tuple[Allocation, ...]] | None:
        """Plan ``job`` at its earliest start and hold its resources until its walltime
        ends. Returns the start and allocations, or ``None`` if it never fits.

        Steps:
        1. Resume at the cursor of identical requests (or ``now``, scanning every node).
        2. Keep the nodes one share of the job fits on for the whole walltime; if the
           strategy can place the gang on them, that instant is the start.
        3. Otherwise move to the next release instant: re-check the nodes kept, add the
           nodes something is released on, and go to 2. Past the last release nothing
           changes any more: the job never fits.
        """
        accepts = self._accepts(job)
        walltime = job.walltime_seconds * 1_000_000
        key = (request_shape(job), walltime)
        cursor = self._cursors.get(key)
        if cursor is None:
            at, candidates = 0, self.lines
        else:
            at, candidates = cursor.at, cursor.fitting
        fitting: list[tuple[NodeTimeline, tuple[int, ...]]] = []
        for line in candidates:
            share = self._share(line, job, accepts[line.position], at, at + walltime)
            if share is not None:
                fitting.append((line, share))
        releases = self._released(job.gpus_per_node)
        i = bisect.bisect_right(releases.at, at)
        while True:
            chosen = self._choose(job, fitting, at)
            if chosen is not None:
                break
            if i == len(releases.at):
                self._cursors[key] = _Cursor(at, [line for line, _ in fitting])
                return None
            at = releases.at[i]
            touched = releases.nodes[at]
            opened = []
            for position in sorted(touched):
                line = self.lines[position]
                if line.free_count(at) < job.gpus_per_node:
                    touched.discard(position)  # only shrinks from here: never again
                else:
                    opened.append(line)
            if not touched:
                del releases.at[i], releases.nodes[at]
            else:
                i += 1
            if not opened and not fitting:
                continue
            kept = {line.position for line, _ in fitting}
            still = []
            for line in [*(line for line, _ in fitting), *(line for line in opened if line.position not in kept)]:
                share = self._share(line, job, accepts[line.position], at, at + walltime)
                if share is not None:
                    still.append((line, share))
            fitting = still
        self._cursors[key] = _Cursor(at, [line for line, _ in fitting])
        allocations = []
        for line, gpus in chosen:
            mask = sum(1 << line.bits[i] for i in gpus)
            line.change(at, at + walltime, mask, job.cpus_per_node, job.memory_mib_per_node, -1)
            allocations.append(Allocation(line.node.name, gpus, job.cpus_per_node, job.memory_mib_per_node))
        for line, _ in chosen:
            self._note_release(at + walltime, line)
        return self.now + timedelta(microseconds=at), tuple(allocations)

    def _share(self, line: NodeTimeline, job: PendingJob, accepts: int, start: int, end: int) -> tuple[int, ...] | None:
        """The GPU indices one share of ``job`` gets on ``line`` for ``[start, end)``, or ``None``."""
        if not line.node.schedulable or (job.node_labels and not job.fits_node(line.node)):
            return None
        mask, cpus, memory = line.window(start, end)
        if cpus < job.cpus_per_node or memory < job.memory_mib_per_node:
            return None
        usable = mask & accepts
        wanted = job.gpus_per_node
        if usable.bit_count() < wanted:
            return None
        gpus = line.node.gpus
        picked: list[int] = []
        while len(picked) < wanted:
            low = usable & -usable
            picked.append(gpus[low.bit_length() - 1].index)
            usable ^= low
        return tuple(picked)

    def _choose(
        self, job: PendingJob, fitting: list[tuple[NodeTimeline, tuple[int, ...]]], at: int
    ) -> list[tuple[NodeTimeline, tuple[int, ...]]] | None:
        """The nodes ``Ledger.place`` would pick among those that fit, or ``None``.

        Per cluster (in ledger order) the fitting nodes are ordered as the strategy
        orders candidates (pack: fewest free GPUs at ``at`` first; spread: most; first:
        by name; ties by name) and the first ``job.nodes`` taken; pack keeps the cluster
        that leaves the fewest free GPUs on the chosen nodes, the others the first
        cluster that has enough.
        """
        if len(fitting) < job.nodes:
            return None
        by_cluster: dict[str, list[tuple[int, int, NodeTimeline, tuple[int, ...]]]] = {}
        for line, share in fitting:
            by_cluster.setdefault(line.node.cluster, []).append((line.free_count(at), line.position, line, share))
        best: tuple[int, list[tuple[NodeTimeline, tuple[int, ...]]]] | None = None
        for cluster in self.clusters:
            options = by_cluster.get(cluster)
            if options is None or len(options) < job.nodes:
                continue
            if self.strategy is PlacementStrategy.PACK:
                options.sort(key=lambda o: (o[0], o[1]))
            elif self.strategy is PlacementStrategy.SPREAD:
                options.sort(key=lambda o: (-o[0], o[1]))
            else:
                options.sort(key=lambda o: o[1])
            picked = options[: job.nodes]
            placement = [(line, share) for _, _, line, share in picked]
            if self.strategy is not PlacementStrategy.PACK:
                return placement
            leftover = sum(free - len(share) for free, _, _, share in picked)
            if best is None or leftover < best[0]:
                best = (leftover, placement)
        return best[1] if best else None


#: Reasons under which the queue alone does not decide when a job starts.
NOT_ESTIMATED = frozenset(
    {
        PendingReason.NODES_UNAVAILABLE,
        PendingReason.DEPENDENCY,
        PendingReason.DEPENDENCY_NEVER,
        PendingReason.ACCOUNT_GPU_LIMIT,
        PendingReason.ACCOUNT_JOB_LIMIT,
        PendingReason.USER_GPU_LIMIT,
        PendingReason.USER_JOB_LIMIT,
    }
)


def estimate_queue(
    queue: Iterable[PendingJob],
    decisions: Decisions,
    ledger: Ledger,
    releases: Iterable[tuple[datetime, tuple[Allocation, ...]]],
    now: datetime,
    policy: Policy,
) -> dict[int, datetime]:
    """Job id -> latest expected start, for every job of ``queue`` (in queue order) that
    the cycle's ``decisions`` started or left waiting for resources or priority.

    ``ledger`` is what is free after the cycle's starts and evictions; ``releases`` are
    when running and just-started jobs give their resources back (their walltime
    limits). Jobs started now are estimated ``now``. The others are planned in queue
    order, each at the earliest instant it fits for its whole walltime alongside every
    job planned before it; under a strict-order policy without backfill no job is
    planned before the one ahead of it (the queue is walked forward in time, as the
    cycle would walk it at each release). Jobs waiting on a dependency, a quota limit
    or hardware that is not up get no estimate.
    """
    estimates = {start.job_id: now for start in decisions.starts}
    waiting = [
        job for job in queue if job.id not in estimates and decisions.pending_reasons.get(job.id) not in NOT_ESTIMATED
    ]
    if policy.strict_order and not policy.backfill:
        estimates.update(_in_order(waiting, ledger, releases, now, policy.placement))
        return estimates
    planner = Planner(ledger, releases, now, policy.placement)
    for job in waiting:
        planned = planner.plan(job)
        if planned is not None:
            estimates[job.id] = planned[0]
    return estimates


def _in_order(
    waiting: list[PendingJob],
    ledger: Ledger,
    releases: Iterable[tuple[datetime, tuple[Allocation, ...]]],
    now: datetime,
    strategy: PlacementStrategy,
) -> dict[int, datetime]:
    """Strict order: each job starts at the first release instant, no earlier than the
    job ahead of it, at which it fits on what is free then (``Ledger.place``)."""
    trial = ledger.copy()
    events = [(max(to_us(at, now), 0), seq, allocations) for seq, (at, allocations) in enumerate(releases)]
    heapq.heapify(events)
    seq = len(events)
    at = 0
    failed: set[tuple[object, ...]] = set()  # shapes that do not fit at ``at``
    estimates: dict[int, datetime] = {}
    for job in waiting:
        shape = request_shape(job)
        while True:
            while events and events[0][0] <= at:
                trial.release(heapq.heappop(events)[2])
            start = None if shape in failed else trial.place(job, None, strategy)
            if start is not None:
                trial.commit(start)
                seq += 1
                heapq.heappush(events, (at + job.walltime_seconds * 1_000_000, seq, start.allocations))
                estimates[job.id] = now + timedelta(microseconds=at)
                break
            failed.add(shape)
            if not events:
                break  # never fits: no estimate, and the jobs behind it are not held up
            at = events[0][0]
            failed.clear()
    return estimates
