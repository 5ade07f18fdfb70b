"""Preemption: a blocked job evicts the fewest, cheapest running jobs its QOS outranks."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, schedule
from scheduler.core.placement import Ledger
from scheduler.core.types import Allocation, RunningJob
from tests.builders import T0, node, pending, snapshot

PREEMPT = Policy(preemption=True)
QOS = {
    "qos_preempts": {"high": frozenset({"low", "scavenger"})},
    "qos_priorities": {"scavenger": 0, "low": 10, "high": 100},
}


def low(job_id: int, node_name: str, gpus: tuple[int, ...], *, qos: str = "low", ran_h: float = 1) -> RunningJob:
    return RunningJob(
        job_id, (Allocation(node_name, gpus),), started_at=T0 - timedelta(hours=ran_h), walltime_seconds=86400, qos=qos
    )


def world(nodes, running, *jobs, **extra):  # type: ignore[no-untyped-def]
    return replace(snapshot(nodes, list(jobs), running), **{**QOS, **extra})


def evicted(decisions) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(e.victim_id for e in decisions.evictions)


def test_high_qos_job_evicts_a_low_job_and_starts_on_its_gpus() -> None:
    decisions = schedule(
        world([node("n1", gpus=2)], [low(90, "n1", (0, 1))], pending(1, gpus_per_node=2, qos="high")), PREEMPT, T0
    )
    assert evicted(decisions) == [90]
    assert [(s.job_id, s.allocations[0].gpu_indices) for s in decisions.starts] == [(1, (0, 1))]
    assert "preempted by job 1" in decisions.evictions[0].reason


def test_takes_no_more_victims_than_needed() -> None:
    running = [low(90, "n1", (0,)), low(91, "n1", (1,)), low(92, "n1", (2,))]
    decisions = schedule(world([node("n1", gpus=4)], running, pending(1, gpus_per_node=2, qos="high")), PREEMPT, T0)
    assert len(decisions.evictions) == 1


def test_fewest_victims_wins_over_node_order() -> None:
    running = [low(90, "a", (0,)), low(91, "a", (1,)), low(92, "b", (0, 1))]
    decisions = schedule(
        world([node("a", gpus=2), node("b", gpus=2)], running, pending(1, gpus_per_node=2, qos="high")), PREEMPT, T0
    )
    assert evicted(decisions) == [92]


def test_cheapest_victim_lowest_qos_then_least_run_time_lost() -> None:
    running = [
        low(90, "n1", (0,), ran_h=1),
        low(91, "n1", (1,), qos="scavenger", ran_h=9),
        low(92, "n1", (2,), ran_h=5),
    ]
    decisions = schedule(world([node("n1", gpus=3)], running, pending(1, qos="high")), PREEMPT, T0)
    assert evicted(decisions) == [91]
    running = [low(90, "n1", (0,), ran_h=1), low(92, "n1", (1,), ran_h=5)]
    decisions = schedule(world([node("n1", gpus=2)], running, pending(1, qos="high")), PREEMPT, T0)
    assert evicted(decisions) == [90]


def test_only_qos_the_preemptor_may_preempt() -> None:
    running = [low(90, "n1", (0, 1), qos="normal")]
    decisions = schedule(world([node("n1", gpus=2)], running, pending(1, gpus_per_node=2, qos="high")), PREEMPT, T0)
    assert decisions.evictions == [] and decisions.starts == []


def test_a_job_without_a_preempting_qos_never_preempts() -> None:
    decisions = schedule(
        world([node("n1", gpus=2)], [low(90, "n1", (0, 1))], pending(1, gpus_per_node=2, qos="low")), PREEMPT, T0
    )
    assert decisions.evictions == []


def test_minimum_runtime_protects_young_jobs() -> None:
    young = [low(90, "n1", (0, 1), ran_h=0.1)]
    policy = Policy(preemption=True, preempt_min_runtime_seconds=3600)
    decisions = schedule(world([node("n1", gpus=2)], young, pending(1, gpus_per_node=2, qos="high")), policy, T0)
    assert decisions.evictions == []


def test_preemption_off_by_default() -> None:
    decisions = schedule(
        world([node("n1", gpus=2)], [low(90, "n1", (0, 1))], pending(1, gpus_per_node=2, qos="high")), Policy(), T0
    )
    assert decisions.evictions == []


def test_gang_preemptor_evicts_on_two_nodes() -> None:
    running = [low(90, "a", (0, 1)), low(91, "b", (0, 1)), low(92, "c", (0,))]
    decisions = schedule(
        world(
            [node("a", gpus=2), node("b", gpus=2), node("c", gpus=2)],
            running,
            pending(1, nodes=2, gpus_per_node=2, qos="high"),
        ),
        PREEMPT,
        T0,
    )
    assert len(decisions.starts) == 1 and len(decisions.starts[0].allocations) == 2
    assert len(evicted(decisions)) == 2 and 92 in evicted(decisions)


@settings(max_examples=200, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    holds=st.data(),
    want=st.integers(1, 4),
)
def test_preemption_frees_enough_and_no_more(shape, holds, want) -> None:  # type: ignore[no-untyped-def]
    nodes = [node(f"n{i}", gpus=g) for i, g in enumerate(shape)]
    running, next_id = [], 100
    for n in nodes:
        free = list(range(len(n.gpus)))
        while free and holds.draw(st.booleans()):
            size = holds.draw(st.integers(1, len(free)))
            running.append(low(next_id, n.name, tuple(free[:size]), ran_h=holds.draw(st.integers(1, 9))))
            free, next_id = free[size:], next_id + 1
    decisions = schedule(world(nodes, running, pending(1, gpus_per_node=want, qos="high")), PREEMPT, T0)
    if not decisions.evictions:
        return
    (start,) = decisions.starts
    victims = {e.victim_id for e in decisions.evictions}
    survivors = [r for r in running if r.id not in victims]
    held = {(a.node, i) for r in survivors for a in r.allocations for i in a.gpu_indices}
    assert not held & {(a.node, i) for a in start.allocations for i in a.gpu_indices}, "placed on a survivor's GPU"
    for victim in victims:  # sparing any one victim leaves the job unplaceable on that node
        spared = [r for r in running if r.id not in victims or r.id == victim]
        ledger = Ledger.from_snapshot(snapshot(nodes, [], spared))
        node_name = start.allocations[0].node
        assert ledger.by_name[node_name].fit(pending(2, gpus_per_node=want)) is None
