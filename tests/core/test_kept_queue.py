"""A kept pending queue (``scheduler.core.queue``) never changes a decision.

Over random sequences of cycles, where each cycle's queue is the last one's minus its
starts, plus new jobs and the evicted ones (as a replay does), a cycle that walks a
:class:`PendingQueue` class by class starts, evicts, reserves and ranks exactly what a
cycle handed every pending job does, under every policy knob that shapes the walk.
Jobs come from a few classes, so that many of them are set aside.
"""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, RunningJob, schedule
from scheduler.core.priority import PriorityWeights
from scheduler.core.queue import CLASS_FIELDS, IDENTITY_FIELDS, PendingQueue, class_key, service_level
from scheduler.core.types import Allocation, Decisions, Limits, PendingJob, Snapshot
from tests.builders import T0, node, pending

NODES = (node("a1", gpus=4, cluster="a"), node("a2", gpus=2, cluster="a"), node("b1", gpus=4, cluster="b"))
LEVELS = (3_600, 36_000)


@st.composite
def jobs(draw: st.DrawFn, first_id: int) -> list[PendingJob]:
    made = []
    for offset in range(draw(st.integers(0, 12))):
        throttled = draw(st.integers(0, 6)) == 0
        made.append(
            pending(
                first_id + offset,
                age_rank=draw(st.integers(0, 50)),
                gpus_per_node=draw(st.sampled_from([1, 2, 4])),
                nodes=draw(st.sampled_from([1, 1, 2])),
                walltime_seconds=draw(st.sampled_from([600, 3600])),
                account=draw(st.sampled_from(["x", "y"])),
                qos=draw(st.sampled_from(["", "", "high"])),
                nice=draw(st.sampled_from([0, 0, 50])),
                dependencies=(("afterok", 1),) if draw(st.integers(0, 8)) == 0 else (),
                array_job=7 if throttled else 0,
                array_limit=1 if throttled else 0,
                attained_gpu_s=draw(st.sampled_from([0, 0, 5_000, 50_000])),
            )
        )
    return made


