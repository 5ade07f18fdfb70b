"""Queue positions: how many jobs, and GPU-hours, wait their turn ahead of each waiting
job on the nodes it could run on, read off the cycle's own order."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, schedule
from scheduler.core.placement import IdleCluster, request_shape
from scheduler.core.positions import IN_LINE
from scheduler.core.priority import PriorityWeights
from scheduler.core.queue import PendingQueue
from scheduler.core.types import Allocation, Limits, NodeView, RunningJob, Snapshot
from tests.builders import T0, node, pending

HOUR = 3600
POSITIONS = Policy(positions=True)


def busy(node_name: str, gpus: int = 8, job_id: int = 900) -> RunningJob:
    """A running job that holds the first ``gpus`` GPUs of a node."""
    return RunningJob(job_id, (Allocation(node_name, tuple(range(gpus))),), T0, 10 * HOUR)


def shared_node(name: str) -> NodeView:
    """A one-GPU node whose GPU fractional jobs may share."""
    plain = node(name, gpus=1)
    return replace(plain, gpus=tuple(replace(g, sharing="time-slicing") for g in plain.gpus))


def places(world: Snapshot, policy: Policy = POSITIONS) -> dict[int, tuple[int, float]]:
    return schedule(world, policy, T0).positions


FULL_H100 = (node("h1"),)
FULL = (busy("h1"),)

SCENARIOS = [
    pytest.param(
        Snapshot(
            nodes=FULL_H100,
            running=FULL,
            pending=(
                pending(1, walltime_seconds=2 * HOUR),
                pending(2, gpus_per_node=4, walltime_seconds=HOUR),
                pending(3),
            ),
        ),
        {1: (0, 0.0), 2: (1, 2.0), 3: (2, 6.0)},
        id="first in line has none ahead; each later job counts the jobs and GPU x walltime before it",
    ),
    pytest.param(
        Snapshot(
            nodes=(node("h1", cluster="c1"), node("l1", model="L4", cluster="c2")),
            running=(busy("h1", job_id=900), busy("l1", job_id=901)),
            pending=(
                pending(1, gpu_model="L4"),
                pending(2, gpu_model="H100-80GB"),
                pending(3, gpu_model="L4"),
                pending(4),
            ),
        ),
        {1: (0, 0.0), 2: (0, 0.0), 3: (1, 1.0), 4: (3, 3.0)},
        id="jobs that could run on none of its nodes (another cluster, another model) are in another line",
    ),
    pytest.param(
        Snapshot(
            nodes=FULL_H100,
            running=FULL,
            pending=(
                pending(1, dependencies=(("afterok", 50),)),
                pending(2, account="capped", gpus_per_node=2),
                pending(3, gpus_per_node=4),
                pending(4),
            ),
            dependency_states={50: "RUNNING"},
            account_limits={"capped": Limits(max_gpus=1)},
            account_parents={"capped": None},
        ),
        {1: (0, 0.0), 2: (0, 0.0), 3: (0, 0.0), 4: (1, 4.0)},
        id="jobs waiting on a dependency or a quota limit do not stand ahead, but have a place themselves",
    ),
    pytest.param(
        Snapshot(
            nodes=(node("h1", gpus=2),),
            running=(),
            pending=(pending(1), pending(2, gpus_per_node=2), pending(3)),
        ),
        {2: (0, 0.0), 3: (1, 2.0)},
        id="jobs started by this cycle count for nobody and have no place",
    ),
    pytest.param(
        Snapshot(
            nodes=FULL_H100,
            running=FULL,
            pending=(pending(1, gpus_per_node=16), pending(2, gpu_model="L4"), pending(3)),
        ),
        {3: (0, 0.0)},
        id="a job no node could ever hold has no place and is ahead of no one",
    ),
    pytest.param(
        Snapshot(
            nodes=(shared_node("s1"), node("h1"), node("h2")),
            running=(busy("s1", 1), busy("h1", job_id=901), busy("h2", job_id=902)),
            pending=(
                pending(1, gpu_share=0.25, gpu_memory_mib_share=1024, walltime_seconds=4 * HOUR),
                pending(2, nodes=2, gpus_per_node=4, walltime_seconds=3 * HOUR),
                pending(3),
            ),
        ),
        {1: (0, 0.0), 2: (0, 0.0), 3: (2, 25.0)},
        id="GPU-hours are GPUs x walltime: a gang counts all its nodes' GPUs, a share its fraction",
    ),
    pytest.param(
        Snapshot(
            nodes=(shared_node("s1"),),
            running=(busy("s1", 1),),
            pending=(
                pending(1, gpu_share=0.25, gpu_memory_mib_share=1024, walltime_seconds=4 * HOUR),
                pending(2, gpu_share=0.5, gpu_memory_mib_share=1024),
            ),
        ),
        {1: (0, 0.0), 2: (1, 1.0)},
        id="a share of a GPU counts as its fraction of GPU-hours",
    ),
]


@pytest.mark.parametrize(("world", "expected"), SCENARIOS)
def test_queue_positions(world: Snapshot, expected: dict[int, tuple[int, float]]) -> None:
    assert places(world) == expected


def test_positions_follow_the_priority_order_not_the_submit_order() -> None:
    world = Snapshot(
        nodes=FULL_H100,
        running=FULL,
        pending=(pending(1), pending(2), pending(3, qos="high", walltime_seconds=5 * HOUR)),
        qos_priorities={"high": 10, "": 0},
    )
    policy = Policy(positions=True, priority=PriorityWeights(age=0, fairshare=0, jobsize=0, qos=1000))
    assert places(world, policy) == {3: (0, 0.0), 1: (1, 5.0), 2: (2, 6.0)}


def test_without_the_policy_no_position_is_computed() -> None:
    world = Snapshot(nodes=FULL_H100, running=FULL, pending=(pending(1), pending(2)))
    assert schedule(world, Policy(), T0).positions == {}


def test_a_kept_queue_gets_every_job_its_position_as_the_pending_jobs_do() -> None:
    jobs = [pending(i, gpus_per_node=1 + i % 3) for i in range(1, 30)]
    queue = PendingQueue()
    for job in jobs:
        queue.add(job)
    pending_world = Snapshot(nodes=FULL_H100, running=FULL, pending=tuple(jobs))
    kept = Snapshot(nodes=FULL_H100, running=FULL, pending=(), queue=queue)
    no_explain = Policy(positions=True, explain=False)
    assert places(kept, no_explain) == places(pending_world, no_explain)
    assert len(places(kept, no_explain)) == len(jobs)


MODEL_NODES = (
    node("h1", gpus=4),
    node("h2", gpus=8),
    node("a1", gpus=4, model="A100-40GB", cluster="c2"),
    node("l1", gpus=2, model="L4", cluster="c3"),
)


def counted_by_hand(world: Snapshot, policy: Policy) -> dict[int, tuple[int, float]]:
    """The definition, spelt out job by job: the in-line jobs before it in the walk's
    order whose possible nodes share one with its own."""
    decisions = schedule(world, policy, T0)
    idle = IdleCluster(world.nodes)
    order = sorted(world.pending, key=lambda j: (j.submitted_at, j.id))
    found: dict[int, tuple[int, float]] = {}
    for i, job in enumerate(order):
        mine = idle.holders(job, request_shape(job))
        if job.id not in decisions.pending_reasons or not mine:
            continue
        ahead = [
            other
            for other in order[:i]
            if decisions.pending_reasons.get(other.id) in IN_LINE
            and not idle.holders(other, request_shape(other)).isdisjoint(mine)
        ]
        found[job.id] = (len(ahead), sum(o.gpu_amount * o.walltime_seconds for o in ahead) / HOUR)
    return found


@settings(max_examples=80, deadline=None)
@given(
    requests=st.lists(
        st.tuples(
            st.sampled_from([1, 2, 4, 8]),
            st.sampled_from(["", "H100-80GB", "A100-40GB", "L4"]),
            st.sampled_from([HOUR, 3 * HOUR]),
            st.sampled_from([(), (("afterok", 999),)]),
        ),
        min_size=1,
        max_size=25,
    ),
    backfill=st.booleans(),
)
def test_positions_equal_the_definition_counted_job_by_job(requests, backfill) -> None:  # type: ignore[no-untyped-def]
    world = Snapshot(
        nodes=MODEL_NODES,
        running=(busy("h1", 2, job_id=900),),
        pending=tuple(
            pending(i, gpus_per_node=g, gpu_model=m, walltime_seconds=w, dependencies=d)
            for i, (g, m, w, d) in enumerate(requests, start=1)
        ),
        dependency_states={999: "RUNNING"},
    )
    policy = Policy(positions=True, backfill=backfill)
    assert places(world, policy) == counted_by_hand(world, policy)


@settings(max_examples=50, deadline=None)
@given(requests=st.lists(st.tuples(st.integers(1, 8), st.sampled_from([HOUR, 4 * HOUR])), min_size=1, max_size=15))
def test_turning_positions_on_changes_no_decision(requests) -> None:  # type: ignore[no-untyped-def]
    world = Snapshot(
        nodes=(node("n1", gpus=8), node("n2", gpus=4)),
        running=(),
        pending=tuple(pending(i, gpus_per_node=g, walltime_seconds=w) for i, (g, w) in enumerate(requests, start=1)),
    )
    without = schedule(world, Policy(backfill=True), T0)
    with_positions = schedule(world, Policy(backfill=True, positions=True), T0)
    assert (with_positions.starts, with_positions.pending_reasons, with_positions.blockers) == (
        without.starts,
        without.pending_reasons,
        without.blockers,
    )
