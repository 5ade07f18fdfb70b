"""Why pending: every blocker of a waiting job, with evidence, the cycle's reason first."""

from __future__ import annotations

from datetime import timedelta

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.types import Allocation, Blocker, Limits, NodeView, RunningJob, Snapshot
from tests.builders import T0, node, pending

NOW = T0 + timedelta(hours=1)
R = PendingReason


def held(job_id: int, node_name: str, gpus: tuple[int, ...], account: str = "lab", hours_left: int = 2) -> RunningJob:
    return RunningJob(
        job_id,
        (Allocation(node_name, gpus),),
        started_at=NOW - timedelta(hours=1),
        walltime_seconds=(1 + hours_left) * 3600,
        account=account,
        user="u",
    )


def blockers_of(snapshot: Snapshot, job_id: int, policy: Policy | None = None) -> tuple[Blocker, ...]:
    return schedule(snapshot, policy or Policy(backfill=True), NOW).blockers[job_id]


def codes(blockers: tuple[Blocker, ...]) -> list[PendingReason]:
    return [b.code for b in blockers]


def test_a_job_over_quota_and_short_of_gpus_lists_both_with_figures() -> None:
    snapshot = Snapshot(
        nodes=(node("n1"),),
        running=(held(90, "n1", (0, 1, 2, 3, 4, 5)),),
        pending=(pending(1, account="lab", user="u", gpus_per_node=4),),
        account_limits={"lab": Limits(max_gpus=8)},
        account_parents={"lab": None},
    )
    found = blockers_of(snapshot, 1)
    assert codes(found) == [R.ACCOUNT_GPU_LIMIT, R.RESOURCES]
    quota, resources = found
    assert quota.message == "account lab holds 6 of its 8 GPUs; this job needs 4"
    assert quota.evidence == {
        "scope": "account",
        "name": "lab",
        "limit": "max_gpus",
        "used": 6,
        "cap": 8,
        "requested": 4,
    }
    assert resources.message == "best node n1 has 2 of the 4 GPUs it needs free"
    assert resources.evidence["best_node_free_gpus"] == 2


def test_every_limit_that_blocks_is_listed_not_just_the_first() -> None:
    snapshot = Snapshot(
        nodes=(node("n1"), node("n2")),
        running=(held(90, "n1", (0, 1, 2, 3)),),
        pending=(pending(1, account="lab", user="u", gpus_per_node=4),),
        account_limits={"lab": Limits(max_gpus=6, max_running_jobs=1)},
        user_limits={"u": Limits(max_gpus=4)},
        account_parents={"lab": None},
    )
    found = blockers_of(snapshot, 1)
    assert codes(found) == [R.ACCOUNT_JOB_LIMIT, R.ACCOUNT_GPU_LIMIT, R.USER_GPU_LIMIT]


def test_a_job_behind_a_reservation_says_so_but_not_its_place_in_line() -> None:
    snapshot = Snapshot(
        nodes=(node("n1"),),
        running=(held(90, "n1", (0, 1, 2, 3, 4, 5)),),
        pending=(
            pending(1, gpus_per_node=8, walltime_seconds=3600),
            pending(2, gpus_per_node=8, walltime_seconds=3600),
            pending(3, gpus_per_node=2, walltime_seconds=10 * 3600),
        ),
    )
    decisions = schedule(snapshot, Policy(backfill=True), NOW)
    assert decisions.reservations[0].start_at == NOW + timedelta(hours=2)
    first, third = decisions.blockers[1], decisions.blockers[3]
    assert codes(first) == [R.RESOURCES]
    assert first[0].message.endswith("; reserved to start on n1")
    assert first[0].evidence["reserved_nodes"] == ["n1"]
    assert codes(third) == [R.PRIORITY]
    assert third[0].evidence == {}  # no place in line, no job id: they move every tick
    assert third[0].message == (
        "jobs ahead of it in priority order wait first; one of them holds a reservation that this job would delay"
    )