@st.composite
def worlds(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    steps = [
        (draw(jobs(100 * (i + 1))), draw(st.lists(st.booleans(), min_size=12, max_size=12)))
        for i in range(draw(st.integers(1, 5)))
    ]
    policy = Policy(
        strict_order=draw(st.booleans()),
        backfill=draw(st.booleans()),
        reservations=draw(st.sampled_from([1, 2])),
        max_starts=draw(st.sampled_from([1, 3, 1000])),
        priority=draw(st.sampled_from([None, PriorityWeights()])),
        preemption=draw(st.booleans()),
        reclaim=draw(st.booleans()),
        service_levels=draw(st.sampled_from([(), LEVELS])),
        preempt_min_runtime_seconds=draw(st.sampled_from([0, 600])),
        explain=False,
    )
    limits = draw(
        st.sampled_from(
            [{}, {"x": Limits(guaranteed_gpus=4)}, {"y": Limits(max_gpus=4)}, {"x": Limits(max_running_jobs=2)}]
        )
    )
    return steps, policy, limits


def assert_same_decisions(kept: Decisions, full: Decisions) -> None:
    """Everything a caller acts on is equal; reasons and priorities, where the kept
    walk gave them (it skips jobs that cannot start), are those of the full walk."""
    assert kept.starts == full.starts
    assert kept.evictions == full.evictions
    assert kept.reservations == full.reservations
    assert kept.backfilled == full.backfilled
    assert kept.borrowed == full.borrowed
    assert {j: full.pending_reasons[j] for j in kept.pending_reasons} == kept.pending_reasons
    assert {j: full.priorities[j] for j in kept.priorities} == kept.priorities


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_a_kept_queue_decides_what_the_whole_pending_list_decides(world) -> None:  # type: ignore[no-untyped-def]
    steps, policy, limits = world
    queue = PendingQueue(policy.service_levels)
    waiting: dict[int, PendingJob] = {}
    running: dict[int, RunningJob] = {}
    now = T0 + timedelta(hours=1)
    for arriving, ends in steps:
        for job_id, ended in zip(list(running), ends, strict=False):
            if ended:
                del running[job_id]
        for job in arriving:
            waiting[job.id] = job
            queue.add(job)
        world = Snapshot(
            NODES,
            tuple(running.values()),
            tuple(waiting.values()),
            account_limits=limits,
            qos_priorities={"high": 10},
            qos_preempts={"high": frozenset({""})},
            dependency_states={1: "RUNNING"},
        )
        full = schedule(world, policy, now)
        kept = schedule(replace(world, pending=(), queue=queue), policy, now)
        assert_same_decisions(kept, full)
        for eviction in full.evictions:
            victim = running.pop(eviction.victim_id)
            ran = int((now - victim.started_at).total_seconds()) if victim.started_at else 0
            back = PendingJob(
                victim.id,
                T0,
                gpus_per_node=victim.gpus,
                walltime_seconds=victim.walltime_seconds,
                account=victim.account,
                user=victim.user,
                qos=victim.qos,
                attained_gpu_s=victim.attained_gpu_s + ran * victim.gpus,
            )
            waiting[victim.id] = back
            queue.add(back)
        for start in full.starts:
            job = waiting.pop(start.job_id)
            assert queue.remove(start.job_id) == job
            running[job.id] = RunningJob(
                job.id,
                start.allocations,
                now,
                job.walltime_seconds,
                job.account,
                job.user,
                job.qos,
                job.array_job,
                job.attained_gpu_s,
            )
        assert len(queue) == len(waiting)
        now += timedelta(minutes=20)


@settings(max_examples=100, deadline=None)
@given(worlds())
def test_with_explain_a_kept_queue_gives_every_job_its_reason_and_blockers(world) -> None:  # type: ignore[no-untyped-def]
    steps, policy, limits = world
    policy = replace(policy, explain=True)
    arriving = [job for step, _ in steps for job in step]
    queue = PendingQueue(policy.service_levels)
    for job in arriving:
        queue.add(job)
    world = Snapshot(NODES, (), tuple(arriving), account_limits=limits, dependency_states={1: "RUNNING"})
    now = T0 + timedelta(hours=1)
    assert schedule(replace(world, pending=(), queue=queue), policy, now) == schedule(world, policy, now)


def test_jobs_that_differ_in_anything_but_identity_and_age_are_in_different_classes() -> None:
    job = pending(1, gpus_per_node=2, walltime_seconds=600, account="x")
    other_values: dict[str, Any] = {
        "nodes": 2,
        "gpus_per_node": 4,
        "cpu_millis_per_node": 5,
        "memory_mib_per_node": 5,
        "gpu_model": "L4",
        "min_gpu_memory_mib": 5,
        "min_compute_capability": (8, 0),
        "walltime_seconds": 3600,
        "account": "y",
        "user": "u",
        "qos": "high",
        "nice": 5,
        "dependencies": (("afterok", 3),),
        "gpu_share": 0.5,
        "gpu_memory_mib_share": 5,
        "node_labels": (("rack", "r1"),),
        "array_job": 9,
        "array_limit": 2,
        "reservation": "r",
    }
    assert set(other_values) == set(CLASS_FIELDS)  # a new PendingJob field needs a place in the class key
    assert {f.name for f in fields(PendingJob)} == set(CLASS_FIELDS) | IDENTITY_FIELDS
    for name, value in other_values.items():
        assert class_key(replace(job, **{name: value})) != class_key(job), name
    assert class_key(replace(job, id=2, submitted_at=T0 + timedelta(days=1))) == class_key(job)
    # service counts by level only
    assert class_key(replace(job, attained_gpu_s=100), LEVELS) == class_key(job, LEVELS)
    assert class_key(replace(job, attained_gpu_s=4_000), LEVELS) != class_key(job, LEVELS)


def test_service_levels_count_the_thresholds_a_job_has_reached() -> None:
    assert [service_level(s, LEVELS) for s in (0, 3_599, 3_600, 35_999, 36_000, 10**9)] == [0, 0, 1, 1, 2, 2]
    assert service_level(10**9, ()) == 0


def test_a_requeued_job_goes_back_to_its_place_by_age_and_any_job_can_leave() -> None:
    queue = PendingQueue()
    young, old, oldest = pending(3, age_rank=30), pending(2, age_rank=20), pending(1, age_rank=10)
    for job in (old, young, oldest):
        queue.add(job)
    (members,) = queue.classes.values()
    assert [j.id for j in members.jobs] == [1, 2, 3]
    assert queue.remove(2) == old
    assert [j.id for j in queue.jobs()] == [1, 3]
    with pytest.raises(ValueError, match="already queued"):
        queue.add(young)
    with pytest.raises(KeyError):
        queue.remove(2)
    assert 1 in queue and 2 not in queue and len(queue) == 2


def test_a_class_set_aside_is_walked_again_when_an_eviction_frees_room_for_it() -> None:
    """A (1 GPU) cannot start and its class is set aside; B's QOS evicts the 4-GPU job,
    B takes 2 of the 4 GPUs freed and A's reservation holds one: A's younger classmate C
    starts on the last one, as in the full walk."""
    a1 = node("a1", gpus=4)
    hog = RunningJob(9, (Allocation("a1", (0, 1, 2, 3)),), T0, 7200, "y", "y")
    a, b, c = (
        pending(1, age_rank=1, walltime_seconds=7200),
        pending(2, age_rank=2, gpus_per_node=2, qos="high"),
        pending(3, age_rank=3, walltime_seconds=7200),
    )
    queue = PendingQueue()
    for job in (a, b, c):
        queue.add(job)
    world = Snapshot((a1,), (hog,), (a, b, c), qos_preempts={"high": frozenset({""})})
    policy = Policy(backfill=True, preemption=True, explain=False)
    now = T0 + timedelta(minutes=10)
    full = schedule(world, policy, now)
    assert [s.job_id for s in full.starts] == [2, 3] and [e.victim_id for e in full.evictions] == [9]
    assert_same_decisions(schedule(replace(world, pending=(), queue=queue), policy, now), full)
