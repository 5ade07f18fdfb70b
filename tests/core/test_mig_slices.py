"""MIG slices are fractions of a GPU: a request for N GPUs (of any model, or of a GPU's
model) means N whole GPUs; only a request that names a slice's label
(``<model>/<profile>``) takes slices. Placement, why-pending and the planner agree."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.types import GpuView, NodeView, PlacementStrategy
from tests.builders import T0, node, pending, snapshot

SLICE = "A100-40GB/3g.20gb"


def mig_node(name: str = "a100-04", slices: int = 16) -> NodeView:
    """A node whose eight A100s are each split into two 3g.20gb slices (the demo's a100-04):
    only the slices are allocatable, at indices 8 and up."""
    gpus = tuple(GpuView(8 + i, SLICE, 20480, (8, 0), mig_slice=True) for i in range(slices))
    return replace(node(name, gpus=0), gpus=gpus)


def started_on(nodes: list[NodeView], job, policy: Policy) -> list[str]:  # type: ignore[no-untyped-def]
    decisions = schedule(snapshot(nodes, [job], []), policy, T0)
    return [a.node for s in decisions.starts for a in s.allocations]


POLICIES = [Policy(placement=strategy) for strategy in PlacementStrategy]


@pytest.mark.parametrize("policy", POLICIES, ids=[p.placement.value for p in POLICIES])
@pytest.mark.parametrize(
    "case_id,job,placed",
    [
        ("1 GPU of any model takes a whole GPU, not a slice", pending(1), ["h100-01"]),
        ("a 9-GPU job of any model fits nowhere: 16 slices are not 9 GPUs", pending(1, gpus_per_node=9), []),
        ("the slices' parent model means its whole GPUs", pending(1, gpu_model="A100-40GB"), []),
        ("naming the slice profile takes slices", pending(1, gpu_model=SLICE, gpus_per_node=9), ["a100-04"]),
        ("a choice that names the slice may take one", pending(1, gpu_model=f"L4|{SLICE}"), ["a100-04"]),
    ],
)
def test_whole_gpu_requests_never_get_mig_slices(case_id, job, placed, policy):  # type: ignore[no-untyped-def]
    # a100-04 first by name and emptiest, so each strategy would pick it if slices counted
    assert started_on([mig_node(), node("h100-01")], job, policy) == placed


def test_why_pending_counts_whole_gpus_not_slices() -> None:
    job = pending(1, gpus_per_node=9)
    decisions = schedule(snapshot([mig_node(), node("h100-01")], [job], []), Policy(), T0)
    [blocker] = decisions.blockers[1]
    assert blocker.code == PendingReason.NODES_UNAVAILABLE
    assert blocker.message == "the largest node has 8 GPUs; this job asks for 9 per node"


def test_a_slice_only_cluster_says_it_has_no_whole_gpus() -> None:
    decisions = schedule(snapshot([mig_node()], [pending(1)], []), Policy(), T0)
    assert [b.message for b in decisions.blockers[1]] == ["no node has GPUs"]
