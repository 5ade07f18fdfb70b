"""QOS limits: what one user's running jobs in a QOS may hold (GPUs, CPUs, jobs), and
what all of the QOS's running jobs may hold together (GPUs), as Slurm's QOS
``MaxTRESPerUser``, ``MaxJobsPerUser`` and ``GrpTRES``."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.reason_words import REASON_WORDS
from scheduler.core.types import CPU_MILLIS, Allocation, Limits, QosLimits, RunningJob
from tests.builders import T0, node, pending, snapshot

#: The usual debug lane: 2 GPUs and 2 jobs per user, 16 CPUs per user, 6 GPUs in all.
DEBUG = QosLimits(max_gpus_per_user=2, max_running_jobs_per_user=2, max_cpu_millis_per_user=16 * CPU_MILLIS, max_gpus=6)


def job(job_id: int, user: str = "alice", qos: str = "debug", account: str = "nlp", **request):  # type: ignore[no-untyped-def]
    return pending(job_id, user=user, qos=qos, account=account, **request)


def holding(  # type: ignore[no-untyped-def]
    job_id: int, node_name: str, gpus: tuple[int, ...], user: str = "alice", qos: str = "debug", cpus: int = 1, **more
):
    return RunningJob(
        job_id,
        (Allocation(node_name, gpus, cpu_millis=cpus * CPU_MILLIS),),
        started_at=T0 - timedelta(hours=1),
        walltime_seconds=86400,
        user=user,
        qos=qos,
        account=more.pop("account", "nlp"),
        **more,
    )


CASES = [
    (
        "alice's third debug job waits with QOSMaxJobsPerUserLimit",
        {"debug": DEBUG},
        [],
        [job(1), job(2), job(3)],
        {3: PendingReason.QOS_USER_JOB_LIMIT},
    ),
    (
        "alice holds 1 debug GPU of 2: a 2-GPU job waits with QOSMaxGRESPerUser",
        {"debug": DEBUG},
        [holding(90, "n1", (0,))],
        [job(1, gpus_per_node=2)],
        {1: PendingReason.QOS_USER_GPU_LIMIT},
    ),
    (
        "bob is not held back by alice's debug GPUs",
        {"debug": DEBUG},
        [holding(90, "n1", (0, 1))],
        [job(1, user="bob", gpus_per_node=2)],
        {},
    ),
    (
        "alice's debug jobs count in every account",
        {"debug": DEBUG},
        [holding(90, "n1", (0, 1), account="vision")],
        [job(1)],
        {1: PendingReason.QOS_USER_GPU_LIMIT},
    ),
    (
        "her jobs in another QOS do not count against debug",
        {"debug": DEBUG},
        [holding(90, "n1", (0, 1, 2, 3), qos="normal")],
        [job(1, gpus_per_node=2)],
        {},
    ),
    (
        "alice holds 14 of 16 debug CPUs: a 4-CPU job waits with QOSMaxCpuPerUserLimit",
        {"debug": DEBUG},
        [holding(90, "n1", (0,), cpus=14)],
        [job(1, cpus_per_node=4)],
        {1: PendingReason.QOS_USER_CPU_LIMIT},
    ),
    (
        "a GPU-less job is capped by CPUs alone",
        {"cpu": QosLimits(max_cpu_millis_per_user=8 * CPU_MILLIS)},
        [],
        [job(1, qos="cpu", gpus_per_node=0, cpus_per_node=6), job(2, qos="cpu", gpus_per_node=0, cpus_per_node=6)],
        {2: PendingReason.QOS_USER_CPU_LIMIT},
    ),
    (
        "bob and charlie hold 5 of debug's 6 GPUs: alice's 2-GPU job waits with QOSGrpGRES",
        {"debug": DEBUG},
        [holding(90, "n1", (0, 1), user="bob"), holding(91, "n1", (2, 3), user="charlie"), holding(92, "n1", (4,))],
        [job(1, user="dave", gpus_per_node=2)],
        {1: PendingReason.QOS_GROUP_GPU_LIMIT},
    ),
    (
        "starts in one cycle count against the group cap",
        {"debug": QosLimits(max_gpus=4)},
        [],
        [job(1, user="alice", gpus_per_node=2), job(2, user="bob", gpus_per_node=2), job(3, user="charlie")],
        {3: PendingReason.QOS_GROUP_GPU_LIMIT},
    ),
    (
        "shared GPUs count their share",
        {"debug": QosLimits(max_gpus_per_user=1)},
        [RunningJob(90, (Allocation("n1", (0,), gpu_share=0.5),), user="alice", qos="debug")],
        [job(1, gpu_share=0.5), job(2, gpu_share=0.25)],
        {2: PendingReason.QOS_USER_GPU_LIMIT},
    ),
    (
        "an account's quota is checked first and names itself",
        {"debug": DEBUG},
        [holding(90, "n1", (0, 1))],
        [job(1)],
        {1: PendingReason.ACCOUNT_GPU_LIMIT},
    ),
]


@pytest.mark.parametrize("case_id,qos_limits,running,jobs,reasons", CASES, ids=[c[0] for c in CASES])
def test_qos_limits(case_id, qos_limits, running, jobs, reasons):  # type: ignore[no-untyped-def]
    account_limits = {"nlp": Limits(max_gpus=2)} if "quota" in case_id else {}
    nodes = [node("n1", gpus=8, cpus=64)]
    if any(j.gpu_share for j in jobs):
        nodes = [replace(nodes[0], gpus=tuple(replace(g, sharing="time-slicing") for g in nodes[0].gpus))]
    world = replace(snapshot(nodes, jobs, running), qos_limits=qos_limits, account_limits=account_limits)
    decisions = schedule(world, Policy(), T0)
    assert decisions.pending_reasons == reasons
    assert {s.job_id for s in decisions.starts} == {j.id for j in jobs} - set(reasons)


def test_the_blocker_shows_what_the_user_holds_against_the_cap() -> None:
    world = replace(
        snapshot([node("n1")], [job(1, gpus_per_node=2)], [holding(90, "n1", (0,))]), qos_limits={"debug": DEBUG}
    )
    blocker = schedule(world, Policy(), T0).blockers[1][0]
    assert blocker.code is PendingReason.QOS_USER_GPU_LIMIT
    assert blocker.message == "alice holds 1 of the 2 GPUs QOS debug allows a user; this job needs 2"
    assert blocker.evidence == {
        "scope": "qos",
        "name": "debug",
        "limit": "max_gpus_per_user",
        "user": "alice",
        "used": 1,
        "cap": 2,
        "requested": 2,
    }


def test_every_qos_limit_broken_is_a_blocker_with_its_own_word() -> None:
    running = [holding(90, "n1", (0, 1), cpus=16), holding(91, "n1", (2, 3)), holding(92, "n1", (4, 5), user="bob")]
    world = replace(snapshot([node("n1")], [job(1)], running), qos_limits={"debug": DEBUG})
    blockers = schedule(world, Policy(), T0).blockers[1]
    assert [b.code.value for b in blockers] == [
        "QOSMaxJobsPerUserLimit",
        "QOSMaxGRESPerUser",
        "QOSMaxCpuPerUserLimit",
        "QOSGrpGRES",
    ]
    assert blockers[0].message == "QOS debug runs 2 of the 2 jobs it allows alice at once"
    assert blockers[2].evidence["used"] == 17 and blockers[2].evidence["cap"] == 16
    assert (
        blockers[3].message == "the running jobs of QOS debug hold 6 of the 6 GPUs it allows in all; this job needs 1"
    )
    assert all(REASON_WORDS[b.code].title for b in blockers)


def test_a_capped_job_does_not_block_the_queue_under_strict_fifo() -> None:
    world = replace(
        snapshot([node("n1")], [job(1, gpus_per_node=4), job(2, qos="normal")]), qos_limits={"debug": DEBUG}
    )
    decisions = schedule(world, Policy(strict_order=True), T0)
    assert [s.job_id for s in decisions.starts] == [2]
    assert decisions.pending_reasons == {1: PendingReason.QOS_USER_GPU_LIMIT}


def test_a_capped_job_evicts_no_one() -> None:
    """A high job over its QOS's per-user cap does not preempt: the cap holds whatever
    eviction could free."""
    running = [holding(90, "n1", (0, 1), qos="high"), holding(91, "n1", (2, 3), user="bob", qos="low")]
    world = replace(
        snapshot([node("n1", gpus=4)], [job(1, qos="high", gpus_per_node=2)], running),
        qos_limits={"high": QosLimits(max_gpus_per_user=2)},
        qos_preempts={"high": frozenset({"low"})},
        qos_priorities={"low": 0, "high": 100},
    )
    decisions = schedule(world, Policy(preemption=True), T0)
    assert decisions.evictions == [] and decisions.starts == []
    assert decisions.pending_reasons == {1: PendingReason.QOS_USER_GPU_LIMIT}


def test_an_evicted_job_gives_its_qos_room_back() -> None:
    """Bob's debug job is preempted by alice's high one, which needs all of n1: his debug
    GPUs no longer count, so his next debug job starts on n2 in the same cycle."""
    running = [holding(90, "n1", (0, 1), user="bob", qos="debug")]
    world = replace(
        snapshot([node("n1", gpus=4), node("n2", gpus=2)], [job(1, qos="high", gpus_per_node=4)], running),
        qos_limits={"debug": QosLimits(max_gpus_per_user=2)},
        qos_preempts={"high": frozenset({"debug"})},
        qos_priorities={"debug": 0, "high": 100},
    )
    world = replace(world, pending=(*world.pending, job(2, user="bob", gpus_per_node=2)))
    decisions = schedule(world, Policy(preemption=True), T0)
    assert [e.victim_id for e in decisions.evictions] == [90]
    assert [(s.job_id, s.allocations[0].node) for s in decisions.starts] == [(1, "n1"), (2, "n2")]


# --- No start ever exceeds a QOS limit -------------------------------------------------

USERS = ["alice", "bob", "charlie"]
QOS_NAMES = ["debug", "low", "high"]
caps = st.one_of(st.none(), st.integers(0, 8))
qos_limits = st.builds(
    QosLimits,
    max_gpus_per_user=caps,
    max_cpu_millis_per_user=st.one_of(st.none(), st.integers(0, 24).map(lambda c: c * CPU_MILLIS)),
    max_running_jobs_per_user=st.one_of(st.none(), st.integers(0, 4)),
    max_gpus=st.one_of(st.none(), st.integers(0, 12)),
)


def _holds(allocations: tuple[Allocation, ...]) -> tuple[float, int]:
    return sum(a.gpu_amount for a in allocations), sum(a.cpu_millis for a in allocations)


@settings(max_examples=300, deadline=None)
@given(
    limits=st.dictionaries(st.sampled_from(QOS_NAMES), qos_limits, max_size=3),
    account_cap=st.one_of(st.none(), st.integers(0, 12)),
    running_jobs=st.lists(
        st.tuples(st.sampled_from(USERS), st.sampled_from(QOS_NAMES), st.integers(1, 4), st.integers(1, 8)),
        max_size=6,
    ),
    requests=st.lists(
        st.tuples(
            st.sampled_from(USERS),
            st.sampled_from(QOS_NAMES),
            st.sampled_from(["nlp", "vision"]),
            st.integers(0, 4),
            st.integers(1, 8),
            st.integers(1, 2),
        ),
        max_size=14,
    ),
    backfill=st.booleans(),
    preemption=st.booleans(),
)
def test_no_start_ever_exceeds_a_qos_limit(  # type: ignore[no-untyped-def]
    limits, account_cap, running_jobs, requests, backfill, preemption
) -> None:
    """Replaying the cycle's starts in order (each after the evictions made for it), no
    user's jobs in a QOS and no QOS's jobs in all hold more than its caps once a job
    starts, with quotas, backfill and preemption in play."""
    nodes = [node(f"n{i}", gpus=4, cpus=16) for i in range(4)]
    running: list[RunningJob] = []
    free = {n.name: list(range(4)) for n in nodes}
    for i, (user, qos, gpus, cpus) in enumerate(running_jobs, start=100):
        name = next((n for n, f in free.items() if len(f) >= gpus), None)
        if name is None:
            continue
        taken, free[name] = tuple(free[name][:gpus]), free[name][gpus:]
        running.append(holding(i, name, taken, user=user, qos=qos, cpus=cpus // 2 or 1))
    jobs = [
        job(i, user=u, qos=q, account=a, gpus_per_node=g, cpus_per_node=c, nodes=n, walltime_seconds=600 * i)
        for i, (u, q, a, g, c, n) in enumerate(requests, start=1)
    ]
    world = replace(
        snapshot(nodes, jobs, running),
        qos_limits=limits,
        account_limits={"nlp": Limits(max_gpus=account_cap)} if account_cap is not None else {},
        qos_preempts={"high": frozenset({"low", "debug"})},
        qos_priorities={"debug": 0, "low": 0, "high": 100},
    )
    decisions = schedule(world, Policy(backfill=backfill, preemption=preemption, reclaim=False), T0)

    holding_now: dict[int, tuple[str, str, tuple[Allocation, ...]]] = {
        r.id: (r.user, r.qos, r.allocations) for r in running
    }
    by_id = {j.id: j for j in jobs}
    for start in decisions.starts:
        for eviction in decisions.evictions:
            if eviction.by == start.job_id:
                holding_now.pop(eviction.victim_id)
        started = by_id[start.job_id]
        holding_now[start.job_id] = (started.user, started.qos, start.allocations)
        cap = limits.get(started.qos)
        if cap is None:
            continue
        mine = [a for user, qos, a in holding_now.values() if qos == started.qos and user == started.user]
        everyone = [a for _, qos, a in holding_now.values() if qos == started.qos]
        gpus = sum(_holds(a)[0] for a in mine)
        cpus = sum(_holds(a)[1] for a in mine)
        if cap.max_gpus_per_user is not None:
            assert gpus <= cap.max_gpus_per_user
        if cap.max_cpu_millis_per_user is not None:
            assert cpus <= cap.max_cpu_millis_per_user
        if cap.max_running_jobs_per_user is not None:
            assert len(mine) <= cap.max_running_jobs_per_user
        if cap.max_gpus is not None:
            assert sum(_holds(a)[0] for a in everyone) <= cap.max_gpus
    for job_id, reason in decisions.pending_reasons.items():
        if reason.value.startswith("QOS"):
            assert by_id[job_id].qos in limits
