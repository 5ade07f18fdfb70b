"""The FIFO first-fit policy, as a table of scenarios."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.types import PendingJob, RunningJob
from tests.builders import T0, node, pending, running, snapshot


@dataclass
class Case:
    id: str
    nodes: list
    jobs: list[PendingJob]
    running: list[RunningJob] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    starts: dict[int, list[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)
    reasons: dict[int, PendingReason] = field(default_factory=dict)


CASES = [
    Case(
        "1-GPU job takes the lowest GPU of the first node",
        nodes=[node("n1"), node("n2")],
        jobs=[pending(1, gpus_per_node=1)],
        starts={1: [("n1", (0,))]},
    ),
    Case(
        "8-GPU job skips 4-GPU nodes",
        nodes=[node("a-small", gpus=4), node("b-big", gpus=8)],
        jobs=[pending(1, gpus_per_node=8)],
        starts={1: [("b-big", tuple(range(8)))]},
    ),
    Case(
        "model mismatch: an L4 job skips H100 nodes",
        nodes=[node("h1", model="H100-80GB"), node("l1", gpus=4, model="L4")],
        jobs=[pending(1, gpus_per_node=2, gpu_model="L4")],
        starts={1: [("l1", (0, 1))]},
    ),
    Case(
        "GPU memory too small everywhere: ReqNodeNotAvail, and it does not block the queue",
        nodes=[node("a1", model="A100-40GB")],
        jobs=[pending(1, min_gpu_memory_mib=80_000), pending(2)],
        starts={2: [("a1", (0,))]},
        reasons={1: PendingReason.NODES_UNAVAILABLE},
    ),
    Case(
        "compute capability 9.0 needs Hopper",
        nodes=[node("a1", model="A100-40GB"), node("h1")],
        jobs=[pending(1, min_compute_capability=(9, 0))],
        starts={1: [("h1", (0,))]},
    ),
    Case(
        "GPUs held by running jobs are not given again",
        nodes=[node("n1", gpus=4)],
        running=[running(99, ("n1", (0, 1, 2)))],
        jobs=[pending(1, gpus_per_node=1), pending(2, gpus_per_node=1)],
        starts={1: [("n1", (3,))]},
        reasons={2: PendingReason.RESOURCES},
    ),
    Case(
        "strict FIFO: a small job waits behind a big job that waits for resources",
        nodes=[node("n1", gpus=8)],
        running=[running(99, ("n1", (0,)))],
        jobs=[pending(1, gpus_per_node=8), pending(2, gpus_per_node=1)],
        reasons={1: PendingReason.RESOURCES, 2: PendingReason.PRIORITY},
    ),
    Case(
        "without strict order the small job goes ahead",
        nodes=[node("n1", gpus=8)],
        running=[running(99, ("n1", (0,)))],
        jobs=[pending(1, gpus_per_node=8), pending(2, gpus_per_node=1)],
        policy=Policy(strict_order=False),
        starts={2: [("n1", (1,))]},
        reasons={1: PendingReason.RESOURCES},
    ),
    Case(
        "older job goes first whatever the id order",
        nodes=[node("n1", gpus=1)],
        jobs=[pending(1, age_rank=5), pending(2, age_rank=1)],
        starts={2: [("n1", (0,))]},
        reasons={1: PendingReason.RESOURCES},
    ),
    Case(
        "gang: 2 nodes x 8 GPUs start together on two nodes",
        nodes=[node("n1"), node("n2"), node("n3")],
        jobs=[pending(1, nodes=2, gpus_per_node=8)],
        starts={1: [("n1", tuple(range(8))), ("n2", tuple(range(8)))]},
    ),
    Case(
        "gang: all or nothing when only one node is free",
        nodes=[node("n1"), node("n2")],
        running=[running(99, ("n2", (0,)))],
        jobs=[pending(1, nodes=2, gpus_per_node=8)],
        reasons={1: PendingReason.RESOURCES},
    ),
    Case(
        "gang stays inside one cluster",
        nodes=[node("a1", cluster="a"), node("b1", cluster="b")],
        jobs=[pending(1, nodes=2, gpus_per_node=1)],
        reasons={1: PendingReason.NODES_UNAVAILABLE},
    ),
    Case(
        "drained node is not used",
        nodes=[node("n1", schedulable=False), node("n2")],
        jobs=[pending(1)],
        starts={1: [("n2", (0,))]},
    ),
    Case(
        "unhealthy GPU is skipped",
        nodes=[node("n1", gpus=2, unhealthy=(0,))],
        jobs=[pending(1)],
        starts={1: [("n1", (1,))]},
    ),
    Case(
        "CPU and memory per node are honoured",
        nodes=[node("n1", cpus=8), node("n2", cpus=64)],
        jobs=[pending(1, cpus_per_node=16)],
        starts={1: [("n2", (0,))]},
    ),
    Case(
        "CPU-only job (0 GPUs) needs no GPU",
        nodes=[node("n1", gpus=0)],
        jobs=[pending(1, gpus_per_node=0, cpus_per_node=4)],
        starts={1: [("n1", ())]},
    ),
    Case(
        "max_starts bounds one cycle",
        nodes=[node("n1")],
        jobs=[pending(1), pending(2), pending(3)],
        policy=Policy(max_starts=2),
        starts={1: [("n1", (0,))], 2: [("n1", (1,))]},
        reasons={3: PendingReason.CYCLE_LIMIT},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fifo_first_fit(case: Case) -> None:
    decisions = schedule(snapshot(case.nodes, case.jobs, case.running), case.policy, T0)

    starts = {s.job_id: [(a.node, a.gpu_indices) for a in s.allocations] for s in decisions.starts}
    assert starts == case.starts
    assert {k: v for k, v in decisions.pending_reasons.items() if k in case.reasons} == case.reasons
    assert set(starts) | set(decisions.pending_reasons) == {j.id for j in case.jobs}


def test_start_names_the_cluster_it_placed_on() -> None:
    decisions = schedule(snapshot([node("b1", cluster="b")], [pending(1)]), Policy(), T0)
    assert decisions.starts[0].cluster == "b"
