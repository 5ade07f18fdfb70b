"""Which of the nodes that fit a job it lands on: pack, spread, first (fragmentation has its own tests)."""

from __future__ import annotations

import pytest

from scheduler.core import Policy, schedule
from scheduler.core.types import PlacementStrategy
from tests.builders import T0, node, pending, running, snapshot

PACK, SPREAD, FIRST, FRAGMENTATION = (Policy(placement=s) for s in PlacementStrategy)

CASES = [
    (
        "pack: a 1-GPU job goes to the node with the fewest free GPUs",
        PACK,
        [node("n1"), node("n2")],
        [running(90, ("n2", (0, 1, 2, 3, 4, 5)))],
        [pending(1)],
        {1: ["n2"]},
    ),
    (
        "spread: a 1-GPU job goes to the emptiest node",
        SPREAD,
        [node("n1"), node("n2")],
        [running(90, ("n1", (0, 1)))],
        [pending(1)],
        {1: ["n2"]},
    ),
    (
        "first: node name order whatever the load",
        FIRST,
        [node("n1"), node("n2")],
        [running(90, ("n2", (0, 1, 2, 3, 4, 5)))],
        [pending(1)],
        {1: ["n1"]},
    ),
    (
        "pack keeps a whole node free for a later 8-GPU job",
        PACK,
        [node("n1"), node("n2")],
        [running(90, ("n2", (0, 1, 2, 3)))],
        [pending(1, gpus_per_node=4), pending(2, gpus_per_node=8)],
        {1: ["n2"], 2: ["n1"]},
    ),
    (
        "first-fit fragments: the same queue leaves the 8-GPU job waiting",
        FIRST,
        [node("n1"), node("n2")],
        [running(90, ("n2", (0, 1, 2, 3)))],
        [pending(1, gpus_per_node=4), pending(2, gpus_per_node=8)],
        {1: ["n1"]},
    ),
    (
        "pack: a gang job takes the fullest nodes that still fit",
        PACK,
        [node("a"), node("b"), node("c")],
        [running(90, ("b", (0, 1, 2, 3, 4, 5))), running(91, ("c", (0, 1, 2, 3)))],
        [pending(1, nodes=2, gpus_per_node=2)],
        {1: ["b", "c"]},
    ),
    (
        "pack across clusters: the cluster left with the fewest free GPUs",
        PACK,
        [node("a1", cluster="a"), node("b1", cluster="b")],
        [running(90, ("b1", (0, 1, 2, 3, 4)))],
        [pending(1, gpus_per_node=2)],
        {1: ["b1"]},
    ),
]


@pytest.mark.parametrize("case_id,policy,nodes,busy,jobs,placed", CASES, ids=[c[0] for c in CASES])
def test_placement_strategy(case_id, policy, nodes, busy, jobs, placed):  # type: ignore[no-untyped-def]
    decisions = schedule(snapshot(nodes, jobs, busy), policy, T0)
    assert {s.job_id: [a.node for a in s.allocations] for s in decisions.starts} == placed
