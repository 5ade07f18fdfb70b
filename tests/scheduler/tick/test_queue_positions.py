"""The tick records every waiting job's place in line (the jobs and GPU-hours ahead of it
on the nodes it could run on, from the cycle's order) in the statement that records the
tick, packed (``scheduler.tick.positions``); the reads give a place to pending jobs only."""

from __future__ import annotations

import zlib
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler.choices import JobState
from scheduler.jobs.verbs import cancel_job, hold_job, release_job
from scheduler.models import Job, TickState
from scheduler.reads.positions import QueueLine, stored_positions
from scheduler.tick.positions import packed, unpacked
from tests.builders import run_attempt, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def full(world: Any, settings: Any) -> list[Job]:
    """Every GPU of the test cluster held (two 8-GPU H100 nodes, one 4-GPU L4 node), by
    jobs of charlie's that run without a process; the queue in submit order (FIFO)."""
    settings.SCHEDULER_PRIORITY = "fifo"
    began = timezone.now() - timedelta(minutes=5)
    holders = []
    for node, gpus in (("h100-01", 8), ("h100-02", 8), ("l4-01", 4)):
        job = submit(world.charlie, world.other, gpus_per_node=gpus)
        run_attempt(job, began, None, node=node, gpus=gpus)
        holders.append(job)
    return holders


def places() -> dict[int, tuple[int, float]]:
    """The places of the pending jobs, as the pages and the API read them."""
    return QueueLine().places_of(Job.objects.filter(state=JobState.PENDING))


def test_each_waiting_job_has_the_jobs_and_gpu_hours_ahead_of_it(world, full, tick):
    h100 = submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2 * 3600)
    any_four = submit(world.alice, world.lab, gpus_per_node=4, walltime_seconds=3600)
    l4 = submit(world.alice, world.lab, gpu_model="L4", walltime_seconds=3 * 3600)
    waits = submit(world.alice, world.lab, dependencies=[{"type": "afterok", "job": full[0].id}])
    last = submit(world.alice, world.lab)
    held = submit(world.alice, world.lab, gpus_per_node=8)
    hold_job(held, by="alice")
    tick()
    assert places() == {
        h100.id: (0, 0.0),
        any_four.id: (1, 16.0),  # the H100 job: its nodes are some of this one's
        l4.id: (1, 4.0),  # only the 4-GPU job may run on the L4 node too
        waits.id: (3, 23.0),  # it has a place, but waits on its dependency first...
        last.id: (3, 23.0),  # ...so it stands ahead of no one; nor does the held job
    }
    assert held.id not in stored_positions()


def test_a_job_that_starts_or_is_held_leaves_the_line_and_those_behind_move_up(world, full, tick):
    first = submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB")
    second = submit(world.alice, world.lab, gpus_per_node=2)
    third = submit(world.alice, world.lab)
    tick()
    assert places()[third.id] == (2, 10.0)

    hold_job(second, by="alice")
    assert QueueLine().place_of(Job.objects.get(pk=second.pk)) is None  # at once, before the next tick
    tick()
    assert places()[third.id] == (1, 8.0)

    cancel_job(Job.objects.get(pk=full[0].pk), by="test")  # frees h100-01: the first job starts
    tick()
    first.refresh_from_db()
    assert first.state != JobState.PENDING and QueueLine().place_of(first) is None
    assert places()[third.id] == (0, 0.0)

    release_job(Job.objects.get(pk=second.pk), by="alice")
    assert QueueLine().place_of(Job.objects.get(pk=second.pk)) is None  # not placed until the next tick
    tick()
    assert places() == {second.id: (0, 0.0), third.id: (1, 2.0)}  # back in its place by age
    for job in Job.objects.filter(state__in=[JobState.RUNNING, JobState.DISPATCHING]):
        cancel_job(job, by="test")


def test_the_line_is_written_in_the_statement_that_records_the_tick(world, full, tick):
    """No query per job: with 3 or 33 jobs waiting, a tick (after the one that wrote their
    reasons) makes the same queries, and the line rides on the tick's own record."""
    for _ in range(3):
        submit(world.alice, world.lab)
    tick()
    with CaptureQueriesContext(connection) as few:
        tick()
    for _ in range(30):
        submit(world.alice, world.lab)
    tick()
    with CaptureQueriesContext(connection) as many:
        tick()
    assert len(many.captured_queries) == len(few.captured_queries)
    writes = [q["sql"] for q in many.captured_queries if "queue_positions" in q["sql"]]
    assert len(writes) == 1 and writes[0].startswith("UPDATE") and "finished_at" in writes[0]
    assert len(stored_positions()) == 33


@pytest.mark.parametrize(
    "line",
    [{}, {7: (0, 0.0)}, {9: (3, 12.5), 2: (0, 0.0), 2**40: (10_000, 123_456.75)}],
    ids=["nobody waits", "one job", "in the cycle's order, not by id"],
)
def test_a_line_reads_back_as_written(line):
    back = unpacked(packed(line))
    assert back == line and list(back) == list(line)


@pytest.mark.parametrize("blob,why", [(b"\0" * 24, "not a packing"), (zlib.compress(b"\0" * 25), "24 bytes an entry")])
def test_a_value_that_is_no_line_is_refused(blob, why):
    with pytest.raises(ValueError, match=why):
        unpacked(blob)


def test_before_any_tick_no_job_has_a_place(world):
    job = submit(world.alice, world.lab)
    assert not TickState.objects.exists()
    assert QueueLine().place_of(job) is None
