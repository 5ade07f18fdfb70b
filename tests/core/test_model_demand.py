"""Demand that names GPU models stays in view of fragmentation placement.

Part of a workload can use only some models ("L4", "A100-40GB|L4"). The workload mix
counts that demand by the models it accepts, from what waits and from what runs; a job
naming no model is scored against it, and among equally good nodes it takes the GPUs
that the fewest model-naming jobs can use. Whole nodes stay whole for whole-node jobs
all the same, and no placement ever breaks a capacity or a model constraint.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, schedule
from scheduler.core.carry import Carry
from scheduler.core.fragmentation import WorkloadMix, shape_of_job
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
from tests.builders import MODELS, T0, pending

NOW = T0 + timedelta(hours=1)
FRAGMENTATION = Policy(placement=PlacementStrategy.FRAGMENTATION, strict_order=False)
SLICED = "time-slicing"


def gpu_node(name: str, model: str, gpus: int, cpus: int = 64, sharing: str = SLICED) -> NodeView:
    memory, capability = MODELS[model]
    return NodeView(
        name,
        "c1",
        cpus * CPU_MILLIS,
        512_000,
        tuple(GpuView(i, model, memory, capability, sharing=sharing) for i in range(gpus)),
    )


def holding(job_id: int, where: str, gpus: tuple[int, ...], model: str = "", share: float = 0.0) -> RunningJob:
    """A running job holding ``gpus`` of node ``where`` (a ``share`` of one), whose
    request accepted ``model``."""
    allocation = Allocation(where, gpus, CPU_MILLIS, 0, gpu_share=share)
    return RunningJob(job_id, (allocation,), NOW, 3600, gpu_model=model)


def placed(nodes: list[NodeView], running: list[RunningJob], job: PendingJob) -> str:
    (start,) = schedule(Snapshot(tuple(nodes), tuple(running), (job,)), FRAGMENTATION, NOW).starts
    return start.allocations[0].node


def test_the_mix_counts_running_jobs_by_the_models_they_accepted() -> None:
    running = [holding(1, "l4", (0, 1), model="L4"), holding(2, "h", (0, 1))]
    mix = WorkloadMix.of(running, ())
    models = sorted(shape[4] for shape, _ in mix.shapes)
    assert models == ["", "L4"]


def test_a_carrys_mix_counts_the_models_of_what_runs() -> None:
    """A start is kept by the carry before its model is known; the next snapshot, which
    runs it, corrects the count: the carried mix is the one built from scratch."""
    nodes = (gpu_node("l4", "L4", 4, sharing=""), gpu_node("h", "H100-80GB", 4, sharing=""))
    carry = Carry()
    job = pending(1, gpus_per_node=2, gpu_model="L4")
    (start,) = schedule(Snapshot(nodes, (), (job,), carry=carry), FRAGMENTATION, NOW).starts
    running = (RunningJob(1, start.allocations, NOW, 3600, gpu_model="L4"),)
    waiting = (pending(2, gpus_per_node=1),)
    following = Snapshot(nodes, running, waiting, carry=carry)
    carry.ledger(following)  # as the next cycle begins
    assert carry.mix(following).shapes == WorkloadMix.of(running, waiting).shapes


CASES = [
    (
        "a job naming no model leaves whole L4s to the 2-L4 jobs that run: the mix knows they need L4s",
        [gpu_node("a-l4", "L4", 2), gpu_node("b-h100", "H100-80GB", 8), gpu_node("c-l4", "L4", 2)],
        [holding(1, "c-l4", (0, 1), model="L4")],
        pending(2, gpus_per_node=2),
        "b-h100",
    ),
    (
        "the same job lands on the smaller node when what runs could use any model",
        [gpu_node("a-l4", "L4", 2), gpu_node("b-h100", "H100-80GB", 8), gpu_node("c-l4", "L4", 2)],
        [holding(1, "c-l4", (0, 1))],
        pending(2, gpus_per_node=2),
        "a-l4",
    ),
    (
        "among equally good nodes, a share takes the GPU that no model-naming job needs",
        [gpu_node("a-l4", "L4", 2), gpu_node("b-h100", "H100-80GB", 2), gpu_node("c-l4", "L4", 1)],
        [
            holding(1, "c-l4", (0,), model="L4", share=0.5),
            *(holding(10 + i, "c-l4", (0,), share=0.05) for i in range(10)),
        ],
        pending(2, gpu_share=0.2),
        "b-h100",
    ),
    (
        "a share still fills a broken node of a wanted model before it breaks a node that 8-GPU jobs need",
        [
            gpu_node("a-l4", "L4", 8, sharing=""),
            gpu_node("b-h100", "H100-80GB", 8, sharing=""),
            gpu_node("c-l4", "L4", 8, sharing=""),
        ],
        [holding(1, "a-l4", (0, 1, 2, 3), model="L4"), holding(2, "c-l4", tuple(range(8)))],
        pending(3, gpus_per_node=1),
        "a-l4",
    ),
    (
        "the one largest node of ten stays whole for the requests only it can hold, claimed GPUs or not",
        [gpu_node("big-h100", "H100-80GB", 8, cpus=128), *(gpu_node(f"l4-{i}", "L4", 2) for i in range(9))],
        [holding(1, "l4-8", (0, 1), model="L4")],
        pending(2, gpus_per_node=2),
        "l4-0",
    ),
]


@pytest.mark.parametrize(("nodes", "running", "job", "where"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_where_a_job_goes_when_part_of_the_demand_names_models(
    nodes: list[NodeView], running: list[RunningJob], job: PendingJob, where: str
) -> None:
    assert placed(nodes, running, job) == where


# --- Property: no placement breaks a capacity or a model constraint --------------------

MODEL_CHOICES = ["", "", "L4", "H100-80GB", "A100-40GB|L4", "H100-80GB|L4"]

requests = st.one_of(
    st.builds(
        lambda gpus, cpus, model: {"gpus_per_node": gpus, "cpus_per_node": cpus, "gpu_model": model},
        st.integers(0, 4),
        st.integers(0, 24),
        st.sampled_from(MODEL_CHOICES),
    ),
    st.builds(
        lambda share, cpus, model: {"gpu_share": share, "cpus_per_node": cpus, "gpu_model": model},
        st.sampled_from([0.1, 0.25, 0.5, 0.75]),
        st.integers(0, 8),
        st.sampled_from(MODEL_CHOICES),
    ),
)

#: Nodes as (model, GPUs, shared GPUs?, CPUs).
node_shapes = st.tuples(
    st.sampled_from(["L4", "H100-80GB", "A100-40GB"]),
    st.sampled_from([1, 2, 4, 8]),
    st.booleans(),
    st.sampled_from([8, 32, 96]),
)


@settings(max_examples=100, deadline=None)
@given(
    shapes=st.lists(node_shapes, min_size=1, max_size=6),
    rounds=st.lists(st.lists(requests, min_size=1, max_size=12), min_size=1, max_size=3),
    ends=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_property_no_placement_breaks_a_capacity_or_a_model_constraint(
    shapes: list[tuple[str, int, bool, int]], rounds: list[list[dict[str, object]]], ends: list[bool]
) -> None:
    """Cycles with a carry: each offers new jobs to what the last left running (some
    ended); what runs then always fits every node and every job holds only GPUs of a
    model it accepts."""
    nodes = tuple(
        gpu_node(f"n{i}", model, gpus, cpus, SLICED if is_shared else "")
        for i, (model, gpus, is_shared, cpus) in enumerate(shapes)
    )
    by_name = {n.name: n for n in nodes}
    carry = Carry()
    running: list[RunningJob] = []
    for number, asks in enumerate(rounds):
        jobs = tuple(pending(100 * number + i + 1, **ask) for i, ask in enumerate(asks))  # type: ignore[arg-type]
        decisions = schedule(Snapshot(nodes, tuple(running), jobs, carry=carry), FRAGMENTATION, NOW)
        by_id = {j.id: j for j in jobs}
        for start in decisions.starts:
            job = by_id[start.job_id]
            for allocation in start.allocations:
                assert all(job.accepts(by_name[allocation.node].gpus[i]) for i in allocation.gpu_indices)
            running.append(RunningJob(job.id, start.allocations, NOW, 60, gpu_model=job.gpu_model))
        assert_fits(by_name, running)
        running = [r for i, r in enumerate(running) if not ends[i % len(ends)]]


def assert_fits(by_name: dict[str, NodeView], running: list[RunningJob]) -> None:
    """No GPU held whole twice or whole and shared, no GPU shared past its capacity, and
    no node's CPUs or memory handed out twice."""
    whole: set[tuple[str, int]] = set()
    units: dict[tuple[str, int], int] = defaultdict(int)
    cpus: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    for job in running:
        for allocation in job.allocations:
            cpus[allocation.node] += allocation.cpu_millis
            memory[allocation.node] += allocation.memory_mib
            for index in allocation.gpu_indices:
                key = (allocation.node, index)
                if allocation.gpu_share:
                    units[key] += round(allocation.gpu_share * 1000)
                else:
                    assert key not in whole
                    whole.add(key)
    assert not whole & units.keys()
    assert all(value <= 1000 for value in units.values())
    assert all(cpus[n] <= by_name[n].cpu_millis and memory[n] <= by_name[n].memory_mib for n in cpus)


def test_a_shape_keeps_the_models_its_request_named() -> None:
    assert shape_of_job(pending(1, gpus_per_node=2, gpu_model="A100-40GB|L4"))[4] == "A100-40GB|L4"
