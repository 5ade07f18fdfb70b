"""Fragmentation-aware placement: put each job where it strands the least capacity.

Shared GPUs fragment: a GPU with 0.3 left cannot hold the 0.5 shares most jobs ask for,
a node whose CPUs are all taken strands its free GPUs, and a node with one busy GPU can
no longer hold an 8-GPU job. Packing by free-GPU count (``pack``) does not see any of
this. Following FGD (Weng et al., "Beware of Fragmentation", USENIX ATC'23), this
module measures a node's **fragmentation** against the workload the cluster serves: for
each request shape ``m`` of the :class:`WorkloadMix`, the free GPU capacity on the node
that ``m`` could not use (all of it when not one ``m`` fits the node: too few CPUs,
memory, matching or whole GPUs; else, for a fractional ``m``, the GPUs whose free part is
smaller than ``m``'s share, and for a whole-GPU ``m`` the partly used ones), weighted by
how common ``m`` is. A job goes where placing it raises that sum the least (usually:
lowers it the most, by filling capacity that was stranded anyway).

Beyond FGD (each measured on the openb trace, see docs/benchmarks.md and CHANGELOG.md):

- **CPU and memory feed**: FGD asks only whether one more request of a shape fits. A
  node with 8 free GPUs and CPUs for one more request strands 7 of them all the same;
  the part of the usable GPU capacity the node's free CPUs and memory cannot feed
  counts as stranded too, with weight :data:`FEED_WEIGHT` (more makes nodes with spare
  CPUs so attractive that the few nodes able to hold the largest requests get broken).
- **The mix is learned online** from what the cluster runs and what waits (running
  allocations and pending requests, the most common shapes covering
  :data:`MIX_COVERAGE`), not given in advance from a trace; it is replaced (and the
  memo with it) only when it drifts by more than :data:`MIX_DRIFT`.
- **Demand that names models stays in view**: running jobs count in the mix with the
  models their request accepted (``RunningJob.gpu_model``), not as "any"; a shape's
  stranded capacity on a node none of whose GPUs it accepts is all of it, as FGD has it
  (counting none of it instead left 8.40% unallocated at 100% arrived on the seed below).
- **Near-ties go to the least claimed, then the smallest node**: placements whose
  fragmentation differs by less than :data:`TOLERANCE_UNITS` count as equal; among them
  the node whose GPUs the mix's model-naming demand claims least (:meth:`Scorer.claim`:
  on the openb trace with 20% of pods naming models, unconstrained pods otherwise filled
  the small T4, P100 and V100 nodes that those pods alone can use: seed 42 left 12.05%
  of GPUs unallocated at 100% arrived, 7.02% with the models in the mix, 5.18% with the
  claim too), then the node with the fewest GPUs, then the fewest CPUs, then the first
  by name wins: the largest nodes stay whole for the largest requests, and equal nodes
  fill one at a time.

Cost: a node's fragmentation depends only on its free state (free CPUs, memory and the
free part of each GPU, by GPU kind), and many nodes share one state (idle nodes, full
nodes); values are memoised per state while the mix stays, placements per request
shape and state (:meth:`Scorer.options_for`), and the ledger keeps one heap of ranked
nodes per request shape (``scheduler.core.placement.Ledger._ranked``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from scheduler.core.types import Allocation, GpuView, PendingJob, RunningJob, gpu_model_choices

#: A GPU's capacity in integer units (milli-GPUs, as Kubernetes and the openb trace
#: count them): shares are summed exactly, in any order.
SHARE_UNITS = 1000


def share_units(share: float) -> int:
    """A fractional request in :data:`SHARE_UNITS` (at least one unit)."""
    return max(1, round(share * SHARE_UNITS))


#: One GPU in a node state: (GPU kind, free units, GPU memory reserved by shares).
GpuState = tuple[int, int, int]
#: A node's free state: (free CPUs, free memory MiB, its GPUs sorted).
NodeState = tuple[int, int, tuple[GpuState, ...]]
#: A request shape of the mix: (units per GPU (SHARE_UNITS for whole GPUs), GPUs,
#: CPUs, memory MiB, GPU model or ``A|B`` set ("" any), fractional?).
Shape = tuple[int, int, int, int, str, bool]

_kind_ids: dict[tuple[str, int, tuple[int, int], bool, str, bool, bool], int] = {}
_kinds: list[GpuView] = []


def gpu_kind(gpu: GpuView) -> int:
    """A small integer standing for every property of ``gpu`` but its index: GPUs of one
    kind are interchangeable for placement."""
    key = (gpu.model, gpu.memory_mib, gpu.compute_capability, gpu.healthy, gpu.sharing, gpu.exclusive, gpu.mig_slice)
    kind = _kind_ids.get(key)
    if kind is None:
        kind = _kind_ids[key] = len(_kinds)
        _kinds.append(gpu)
    return kind


def kind_gpu(kind: int) -> GpuView:
    """A GPU of kind ``kind`` (its index is the first one seen of that kind)."""
    return _kinds[kind]


def shape_of_job(job: PendingJob) -> Shape:
    """The per-node shape of a pending request."""
    if job.gpu_share:
        return (share_units(job.gpu_share), 1, job.cpu_millis_per_node, job.memory_mib_per_node, job.gpu_model, True)
    return (SHARE_UNITS, job.gpus_per_node, job.cpu_millis_per_node, job.memory_mib_per_node, job.gpu_model, False)


def shapes_of_allocations(allocations: Iterable[Allocation], model: str = "") -> Iterator[Shape]:
    """The per-node shapes a running job holds; ``model``: the models its request
    accepted (``RunningJob.gpu_model``, "" any)."""
    for a in allocations:
        if a.gpu_share:
            yield (share_units(a.gpu_share), 1, a.cpu_millis, a.memory_mib, model, True)
        else:
            yield (SHARE_UNITS, len(a.gpu_indices), a.cpu_millis, a.memory_mib, model, False)


#: The mix keeps the most common shapes covering this fraction of all requests...
MIX_COVERAGE = 0.99
#: ... and at most this many of them (each costs a little on every scored node state).
MIX_LIMIT = 128
#: A new mix replaces the scorer's only when their weights differ by more than this in
#: total (0 to 2): a slowly changing workload keeps its memoised values.
MIX_DRIFT = 0.05
#: How much the capacity a node's CPUs and memory cannot feed counts, next to FGD's
#: measure (0: FGD's, 1: only the feed).
FEED_WEIGHT = 0.05
#: The memos of a scorer (fragmentation per node state; placements per request shape
#: and state) are emptied when they grow past this many entries.
MEMO_LIMIT = 200_000
#: Placements whose fragmentation differs by less than this many GPU units (0.04 GPU)
#: count as equally good; the smallest node among them wins.
TOLERANCE_UNITS = 40


class WorkloadMix:
    """The request shapes the cluster serves and how common each is: the most common
    shapes covering ``coverage`` of all requests (at most ``limit``), weighted by their
    counts."""

    def __init__(self, counts: Mapping[Shape, int], *, coverage: float = MIX_COVERAGE, limit: int = MIX_LIMIT) -> None:
        total = sum(counts.values())
        kept: list[tuple[Shape, int]] = []
        covered = 0
        for shape, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            if kept and (covered >= coverage * total or len(kept) >= limit):
                break
            kept.append((shape, count))
            covered += count
        self.shapes: tuple[tuple[Shape, float], ...] = tuple((shape, count / covered) for shape, count in kept)

    def distance(self, other: WorkloadMix) -> float:
        """How different two mixes are: the sum of their weights' differences (0 to 2)."""
        mine = dict(self.shapes)
        theirs = dict(other.shapes)
        return sum(abs(mine.get(shape, 0.0) - theirs.get(shape, 0.0)) for shape in mine.keys() | theirs.keys())

    @classmethod
    def of(cls, running: Iterable[RunningJob], pending: Iterable[PendingJob]) -> WorkloadMix:
        """The mix of what runs (its allocations and the models it accepted) and what
        waits (its requests)."""
        counts: dict[Shape, int] = {}
        for job in running:
            model = job.gpu_model
            for a in job.allocations:  # shapes_of_allocations, inlined: one per running job
                if a.gpu_share:
                    shape = (share_units(a.gpu_share), 1, a.cpu_millis, a.memory_mib, model, True)
                else:
                    shape = (SHARE_UNITS, len(a.gpu_indices), a.cpu_millis, a.memory_mib, model, False)
                counts[shape] = counts.get(shape, 0) + 1
        return cls.counted(counts, pending)

    @classmethod
    def counted(cls, running: Mapping[Shape, int], pending: Iterable[PendingJob]) -> WorkloadMix:
        """The mix of running shapes already counted and the ``pending`` requests."""
        counts = dict(running)
        for job in pending:
            shape = shape_of_job(job)
            counts[shape] = counts.get(shape, 0) + 1
        return cls(counts)


