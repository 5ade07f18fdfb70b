"""EASY backfill: reservations for blocked jobs, and who may jump ahead of them."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.backfill import Release, plan_reservation
from scheduler.core.cycle import latest_end
from scheduler.core.placement import Ledger
from scheduler.core.types import Allocation, Reservation, RunningJob
from tests.builders import T0, node, pending, snapshot

HOUR = 3600
BACKFILL = Policy(backfill=True)


def busy(job_id: int, node_name: str, gpus: tuple[int, ...], *, ends_in_h: float, walltime_h: float = 10) -> RunningJob:
    """A running job holding ``gpus`` on ``node_name`` that hits its walltime in ``ends_in_h`` hours."""
    started = T0 - timedelta(hours=walltime_h - ends_in_h)
    return RunningJob(
        job_id, (Allocation(node_name, gpus),), started_at=started, walltime_seconds=int(walltime_h * HOUR)
    )


def started(decisions) -> set[int]:  # type: ignore[no-untyped-def]
    return {s.job_id for s in decisions.starts}


def test_short_job_backfills_ahead_of_a_blocked_job_when_it_ends_before_the_reservation() -> None:
    world = snapshot(
        [node("n1", gpus=8)],
        [
            pending(1, gpus_per_node=8, walltime_seconds=HOUR),
            pending(2, gpus_per_node=2, walltime_seconds=HOUR // 2),
            pending(3, gpus_per_node=2, walltime_seconds=2 * HOUR),
        ],
        [busy(99, "n1", (0, 1, 2, 3), ends_in_h=1)],
    )
    decisions = schedule(world, BACKFILL, T0)
    assert started(decisions) == {2} and decisions.backfilled == {2}
    assert decisions.pending_reasons == {1: PendingReason.RESOURCES, 3: PendingReason.PRIORITY}
    (reservation,) = decisions.reservations
    assert (reservation.job_id, reservation.start_at) == (1, T0 + timedelta(hours=1))
    assert reservation.allocations == (Allocation("n1", tuple(range(8)), 1000, 0),)


def test_long_job_backfills_on_gpus_the_reservation_does_not_need() -> None:
    world = snapshot(
        [node("h1", gpus=8), node("l1", gpus=4, model="L4")],
        [
            pending(1, gpus_per_node=8, gpu_model="H100-80GB"),
            pending(2, gpus_per_node=1, gpu_model="L4", walltime_seconds=100 * HOUR),
        ],
        [busy(99, "h1", (0,), ends_in_h=2)],
    )
    decisions = schedule(world, BACKFILL, T0)
    assert started(decisions) == {2}
    assert decisions.reservations[0].start_at == T0 + timedelta(hours=2)


def test_without_backfill_the_same_queue_waits_behind_the_blocked_job() -> None:
    world = snapshot(
        [node("n1", gpus=8)],
        [pending(1, gpus_per_node=8), pending(2, gpus_per_node=2, walltime_seconds=60)],
        [busy(99, "n1", (0,), ends_in_h=1)],
    )
    decisions = schedule(world, Policy(), T0)
    assert started(decisions) == set() and decisions.reservations == []


def test_reservation_waits_for_enough_gpus_on_one_node_not_in_total() -> None:
    world = snapshot(
        [node("n1", gpus=4), node("n2", gpus=4)],
        [pending(1, gpus_per_node=4)],
        [busy(10, "n1", (0,), ends_in_h=3), busy(11, "n2", (0,), ends_in_h=5)],
    )
    (reservation,) = schedule(world, BACKFILL, T0).reservations
    assert reservation.start_at == T0 + timedelta(hours=3)
    assert reservation.allocations[0].node == "n1"


def test_gang_reservation_waits_for_the_second_node() -> None:
    world = snapshot(
        [node("n1"), node("n2")],
        [pending(1, nodes=2, gpus_per_node=8)],
        [busy(10, "n1", (0,), ends_in_h=1), busy(11, "n2", (0,), ends_in_h=4)],
    )
    (reservation,) = schedule(world, BACKFILL, T0).reservations
    assert reservation.start_at == T0 + timedelta(hours=4)
    assert [a.node for a in reservation.allocations] == ["n1", "n2"]


def test_two_reservations_do_not_overlap() -> None:
    world = snapshot(
        [node("n1", gpus=8)],
        [pending(1, gpus_per_node=8, walltime_seconds=2 * HOUR), pending(2, gpus_per_node=8, walltime_seconds=HOUR)],
        [busy(99, "n1", (0,), ends_in_h=1)],
    )
    decisions = schedule(world, Policy(backfill=True, reservations=2), T0)
    first, second = decisions.reservations
    assert first.start_at == T0 + timedelta(hours=1)
    assert second.start_at == first.end_at == T0 + timedelta(hours=3)
    assert decisions.pending_reasons == {1: PendingReason.RESOURCES, 2: PendingReason.RESOURCES}


def test_job_past_its_walltime_counts_as_ending_now() -> None:
    overdue = busy(99, "n1", (0,), ends_in_h=-1)
    assert latest_end(overdue, T0) == T0


def test_every_pending_job_is_considered_not_just_the_first_500() -> None:
    blockers = [pending(i, gpus_per_node=8) for i in range(1, 1001)]
    small = pending(5000, gpus_per_node=1, walltime_seconds=60)
    world = snapshot([node("n1", gpus=8), node("n2", gpus=1)], [*blockers, small], [busy(99, "n1", (0,), ends_in_h=1)])
    assert 5000 in started(schedule(world, BACKFILL, T0))


# --- Properties -------------------------------------------------------------------------


@st.composite
def backfill_worlds(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    nodes = [node(f"n{i}", gpus=draw(st.integers(1, 8)), cpus=64) for i in range(draw(st.integers(1, 5)))]
    running = []
    for i, n in enumerate(nodes):
        taken = draw(st.lists(st.sampled_from(range(len(n.gpus))), unique=True))
        if taken:
            running.append(busy(900 + i, n.name, tuple(taken), ends_in_h=draw(st.integers(0, 20)) / 2))
    jobs = [
        pending(
            i,
            nodes=draw(st.integers(1, 2)),
            gpus_per_node=draw(st.integers(1, 8)),
            walltime_seconds=draw(st.sampled_from([600, HOUR, 4 * HOUR, 24 * HOUR])),
        )
        for i in range(1, draw(st.integers(1, 15)))
    ]
    return nodes, running, jobs, draw(st.integers(1, 3))


@settings(max_examples=300, deadline=None)
@given(backfill_worlds())
def test_backfill_never_delays_a_reservation_and_never_double_allocates(world) -> None:  # type: ignore[no-untyped-def]
    nodes, running, jobs, k = world
    decisions = schedule(snapshot(nodes, jobs, running), Policy(backfill=True, reservations=k), T0)

    # no GPU twice
    held = {(a.node, i) for r in running for a in r.allocations for i in a.gpu_indices}
    for start in decisions.starts:
        for a in start.allocations:
            for i in a.gpu_indices:
                assert (a.node, i) not in held
                held.add((a.node, i))

    # replanning every reservation after the cycle's starts gives the same or an earlier start
    by_id = {j.id: j for j in jobs}
    after = Ledger.from_snapshot(snapshot(nodes, [], running))
    releases = [Release(latest_end(r, T0), r.allocations) for r in running]
    for start in decisions.starts:
        after.commit(start)
        releases.append(Release(T0 + timedelta(seconds=by_id[start.job_id].walltime_seconds), start.allocations))
    earlier: list[Reservation] = []
    for reservation in decisions.reservations:
        replanned = plan_reservation(by_id[reservation.job_id], after, releases, earlier)
        assert replanned is not None and replanned.start_at <= reservation.start_at
        earlier.append(reservation)
