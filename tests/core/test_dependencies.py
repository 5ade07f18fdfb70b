"""Dependencies: afterok, afternotok, afterany; impossible ones are said to be so."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.dependencies import Readiness, readiness
from tests.builders import T0, node, pending, snapshot


@pytest.mark.parametrize(
    "kind,state,expected",
    [
        ("afterok", "RUNNING", Readiness.WAITING),
        ("afterok", "COMPLETED", Readiness.READY),
        ("afterok", "FAILED", Readiness.NEVER),
        ("afternotok", "FAILED", Readiness.READY),
        ("afternotok", "TIMEOUT", Readiness.READY),
        ("afternotok", "COMPLETED", Readiness.NEVER),
        ("afterany", "CANCELLED", Readiness.READY),
        ("afterany", "PENDING", Readiness.WAITING),
    ],
)
def test_one_dependency(kind, state, expected):  # type: ignore[no-untyped-def]
    assert readiness([(kind, 7)], {7: state}) is expected


def test_all_must_be_met_and_never_wins_over_waiting() -> None:
    states = {1: "COMPLETED", 2: "RUNNING", 3: "FAILED"}
    assert readiness([("afterok", 1), ("afterany", 2)], states) is Readiness.WAITING
    assert readiness([("afterany", 2), ("afterok", 3)], states) is Readiness.NEVER


def test_a_vanished_job_counts_as_ended_without_success() -> None:
    assert readiness([("afterok", 99)], {}) is Readiness.NEVER
    assert readiness([("afterany", 99)], {}) is Readiness.READY


def test_the_cycle_holds_dependent_jobs_without_blocking_others() -> None:
    world = replace(
        snapshot(
            [node("n1", gpus=1)],
            [pending(1, dependencies=(("afterok", 50),)), pending(2, dependencies=(("afterok", 51),)), pending(3)],
        ),
        dependency_states={50: "RUNNING", 51: "FAILED"},
    )
    decisions = schedule(world, Policy(), T0)
    assert [s.job_id for s in decisions.starts] == [3]
    assert decisions.pending_reasons == {1: PendingReason.DEPENDENCY, 2: PendingReason.DEPENDENCY_NEVER}
