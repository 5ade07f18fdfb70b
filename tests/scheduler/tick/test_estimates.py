"""Stored start estimates: the periodic pass fills ``Job.estimated_start_at`` for every
pending job whose start the queue decides, clears it for the others, and costs the same
few queries whatever the length of the queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler import tasks
from scheduler.choices import JobState
from scheduler.jobs.verbs import cancel_job, hold_job
from scheduler.models import Job
from scheduler.tick.estimates import refresh_estimates
from tests.builders import run_attempt, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def full(world, tick):
    """Both 8-GPU H100 nodes busy (simulated): one job until its one-hour limit, one until two hours."""
    world.cluster.config = {**world.cluster.config, "simulate": 600}
    world.cluster.save()
    for hours in (1, 2):
        submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=hours * 3600)
    tick()
    return world


def node_job(world, **overrides):
    """An 8-GPU H100 job of alice's: it waits while the cluster is full."""
    return submit(world.alice, world.lab, **{"gpus_per_node": 8, "gpu_model": "H100-80GB", **overrides})


def started_at(walltime_hours: int):
    return Job.objects.get(state=JobState.RUNNING, walltime_seconds=walltime_hours * 3600).started_at


def test_each_waiting_job_is_estimated_to_start_when_a_node_frees_up(full):
    first, second = node_job(full, walltime_seconds=3 * 3600), node_job(full, walltime_seconds=3 * 3600)
    refresh_estimates()
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.estimated_start_at == started_at(1) + timedelta(hours=1)
    assert second.estimated_start_at == started_at(2) + timedelta(hours=2)


def test_a_job_waiting_on_a_dependency_has_no_estimate(full):
    running = Job.objects.get(state=JobState.RUNNING, walltime_seconds=3600)
    waiting = node_job(full, dependencies=[{"type": "afterok", "job": running.id}])
    refresh_estimates()
    waiting.refresh_from_db()
    assert waiting.estimated_start_at is None


def test_the_estimate_is_cleared_when_the_job_starts(full, tick):
    job = node_job(full)
    refresh_estimates()
    cancel_job(Job.objects.get(state=JobState.RUNNING, walltime_seconds=3600), by="alice")
    tick()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.estimated_start_at is None


def test_held_and_cancelled_jobs_lose_their_estimate(full):
    held, cancelled = node_job(full), node_job(full)
    refresh_estimates()
    hold_job(held, by="alice")
    cancel_job(cancelled, by="alice")
    assert list(Job.objects.filter(pk__in=[held.pk, cancelled.pk]).values_list("estimated_start_at", flat=True)) == [
        None,
        None,
    ]


def test_the_pass_clears_estimates_of_jobs_that_left_the_queue_any_other_way(full):
    job = node_job(full)
    refresh_estimates()
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED)  # no service cleared it
    refresh_estimates()
    job.refresh_from_db()
    assert job.estimated_start_at is None


def test_a_second_pass_over_an_unchanged_queue_writes_nothing(full):
    node_job(full)
    node_job(full)
    assert refresh_estimates() == 2
    assert refresh_estimates() == 0


def test_the_pass_does_not_grow_queries_with_the_queue(full):
    def queries_of_a_pass_over_new_jobs(count: int) -> int:
        for _ in range(count):
            node_job(full)
        with CaptureQueriesContext(connection) as queries:
            assert refresh_estimates() == count
        return len(queries)

    queries_of_a_pass_over_new_jobs(1)  # the process keeps the node views from here on
    assert queries_of_a_pass_over_new_jobs(2) == queries_of_a_pass_over_new_jobs(30)


def test_celery_beat_runs_the_pass_every_estimate_interval(full):
    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "scheduler.refresh_estimates")
    assert entry["schedule"] == settings.SCHEDULER_ESTIMATE_SECONDS
    assert tasks.refresh_estimates.name == "scheduler.refresh_estimates"
    job = node_job(full)
    tasks.refresh_estimates()
    job.refresh_from_db()
    assert job.estimated_start_at is not None


# --- Calibrated starts ------------------------------------------------------------------


def ended_history(world, ratios) -> None:
    """Alice's one-hour jobs that ended after running these fractions of their hour."""
    start = timezone.now() - timedelta(days=1)
    for i, ratio in enumerate(ratios):
        job = submit(world.alice, world.lab, gpus_per_node=1, walltime_seconds=3600)
        began = start + timedelta(hours=i)
        run_attempt(job, began, began + timedelta(seconds=3600 * ratio))


def test_the_pass_stores_the_p50_and_p90_starts_from_how_much_of_their_walltime_jobs_ran(full):
    """Alice's ended jobs ran a quarter or a half of their hour: the one-hour job holding
    a node ends a quarter hour after its start at the median, half an hour at the p90."""
    ended_history(full, [0.25] * 5 + [0.5] * 5)
    waiting = node_job(full, walltime_seconds=3 * 3600)
    refresh_estimates()
    waiting.refresh_from_db()
    assert waiting.estimated_start_at == started_at(1) + timedelta(hours=1)
    assert waiting.estimated_start_p50_at == started_at(1) + timedelta(minutes=15)
    assert waiting.estimated_start_p90_at == started_at(1) + timedelta(minutes=30)


def test_with_no_ended_jobs_the_p50_and_p90_are_the_latest_start(full):
    waiting = node_job(full)
    refresh_estimates()
    waiting.refresh_from_db()
    assert waiting.estimated_start_p50_at == waiting.estimated_start_p90_at == waiting.estimated_start_at


def test_a_held_job_loses_its_p50_and_p90_with_its_estimate(full):
    ended_history(full, [0.5] * 5)
    held = node_job(full)
    refresh_estimates()
    hold_job(held, by="alice")
    held.refresh_from_db()
    assert (held.estimated_start_at, held.estimated_start_p50_at, held.estimated_start_p90_at) == (None, None, None)
