"""The cycle walks the queue by multifactor priority when the policy has weights."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from scheduler.core import Policy, schedule
from scheduler.core.fairshare import AccountNode, FairShareTree
from scheduler.core.priority import PriorityWeights
from tests.builders import T0, node, pending, snapshot

TREE = FairShareTree.build(
    [AccountNode("nlp", shares=1), AccountNode("vision", shares=1)],
    [("nlp", "alice"), ("vision", "victor")],
)
FAIRSHARE = Policy(priority=PriorityWeights())


def one_gpu_world(*jobs, **extra):  # type: ignore[no-untyped-def]
    return replace(snapshot([node("n1", gpus=1)], list(jobs)), fairshare_tree=TREE, **extra)


def test_the_account_that_used_less_goes_first_even_if_it_submitted_later() -> None:
    world = one_gpu_world(
        pending(1, account="nlp", user="alice"),
        pending(2, age_rank=100, account="vision", user="victor"),
        usage={("nlp", "alice"): 1e6, ("vision", "victor"): 10.0},
    )
    decisions = schedule(world, FAIRSHARE, T0 + timedelta(minutes=5))
    assert [s.job_id for s in decisions.starts] == [2]
    assert decisions.priorities[2].fairshare > decisions.priorities[1].fairshare


def test_qos_priority_jumps_the_queue() -> None:
    world = one_gpu_world(
        pending(1, account="nlp", user="alice", qos="normal"),
        pending(2, age_rank=50, account="nlp", user="alice", qos="high"),
        qos_priorities={"normal": 10, "high": 100},
    )
    assert [s.job_id for s in schedule(world, FAIRSHARE, T0).starts] == [2]


def test_nice_lowers_priority() -> None:
    world = one_gpu_world(pending(1, account="nlp", user="alice", nice=5000), pending(2, account="nlp", user="alice"))
    decisions = schedule(world, FAIRSHARE, T0)
    assert [s.job_id for s in decisions.starts] == [2]
    assert decisions.priorities[1].nice == 5000


def test_without_weights_the_queue_is_fifo_and_no_breakdown_is_given() -> None:
    world = one_gpu_world(
        pending(1, account="nlp", user="alice"),
        pending(2, account="vision", user="victor"),
        usage={("nlp", "alice"): 1e6},
    )
    decisions = schedule(world, Policy(), T0)
    assert [s.job_id for s in decisions.starts] == [1] and decisions.priorities == {}
