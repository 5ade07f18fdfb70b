"""Where a job fits: a ledger of free capacity and gang placement (pack, spread, first).

The ledger is built once per cycle from the snapshot and updated as the cycle commits
starts, so one GPU can never be handed to two jobs within a cycle or across cycles
(running jobs' GPUs are removed before any placement is tried).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.core.types import Allocation, NodeView, PendingJob, Snapshot, Start
from scheduler.core.types import PlacementStrategy as Strategy


@dataclass(slots=True)
class NodeCapacity:
    """What is still free on one node during a cycle."""

    node: NodeView
    free_gpus: dict[int, bool] = field(default_factory=dict)  # index -> free (ordered)
    free_cpus: int = 0
    free_memory_mib: int = 0
    #: Number of free GPUs, kept so that full nodes are skipped without a scan.
    free_count: int = 0
    #: Shared GPUs with shares on them: index -> (capacity used, with the overhead;
    #: GPU memory reserved). Such a GPU is not free for whole-GPU jobs.
    shares: dict[int, tuple[float, int]] = field(default_factory=dict)
    #: A share ``s`` takes ``s * (1 + overhead)`` of a GPU (see ``Policy.sharing_overhead``).
    overhead: float = 0.0

    def usable_gpus(self, job: PendingJob, held: frozenset[int] = frozenset()) -> list[int]:
        """Free GPU indices on this node that satisfy the job's per-GPU constraints."""
        return [
            gpu.index
            for gpu in self.node.gpus
            if self.free_gpus.get(gpu.index) and gpu.index not in held and job.accepts(gpu)
        ]

    def fit(self, job: PendingJob, held: Allocation | None = None) -> Allocation | None:
        """The lowest-index allocation for one node's share of ``job``, or ``None``.

        ``held`` is what a reservation keeps back on this node: those GPUs are not
        offered, and its CPUs and memory count as used (conservatively: never lets a
        job in that could delay the reservation).
        """
        if not self.node.schedulable or (job.node_labels and not job.fits_node(self.node)):
            return None
        held_gpus = frozenset(held.gpu_indices) if held else frozenset()
        held_cpus, held_memory = (held.cpus, held.memory_mib) if held else (0, 0)
        if (
            self.free_cpus - held_cpus < job.cpus_per_node
            or self.free_memory_mib - held_memory < job.memory_mib_per_node
        ):
            return None
        if job.gpus_per_node == 0:
            return Allocation(self.node.name, (), job.cpus_per_node, job.memory_mib_per_node)
        if job.gpu_share:
            return self._fit_share(job, held_gpus)
        if self.free_count < job.gpus_per_node:
            return None
        usable = self.usable_gpus(job, held_gpus)
        if len(usable) < job.gpus_per_node:
            return None
        return Allocation(
            self.node.name, tuple(usable[: job.gpus_per_node]), job.cpus_per_node, job.memory_mib_per_node
        )

    def _fit_share(self, job: PendingJob, held: frozenset[int]) -> Allocation | None:
        """A fractional job's GPU: the fullest shared GPU it still fits on (packing
        shares so whole GPUs stay free), else a free shared GPU."""
        need = job.gpu_share * (1 + self.overhead)
        best: tuple[float, int] | None = None
        for gpu in self.node.gpus:
            if gpu.index in held or not job.accepts(gpu):
                continue
            used, memory = self.shares.get(gpu.index, (0.0, 0))
            if gpu.index not in self.shares and not self.free_gpus.get(gpu.index):
                continue  # held whole by another job
            if used + need > 1.0 + 1e-9 or memory + job.gpu_memory_mib_share > gpu.memory_mib:
                continue
            if best is None or used > best[0]:
                best = (used, gpu.index)
        if best is None:
            return None
        return Allocation(
            self.node.name,
            (best[1],),
            job.cpus_per_node,
            job.memory_mib_per_node,
            gpu_share=job.gpu_share,
            gpu_memory_mib=job.gpu_memory_mib_share,
        )

    def take(self, allocation: Allocation) -> None:
        for index in allocation.gpu_indices:
            if self.free_gpus.get(index):
                self.free_gpus[index] = False
                self.free_count -= 1
            if allocation.gpu_share:
                used, memory = self.shares.get(index, (0.0, 0))
                self.shares[index] = (
                    used + allocation.gpu_share * (1 + self.overhead),
                    memory + allocation.gpu_memory_mib,
                )
        self.free_cpus -= allocation.cpus
        self.free_memory_mib -= allocation.memory_mib

    def give_back(self, allocation: Allocation) -> None:
        for index in allocation.gpu_indices:
            if allocation.gpu_share and index in self.shares:
                used, memory = self.shares[index]
                used -= allocation.gpu_share * (1 + self.overhead)
                memory -= allocation.gpu_memory_mib
                if used > 1e-9 or memory > 0:
                    self.shares[index] = (used, memory)
                    continue
                del self.shares[index]
            if index in self.free_gpus and not self.free_gpus[index]:
                self.free_gpus[index] = True
                self.free_count += 1
        self.free_cpus += allocation.cpus
        self.free_memory_mib += allocation.memory_mib

    def copy(self) -> NodeCapacity:
        return NodeCapacity(
            self.node,
            dict(self.free_gpus),
            self.free_cpus,
            self.free_memory_mib,
            self.free_count,
            dict(self.shares),
            self.overhead,
        )


