"""Quota limits on concurrent use: per account (covering its subtree) and per user."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.types import Allocation, Limits, RunningJob
from tests.builders import T0, node, pending, snapshot

PARENTS = {"nlp": "research", "vision": "research", "research": None}


def job(job_id: int, account: str = "nlp", user: str = "alice", **request):  # type: ignore[no-untyped-def]
    return pending(job_id, account=account, user=user, **request)


def holding(job_id: int, node_name: str, gpus: tuple[int, ...], account: str = "nlp", user: str = "alice"):  # type: ignore[no-untyped-def]
    return RunningJob(job_id, (Allocation(node_name, gpus),), account=account, user=user)


CASES = [
    (
        "account GPU limit: 4 held + 4 asked > 6",
        dict(account_limits={"nlp": Limits(max_gpus=6)}),
        [holding(90, "n1", (0, 1, 2, 3))],
        [job(1, gpus_per_node=4)],
        {1: PendingReason.ACCOUNT_GPU_LIMIT},
    ),
    (
        "a parent's limit covers its children",
        dict(account_limits={"research": Limits(max_gpus=6)}),
        [holding(90, "n1", (0, 1, 2, 3), account="vision")],
        [job(1, gpus_per_node=4)],
        {1: PendingReason.ACCOUNT_GPU_LIMIT},
    ),
    (
        "running-jobs limit",
        dict(account_limits={"nlp": Limits(max_running_jobs=1)}),
        [holding(90, "n1", (0,))],
        [job(1)],
        {1: PendingReason.ACCOUNT_JOB_LIMIT},
    ),
    (
        "user GPU limit counts the user's jobs in every account",
        dict(user_limits={"alice": Limits(max_gpus=2)}),
        [holding(90, "n1", (0, 1), account="vision")],
        [job(1)],
        {1: PendingReason.USER_GPU_LIMIT},
    ),
    (
        "user running-jobs limit",
        dict(user_limits={"alice": Limits(max_running_jobs=2)}),
        [holding(90, "n1", (0,)), holding(91, "n1", (1,))],
        [job(1)],
        {1: PendingReason.USER_JOB_LIMIT},
    ),
    (
        "per-model limit applies to the model the job is placed on",
        dict(account_limits={"nlp": Limits(max_gpus_per_model={"H100-80GB": 1})}),
        [holding(90, "n1", (0,))],
        [job(1)],
        {1: PendingReason.ACCOUNT_GPU_LIMIT},
    ),
    (
        "limits of other accounts do not apply",
        dict(account_limits={"vision": Limits(max_gpus=0)}),
        [],
        [job(1)],
        {},
    ),
]


@pytest.mark.parametrize("case_id,limits,running,jobs,reasons", CASES, ids=[c[0] for c in CASES])
def test_limits(case_id, limits, running, jobs, reasons):  # type: ignore[no-untyped-def]
    world = replace(snapshot([node("n1")], jobs, running), account_parents=PARENTS, **limits)
    decisions = schedule(world, Policy(), T0)
    assert decisions.pending_reasons == reasons
    assert {s.job_id for s in decisions.starts} == {j.id for j in jobs} - set(reasons)


def test_limited_job_does_not_block_the_queue_under_strict_fifo() -> None:
    world = replace(
        snapshot([node("n1")], [job(1, gpus_per_node=4), job(2, account="vision")]),
        account_limits={"nlp": Limits(max_gpus=2)},
        account_parents=PARENTS,
    )
    decisions = schedule(world, Policy(strict_order=True), T0)
    assert [s.job_id for s in decisions.starts] == [2]


def test_starts_in_one_cycle_count_against_the_limit() -> None:
    world = replace(
        snapshot([node("n1")], [job(i, gpus_per_node=2) for i in (1, 2, 3)]),
        account_limits={"nlp": Limits(max_gpus=4)},
        account_parents=PARENTS,
    )
    decisions = schedule(world, Policy(), T0)
    assert [s.job_id for s in decisions.starts] == [1, 2]
    assert decisions.pending_reasons == {3: PendingReason.ACCOUNT_GPU_LIMIT}


@settings(max_examples=200, deadline=None)
@given(
    caps=st.dictionaries(st.sampled_from(["nlp", "vision", "research"]), st.integers(0, 12), max_size=3),
    user_cap=st.one_of(st.none(), st.integers(0, 12)),
    requests=st.lists(
        st.tuples(st.sampled_from(["nlp", "vision"]), st.sampled_from(["alice", "bob"]), st.integers(1, 8)),
        max_size=12,
    ),
    backfill=st.booleans(),
)
def test_no_limit_is_ever_exceeded(caps, user_cap, requests, backfill) -> None:  # type: ignore[no-untyped-def]
    jobs = [job(i, account=a, user=u, gpus_per_node=g) for i, (a, u, g) in enumerate(requests, start=1)]
    world = replace(
        snapshot([node(f"n{i}") for i in range(4)], jobs),
        account_limits={a: Limits(max_gpus=c) for a, c in caps.items()},
        user_limits={"alice": Limits(max_gpus=user_cap)} if user_cap is not None else {},
        account_parents=PARENTS,
    )
    decisions = schedule(world, Policy(backfill=backfill), T0)
    by_id = {j.id: j for j in jobs}
    used: dict[str, int] = {}
    for start in decisions.starts:
        j = by_id[start.job_id]
        for key in [j.account, *(["research"] if j.account != "research" else []), f"user:{j.user}"]:
            used[key] = used.get(key, 0) + j.gpus
    for account, cap in caps.items():
        assert used.get(account, 0) <= cap
    if user_cap is not None:
        assert used.get("user:alice", 0) <= user_cap
