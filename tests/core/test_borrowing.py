"""Guaranteed quotas with borrowing and reclaim (Kueue cohorts), as scenarios and properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.borrowing import GuaranteeBook, _oldest_first
from scheduler.core.types import Allocation, Limits, PendingJob, RunningJob, Snapshot
from tests.builders import T0, node, pending

NOW = T0 + timedelta(hours=1)
PARENTS = {"nlp": "research", "vision": "research", "research": None, "guest": None}
GUARANTEES = {"nlp": Limits(guaranteed_gpus=8), "vision": Limits(guaranteed_gpus=8)}


def holding(job_id: int, node_name: str, gpus: tuple[int, ...], account: str, started_min_ago: int = 30) -> RunningJob:
    return RunningJob(
        job_id,
        (Allocation(node_name, gpus),),
        started_at=NOW - timedelta(minutes=started_min_ago),
        walltime_seconds=4 * 3600,
        account=account,
        user=account + "-user",
    )


def job(job_id: int, account: str, gpus: int = 1) -> PendingJob:
    return pending(job_id, account=account, user=account + "-user", gpus_per_node=gpus)


def world(running: list[RunningJob], waiting: list[PendingJob], limits: dict[str, Limits] | None = None) -> Snapshot:
    return Snapshot(
        nodes=(node("n1"), node("n2")),
        running=tuple(running),
        pending=tuple(waiting),
        account_limits=GUARANTEES if limits is None else limits,
        account_parents=PARENTS,
    )


def test_an_account_may_borrow_idle_gpus_beyond_its_guarantee_and_the_jobs_say_so() -> None:
    decisions = schedule(world([], [job(1, "nlp", 8), job(2, "nlp", 4)]), Policy(), NOW)
    assert [s.job_id for s in decisions.starts] == [1, 2]
    assert decisions.borrowed == {2}


def test_jobs_of_an_account_without_guarantee_always_borrow_once_guarantees_exist() -> None:
    decisions = schedule(world([], [job(1, "guest", 2)]), Policy(), NOW)
    assert decisions.borrowed == {1}


def test_without_any_guarantee_nothing_is_borrowed() -> None:
    decisions = schedule(world([], [job(1, "guest", 2)], limits={}), Policy(), NOW)
    assert decisions.borrowed == set()


def test_the_newest_jobs_of_an_account_are_the_borrowed_ones() -> None:
    old = holding(10, "n1", (0, 1, 2, 3, 4, 5), "nlp", started_min_ago=90)
    new = holding(11, "n2", (0, 1, 2, 3), "nlp", started_min_ago=10)
    assert GuaranteeBook([new, old], GUARANTEES, PARENTS).borrowed == {11}


def test_a_borrowed_job_becomes_guaranteed_when_older_jobs_of_its_account_end() -> None:
    new = holding(11, "n2", (0, 1, 2, 3), "nlp", started_min_ago=10)
    assert GuaranteeBook([new], GUARANTEES, PARENTS).borrowed == set()


def test_borrowing_limit_caps_use_beyond_the_guarantee() -> None:
    limits = {**GUARANTEES, "nlp": Limits(guaranteed_gpus=8, borrowing_limit_gpus=2)}
    decisions = schedule(world([holding(10, "n1", tuple(range(8)), "nlp")], [job(1, "nlp", 4)], limits), Policy(), NOW)
    assert decisions.starts == []
    assert decisions.pending_reasons == {1: PendingReason.BORROW_LIMIT}
    blocker = decisions.blockers[1][0]
    assert blocker.evidence["used"] == 8 and blocker.evidence["cap"] == 10
    assert "guarantee of 8 plus at most 2 borrowed" in blocker.message


def test_an_account_below_its_guarantee_reclaims_gpus_from_borrowed_jobs() -> None:
    # nlp borrowed all of n2 beyond its guarantee; vision (guarantee 8, using 0) needs 4.
    running = [holding(10, "n1", tuple(range(8)), "nlp", 120), holding(11, "n2", tuple(range(8)), "nlp", 60)]
    decisions = schedule(world(running, [job(1, "vision", 4)]), Policy(), NOW)
    assert [(e.victim_id, e.by) for e in decisions.evictions] == [(11, 1)]
    assert "borrowed" in decisions.evictions[0].reason
    assert [s.job_id for s in decisions.starts] == [1]
    assert 11 not in decisions.borrowed and 1 not in decisions.borrowed


def test_reclaim_never_takes_guaranteed_jobs() -> None:
    # Both accounts are inside their guarantees: the new job waits instead.
    running = [holding(10, "n1", tuple(range(8)), "nlp"), holding(11, "n2", tuple(range(8)), "vision")]
    decisions = schedule(world(running, [job(1, "vision", 4)]), Policy(), NOW)
    assert decisions.evictions == [] and decisions.starts == []


def test_a_job_beyond_its_own_guarantee_does_not_reclaim() -> None:
    running = [holding(10, "n1", tuple(range(8)), "vision", 120), holding(11, "n2", tuple(range(8)), "guest", 60)]
    decisions = schedule(world(running, [job(1, "vision", 4)]), Policy(), NOW)
    assert decisions.evictions == []


def test_reclaim_respects_the_minimum_runtime_and_can_be_turned_off() -> None:
    running = [holding(10, "n1", tuple(range(8)), "nlp", 120), holding(11, "n2", tuple(range(8)), "guest", 2)]
    waiting = [job(1, "vision", 4)]
    assert schedule(world(running, waiting), Policy(preempt_min_runtime_seconds=600), NOW).evictions == []
    assert schedule(world(running, waiting), Policy(reclaim=False), NOW).evictions == []
    assert [e.victim_id for e in schedule(world(running, waiting), Policy(), NOW).evictions] == [11]


def test_a_parent_guarantee_covers_its_subtree() -> None:
    limits = {"research": Limits(guaranteed_gpus=8)}
    decisions = schedule(world([], [job(1, "nlp", 4), job(2, "vision", 4), job(3, "vision", 2)], limits), Policy(), NOW)
    assert decisions.borrowed == {3}


@pytest.mark.parametrize("backfill", [False, True])
def test_qos_preemption_takes_borrowed_jobs_before_guaranteed_ones(backfill: bool) -> None:
    # Two equally cheap victims on different nodes; the borrowed one goes.
    running = [
        RunningJob(10, (Allocation("n1", tuple(range(8))),), NOW - timedelta(minutes=5), 3600, "nlp", "u", "low"),
        RunningJob(11, (Allocation("n2", tuple(range(8))),), NOW - timedelta(minutes=5), 3600, "guest", "u", "low"),
    ]
    urgent = pending(1, account="guest", user="u", qos="high", gpus_per_node=8)
    snapshot = Snapshot(
        nodes=(node("n1"), node("n2")),
        running=tuple(running),
        pending=(urgent,),
        account_limits=GUARANTEES,
        account_parents=PARENTS,
        qos_preempts={"high": frozenset({"low"})},
    )
    decisions = schedule(snapshot, Policy(preemption=True, reclaim=False, backfill=backfill), NOW)
    assert [e.victim_id for e in decisions.evictions] == [11]


@settings(max_examples=60, deadline=None)
@given(
    guarantees=st.tuples(st.integers(0, 16), st.integers(0, 16)),
    jobs=st.lists(st.tuples(st.sampled_from(["nlp", "vision", "guest"]), st.integers(1, 8)), max_size=12),
    borrow_limit=st.one_of(st.none(), st.integers(0, 8)),
)
def test_properties_guaranteed_use_never_exceeds_the_guarantee_and_borrowing_stays_within_limits(
    guarantees: tuple[int, int], jobs: list[tuple[str, int]], borrow_limit: int | None
) -> None:
    limits = {
        "nlp": Limits(guaranteed_gpus=guarantees[0], borrowing_limit_gpus=borrow_limit),
        "vision": Limits(guaranteed_gpus=guarantees[1]),
    }
    waiting = [job(i + 1, account, gpus) for i, (account, gpus) in enumerate(jobs)]
    decisions = schedule(world([], waiting, limits), Policy(backfill=True), NOW)
    by_id = {j.id: j for j in waiting}
    held = {"nlp": 0, "vision": 0, "guest": 0}
    unborrowed = {"nlp": 0, "vision": 0, "guest": 0}
    for start in decisions.starts:
        account = by_id[start.job_id].account
        gpus = sum(len(a.gpu_indices) for a in start.allocations)
        held[account] += gpus
        if start.job_id not in decisions.borrowed:
            unborrowed[account] += gpus
    assert unborrowed["nlp"] <= guarantees[0] and unborrowed["vision"] <= guarantees[1]
    assert unborrowed["guest"] == 0
    if borrow_limit is not None:
        assert held["nlp"] <= guarantees[0] + borrow_limit


@settings(max_examples=300, deadline=None)
@given(
    starts=st.lists(
        st.one_of(st.none(), st.integers(-(10**12), 10**12)),  # microseconds around T0, or unknown
        max_size=12,
    ),
    zone=st.sampled_from([UTC, timezone(timedelta(hours=-5)), None]),
)
def test_guarantees_fill_oldest_first_in_the_order_of_the_start_timestamps_text(starts, zone) -> None:  # type: ignore[no-untyped-def]
    """The book orders running jobs by ``started_at.isoformat()`` (then id); comparing the
    datetimes instead, as it does when it can, gives the same order."""
    base = T0.astimezone(zone) if zone is not None else T0.replace(tzinfo=None)
    running = [
        RunningJob(job_id, (), None if us is None else base + timedelta(microseconds=us))
        for job_id, us in enumerate(starts)
    ]
    by_text = sorted(
        running, key=lambda r: (r.started_at.isoformat() if r.started_at else datetime.min.isoformat(), r.id)
    )
    assert _oldest_first(reversed(running)) == by_text
