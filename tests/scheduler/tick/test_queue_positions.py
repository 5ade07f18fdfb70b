"""The tick stores every waiting job's place in line: the jobs and GPU-hours ahead of it
on the nodes it could run on, from the cycle's order, in the write it already makes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from scheduler.choices import JobState
from scheduler.core.types import Decisions, PendingReason
from scheduler.jobs.verbs import cancel_job, hold_job, release_job
from scheduler.models import Job
from scheduler.tick.apply import store_waiting
from scheduler.tick.snapshot import load_snapshot
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


def places() -> dict[int, tuple[int | None, float | None]]:
    rows = Job.objects.filter(state=JobState.PENDING).values_list("id", "queue_jobs_ahead", "queue_gpu_hours_ahead")
    return {job_id: (jobs, hours) for job_id, jobs, hours in rows}


def test_each_waiting_job_stores_the_jobs_and_gpu_hours_ahead_of_it(world, full, tick):
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
    held.refresh_from_db()
    assert (held.queue_jobs_ahead, held.queue_gpu_hours_ahead) == (None, None)


def test_a_job_that_starts_or_is_held_leaves_the_line_and_those_behind_move_up(world, full, tick):
    first = submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB")
    second = submit(world.alice, world.lab, gpus_per_node=2)
    third = submit(world.alice, world.lab)
    tick()
    assert places()[third.id] == (2, 10.0)

    hold_job(second, by="alice")
    assert Job.objects.get(pk=second.pk).queue_jobs_ahead is None
    tick()
    assert places()[third.id] == (1, 8.0)

    cancel_job(Job.objects.get(pk=full[0].pk), by="test")  # frees h100-01: the first job starts
    tick()
    first.refresh_from_db()
    assert first.state != JobState.PENDING and (first.queue_jobs_ahead, first.queue_gpu_hours_ahead) == (None, None)
    assert places()[third.id] == (0, 0.0)

    release_job(Job.objects.get(pk=second.pk), by="alice")
    tick()
    assert places() == {second.id: (0, 0.0), third.id: (1, 2.0)}  # back in its place by age
    for job in Job.objects.filter(state__in=[JobState.RUNNING, JobState.DISPATCHING]):
        cancel_job(job, by="test")


def test_a_position_is_written_only_when_it_changed_in_the_same_statement_as_reasons(world):
    jobs = [submit(world.alice, world.lab) for _ in range(3)]
    decisions = Decisions(
        pending_reasons={job.id: PendingReason.PRIORITY for job in jobs},
        positions={job.id: (i, float(i)) for i, job in enumerate(jobs)},
    )
    assert store_waiting(decisions, load_snapshot()) == 3
    assert store_waiting(decisions, load_snapshot()) == 0  # nothing changed: nothing written
    moved = Decisions(
        pending_reasons=decisions.pending_reasons,
        positions={jobs[0].id: (0, 0.0), jobs[2].id: (1, 1.0)},  # the middle one has no place now
    )
    assert store_waiting(moved, load_snapshot()) == 2
    assert places() == {jobs[0].id: (0, 0.0), jobs[1].id: (None, None), jobs[2].id: (1, 1.0)}


def test_a_job_the_cycle_stopped_short_of_keeps_its_reason_but_gets_its_new_place(world):
    job = submit(world.alice, world.lab)
    Job.objects.filter(pk=job.pk).update(pending_reason="Priority", queue_jobs_ahead=5, queue_gpu_hours_ahead=5.0)
    decisions = Decisions(pending_reasons={job.id: PendingReason.CYCLE_LIMIT}, positions={job.id: (3, 2.5)})
    assert store_waiting(decisions, load_snapshot()) == 1
    job.refresh_from_db()
    assert (job.pending_reason, job.queue_jobs_ahead, job.queue_gpu_hours_ahead) == ("Priority", 3, 2.5)
