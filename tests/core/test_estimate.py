"""Start-time estimates: when each waiting job starts at the latest, queue-wide."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy
from scheduler.core.estimate import estimate_starts
from scheduler.core.types import Allocation, RunningJob
from tests.builders import T0, node, pending, snapshot

HOUR = 3600


def busy(job_id: int, node_name: str, gpus: tuple[int, ...], ends_in_h: float) -> RunningJob:
    return RunningJob(
        job_id,
        (Allocation(node_name, gpus),),
        started_at=T0 - timedelta(hours=10 - ends_in_h),
        walltime_seconds=10 * HOUR,
    )


def test_jobs_that_start_now_are_estimated_now_and_the_rest_queue_behind_walltimes() -> None:
    world = snapshot(
        [node("n1", gpus=2)],
        [
            pending(1, gpus_per_node=1, walltime_seconds=HOUR),
            pending(2, gpus_per_node=2, walltime_seconds=2 * HOUR),
            pending(3, gpus_per_node=2, walltime_seconds=HOUR),
        ],
        [busy(90, "n1", (0,), ends_in_h=3)],
    )
    estimates = estimate_starts(world, Policy(backfill=True), T0)
    assert estimates == {1: T0, 2: T0 + timedelta(hours=3), 3: T0 + timedelta(hours=5)}


def test_jobs_waiting_on_a_dependency_get_no_estimate() -> None:
    world = replace(
        snapshot([node("n1", gpus=1)], [pending(1, dependencies=(("afterok", 50),))]),
        dependency_states={50: "RUNNING"},
    )
    assert estimate_starts(world, Policy(), T0) == {}


def test_horizon_bounds_the_work() -> None:
    world = snapshot([node("n1", gpus=1)], [pending(i, walltime_seconds=HOUR) for i in range(1, 11)])
    estimates = estimate_starts(world, Policy(), T0, horizon=3)
    assert estimates == {1: T0, 2: T0 + timedelta(hours=1), 3: T0 + timedelta(hours=2), 4: T0 + timedelta(hours=3)}


@settings(max_examples=150, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    requests=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([HOUR, 2 * HOUR, 5 * HOUR])), max_size=10),
    backfill=st.booleans(),
)
def test_estimated_plan_never_overcommits_a_gpu(shape, requests, backfill) -> None:  # type: ignore[no-untyped-def]
    nodes = [node(f"n{i}", gpus=g) for i, g in enumerate(shape)]
    running = [busy(900 + i, n.name, (0,), ends_in_h=1 + i) for i, n in enumerate(nodes)]
    jobs = [pending(i, gpus_per_node=g, walltime_seconds=w) for i, (g, w) in enumerate(requests, start=1)]
    world = snapshot(nodes, jobs, running)
    estimates = estimate_starts(world, Policy(backfill=backfill), T0)
    assert all(at >= T0 for at in estimates.values())
    # Rebuild the plan: every estimated job fits on some node for its whole walltime when
    # the jobs planned so far hold their GPUs; the total GPUs in use never exceed capacity.
    capacity = sum(shape)
    spans = [(T0, T0 + timedelta(hours=1 + i), 1) for i in range(len(nodes))]
    spans += [
        (estimates[j.id], estimates[j.id] + timedelta(seconds=j.walltime_seconds), j.gpus)
        for j in jobs
        if j.id in estimates
    ]
    for instant in {start for start, _, _ in spans}:
        assert sum(g for start, end, g in spans if start <= instant < end) <= capacity


def test_a_cpu_only_job_with_node_labels_is_estimated_on_a_labelled_node_only() -> None:
    """The labelled node is full of CPUs for an hour; the idle unlabelled one does not count."""
    labelled = replace(node("r2"), labels={"rack": "r2"})
    hog = RunningJob(
        90, (Allocation("r2", (), cpu_millis=64_000),), started_at=T0 - timedelta(hours=9), walltime_seconds=10 * 3600
    )
    job = pending(1, gpus_per_node=0, cpus_per_node=8, node_labels=(("rack", "r2"),))
    estimates = estimate_starts(snapshot([node("r1"), labelled], [job], [hog]), Policy(backfill=True), T0)
    assert estimates[1] == T0 + timedelta(hours=1)