class Ledger:
    """Free capacity of every node, grouped by cluster, for one scheduling cycle."""

    def __init__(self, nodes: Iterable[NodeView], sharing_overhead: float = 0.0) -> None:
        self.by_name: dict[str, NodeCapacity] = {}
        self.by_cluster: dict[str, list[NodeCapacity]] = {}
        for node in sorted(nodes, key=lambda n: (n.cluster, n.name)):
            capacity = NodeCapacity(
                node=node,
                free_gpus={gpu.index: True for gpu in node.gpus},
                free_cpus=node.cpus,
                free_memory_mib=node.memory_mib,
                free_count=len(node.gpus),
                overhead=sharing_overhead,
            )
            self.by_name[node.name] = capacity
            if node.schedulable:  # others only matter for what running jobs hold
                self.by_cluster.setdefault(node.cluster, []).append(capacity)

    @classmethod
    def idle(cls, nodes: tuple[NodeView, ...], sharing_overhead: float = 0.0) -> Ledger:
        """A ledger of ``nodes`` with everything free.

        The last one built is kept and copied (for the same tuple object and overhead):
        a replay passes the same nodes every cycle and the sort and set-up are then paid
        once.
        """
        global _last_idle
        if _last_idle is None or _last_idle[0] is not nodes or _last_idle[1] != sharing_overhead:
            _last_idle = (nodes, sharing_overhead, cls(nodes, sharing_overhead))
        return _last_idle[2].copy()

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, sharing_overhead: float = 0.0) -> Ledger:
        """Capacity left after subtracting what running jobs hold."""
        ledger = cls.idle(snapshot.nodes, sharing_overhead)
        for job in snapshot.running:
            ledger.take(job.allocations)
        return ledger

    def copy(self) -> Ledger:
        """An independent ledger to try futures on (reservations, estimates)."""
        clone = Ledger(())
        clone.by_name = {name: capacity.copy() for name, capacity in self.by_name.items()}
        clone.by_cluster = {
            cluster: [clone.by_name[c.node.name] for c in capacities] for cluster, capacities in self.by_cluster.items()
        }
        return clone

    def first_fit(self, job: PendingJob, held: Mapping[str, Allocation] | None = None) -> Start | None:
        """Place ``job`` on the first nodes (by name) that fit; see :meth:`place`."""
        return self.place(job, held, Strategy.FIRST)

    def place(
        self, job: PendingJob, held: Mapping[str, Allocation] | None = None, strategy: Strategy | None = None
    ) -> Start | None:
        """Place all ``job.nodes`` shares at once inside one cluster, or nothing (gang).

        ``strategy`` orders the candidate nodes: ``PACK`` (the default) tries the nodes
        with the fewest free GPUs first, so jobs fill partly used nodes and whole nodes
        stay free for large jobs; ``SPREAD`` the most free first; ``FIRST`` by name.
        With several clusters, ``PACK`` picks the one that leaves the fewest free GPUs
        on the chosen nodes. GPUs go in index order. ``held`` maps node names to what
        reservations keep back there (see :meth:`NodeCapacity.fit`). Deterministic for
        a given ledger.
        """
        strategy = strategy or Strategy.PACK
        best: tuple[int, Start] | None = None
        need = job.gpus_per_node
        for cluster, capacities in self.by_cluster.items():
            if job.gpu_share:
                candidates = [c for c in capacities if c.free_count >= need or c.shares]
            else:  # the common case, tested without the share condition: one node at a time
                candidates = [c for c in capacities if c.free_count >= need]
            if len(candidates) < job.nodes:
                continue
            if strategy is Strategy.PACK:
                candidates.sort(key=lambda c: c.free_count)
            elif strategy is Strategy.SPREAD:
                candidates.sort(key=lambda c: -c.free_count)
            allocations: list[Allocation] = []
            leftover = 0
            for capacity in candidates:
                allocation = capacity.fit(job, held.get(capacity.node.name) if held else None)
                if allocation is not None:
                    allocations.append(allocation)
                    leftover += capacity.free_count - len(allocation.gpu_indices)
                    if len(allocations) == job.nodes:
                        break
            if len(allocations) < job.nodes:
                continue
            start = Start(job.id, cluster, tuple(allocations))
            if strategy is not Strategy.PACK:
                return start
            if best is None or leftover < best[0]:
                best = (leftover, start)
        return best[1] if best else None

    def commit(self, start: Start) -> None:
        """Mark a start's GPUs, CPUs and memory as taken."""
        self.take(start.allocations)

    def take(self, allocations: Iterable[Allocation]) -> None:
        for allocation in allocations:
            capacity = self.by_name.get(allocation.node)
            if capacity is not None:
                capacity.take(allocation)

    def release(self, allocations: Iterable[Allocation]) -> None:
        """Give back what a job held (it ended)."""
        for allocation in allocations:
            capacity = self.by_name.get(allocation.node)
            if capacity is not None:
                capacity.give_back(allocation)


