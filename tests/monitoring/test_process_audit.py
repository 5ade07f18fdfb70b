"""The GPU process audit's rules (``monitoring.process_audit``), pure: which process on a
GPU breaks which rule, given the jobs on its node."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitoring.process_audit import ESCAPED, FOREIGN, LEFTOVER, SeenProcess, audit_gpu, owns
from tests.builders import T0, gpu_process, node_job

GRACE = timedelta(seconds=120)
ALICE, BOB = 1001, 1002


def rules(index, processes, active=(), ended=(), *, at=T0, slices=frozenset()):
    found = audit_gpu(
        index, at, [SeenProcess.from_sample(p) for p in processes], list(active), list(ended), GRACE, slices
    )
    return [(f.rule, f.process.pid, f.job_id) for f in found]


@pytest.mark.parametrize(
    "index,processes,active,ended,expected",
    [
        (0, [gpu_process(10, uid=ALICE)], [node_job(1, (0,), uid=ALICE)], [], []),
        (3, [gpu_process(10, uid=BOB)], [node_job(1, (0,), uid=ALICE)], [], [(FOREIGN, 10, None)]),
        (3, [gpu_process(10)], [], [], [(FOREIGN, 10, None)]),
        (0, [gpu_process(10, uid=BOB)], [node_job(1, (0,), uid=ALICE)], [], [(FOREIGN, 10, None)]),
        (0, [gpu_process(10)], [node_job(1, (0,), uid=ALICE)], [], []),
        (0, [gpu_process(10, uid=BOB)], [node_job(1, (0,), uid=None)], [], []),
        (3, [gpu_process(10, uid=ALICE)], [node_job(1, (0, 1), uid=ALICE)], [], [(ESCAPED, 10, 1)]),
        (
            1,
            [gpu_process(10, uid=ALICE)],
            [node_job(1, (0,), uid=ALICE), node_job(2, (1,), uid=BOB)],
            [],
            [(ESCAPED, 10, 1)],
        ),
        (
            2,
            [gpu_process(10, uid=ALICE)],
            [],
            [node_job(5, (2,), uid=ALICE, ended_at=T0 - timedelta(minutes=5))],
            [(LEFTOVER, 10, 5)],
        ),
        (2, [gpu_process(10, uid=ALICE)], [], [node_job(5, (2,), uid=ALICE, ended_at=T0 - timedelta(seconds=60))], []),
        (
            2,
            [gpu_process(10, uid=ALICE)],
            [node_job(6, (2,), uid=BOB)],
            [node_job(5, (2,), uid=ALICE, ended_at=T0 - timedelta(minutes=5))],
            [(LEFTOVER, 10, 5)],
        ),
        (
            2,
            [gpu_process(10, uid=BOB)],
            [],
            [node_job(5, (2,), uid=ALICE, ended_at=T0 - timedelta(minutes=5))],
            [(FOREIGN, 10, None)],
        ),
        (
            2,
            [gpu_process(10)],
            [],
            [node_job(5, (2,), uid=ALICE, ended_at=T0 - timedelta(minutes=5))],
            [(LEFTOVER, 10, 5)],
        ),
        (0, [gpu_process(10, uid=BOB), gpu_process(10, uid=BOB)], [], [], [(FOREIGN, 10, None)]),
    ],
    ids=[
        "its holder's process is accounted for",
        "(a) a process on a GPU the portal believes free is foreign",
        "(a) a process of unknown owner on a free GPU is foreign",
        "(a) another user's process on a held GPU is foreign",
        "a process of unknown owner on a held GPU has the benefit of the doubt",
        "a holder without a cluster identity cannot be told: benefit of the doubt",
        "(b) a job's process on a GPU of its node it was not given escaped",
        "(b) a job's process on another job's GPU escaped",
        "(c) a process still on an ended job's GPU past the grace is a leftover",
        "(c) within the grace it is not reported",
        "(c) a leftover on a GPU another job now holds",
        "someone else's process on an ended job's GPU is foreign",
        "a process of unknown owner on an ended job's GPU is taken as its leftover",
        "a process listed twice is one finding",
    ],
)
def test_audit_rules(index, processes, active, ended, expected):
    assert rules(index, processes, active, ended) == expected


def test_a_job_on_a_mig_slice_holds_the_gpu_its_processes_are_listed_on():
    on_slice = node_job(1, (8,), uid=ALICE)
    assert rules(0, [gpu_process(10, uid=ALICE)], [on_slice], slices=frozenset({8, 9})) == []
    assert rules(0, [gpu_process(10, uid=BOB)], [on_slice], slices=frozenset({8, 9})) == [(FOREIGN, 10, None)]


def test_owner_by_uid_where_both_know_it_else_by_user_name():
    from monitoring.process_audit import Identity

    alice = Identity(ALICE, "alice")
    assert owns(alice, SeenProcess(1, uid=ALICE, user="someone")) is True
    assert owns(alice, SeenProcess(1, uid=BOB, user="alice")) is False
    assert owns(Identity(None, "alice"), SeenProcess(1, uid=BOB, user="alice")) is True
    assert owns(alice, SeenProcess(1)) is None
    assert owns(None, SeenProcess(1, uid=ALICE)) is None


def test_each_finding_says_which_rule_and_the_evidence():
    [escaped] = audit_gpu(
        3, T0, [SeenProcess(10, uid=ALICE, user="alice")], [node_job(1, (0, 1), uid=ALICE)], [], GRACE
    )
    assert escaped.reason == "job 1 of alice (uid 1001) runs on this node with GPUs 0, 1, not GPU 3"
    ended = node_job(5, (2,), uid=ALICE, ended_at=T0 - timedelta(minutes=5))
    [left] = audit_gpu(2, T0, [SeenProcess(10, uid=ALICE)], [], [ended], GRACE)
    assert left.reason == "still on GPU 2 5 min after job 5 ended (grace 120 s)"
    [foreign] = audit_gpu(0, T0, [SeenProcess(10, uid=BOB, user="bob")], [node_job(1, (0,), uid=ALICE)], [], GRACE)
    assert foreign.reason == "bob (uid 1002) owns no job on this GPU (job 1 holds it)"
