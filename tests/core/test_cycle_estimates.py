"""Estimates as a product of the cycle, and the shortcuts that must not change answers."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, schedule
from scheduler.core.estimate import estimate_starts
from scheduler.core.priority import PriorityWeights, job_priority, priority_breakdowns
from tests.builders import T0, node, pending, snapshot

HOUR = 3600


@settings(max_examples=100, deadline=None)
@given(
    requests=st.lists(st.tuples(st.integers(1, 8), st.sampled_from([HOUR, 4 * HOUR])), min_size=1, max_size=15),
    backfill=st.booleans(),
)
def test_turning_estimates_on_changes_no_decision(requests, backfill) -> None:  # type: ignore[no-untyped-def]
    world = snapshot(
        [node("n1", gpus=8), node("n2", gpus=4)],
        [pending(i, gpus_per_node=g, walltime_seconds=w) for i, (g, w) in enumerate(requests, start=1)],
    )
    policy = Policy(backfill=backfill)
    without = schedule(world, policy, T0)
    with_estimates = schedule(world, replace(policy, estimates=True), T0)
    assert (with_estimates.starts, with_estimates.pending_reasons, with_estimates.reservations) == (
        without.starts,
        without.pending_reasons,
        without.reservations,
    )
    assert with_estimates.estimates == estimate_starts(world, policy, T0)
    assert without.estimates == {}


def test_every_waiting_job_that_fits_the_cluster_gets_an_estimate() -> None:
    world = snapshot([node("n1", gpus=1)], [pending(i, walltime_seconds=HOUR) for i in range(1, 2001)])
    estimates = schedule(world, Policy(estimates=True), T0).estimates
    assert estimates[2000] == T0 + timedelta(hours=1999)


def test_breakdowns_of_the_queue_equal_each_job_s_own_priority() -> None:
    jobs = [
        pending(i, gpus_per_node=1 + i % 4, account=f"a{i % 3}", user=f"u{i % 5}", qos=["", "high"][i % 2], nice=i % 7)
        for i in range(1, 40)
    ]
    inputs = dict(
        now=T0 + timedelta(days=2),
        weights=PriorityWeights(),
        fairshare={(f"a{a}", f"u{u}"): (a + u) / 10 for a in range(3) for u in range(5)},
        qos_priorities={"high": 10, "": 1},
        cluster_gpus=64,
    )
    assert priority_breakdowns(jobs, **inputs) == [job_priority(job, **inputs) for job in jobs]  # type: ignore[arg-type]