def _accepts(shape: Shape, gpu: GpuView) -> bool:
    """Whether a GPU of this kind could serve ``shape`` at all."""
    model = shape[4]
    if shape[5] and not gpu.shared:
        return False
    if not shape[5] and not gpu.exclusive:
        return False
    if gpu.mig_slice and not model:
        return False  # as ``PendingJob.accepts``: a slice serves only a request naming it
    if model and gpu.model != model and gpu.model not in gpu_model_choices(model):
        return False
    return gpu.healthy


class Scorer:
    """Fragmentation of node states against one :class:`WorkloadMix`, memoised.

    ``Scorer.for_mix`` keeps the last scorer while the mix is the same, so consecutive
    cycles (and a replay's thousands of them) share the memo.
    """

    def __init__(self, mix: WorkloadMix) -> None:
        self.mix = mix
        #: Whether any shape of the mix names models (else every ``claim`` is 0).
        self.names_models = any(shape[4] for shape, _ in mix.shapes)
        self._values: dict[NodeState, float] = {}
        self._options: dict[tuple[object, ...], dict[NodeState, Option | None]] = {}
        self._accepts: dict[tuple[Shape, int], bool] = {}

    @classmethod
    def for_mix(cls, mix: WorkloadMix) -> Scorer:
        global _last_scorer
        if _last_scorer is None or _last_scorer.mix.distance(mix) > MIX_DRIFT:
            _last_scorer = cls(mix)
        return _last_scorer

    def options_for(self, key: tuple[object, ...]) -> dict[NodeState, Option | None]:
        """Where ``score_placement`` results for requests of one shape (``key``: the
        placement's ``request_shape``) are kept, by node state: they depend on nothing
        else while the mix stays, and from one job to the next (and one cycle to the
        next) most nodes keep their state. A memo that grows past :data:`MEMO_LIMIT`
        states is emptied."""
        options = self._options.get(key)
        if options is None or len(options) > MEMO_LIMIT:
            options = self._options[key] = {}
        return options

    def claim(self, kinds: tuple[int, ...], supply: Mapping[int, int]) -> int:
        """How strongly the mix's demand that names models claims GPUs of ``kinds``
        (in millionths): per such shape, its GPUs per request times its weight, spread
        over the ``supply`` (GPUs per kind in the cluster) of the kinds it accepts."""
        total = 0.0
        present = set(kinds)
        for shape, weight in self.mix.shapes:
            if not shape[4]:
                continue
            accepted = 0
            here = False
            for kind, count in supply.items():
                if _accepts(shape, _kinds[kind]):
                    accepted += count
                    here = here or kind in present
            if here:
                total += weight * shape[0] * shape[1] / SHARE_UNITS / accepted
        return round(total * 1_000_000)

    def fragmentation(self, state: NodeState) -> float:
        """Weighted free GPU capacity (in units) on a node in ``state`` that the mix's
        shapes could not use."""
        value = self._values.get(state)
        if value is None:
            if len(self._values) > MEMO_LIMIT:
                self._values.clear()
            value = self._values[state] = self._compute(state)
        return value

    def _compute(self, state: NodeState) -> float:
        free_cpu_millis, free_memory, gpus = state
        total = 0
        for _, free, _ in gpus:
            total += free
        if total == 0:
            return 0.0
        value = 0.0
        for shape, weight in self.mix.shapes:
            value += weight * self._stranded(shape, free_cpu_millis, free_memory, gpus, total)
        return value

    def _stranded(
        self, shape: Shape, free_cpu_millis: int, free_memory: int, gpus: tuple[GpuState, ...], total: int
    ) -> float:
        """The free GPU units ``shape`` could not use on a node: all of them if not one
        such request fits; else FGD's measure (those on GPUs it cannot take: too small a
        free part, a kind it does not accept, partly used for a whole-GPU shape) moved
        :data:`FEED_WEIGHT` of the way toward the feed measure (the part of the usable
        capacity beyond what the node's free CPUs and memory can feed)."""
        units, count, cpus, memory = shape[0], shape[1], shape[2], shape[3]
        if count == 0 or cpus > free_cpu_millis or memory > free_memory:
            return total  # cannot use any of the node's GPUs
        accepts = self._accepts
        usable_units = 0
        fits = 0  # requests the GPUs alone could hold
        usable = 0
        for kind, free, _ in gpus:
            if free < units:
                continue
            key = (shape, kind)
            ok = accepts.get(key)
            if ok is None:
                ok = accepts[key] = _accepts(shape, _kinds[kind])
            if ok:
                usable += 1
                usable_units += free
                if shape[5]:
                    fits += free // units
        if not shape[5]:
            fits = usable // count
        if fits == 0:
            return total
        fed = fits
        if cpus:
            fed = min(fed, free_cpu_millis // cpus)
        if memory:
            fed = min(fed, free_memory // memory)
        fgd = total - usable_units
        # what the fed requests can reach: their share of the usable GPUs, or their GPUs
        reached = usable_units * fed / fits if shape[5] else float(fed * count * units)
        return fgd + FEED_WEIGHT * (usable_units - reached)


_last_scorer: Scorer | None = None


#: A scored placement on one node state: (fragmentation added, the GPU entries the job
#: takes there).
Option = tuple[float, tuple[GpuState, ...]]


def equal_within_tolerance(delta: float) -> int:
    """The bin of a fragmentation change: placements in one bin count as equally good."""
    return math.floor(delta / TOLERANCE_UNITS + 0.5)


def score_placement(job: PendingJob, state: NodeState, scorer: Scorer) -> Option | None:
    """How placing one node's share of ``job`` on a node in ``state`` changes its
    fragmentation, and which GPUs it takes; ``None`` if it does not fit.

    A fractional job tries each distinct GPU state it fits on (ties: the fullest GPU); a
    whole-GPU job takes free GPUs of the kinds it accepts, first kinds first."""
    free_cpu_millis, free_memory, gpus = state
    cpus_left = free_cpu_millis - job.cpu_millis_per_node
    memory_left = free_memory - job.memory_mib_per_node
    if cpus_left < 0 or memory_left < 0:
        return None
    before = scorer.fragmentation(state)
    if job.gpus_per_node == 0:
        return (scorer.fragmentation((cpus_left, memory_left, gpus)) - before, ())
    if job.gpu_share:
        need = share_units(job.gpu_share)
        best: Option | None = None
        best_key = (0, 0)
        tried: set[GpuState] = set()
        for position, entry in enumerate(gpus):
            kind, free, memory = entry
            if free < need or entry in tried:
                continue
            tried.add(entry)
            gpu = _kinds[kind]
            if not job.accepts(gpu) or memory + job.gpu_memory_mib_share > gpu.memory_mib:
                continue
            rest = list(gpus)
            rest[position] = (kind, free - need, memory + job.gpu_memory_mib_share)
            rest.sort()
            delta = scorer.fragmentation((cpus_left, memory_left, tuple(rest))) - before
            key = (equal_within_tolerance(delta), free)
            if best is None or key < best_key:
                best, best_key = (delta, (entry,)), key
        return best
    taken: list[GpuState] = []
    rest = []
    wanted = job.gpus_per_node
    for entry in gpus:
        if len(taken) < wanted and entry[1] == SHARE_UNITS and job.accepts(_kinds[entry[0]]):
            taken.append(entry)
            rest.append((entry[0], 0, 0))
        else:
            rest.append(entry)
    if len(taken) < wanted:
        return None
    rest.sort()
    return (scorer.fragmentation((cpus_left, memory_left, tuple(rest))) - before, tuple(taken))