_last_idle: tuple[tuple[NodeView, ...], float, Ledger] | None = None


class IdleCluster:
    """Answers "could this job start if every schedulable node were idle?".

    Tells "waiting for busy resources" apart from "no node that is up can ever hold
    this", which matters both for the reason a user sees and for queue blocking. Built
    once per cycle and never modified; answers are cached per request shape.
    """

    def __init__(self, nodes: Iterable[NodeView], sharing_overhead: float = 0.0) -> None:
        self._ledger = Ledger(nodes, sharing_overhead)
        self._answers: dict[tuple[object, ...], bool] = {}

    @classmethod
    def shared(cls, nodes: tuple[NodeView, ...], sharing_overhead: float = 0.0) -> IdleCluster:
        """The same answers as ``IdleCluster(nodes, sharing_overhead)``, reused while the
        same tuple object and overhead are passed (the answers depend on nothing else):
        a replay builds it once."""
        global _last_cluster
        if _last_cluster is None or _last_cluster[0] is not nodes or _last_cluster[1] != sharing_overhead:
            _last_cluster = (nodes, sharing_overhead, cls(nodes, sharing_overhead))
        return _last_cluster[2]

    def fits(self, job: PendingJob, shape: tuple[object, ...] | None = None) -> bool:
        """Whether ``job`` fits the idle cluster (``shape``: its ``request_shape``, if known)."""
        if shape is None:
            shape = request_shape(job)
        answer = self._answers.get(shape)
        if answer is None:
            answer = self._answers[shape] = self._ledger.first_fit(job) is not None
        return answer


_last_cluster: tuple[tuple[NodeView, ...], float, IdleCluster] | None = None


def request_shape(job: PendingJob) -> tuple[object, ...]:
    """The part of a request that decides where it can fit."""
    return (
        job.nodes,
        job.gpus_per_node,
        job.cpus_per_node,
        job.memory_mib_per_node,
        job.gpu_model,
        job.min_gpu_memory_mib,
        job.min_compute_capability,
        job.gpu_share,
        job.gpu_memory_mib_share,
        job.node_labels,
    )
