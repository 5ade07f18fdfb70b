"""One UPDATE for many rows with their own values stores what the ORM would store, on
whichever database the tests run against (PostgreSQL in CI, SQLite here)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from common.db.bulk import update_matching_rows, update_rows
from scheduler.choices import JobState
from scheduler.models import Cluster, Job
from tests.builders import submit

pytestmark = pytest.mark.django_db

AT = datetime(2026, 12, 1, 12, 30, 15, 123456, tzinfo=UTC)


def test_each_row_gets_its_own_values_and_every_row_the_shared_ones(world):
    cluster = Cluster.objects.get(name="test")  # the world's
    jobs = [submit(world.alice, world.lab) for _ in range(3)]
    allocations = [[{"node": f"n{i}", "gpus": [i, i + 1]}] for i in range(3)]
    update_rows(
        Job,
        [job.id for job in jobs],
        {"allocations": allocations, "borrowed": [True, False, True], "cluster": [cluster.id] * 3},
        same={"state": JobState.DISPATCHING, "dispatched_at": AT, "pending_blockers": [], "estimated_start_at": None},
    )
    for job, expected, borrowed in zip(jobs, allocations, [True, False, True], strict=True):
        job.refresh_from_db()
        assert (job.allocations, job.borrowed, job.cluster_id) == (expected, borrowed, cluster.id)
        assert (job.state, job.dispatched_at, job.pending_blockers, job.estimated_start_at) == (
            JobState.DISPATCHING,
            AT,
            [],
            None,
        )


def test_rows_that_fail_the_guard_are_left_alone(world):
    waiting, cancelled = submit(world.alice, world.lab), submit(world.alice, world.lab)
    Job.objects.filter(pk=cancelled.pk).update(state=JobState.CANCELLED)
    blockers = [{"code": "Resources", "message": "no node has 8 GPUs free", "evidence": {"best": 6, "of": [1, 2]}}]
    assert (
        update_rows(
            Job,
            [waiting.id, cancelled.id],
            {"pending_reason": ["Resources", "Resources"], "pending_blockers": [blockers, blockers]},
            where={"state": JobState.PENDING},
        )
        == 1
    )  # the rows written, the guarded one not among them
    waiting.refresh_from_db()
    cancelled.refresh_from_db()
    assert (waiting.pending_reason, waiting.pending_blockers) == ("Resources", blockers)
    assert (cancelled.pending_reason, cancelled.pending_blockers) == ("", [])


def test_text_with_quotes_and_unicode_is_stored_as_given(world):
    job = submit(world.alice, world.lab)
    text = 'it\'s "8" GPUs — ok'
    update_rows(Job, [job.id], {"pending_reason": ["x"], "pending_blockers": [[{"message": text}]]})
    job.refresh_from_db()
    assert job.pending_blockers == [{"message": text}]


def test_no_rows_is_no_statement_and_a_short_column_is_refused(world, django_assert_num_queries):
    with django_assert_num_queries(0):
        update_rows(Job, [], {"pending_reason": []})
    job = submit(world.alice, world.lab)
    with pytest.raises(ValueError, match="pending_reason: 0 values for 1 rows"):
        update_rows(Job, [job.id], {"pending_reason": []})
    with pytest.raises(ValueError, match=r"Cluster\.nodes is not a column"):
        update_rows(Cluster, [1], {"nodes": [1]})


def test_a_row_that_no_longer_holds_its_own_matched_value_is_left_alone_and_not_returned(world):
    jobs = [submit(world.alice, world.lab) for _ in range(3)]
    Job.objects.filter(pk=jobs[1].pk).update(attempt=1)  # moved on since it was read
    updated = update_matching_rows(
        Job,
        [job.id for job in jobs],
        {"external_id": ["a", "b", "c"]},
        match={"attempt": [0, 0, 0]},
        same={"state": JobState.RUNNING},
        where={"state": JobState.PENDING},
    )
    assert sorted(updated) == [jobs[0].id, jobs[2].id]
    assert list(Job.objects.order_by("id").values_list("external_id", "state")) == [
        ("a", JobState.RUNNING),
        ("", JobState.PENDING),
        ("c", JobState.RUNNING),
    ]
    with pytest.raises(ValueError, match="attempt: 1 values for 3 rows"):
        update_matching_rows(Job, [job.id for job in jobs], {"external_id": ["a"] * 3}, match={"attempt": [0]})
