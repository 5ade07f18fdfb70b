"""Job array throttles (``--array=0-9%2``): at most N tasks of one array run at once; the
tasks past the limit wait with ``JobArrayTaskLimit`` and hold no one else up."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.types import PendingJob
from tests.builders import T0, node, pending, running, snapshot


def task(job_id: int, array: int, limit: int, **request: Any) -> PendingJob:
    return pending(job_id, array_job=array, array_limit=limit, **request)


def test_no_more_tasks_start_than_the_throttle_allows_and_others_still_start() -> None:
    tasks = [task(i, array=1, limit=2) for i in range(1, 6)]
    world = snapshot([node("n1", gpus=8)], [*tasks, pending(9)])

    decisions = schedule(world, Policy(), T0)

    assert [s.job_id for s in decisions.starts] == [1, 2, 9]
    assert {decisions.pending_reasons[i] for i in (3, 4, 5)} == {PendingReason.ARRAY_TASK_LIMIT}
    blocker = decisions.blockers[3][0]
    assert blocker.code is PendingReason.ARRAY_TASK_LIMIT
    assert blocker.evidence == {"array_job": 1, "running_tasks": 2, "limit": 2}


def test_running_tasks_count_against_the_throttle() -> None:
    busy = replace(running(100, ("n1", (0,))), array_job=1)
    world = snapshot([node("n1", gpus=8)], [task(2, array=1, limit=2), task(3, array=1, limit=2)], [busy])

    decisions = schedule(world, Policy(), T0)

    assert [s.job_id for s in decisions.starts] == [2]
    assert decisions.pending_reasons[3] is PendingReason.ARRAY_TASK_LIMIT


def test_a_throttled_task_does_not_block_the_queue_under_strict_order() -> None:
    world = snapshot(
        [node("n1", gpus=2)],
        [task(1, array=1, limit=1), task(2, array=1, limit=1), pending(3)],
    )

    decisions = schedule(world, Policy(strict_order=True), T0)

    assert [s.job_id for s in decisions.starts] == [1, 3]
    assert decisions.pending_reasons[2] is PendingReason.ARRAY_TASK_LIMIT


def test_arrays_are_throttled_each_on_their_own() -> None:
    world = snapshot(
        [node("n1", gpus=8)],
        [task(1, array=1, limit=1), task(2, array=1, limit=1), task(3, array=3, limit=1), task(4, array=3, limit=1)],
    )

    started = [s.job_id for s in schedule(world, Policy(), T0).starts]

    assert started == [1, 3]


def test_a_throttled_task_gets_no_start_estimate() -> None:
    world = snapshot([node("n1", gpus=8)], [task(1, array=1, limit=1), task(2, array=1, limit=1)])

    decisions = schedule(world, Policy(backfill=True, estimates=True), T0)

    assert decisions.estimates == {1: T0}


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=6),
    tasks=st.integers(min_value=1, max_value=12),
    already=st.integers(min_value=0, max_value=6),
    gpus=st.integers(min_value=1, max_value=16),
)
def test_running_plus_started_tasks_never_exceed_the_limit(limit: int, tasks: int, already: int, gpus: int) -> None:
    busy = [replace(running(1000 + i, ("other", (i,))), array_job=1) for i in range(already)]
    world = snapshot(
        [node("n1", gpus=gpus), node("other", gpus=8)],
        [task(i, array=1, limit=limit, gpu_model="H100-80GB") for i in range(1, tasks + 1)],
        busy,
    )

    decisions = schedule(world, Policy(backfill=True), T0)

    started = len(decisions.starts)
    assert already + started <= max(limit, already)
    assert started == max(0, min(tasks, limit - already, gpus + 8 - already))
