"""Multifactor priority (Slurm's priority/multifactor), as tables of scenarios."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.fairshare import AccountNode, FairShareTree, fair_tree_factors
from scheduler.core.priority import (
    PriorityBreakdown,
    PriorityWeights,
    age_factor,
    cluster_gpu_count,
    job_priority,
    job_size_factor,
    order_by_priority,
    priority_breakdowns,
    qos_factor,
)
from scheduler.core.types import PendingJob
from tests.builders import T0, node, pending

NOW = T0 + timedelta(days=30)
DAY = timedelta(days=1)
QOS = {"low": 0, "normal": 10, "high": 40}


def waiting(job_id: int, age: timedelta = timedelta(0), **request: Any) -> PendingJob:
    """A pending job submitted ``age`` before ``NOW``."""
    return replace(pending(job_id, **request), submitted_at=NOW - age)


# --- Factors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "max_age", "expected"),
    [
        (timedelta(0), 7 * DAY, 0.0),
        (3.5 * DAY, 7 * DAY, 0.5),
        (7 * DAY, 7 * DAY, 1.0),
        (30 * DAY, 7 * DAY, 1.0),
        (timedelta(hours=6), DAY, 0.25),
        (-DAY, 7 * DAY, 0.0),
    ],
    ids=[
        "just submitted: 0",
        "half of max_age: 0.5",
        "exactly max_age: 1",
        "older than max_age: capped at 1",
        "a 1-day max_age",
        "submitted in the future: 0",
    ],
)
def test_age_factor(age: timedelta, max_age: timedelta, expected: float) -> None:
    assert age_factor(NOW - age, NOW, max_age) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("gpus", "cluster_gpus", "favor_small", "expected"),
    [
        (1, 16, True, 1 - 1 / 16),
        (16, 16, True, 0.0),
        (1, 16, False, 1 / 16),
        (16, 16, False, 1.0),
        (64, 16, False, 1.0),
        (0, 16, True, 1.0),
        (4, 0, True, 1.0),
        (4, 0, False, 0.0),
    ],
    ids=[
        "favour small: 1 GPU of 16 nearly 1",
        "favour small: the whole cluster is 0",
        "favour large: 1 GPU of 16",
        "favour large: the whole cluster is 1",
        "more GPUs than the cluster: capped",
        "CPU-only job is the smallest",
        "empty cluster, favour small: all equal (1)",
        "empty cluster, favour large: all equal (0)",
    ],
)
def test_job_size_factor(gpus: int, cluster_gpus: int, favor_small: bool, expected: float) -> None:
    assert job_size_factor(gpus, cluster_gpus, favor_small) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("qos", "priorities", "expected"),
    [
        ("high", QOS, 1.0),
        ("normal", QOS, 0.25),
        ("low", QOS, 0.0),
        ("unknown", QOS, 0.0),
        ("normal", {}, 0.0),
        ("normal", {"normal": 0}, 0.0),
    ],
    ids=["highest QOS is 1", "normal: 10/40", "low: 0", "unknown QOS: 0", "no QOS table: 0", "all priorities 0: 0"],
)
def test_qos_factor(qos: str, priorities: dict[str, int], expected: float) -> None:
    assert qos_factor(qos, priorities) == pytest.approx(expected)


def test_cluster_gpu_count_counts_every_gpu() -> None:
    assert cluster_gpu_count([node("h1", gpus=8), node("l1", gpus=4, model="L4", schedulable=False)]) == 12


# --- The weighted sum, as sprio shows it ------------------------------------------------

WEIGHTS = PriorityWeights(age=1000, fairshare=10000, jobsize=100, qos=2000, max_age=7 * DAY)
FAIRSHARE = {("lab", "alice"): 0.5, ("lab", "bob"): 1.0}


@dataclass
class BreakdownCase:
    id: str
    job: PendingJob
    expected: PriorityBreakdown
    weights: PriorityWeights = WEIGHTS
    cluster_gpus: int = 16
    fairshare: dict[tuple[str, str], float] = field(default_factory=lambda: dict(FAIRSHARE))


BREAKDOWN_CASES = [
    BreakdownCase(
        "every factor weighted and summed",
        waiting(1, 3.5 * DAY, account="lab", user="alice", qos="normal", gpus_per_node=4),
        # age 0.5*1000, fs 0.5*10000, size (1-4/16)*100, qos 0.25*2000
        PriorityBreakdown(1, 500 + 5000 + 75 + 500, age=500, fairshare=5000, jobsize=75, qos=500, nice=0),
    ),
    BreakdownCase(
        "nice is subtracted",
        waiting(2, 7 * DAY, account="lab", user="bob", qos="high", gpus_per_node=16, nice=300),
        PriorityBreakdown(2, 1000 + 10000 + 0 + 2000 - 300, age=1000, fairshare=10000, jobsize=0, qos=2000, nice=300),
    ),
    BreakdownCase(
        "negative nice (admin boost) adds",
        waiting(3, account="lab", user="bob", gpus_per_node=16, nice=-50),
        PriorityBreakdown(3, 10000 + 50, age=0, fairshare=10000, jobsize=0, qos=0, nice=-50),
    ),
    BreakdownCase(
        "an association without a fair-share factor gets 0",
        waiting(4, account="lab", user="ghost", gpus_per_node=16),
        PriorityBreakdown(4, 0, age=0, fairshare=0, jobsize=0, qos=0, nice=0),
    ),
    BreakdownCase(
        "favouring large jobs flips the size factor",
        waiting(5, account="lab", user="ghost", gpus_per_node=4),
        PriorityBreakdown(5, 25, age=0, fairshare=0, jobsize=25, qos=0, nice=0),
        weights=replace(WEIGHTS, favor_small=False),
    ),
    BreakdownCase(
        "multi-node request counts nodes x GPUs per node",
        waiting(6, account="lab", user="ghost", nodes=2, gpus_per_node=4),
        PriorityBreakdown(6, 50, age=0, fairshare=0, jobsize=50, qos=0, nice=0),
    ),
    BreakdownCase(
        "zero weights switch factors off",
        waiting(7, 7 * DAY, account="lab", user="bob", qos="high", gpus_per_node=1),
        PriorityBreakdown(7, 10000, age=0, fairshare=10000, jobsize=0, qos=0, nice=0),
        weights=PriorityWeights(age=0, fairshare=10000, jobsize=0, qos=0),
    ),
]


@pytest.mark.parametrize("case", BREAKDOWN_CASES, ids=[c.id for c in BREAKDOWN_CASES])
def test_job_priority(case: BreakdownCase) -> None:
    breakdown = job_priority(
        case.job,
        now=NOW,
        weights=case.weights,
        fairshare=case.fairshare,
        qos_priorities=QOS,
        cluster_gpus=case.cluster_gpus,
    )
    assert asdict(breakdown) == pytest.approx(asdict(case.expected))
    assert breakdown.total == pytest.approx(
        breakdown.age + breakdown.fairshare + breakdown.jobsize + breakdown.qos - breakdown.nice
    )


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan], ids=["negative", "above 1", "NaN"])
def test_job_priority_rejects_a_fairshare_factor_outside_unit_interval(bad: float) -> None:
    with pytest.raises(ValueError, match="fair-share"):
        job_priority(
            waiting(1, account="lab", user="alice"),
            now=NOW,
            weights=WEIGHTS,
            fairshare={("lab", "alice"): bad},
            qos_priorities=QOS,
            cluster_gpus=8,
        )


@pytest.mark.parametrize(
    "kwargs",
    [{"age": -1.0}, {"fairshare": math.inf}, {"qos": math.nan}, {"max_age": timedelta(0)}],
    ids=["negative weight", "infinite weight", "NaN weight", "zero max_age"],
)
def test_priority_weights_reject_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PriorityWeights(**kwargs)


def test_default_weights() -> None:
    assert PriorityWeights().max_age == timedelta(days=7)
    assert PriorityWeights().favor_small


# --- Ordering ---------------------------------------------------------------------------


@dataclass
class OrderCase:
    id: str
    jobs: list[PendingJob]
    order: list[int]
    weights: PriorityWeights = WEIGHTS
    fairshare: dict[tuple[str, str], float] = field(default_factory=lambda: dict(FAIRSHARE))


ORDER_CASES = [
    OrderCase(
        "higher fair-share goes first",
        [waiting(1, account="lab", user="alice"), waiting(2, account="lab", user="bob")],
        [2, 1],
    ),
    OrderCase(
        "a much older job overtakes a better fair-share when age weighs more",
        [waiting(1, 7 * DAY, account="lab", user="alice"), waiting(2, account="lab", user="bob")],
        [1, 2],
        weights=PriorityWeights(age=10000, fairshare=1000, jobsize=0, qos=0),
    ),
    OrderCase(
        "equal priority: the older submission first",
        [waiting(1, DAY * 0, account="x", user="y"), waiting(2, 8 * DAY, account="x", user="y")],
        [2, 1],
        weights=PriorityWeights(age=0, fairshare=0, jobsize=0, qos=0),
    ),
    OrderCase(
        "equal priority and submission: lower id first",
        [waiting(9, account="x", user="y"), waiting(3, account="x", user="y"), waiting(5, account="x", user="y")],
        [3, 5, 9],
    ),
    OrderCase(
        "QOS lifts a job over a better fair-share",
        [waiting(1, account="lab", user="bob", qos="low"), waiting(2, account="lab", user="alice", qos="high")],
        [2, 1],
        weights=PriorityWeights(age=0, fairshare=1000, jobsize=0, qos=10000),
    ),
    OrderCase(
        "nice pushes a job down",
        [waiting(1, account="lab", user="bob", nice=6000), waiting(2, account="lab", user="alice")],
        [2, 1],
    ),
    OrderCase("empty queue", [], []),
]


@pytest.mark.parametrize("case", ORDER_CASES, ids=[c.id for c in ORDER_CASES])
def test_order_by_priority(case: OrderCase) -> None:
    breakdowns = priority_breakdowns(
        case.jobs, now=NOW, weights=case.weights, fairshare=case.fairshare, qos_priorities=QOS, cluster_gpus=16
    )
    assert [b.job_id for b in breakdowns] == [j.id for j in case.jobs]  # input order kept
    assert [j.id for j in order_by_priority(case.jobs, breakdowns)] == case.order


def test_order_by_priority_needs_a_breakdown_for_every_job() -> None:
    with pytest.raises(ValueError, match=r"\[2\]"):
        order_by_priority([waiting(1), waiting(2)], [PriorityBreakdown(1, 0, 0, 0, 0, 0, 0)])


def test_fair_tree_factors_feed_priority() -> None:
    """An idle account's new job outranks a busy account's week-old job."""
    tree = FairShareTree.build([AccountNode("idle"), AccountNode("busy")], [("idle", "ivy"), ("busy", "bo")])
    factors = fair_tree_factors(tree, {("busy", "bo"): 3.6e6})
    jobs = [waiting(1, 7 * DAY, account="busy", user="bo"), waiting(2, account="idle", user="ivy")]
    breakdowns = priority_breakdowns(
        jobs, now=NOW, weights=PriorityWeights(), fairshare=factors, qos_priorities={}, cluster_gpus=8
    )
    assert [j.id for j in order_by_priority(jobs, breakdowns)] == [2, 1]
    assert [b.fairshare for b in breakdowns] == [5000.0, 10000.0]


# --- Properties -------------------------------------------------------------------------

weights = st.builds(
    PriorityWeights,
    age=st.floats(0, 1e6),
    fairshare=st.floats(0, 1e6),
    jobsize=st.floats(0, 1e6),
    qos=st.floats(0, 1e6),
    max_age=st.integers(1, 30 * 86400).map(lambda s: timedelta(seconds=s)),
    favor_small=st.booleans(),
)
jobs = st.builds(
    waiting,
    st.integers(1, 10_000),
    account=st.sampled_from(["lab", "x"]),
    user=st.sampled_from(["alice", "bob", "y"]),
    qos=st.sampled_from(sorted(QOS)),
    gpus_per_node=st.integers(0, 8),
    nice=st.integers(-1000, 1000),
)


@settings(max_examples=300, deadline=None)
@given(jobs, weights, st.integers(0, 60 * 86400), st.integers(0, 60 * 86400))
def test_priority_is_monotonic_in_age_until_max_age(job: PendingJob, w: PriorityWeights, a: int, b: int) -> None:
    younger, older = sorted((a, b))

    def breakdown(age_s: int) -> PriorityBreakdown:
        return job_priority(
            replace(job, submitted_at=NOW - timedelta(seconds=age_s)),
            now=NOW,
            weights=w,
            fairshare=FAIRSHARE,
            qos_priorities=QOS,
            cluster_gpus=16,
        )

    before, after = breakdown(younger), breakdown(older)
    assert before.total <= after.total
    max_age_s = w.max_age.total_seconds()
    if younger < older <= max_age_s and w.age >= 1.0:
        assert before.age < after.age  # strictly, while the job is still ageing
    if max_age_s <= younger:
        assert before == after  # fully aged: age no longer matters


@settings(max_examples=200, deadline=None)
@given(st.lists(jobs, max_size=20, unique_by=lambda j: j.id), weights)
def test_ordering_is_a_sorted_permutation(queue: list[PendingJob], w: PriorityWeights) -> None:
    breakdowns = priority_breakdowns(
        queue, now=NOW, weights=w, fairshare=FAIRSHARE, qos_priorities=QOS, cluster_gpus=16
    )
    totals = {b.job_id: b.total for b in breakdowns}
    ordered = order_by_priority(queue, breakdowns)
    assert sorted(j.id for j in ordered) == sorted(j.id for j in queue)
    keys = [(-totals[j.id], j.submitted_at, j.id) for j in ordered]
    assert keys == sorted(keys)
