"""Fragmentation-aware placement: each job goes where it strands the least capacity for
the shapes the cluster runs and queues (``scheduler.core.fragmentation``)."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, schedule
from scheduler.core.fragmentation import (
    MIX_DRIFT,
    Scorer,
    WorkloadMix,
    score_placement,
    shape_of_job,
)
from scheduler.core.placement import Ledger
from scheduler.core.types import (
    CPU_MILLIS,
    Allocation,
    GpuView,
    NodeView,
    PendingJob,
    PlacementStrategy,
    RunningJob,
    Snapshot,
)
from tests.builders import T0, node, pending

NOW = T0 + timedelta(hours=1)
SLICED = "time-slicing"
FRAGMENTATION = Policy(placement=PlacementStrategy.FRAGMENTATION, strict_order=False)
PACK = Policy(placement=PlacementStrategy.PACK, strict_order=False)


def shared(name: str, gpus: int = 2, cpus: int = 64, memory_mib: int = 512_000) -> NodeView:
    return NodeView(
        name,
        "c1",
        cpus * CPU_MILLIS,
        memory_mib,
        tuple(GpuView(i, "L4", 24576, (8, 9), sharing=SLICED) for i in range(gpus)),
    )


def holding(job_id: int, where: str, gpus: tuple[int, ...], share: float = 0.0, cpus: int = 0) -> RunningJob:
    return RunningJob(job_id, (Allocation(where, gpus, cpus * CPU_MILLIS, 0, gpu_share=share),), NOW, 3600)


def placed(
    nodes: list[NodeView], running: list[RunningJob], job: PendingJob, policy: Policy
) -> tuple[str, tuple[int, ...]]:
    (start,) = schedule(Snapshot(tuple(nodes), tuple(running), (job,)), policy, NOW).starts
    (allocation,) = start.allocations
    return allocation.node, allocation.gpu_indices


# Each case: what it shows, the nodes, what already runs, the job, where fragmentation puts
# it, and where pack puts it (the cases where they differ are the point of the strategy).
CASES = [
    (
        "a 0.5 share takes a fresh GPU rather than leave 0.1 that no 0.5 or 0.4 share can use",
        [shared("s1"), shared("s2")],
        [holding(1, "s1", (0,), 0.4), *(holding(10 + i, "s2", (i // 2,), 0.5) for i in range(4))],
        pending(2, gpu_share=0.5),
        ("s1", (1,)),
        ("s1", (0,)),
    ),
    (
        "a CPU-only job goes where its CPUs strand no GPU, not to the node its CPUs would starve",
        [node("n1", gpus=2, cpus=8), node("n2", gpus=8, cpus=64)],
        [holding(1, "n1", (0,), cpus=0), holding(2, "n2", (0,), cpus=8)],
        pending(3, gpus_per_node=0, cpus_per_node=8),
        ("n2", ()),
        ("n1", ()),
    ),
    (
        "with 8-GPU jobs in the mix, a 1-GPU job fills a broken node and keeps the whole one whole",
        [node("n1"), node("n2"), node("n3")],
        [holding(1, "n1", tuple(range(8))), holding(2, "n3", (0, 1, 2, 3))],
        pending(3, gpus_per_node=1),
        ("n3", (4,)),
        ("n3", (4,)),
    ),
    (
        "equally good nodes: the smallest takes the job, the largest stays whole",
        [node("a-big", gpus=8, cpus=128), node("b-small", gpus=2, cpus=32)],
        [],
        pending(1, gpus_per_node=1),
        ("b-small", (0,)),
        ("b-small", (0,)),
    ),
    (
        "a job that accepts a set of models lands on either",
        [node("n1", model="H100-80GB"), node("n2", gpus=2, model="L4")],
        [holding(1, "n1", tuple(range(7)))],
        pending(2, gpus_per_node=2, gpu_model="A100-40GB|L4"),
        ("n2", (0, 1)),
        ("n2", (0, 1)),
    ),
]


@pytest.mark.parametrize(
    ("nodes", "running", "job", "fragmentation", "pack"), [case[1:] for case in CASES], ids=[c[0] for c in CASES]
)
def test_where_fragmentation_and_pack_place_a_job(
    nodes: list[NodeView],
    running: list[RunningJob],
    job: PendingJob,
    fragmentation: tuple[str, tuple[int, ...]],
    pack: tuple[str, tuple[int, ...]],
) -> None:
    assert placed(nodes, running, job, FRAGMENTATION) == fragmentation
    assert placed(nodes, running, job, PACK) == pack


def test_the_score_counts_free_capacity_the_mix_cannot_use() -> None:
    """One shared GPU with 0.3 free on a node: for a mix of 0.5 shares all of it is
    stranded; for 0.25 shares none; filling it with a 0.3 share gains back the 300."""
    ledger = Ledger((shared("s1", gpus=1),))
    ledger.take([Allocation("s1", (0,), gpu_share=0.7)])
    state = ledger.by_name["s1"].state()
    halves = Scorer(WorkloadMix({shape_of_job(pending(1, gpu_share=0.5)): 1}))
    quarters = Scorer(WorkloadMix({shape_of_job(pending(1, gpu_share=0.25)): 1}))
    assert halves.fragmentation(state) == pytest.approx(300)
    assert quarters.fragmentation(state) == pytest.approx(0)
    option = score_placement(pending(2, gpu_share=0.3), state, halves)
    assert option is not None and option[0] == pytest.approx(-300)


def test_a_node_whose_cpus_feed_one_request_strands_part_of_its_gpus() -> None:
    """8 free GPUs, CPUs for one 8-CPU 1-GPU request: FGD counts nothing stranded (one
    fits); the feed measure counts 7 of 8 GPUs, and the score moves toward it."""
    ledger = Ledger((node("n1", cpus=64),))
    ledger.take([Allocation("n1", (), 56 * CPU_MILLIS, 0)])
    mix = WorkloadMix({shape_of_job(pending(1, gpus_per_node=1, cpus_per_node=8)): 1})
    value = Scorer(mix).fragmentation(ledger.by_name["n1"].state())
    assert 0 < value < 7000
    assert value == pytest.approx(0.05 * 7000)


def test_the_mix_keeps_the_common_shapes_and_a_small_drift_keeps_the_scorer() -> None:
    common, rare = shape_of_job(pending(1, gpu_share=0.5)), shape_of_job(pending(1, gpus_per_node=8))
    mix = WorkloadMix({common: 999, rare: 1}, coverage=0.99)
    assert [shape for shape, _ in mix.shapes] == [common]
    first = Scorer.for_mix(WorkloadMix({common: 90, rare: 10}))
    assert Scorer.for_mix(WorkloadMix({common: 91, rare: 9})) is first  # moved 0.02 < MIX_DRIFT
    assert MIX_DRIFT < 0.2
    assert Scorer.for_mix(WorkloadMix({common: 50, rare: 50})) is not first


def test_a_gang_places_as_pack() -> None:
    nodes = [node(f"n{i}") for i in range(1, 5)]
    running = [holding(1, "n2", (0, 1, 2, 3)), holding(2, "n4", (0, 1, 2, 3))]
    job = pending(3, nodes=2, gpus_per_node=4)
    (start,) = schedule(Snapshot(tuple(nodes), tuple(running), (job,)), FRAGMENTATION, NOW).starts
    assert sorted(a.node for a in start.allocations) == ["n2", "n4"]


# --- Property: no placement ever oversubscribes a GPU, CPUs or memory ------------------

#: CPUs per node a request may ask: whole, none, or part of one (Kubernetes millicores).
cpu_requests = st.one_of(st.integers(0, 24), st.sampled_from([0.1, 0.25, 0.5, 1.5, 2.75]))

requests = st.one_of(
    st.builds(
        lambda gpus, cpus, memory: {"gpus_per_node": gpus, "cpus_per_node": cpus, "memory_mib_per_node": memory},
        st.integers(0, 4),
        cpu_requests,
        st.sampled_from([0, 16_000, 100_000]),
    ),
    st.builds(
        lambda share, cpus, gpu_memory: {"gpu_share": share, "cpus_per_node": cpus, "gpu_memory_mib_share": gpu_memory},
        st.sampled_from([0.1, 0.25, 0.3, 0.333, 0.5, 0.75, 0.9]),
        cpu_requests,
        st.sampled_from([0, 4000, 12000]),
    ),
)

#: Nodes as (GPUs, shared GPUs?, CPUs, whole CPUs only?): some like Slurm's.
node_shapes = st.tuples(st.sampled_from([1, 2, 4, 8]), st.booleans(), st.sampled_from([8, 32, 96]), st.booleans())


def cluster_of(shapes: list[tuple[int, bool, int, bool]], **labels: str) -> tuple[NodeView, ...]:
    """L4 nodes of the drawn shapes, carrying ``labels``."""
    return tuple(
        NodeView(
            f"n{i}",
            "c1",
            cpus * CPU_MILLIS,
            200_000,
            tuple(GpuView(g, "L4", 24576, (8, 9), sharing=SLICED if is_shared else "") for g in range(gpus)),
            labels=labels,
            fractional_cpus=not whole_cpus,
        )
        for i, (gpus, is_shared, cpus, whole_cpus) in enumerate(shapes)
    )


@settings(max_examples=120, deadline=None)
@given(
    shapes=st.lists(node_shapes, min_size=1, max_size=5),
    asks=st.lists(requests, min_size=1, max_size=25),
    placement=st.sampled_from(list(PlacementStrategy)),
)
def test_property_no_plan_oversubscribes_a_gpu_cpus_or_memory(
    shapes: list[tuple[int, bool, int, bool]], asks: list[dict[str, object]], placement: PlacementStrategy
) -> None:
    nodes = cluster_of(shapes)
    jobs = tuple(pending(i + 1, **ask) for i, ask in enumerate(asks))  # type: ignore[arg-type]
    decisions = schedule(Snapshot(nodes, (), jobs), Policy(strict_order=False, placement=placement), NOW)
    by_name = {n.name: n for n in nodes}
    whole: set[tuple[str, int]] = set()
    units: dict[tuple[str, int], int] = defaultdict(int)
    gpu_memory: dict[tuple[str, int], int] = defaultdict(int)
    cpus: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    for start in decisions.starts:
        for allocation in start.allocations:
            cpus[allocation.node] += allocation.cpu_millis
            if allocation.cpu_millis % CPU_MILLIS:
                assert by_name[allocation.node].fractional_cpus  # part of a CPU only where one is handed out
            memory[allocation.node] += allocation.memory_mib
            for index in allocation.gpu_indices:
                key = (allocation.node, index)
                if allocation.gpu_share:
                    assert by_name[allocation.node].gpus[index].shared
                    units[key] += round(allocation.gpu_share * 1000)
                    gpu_memory[key] += allocation.gpu_memory_mib
                else:
                    assert key not in whole
                    whole.add(key)
    assert not whole & units.keys()  # a GPU is held whole or shared, never both
    assert all(value <= 1000 for value in units.values())
    assert all(gpu_memory[key] <= by_name[key[0]].gpus[key[1]].memory_mib for key in gpu_memory)
    assert all(cpus[name] <= by_name[name].cpu_millis and memory[name] <= by_name[name].memory_mib for name in cpus)


#: Fragmentation placement with EASY backfill in queue order: blocked jobs get
#: reservations, whose held nodes later starts are placed around.
FRAGMENTATION_BACKFILL = Policy(placement=PlacementStrategy.FRAGMENTATION, backfill=True, reservations=3)


@settings(max_examples=60, deadline=None)
@given(
    shapes=st.lists(node_shapes, min_size=1, max_size=6),
    asks=st.lists(requests, min_size=1, max_size=30),
    ends=st.lists(st.booleans(), min_size=30, max_size=30),
    policy=st.sampled_from([FRAGMENTATION, FRAGMENTATION_BACKFILL]),
    walltimes=st.lists(st.sampled_from([30, 60, 600, 7200]), min_size=30, max_size=30),
)
def test_property_the_kept_heaps_place_as_looking_at_every_node(
    shapes: list[tuple[int, bool, int, bool]],
    asks: list[dict[str, object]],
    ends: list[bool],
    policy: Policy,
    walltimes: list[int],
) -> None:
    """Jobs with a node label every node carries are placed by looking at every node;
    the same jobs without it from the heaps kept across starts and cycles (a carry),
    around the nodes reservations hold back when the policy backfills.
    Two cycles: the second after some of the first's jobs ended, with the jobs again."""
    from scheduler.core.carry import Carry

    nodes = cluster_of(shapes, site="a")

    def cycles(labels: tuple[tuple[str, str], ...]) -> list[list[tuple[int, tuple[Allocation, ...]]]]:
        carry: Carry = Carry()
        running: tuple[RunningJob, ...] = ()
        seen: list[list[tuple[int, tuple[Allocation, ...]]]] = []
        for round_ in range(2):
            jobs = tuple(
                pending(100 * round_ + i + 1, node_labels=labels, walltime_seconds=walltimes[i], **ask)  # type: ignore[arg-type]
                for i, ask in enumerate(asks)
            )
            decisions = schedule(Snapshot(nodes, running, jobs, carry=carry), policy, NOW)
            seen.append([(s.job_id, s.allocations) for s in decisions.starts])
            started = tuple(RunningJob(s.job_id, s.allocations, NOW, 60) for s in decisions.starts)
            running = tuple(r for i, r in enumerate((*running, *started)) if not ends[i % len(ends)])
        return seen

    assert cycles((("site", "a"),)) == cycles(())
