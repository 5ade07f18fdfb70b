"""A carry (consecutive cycles sharing their ledger) never changes a decision.

Over random sequences of cycles on one cluster, where each cycle's running jobs are the
last cycle's minus some that ended, plus its starts (as a replay does), and sometimes a
job appears from elsewhere, holds a share of a GPU or comes back on other GPUs, every
cycle decides exactly what a cycle without the carry decides.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, RunningJob, schedule
from scheduler.core.carry import Carry
from scheduler.core.types import Allocation, GpuView, Limits, NodeView, PlacementStrategy, Snapshot
from tests.builders import T0, node, pending

NODES = (
    node("a1", gpus=4, cluster="a"),
    node("a2", gpus=2, cluster="a"),
    node("b1", gpus=4, cluster="b"),
    NodeView(
        "s1", "b", 64, 512_000, tuple(GpuView(i, "H100-80GB", 81920, (9, 0), sharing="time-slicing") for i in range(2))
    ),
)


@st.composite
def cycles(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        jobs = [
            pending(
                draw(st.integers(1, 40)),
                gpus_per_node=draw(st.integers(1, 4)),
                nodes=draw(st.integers(1, 2)),
                walltime_seconds=draw(st.sampled_from([600, 3600])),
                account=draw(st.sampled_from(["x", "y"])),
            )
            for _ in range(draw(st.integers(0, 6)))
        ]
        if draw(st.booleans()):
            jobs.append(pending(draw(st.integers(41, 50)), gpu_share=0.4))
        steps.append(
            (
                list({j.id: j for j in jobs}.values()),
                draw(st.lists(st.booleans(), min_size=12, max_size=12)),  # which running jobs end
                draw(st.sampled_from(["none", "outsider", "moved"])),
            )
        )
    policy = Policy(
        backfill=draw(st.booleans()),
        reclaim=draw(st.booleans()),
        preemption=draw(st.booleans()),
        placement=draw(st.sampled_from(list(PlacementStrategy))),
    )
    guarantees = draw(st.sampled_from([{}, {"x": 4}]))
    return steps, policy, guarantees


@settings(max_examples=200, deadline=None)
@given(cycles())
def test_cycles_with_a_carry_decide_what_cycles_without_one_decide(world) -> None:  # type: ignore[no-untyped-def]
    steps, policy, guarantees = world
    limits = {a: Limits(guaranteed_gpus=g) for a, g in guarantees.items()}
    carry = Carry()
    running: dict[int, RunningJob] = {}
    now = T0
    for queue, ends, surprise in steps:
        for job_id, ended in zip(list(running), ends, strict=False):
            if ended:
                del running[job_id]
        if surprise == "outsider" and not any(a.node == "a2" for r in running.values() for a in r.allocations):
            running[900] = RunningJob(900, (Allocation("a2", (0, 1)),), now, 3600, "y", "y")
        if surprise == "moved" and running:
            job_id, job = next(iter(running.items()))
            running[job_id] = replace(job, allocations=())  # the same job, now holding nothing
        queue = [j for j in queue if j.id not in running]
        world = Snapshot(NODES, tuple(running.values()), tuple(queue), account_limits=limits)
        carried = schedule(replace(world, carry=carry), policy, now)
        assert carried == schedule(world, policy, now)
        for eviction in carried.evictions:
            del running[eviction.victim_id]
        by_id = {j.id: j for j in queue}
        for start in carried.starts:
            job = by_id[start.job_id]
            running[job.id] = RunningJob(job.id, start.allocations, now, job.walltime_seconds, job.account, job.user)
        now += timedelta(minutes=5)


def test_the_guarantee_book_is_reused_only_while_the_very_same_jobs_run() -> None:
    carry = Carry()
    limits = {"x": Limits(guaranteed_gpus=2)}
    job = RunningJob(1, (Allocation("a1", (0, 1)),), T0, 3600, "x", "x")
    world = Snapshot(NODES, (job,), (), account_limits=limits)
    assert carry.guarantee_book(world).borrowed == set()
    assert carry.guarantee_book(world).held["x"] == 2
    # the same job id, restarted on more GPUs: a new book, in which it borrows
    bigger = replace(job, allocations=(Allocation("a1", (0, 1, 2)),))
    assert carry.guarantee_book(replace(world, running=(bigger,))).borrowed == {1}
