"""The cost of a window before it is made: the queue planned with and without it, the
jobs it delays and by how much, the GPU-hours it displaces (queued jobs' GPUs times
their delay, running jobs' GPUs times their hours inside it), and the start in an
admin's range that displaces least."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy
from scheduler.core.types import Allocation, RunningJob, Snapshot, Window
from scheduler.core.window_cost import (
    MAX_CANDIDATES,
    candidate_starts,
    least_costly_start,
    starts_for,
    window_cost,
)
from tests.builders import T0, node, pending

HOUR = 3600
NOW = T0 + timedelta(hours=1)
POLICY = Policy(backfill=True)


def at(hours: float):  # type: ignore[no-untyped-def]
    return NOW + timedelta(hours=hours)


def maintenance(*nodes: str, in_h: float, for_h: float) -> Window:
    return Window("new", frozenset(nodes), at(in_h), at(in_h + for_h), maintenance=True)


def busy(job_id: int, node_name: str, gpus: int, ends_in_h: float) -> RunningJob:
    """A job running on ``node_name`` for the last hour, its walltime ending in ``ends_in_h``."""
    return RunningJob(job_id, (Allocation(node_name, tuple(range(gpus))),), at(-1), round((1 + ends_in_h) * HOUR))


def site(jobs, running=(), nodes=("n1",)):  # type: ignore[no-untyped-def]
    return Snapshot(nodes=tuple(node(n) for n in nodes), running=tuple(running), pending=tuple(jobs))


# --- What one window costs ----------------------------------------------------------------


def test_a_window_over_a_node_whose_running_job_ends_after_it_begins_delays_the_queued_job_past_its_end() -> None:
    # n1 is busy until +2 h; the queued 8-GPU job of 2 h is planned then, without the
    # window. Maintenance from +1 h to +5 h keeps it off until +5 h: 3 h later.
    world = site([pending(1, gpus_per_node=8, walltime_seconds=2 * HOUR)], [busy(90, "n1", 8, ends_in_h=2)])
    cost = window_cost(world, POLICY, NOW, maintenance("n1", in_h=1, for_h=4))
    (delay,) = cost.delays
    assert (delay.job_id, delay.before, delay.after, delay.seconds) == (1, at(2), at(5), 3 * HOUR)
    assert delay.gpu_hours == 24  # 8 GPUs, 3 h later
    (overrun,) = cost.overruns
    assert (overrun.job_id, overrun.until, overrun.gpu_hours) == (90, at(2), 8)  # its last hour is inside
    assert (cost.queued_gpu_hours, cost.running_gpu_hours, cost.gpu_hours, cost.unplanned) == (24, 8, 32, 0)


@pytest.mark.parametrize(
    "scenario,jobs,running,window,delayed,gpu_hours",
    [
        (
            "a job that ends before the window begins is not delayed",
            [pending(1, gpus_per_node=8, walltime_seconds=HOUR)],
            [],
            maintenance("n1", in_h=2, for_h=2),
            {},
            0,
        ),
        (
            "a job that would cross the window's start waits for its end",
            [pending(1, gpus_per_node=4, walltime_seconds=3 * HOUR)],
            [],
            maintenance("n1", "n2", in_h=2, for_h=2),
            {1: 4 * HOUR},
            16,
        ),
        (
            "a window on a node the queue does not need costs nothing",
            [pending(1, gpus_per_node=8, walltime_seconds=3 * HOUR)],
            [],
            maintenance("n2", in_h=0, for_h=2),
            {},
            0,
        ),
        (
            "the job behind a delayed one on the same node is delayed too",
            [
                pending(1, gpus_per_node=8, walltime_seconds=2 * HOUR),
                pending(2, gpus_per_node=8, walltime_seconds=2 * HOUR),
            ],
            [busy(90, "n1", 8, ends_in_h=1), busy(91, "n2", 8, ends_in_h=10)],
            maintenance("n1", in_h=2, for_h=1),
            {1: 2 * HOUR, 2: 2 * HOUR},
            32,
        ),
        (
            "a job the window lets start sooner is not netted against the one it delays",
            [
                pending(1, gpus_per_node=8, walltime_seconds=2 * HOUR),
                pending(2, gpus_per_node=8, walltime_seconds=HOUR),
            ],
            [busy(90, "n1", 8, ends_in_h=1), busy(91, "n2", 8, ends_in_h=10)],
            maintenance("n1", in_h=2, for_h=1),
            {1: 2 * HOUR},
            16,
        ),
        (
            "a job running into the window is displaced work, not a delay",
            [],
            [busy(90, "n1", 2, ends_in_h=3)],
            maintenance("n1", in_h=1, for_h=4),
            {},
            4,
        ),
    ],
)
def test_window_cost_table(scenario, jobs, running, window, delayed, gpu_hours) -> None:  # type: ignore[no-untyped-def]
    cost = window_cost(site(jobs, running, nodes=("n1", "n2")), POLICY, NOW, window)
    assert {d.job_id: d.seconds for d in cost.delays} == delayed, scenario
    assert cost.gpu_hours == pytest.approx(gpu_hours), scenario


def test_the_window_already_in_the_snapshot_is_not_counted_again() -> None:
    # The baseline keeps the windows the site has; only the new one costs.
    old = Window("old", frozenset({"n1"}), at(1), at(2), maintenance=True)
    jobs = [pending(1, gpus_per_node=8, walltime_seconds=2 * HOUR)]
    world = Snapshot(nodes=(node("n1"),), running=(), pending=tuple(jobs), windows=(old,))
    cost = window_cost(world, POLICY, NOW, maintenance("n1", in_h=3, for_h=1))
    assert [(d.before, d.after) for d in cost.delays] == [(at(2), at(4))]


# --- The least costly start ----------------------------------------------------------------


def test_the_suggestion_waits_for_the_running_job_and_the_queued_one_behind_it() -> None:
    # n1 frees at +2h10; the queued job then runs until +3h10. A 2 h window starting
    # at any tried instant before that displaces work; +3h15 (a grid point) none.
    world = site([pending(1, gpus_per_node=8, walltime_seconds=HOUR)], [busy(90, "n1", 8, ends_in_h=2 + 1 / 6)])
    found = least_costly_start(world, POLICY, NOW, maintenance("n1", in_h=0, for_h=2), at(0), at(6))
    assert found.best.start_at == at(3.25) and found.best.end_at == at(5.25)
    assert found.best.gpu_hours == 0 and not found.best.delays
    assert at(2 + 1 / 6) in {c.start_at for c in found.tried}  # the running job's end is tried
    assert all(c.gpu_hours > 0 for c in found.tried if c.start_at < at(3.25))


def test_among_starts_that_cost_the_same_the_earliest_wins() -> None:
    found = least_costly_start(site([]), POLICY, NOW, maintenance("n1", in_h=0, for_h=2), at(1), at(3))
    assert found.best.start_at == at(1) and found.best.gpu_hours == 0
    assert len(found.tried) == 1  # nothing can beat displacing nothing: the search stops there


def test_the_starts_tried_are_the_grid_the_range_s_ends_and_the_ends_of_jobs_on_the_window_s_nodes() -> None:
    world = site([], [busy(90, "n1", 8, ends_in_h=0.4), busy(91, "n2", 8, ends_in_h=0.6)], nodes=("n1", "n2"))
    starts = candidate_starts(world, NOW, frozenset({"n1"}), at(0), at(0.75))
    assert starts == [at(0), at(0.25), at(0.4), at(0.5), at(0.75)]  # n2's job is not on the window's nodes


def test_a_long_range_is_tried_at_a_wider_step_not_at_more_starts() -> None:
    starts = candidate_starts(site([]), NOW, frozenset({"n1"}), at(0), at(24 * 30))
    assert len(starts) == MAX_CANDIDATES + 1 and starts[0] == at(0) and starts[-1] == at(24 * 30)


@pytest.mark.parametrize(
    "pending,steps",
    [(0, MAX_CANDIDATES), (500, MAX_CANDIDATES), (1000, 50), (10_000, 5), (1_000_000, 2)],
    ids=["empty queue", "short queue", "1,000 jobs", "10,000 jobs", "a million jobs"],
)
def test_a_long_queue_is_searched_at_fewer_starts_so_that_a_search_plans_about_as_many_jobs(pending, steps) -> None:  # type: ignore[no-untyped-def]
    assert starts_for(pending) == steps


def test_the_search_tries_at_most_the_steps_it_is_given_and_the_running_jobs_ends() -> None:
    ends = [busy(90, "n1", 2, ends_in_h=0.4), busy(91, "n1", 2, ends_in_h=1.1), busy(92, "n1", 2, ends_in_h=3)]
    starts = candidate_starts(site([], ends), NOW, frozenset({"n1"}), at(0), at(4), most=2)
    assert starts == [at(0), at(0.4), at(1.1), at(2), at(4)]  # two steps, the first two job ends


@pytest.mark.parametrize(
    "earliest,latest,step,most,message",
    [
        (2, 1, timedelta(minutes=15), 4, "ends before it begins"),
        (0, 1, timedelta(0), 4, "step must be positive"),
        (0, 1, timedelta(minutes=15), 0, "at least one step"),
    ],
)
def test_a_range_that_ends_before_it_begins_a_zero_step_or_no_step_is_refused(
    earliest, latest, step, most, message
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        candidate_starts(site([]), NOW, frozenset({"n1"}), at(earliest), at(latest), step, most)


# --- Property: the suggestion is never worse than any start it could have picked -----------


@settings(max_examples=40, deadline=None)
@given(
    asks=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 4)), max_size=6),
    running=st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3"]), st.integers(1, 8), st.integers(1, 16)), max_size=3),
    window_nodes=st.sets(st.sampled_from(["n1", "n2", "n3"]), min_size=1),
    length_q=st.integers(1, 12),
    earliest_q=st.integers(-2, 8),
    span_q=st.integers(0, 16),
    strict=st.booleans(),
)
def test_property_the_suggested_start_is_never_worse_than_any_other_candidate_start(  # type: ignore[no-untyped-def]
    asks, running, window_nodes, length_q, earliest_q, span_q, strict
) -> None:
    quarter = timedelta(minutes=15)
    jobs = [pending(i + 1, gpus_per_node=g, walltime_seconds=h * HOUR) for i, (g, h) in enumerate(asks)]
    holding: list[RunningJob] = []
    for k, (name, gpus, ends_q) in enumerate(running):
        if name not in {r.allocations[0].node for r in holding}:
            holding.append(busy(900 + k, name, gpus, ends_in_h=ends_q / 4 + 0.1))
    world = site(jobs, holding, nodes=("n1", "n2", "n3"))
    policy = Policy(backfill=not strict, strict_order=strict)
    earliest = NOW + earliest_q * quarter
    latest = earliest + span_q * quarter
    window = Window("new", frozenset(window_nodes), earliest, earliest + length_q * quarter, maintenance=True)

    found = least_costly_start(world, policy, NOW, window, earliest, latest)

    assert earliest <= found.best.start_at <= latest
    assert found.best.end_at - found.best.start_at == length_q * quarter
    for start in candidate_starts(world, NOW, window.nodes, earliest, latest):
        other = window_cost(world, policy, NOW, Window("new", window.nodes, start, start + length_q * quarter, True))
        assert (found.best.unplanned, found.best.gpu_hours) <= (other.unplanned, other.gpu_hours)
        if (found.best.unplanned, found.best.gpu_hours) == (other.unplanned, other.gpu_hours):
            assert found.best.start_at <= start