def test_blockers_stay_the_same_when_a_reservation_start_crosses_a_minute() -> None:
    """A running job's recorded start lags the tick that dispatched it by a moment, so
    the reservation behind it moves between ticks; the stored blockers must not."""
    cycles = []
    for started_at in (NOW - timedelta(hours=1, seconds=0.5), NOW - timedelta(hours=1) + timedelta(seconds=0.5)):
        running = RunningJob(90, (Allocation("n1", (0, 1, 2, 3, 4, 5)),), started_at, walltime_seconds=3 * 3600)
        snapshot = Snapshot(
            nodes=(node("n1"),),
            running=(running,),
            pending=(
                pending(1, gpus_per_node=8, walltime_seconds=3600),
                pending(2, gpus_per_node=8, walltime_seconds=3600),
                pending(3, gpus_per_node=2, walltime_seconds=10 * 3600),
            ),
        )
        cycles.append(schedule(snapshot, Policy(backfill=True), NOW))
    before, after = cycles
    assert before.reservations[0].start_at.minute != after.reservations[0].start_at.minute
    assert before.blockers == after.blockers


def test_the_best_node_named_carries_the_gpu_model_asked_for() -> None:
    """Bug report: "best node a100-01 has 0 of the 4 H100-80GB GPUs". A node of another
    model is never the closest fit, however free it is; among nodes that could hold the
    job, the one with the most of its GPUs free is named."""
    cases = [
        (
            "every H100 busy: the first H100 node",
            (0, 0),
            "best node h100-01 has 0 of the 4 H100-80GB GPUs it needs free",
        ),
        (
            "H100s partly free: the one with most",
            (1, 3),
            "best node h100-02 has 3 of the 4 H100-80GB GPUs it needs free",
        ),
    ]
    for scenario, (free_01, free_02), message in cases:
        snapshot = Snapshot(
            nodes=(node("a100-01", model="A100-40GB"), node("h100-01"), node("h100-02")),
            running=(held(90, "h100-01", tuple(range(8 - free_01))), held(91, "h100-02", tuple(range(8 - free_02)))),
            pending=(pending(1, gpus_per_node=4, gpu_model="H100-80GB"),),
        )
        (resources,) = blockers_of(snapshot, 1, Policy())
        assert resources.message == message, scenario


def test_without_backfill_later_jobs_wait_behind_those_ahead() -> None:
    snapshot = Snapshot(
        nodes=(node("n1", gpus=4),),
        running=(held(90, "n1", (0, 1, 2)),),
        pending=(pending(1, gpus_per_node=4), pending(2, gpus_per_node=1)),
    )
    found = blockers_of(snapshot, 2, Policy())
    assert codes(found) == [R.PRIORITY]
    assert (found[0].message, found[0].evidence) == ("jobs ahead of it in priority order wait first", {})


def test_a_job_that_can_never_fit_says_why() -> None:
    cases = [
        (pending(1, gpu_model="L4"), "no node has L4 GPUs"),
        (pending(2, gpus_per_node=16), "the largest node has 8 GPUs; this job asks for 16 per node"),
        (
            pending(3, nodes=3, gpus_per_node=8),
            "needs 3 nodes in one cluster that can hold 8 GPUs; 1 in c1 are up and 1 more are down or drained",
        ),
        (pending(4, cpus_per_node=500), "no node with 1 GPUs has 500 CPUs and 0 MiB (largest: 64 CPUs, 512000 MiB)"),
    ]
    snapshot = Snapshot(
        nodes=(node("n1"), node("n2", schedulable=False)), running=(), pending=tuple(j for j, _ in cases)
    )
    decisions = schedule(snapshot, Policy(), NOW)
    for job, message in cases:
        assert [(b.code, b.message) for b in decisions.blockers[job.id]] == [(R.NODES_UNAVAILABLE, message)]


