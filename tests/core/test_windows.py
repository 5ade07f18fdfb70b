"""Reservations and maintenance windows (``scontrol create reservation``): nodes set aside
for a span; jobs of others kept off them whenever their walltime would reach in, a
reservation's own jobs only on its nodes and inside it, and no plan ever inside a
maintenance window."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.types import Allocation, RunningJob, Snapshot, Window
from tests.builders import T0, node, pending

HOUR = 3600
NOW = T0 + timedelta(hours=1)
POLICY = Policy(backfill=True, estimates=True)


def maintenance(*nodes: str, in_h: float, for_h: float, name: str = "maint") -> Window:
    start = NOW + timedelta(hours=in_h)
    return Window(name, frozenset(nodes), start, start + timedelta(hours=for_h), maintenance=True)


def world(jobs, windows, nodes=None, running=()):  # type: ignore[no-untyped-def]
    return Snapshot(
        nodes=tuple(nodes or (node("n1"), node("n2"))), running=tuple(running), pending=tuple(jobs), windows=windows
    )


def placed(decisions) -> dict[int, str]:  # type: ignore[no-untyped-def]
    return {s.job_id: s.allocations[0].node for s in decisions.starts}


def test_a_job_that_ends_before_maintenance_runs_there_and_one_that_would_not_goes_elsewhere() -> None:
    window = (maintenance("n1", in_h=2, for_h=4),)
    short = pending(1, gpus_per_node=8, walltime_seconds=HOUR)
    long = pending(2, gpus_per_node=8, walltime_seconds=3 * HOUR)
    assert placed(schedule(world([short, long], window), POLICY, NOW)) == {1: "n1", 2: "n2"}


def test_a_job_kept_off_by_maintenance_says_so_with_the_window_and_is_planned_after_it() -> None:
    window = (maintenance("n1", "n2", in_h=1, for_h=4),)
    decisions = schedule(world([pending(1, gpus_per_node=8, walltime_seconds=2 * HOUR)], window), POLICY, NOW)
    assert not decisions.starts
    assert decisions.pending_reasons[1] is PendingReason.NODES_UNAVAILABLE
    (blocker,) = decisions.blockers[1]
    assert blocker.message == "reserved for maintenance from 2026-01-01 02:00 to 06:00 UTC on n1, n2"
    assert decisions.estimates[1] == NOW + timedelta(hours=5)  # when the window ends
    (reservation,) = decisions.reservations
    assert reservation.start_at == NOW + timedelta(hours=5)


def test_nothing_starts_on_a_node_in_maintenance_however_short() -> None:
    window = (maintenance("n1", in_h=-1, for_h=2),)
    jobs = [pending(i, gpus_per_node=1, walltime_seconds=60) for i in range(1, 12)]
    decisions = schedule(world(jobs, window), Policy(backfill=True, strict_order=False, estimates=True), NOW)
    assert set(placed(decisions).values()) == {"n2"} and len(decisions.starts) == 8


def test_a_reservation_runs_its_own_jobs_on_its_nodes_and_keeps_others_off() -> None:
    start = NOW - timedelta(minutes=30)
    window = (Window("lab-demo", frozenset({"n1"}), start, start + timedelta(hours=4), accounts=frozenset({"lab"})),)
    theirs = pending(1, gpus_per_node=8, walltime_seconds=HOUR, account="other")  # first in line
    ours = pending(2, gpus_per_node=8, walltime_seconds=HOUR, account="lab", reservation="lab-demo")
    assert placed(schedule(world([theirs, ours], window), POLICY, NOW)) == {1: "n2", 2: "n1"}
    not_asking = pending(3, gpus_per_node=8, walltime_seconds=HOUR, account="lab")  # lab's, but not in it
    decisions = schedule(world([theirs, not_asking], window), POLICY, NOW)
    assert placed(decisions) == {1: "n2"} and decisions.pending_reasons[3] is PendingReason.NODES_UNAVAILABLE


def test_a_reservation_job_waits_for_its_window_and_never_runs_past_its_end() -> None:
    start = NOW + timedelta(hours=1)
    window = (Window("later", frozenset({"n1"}), start, start + timedelta(hours=2), users=frozenset({"alice"})),)
    early = pending(1, gpus_per_node=1, user="alice", reservation="later")
    decisions = schedule(world([early], window), POLICY, NOW)
    assert not decisions.starts and decisions.pending_reasons[1] is PendingReason.RESERVATION
    (blocker,) = decisions.blockers[1]
    assert blocker.message == (
        "runs in reservation later, from 2026-01-01 02:00 to 2026-01-01 04:00 UTC, once its walltime fits inside it"
    )
    inside = NOW + timedelta(hours=1, minutes=30)
    too_long = pending(2, gpus_per_node=1, user="alice", reservation="later", walltime_seconds=2 * HOUR)
    fits = pending(3, gpus_per_node=1, user="alice", reservation="later", walltime_seconds=HOUR // 2)
    decisions = schedule(world([too_long, fits], window), POLICY, inside)
    assert placed(decisions) == {3: "n1"} and decisions.pending_reasons[2] is PendingReason.RESERVATION


def test_a_job_asking_for_a_reservation_that_is_not_there_or_not_theirs_waits() -> None:
    window = (Window("lab-only", frozenset({"n1"}), NOW, NOW + timedelta(hours=2), accounts=frozenset({"lab"})),)
    stranger = pending(1, gpus_per_node=1, account="other", reservation="lab-only")
    gone = pending(2, gpus_per_node=1, account="lab", reservation="ended-yesterday")
    decisions = schedule(world([stranger, gone], window), POLICY, NOW)
    assert not decisions.starts
    assert decisions.pending_reasons == {1: PendingReason.RESERVATION, 2: PendingReason.NODES_UNAVAILABLE}
    assert [b.message for b in decisions.blockers[2]] == ["reservation ended-yesterday does not exist or has ended"]
    assert "is not for this job's account or owner" in decisions.blockers[1][0].message


# --- Property: no plan ever puts a job on a node inside a maintenance window -----------------


@settings(max_examples=150, deadline=None)
@given(
    windows=st.lists(
        st.tuples(st.sets(st.sampled_from(["n1", "n2", "n3"]), min_size=1), st.integers(-3, 6), st.integers(1, 5)),
        min_size=1,
        max_size=3,
    ),
    asks=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 8)), min_size=1, max_size=12),
    busy=st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3"]), st.integers(1, 8), st.integers(1, 6)), max_size=3),
    strict=st.booleans(),
)
def test_property_no_start_reservation_or_estimate_reaches_into_maintenance(windows, asks, busy, strict) -> None:  # type: ignore[no-untyped-def]
    spans = tuple(
        maintenance(*nodes, in_h=in_h, for_h=for_h, name=f"m{i}") for i, (nodes, in_h, for_h) in enumerate(windows)
    )
    running: list[RunningJob] = []
    for k, (name, gpus, ends_h) in enumerate(busy):
        if name not in {r.allocations[0].node for r in running}:
            started = NOW - timedelta(hours=1)
            running.append(RunningJob(900 + k, (Allocation(name, tuple(range(gpus))),), started, (1 + ends_h) * HOUR))
    jobs = [pending(i + 1, gpus_per_node=g, walltime_seconds=h * HOUR) for i, (g, h) in enumerate(asks)]
    nodes = (node("n1"), node("n2"), node("n3"))
    policy = Policy(backfill=not strict, strict_order=strict, estimates=True)
    decisions = schedule(world(jobs, spans, nodes, running), policy, NOW)

    def clear(names: set[str], start, end) -> bool:  # type: ignore[no-untyped-def]
        return not any(w.start_at < end and w.end_at > start and names & w.nodes for w in spans)

    walltime = {j.id: timedelta(seconds=j.walltime_seconds) for j in jobs}
    for s in decisions.starts:
        assert clear({a.node for a in s.allocations}, NOW, NOW + walltime[s.job_id])
    for r in decisions.reservations:
        assert clear({a.node for a in r.allocations}, r.start_at, r.end_at)
    everywhere = [w for w in spans if w.nodes == {"n1", "n2", "n3"}]
    for job_id, at in decisions.estimates.items():  # where the window covers every node
        assert all(not (w.start_at < at + walltime[job_id] and w.end_at > at) for w in everywhere)


def test_windows_that_ended_change_nothing() -> None:
    jobs = [pending(i, gpus_per_node=4, walltime_seconds=HOUR) for i in range(1, 6)]
    plain = schedule(world(jobs, ()), POLICY, NOW)
    ended = schedule(world(jobs, (maintenance("n1", "n2", in_h=-5, for_h=2),)), POLICY, NOW)
    assert ended.starts == plain.starts and ended.estimates == plain.estimates
    assert replace(ended, blockers={}) == replace(plain, blockers={})
