"""Start-time estimates: when each waiting job starts at the latest, queue-wide."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy
from scheduler.core.estimate import calibrated_starts, estimate_starts
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


# --- Calibrated starts: the p50 and p90 ----------------------------------------------


def tenths_of(user: str) -> dict[tuple[str, str], list[float]]:
    """``RuntimePredictor.samples`` of a user (and account ``a``) whose jobs ran 0.1 ... 1.0 of their walltime."""
    ratios = [tenth / 10 for tenth in range(1, 11)]
    return {("a", user): ratios, ("a", ""): ratios}


def test_the_p50_and_p90_plan_the_queue_with_the_median_and_90th_percentile_run_times() -> None:
    """A 10-hour job holds the node; its user's jobs run a tenth to all of their walltime."""
    holder = RunningJob(
        90, (Allocation("n1", (0, 1)),), started_at=T0, walltime_seconds=10 * HOUR, account="a", user="u"
    )
    world = snapshot(
        [node("n1", gpus=2)], [pending(1, gpus_per_node=2, walltime_seconds=HOUR, account="a", user="u")], [holder]
    )
    starts = calibrated_starts(world, Policy(backfill=True), T0, tenths_of("u"))
    assert estimate_starts(world, Policy(backfill=True), T0) == {1: T0 + timedelta(hours=10)}
    assert starts.p50 == {1: T0 + timedelta(hours=5)}
    assert starts.p90 == {1: T0 + timedelta(hours=9)}


def test_a_running_job_is_planned_past_what_it_already_ran() -> None:
    """It ran 8 of its 10 hours: of the ratios it has not outrun (0.8, 0.9, 1.0) the
    median is 0.9, so it ends in an hour, not at the median's 5 hours (already past)."""
    holder = RunningJob(
        90,
        (Allocation("n1", (0, 1)),),
        started_at=T0 - timedelta(hours=8),
        walltime_seconds=10 * HOUR,
        account="a",
        user="u",
    )
    world = snapshot([node("n1", gpus=2)], [pending(1, gpus_per_node=2, account="a", user="u")], [holder])
    starts = calibrated_starts(world, Policy(backfill=True), T0, tenths_of("u"))
    assert starts.p50 == {1: T0 + timedelta(hours=1)} and starts.p90 == {1: T0 + timedelta(hours=2)}


def test_without_history_the_p50_and_p90_are_the_latest_start() -> None:
    world = snapshot(
        [node("n1", gpus=2)],
        [pending(1, gpus_per_node=2, walltime_seconds=HOUR), pending(2, gpus_per_node=1, walltime_seconds=HOUR)],
        [busy(90, "n1", (0, 1), ends_in_h=3)],
    )
    latest = estimate_starts(world, Policy(backfill=True), T0)
    starts = calibrated_starts(world, Policy(backfill=True), T0, {})
    assert starts.p50 == starts.p90 == latest


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 12), st.sampled_from(["u", "v"])), min_size=1, max_size=10
    ),
    holders=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 11)), max_size=3),
    ratios=st.lists(st.floats(0.01, 1.0), min_size=5, max_size=30),
    backfill=st.booleans(),
)
def test_every_estimated_job_gets_a_p50_no_later_than_its_p90(jobs, holders, ratios, backfill) -> None:
    nodes = [node(f"n{i}", gpus=4) for i in range(1, 4)]
    running = tuple(
        RunningJob(
            100 + i,
            (Allocation(f"n{i + 1}", tuple(range(gpus))),),
            started_at=T0 - timedelta(hours=ran),
            walltime_seconds=12 * HOUR,
            account="a",
            user="u",
        )
        for i, (gpus, ran) in enumerate(holders)
    )
    queue = [
        pending(i + 1, gpus_per_node=gpus, walltime_seconds=hours * HOUR, account="a", user=user)
        for i, (gpus, hours, user) in enumerate(jobs)
    ]
    world = snapshot(nodes, queue, running)
    policy = Policy(backfill=backfill)
    starts = calibrated_starts(world, policy, T0, {("a", "u"): sorted(ratios), ("a", ""): sorted(ratios)})
    assert starts.p50.keys() == starts.p90.keys() == estimate_starts(world, policy, T0).keys()
    assert all(T0 <= starts.p50[job_id] <= starts.p90[job_id] for job_id in starts.p50)