def test_part_of_a_cpu_waits_off_whole_cpu_nodes_and_says_why_where_all_are() -> None:
    """Slurm allocates whole CPUs: a 0.5-CPU job goes to a node that hands out millicores,
    and where every node is like Slurm's it never fits, in words naming the cause."""
    mixed = Snapshot(
        nodes=(node("slurm1", fractional_cpus=False), node("kube1")),
        running=(),
        pending=(pending(1, cpus_per_node=0.5), pending(2, cpus_per_node=0.25)),
    )
    assert {
        (s.job_id, s.allocations[0].node, s.allocations[0].cpu_millis) for s in schedule(mixed, Policy(), NOW).starts
    } == {
        (1, "kube1", 500),
        (2, "kube1", 250),
    }
    whole_only = Snapshot(
        nodes=(node("slurm1", fractional_cpus=False),), running=(), pending=(pending(3, cpus_per_node=2.5),)
    )
    decisions = schedule(whole_only, Policy(), NOW)
    assert not decisions.starts
    assert [(b.code, b.message) for b in decisions.blockers[3]] == [
        (R.NODES_UNAVAILABLE, "no node can hand out part of a CPU (2.5 CPUs asked; Slurm allocates whole CPUs)")
    ]


def test_dependencies_list_each_job_waited_on_and_those_that_can_never_be_met() -> None:
    snapshot = Snapshot(
        nodes=(node("n1"),),
        running=(),
        pending=(pending(1, dependencies=(("afterok", 50), ("afterany", 51))),),
        dependency_states={50: "FAILED", 51: "RUNNING"},
    )
    found = blockers_of(snapshot, 1)
    assert codes(found) == [R.DEPENDENCY_NEVER, R.DEPENDENCY]
    assert found[0].evidence == {"dependencies": [{"job": 50, "kind": "afterok", "state": "FAILED"}]}
    assert found[1].message == "waits for job 51 (afterany; now RUNNING)"


def test_a_qos_walltime_lowered_after_submission_blocks_with_both_figures() -> None:
    snapshot = Snapshot(
        nodes=(node("n1"),),
        running=(),
        pending=(pending(1, qos="short", walltime_seconds=48 * 3600),),
        qos_max_walltime={"short": 4 * 3600},
    )
    decisions = schedule(snapshot, Policy(), NOW)
    assert decisions.starts == []
    (blocker,) = decisions.blockers[1]
    assert blocker.code is R.WALLTIME_LIMIT
    assert blocker.message == "QOS short allows at most 4 h of walltime; this job asks for 48 h"


def test_the_cycle_start_limit_is_a_blocker_of_its_own() -> None:
    snapshot = Snapshot(nodes=(node("n1"),), running=(), pending=(pending(1), pending(2)))
    decisions = schedule(snapshot, Policy(max_starts=1), NOW)
    assert codes(decisions.blockers[2]) == [R.CYCLE_LIMIT]


def test_started_jobs_have_no_blockers_and_every_waiting_job_has_its_reason_first() -> None:
    snapshot = Snapshot(
        nodes=(node("n1", gpus=4),),
        running=(),
        pending=(pending(1, gpus_per_node=2), pending(2, gpus_per_node=4), pending(3, gpu_model="L4")),
    )
    decisions = schedule(snapshot, Policy(backfill=True), NOW)
    assert 1 not in decisions.blockers
    for job_id, reason in decisions.pending_reasons.items():
        assert decisions.blockers[job_id][0].code is reason


def test_explain_can_be_turned_off_for_replays() -> None:
    snapshot = Snapshot(nodes=(node("n1"),), running=(), pending=(pending(1, gpu_model="L4"),))
    assert schedule(snapshot, Policy(explain=False), NOW).blockers == {}


def test_node_labels_narrow_placement_and_a_missing_label_is_explained() -> None:
    rack1 = NodeView("r1n1", "c1", 64_000, 512_000, node("x").gpus, labels={"rack": "r1"})
    rack2 = NodeView("r2n1", "c1", 64_000, 512_000, node("x").gpus, labels={"rack": "r2"})
    snapshot = Snapshot(
        nodes=(rack1, rack2),
        running=(),
        pending=(pending(1, node_labels=(("rack", "r2"),)), pending(2, node_labels=(("rack", "r9"),))),
    )
    decisions = schedule(snapshot, Policy(), NOW)
    assert [(s.job_id, s.allocations[0].node) for s in decisions.starts] == [(1, "r2n1")]
    assert [(b.code, b.message) for b in decisions.blockers[2]] == [
        (R.NODES_UNAVAILABLE, "no node has the labels rack=r9")
    ]
