"""A job's GPU time counts from when its workload manager says it started, not from when
the portal marked its dispatch batch RUNNING: the poll reads the start back (the local
runner's own record here; Slurm's StartTime, a pod's start) and accounting, usage and
estimates use it. Tried with jobs that write down when they really started, across a
worker killed between handing a job off and recording it (the re-dispatch that follows
marks it RUNNING late). And no attempt ends before it starts."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.backends.base import PollResult, RemoteState
from scheduler.choices import JobState
from scheduler.clusters import dispatch
from scheduler.clusters.poll import _record_starts, poll_cluster
from scheduler.jobs.remote import backend_for
from scheduler.models import Job, JobAttempt
from scheduler.tick.run import run_tick
from tests.builders import end, start, submit

pytestmark = pytest.mark.django_db

#: How long a job runs after writing its start: long enough that a late mark shows.
RUN_SECONDS = 3


def _own_start(cluster: Any, job_id: int, timeout: float = 60) -> datetime:
    """The start a job wrote first into its output (``date +%s.%N``), once it is there."""
    backend = backend_for(cluster)
    key = Job.objects.get(pk=job_id).backend_key
    deadline = time.monotonic() + timeout
    while not (written := backend.read_log(key).strip()):
        assert time.monotonic() < deadline, "the job never wrote its start"
        time.sleep(0.05)
    return datetime.fromtimestamp(float(written.split()[0]), UTC)


def _ended(job_id: int, cluster: Any, timeout: float = 60) -> Job:
    deadline = time.monotonic() + timeout
    while (job := Job.objects.get(pk=job_id)).state == JobState.RUNNING:
        assert time.monotonic() < deadline, "the job did not end"
        poll_cluster(cluster)
        time.sleep(0.1)
    return job


def test_a_job_is_charged_from_when_it_started_after_a_killed_worker(world):
    job = submit(world.alice, world.lab, command=f"date +%s.%N; sleep {RUN_SECONDS}", walltime_seconds=60)
    run_tick()
    # The worker that claimed it hands it to the backend, then dies before recording it.
    job = Job.objects.select_related("owner", "account").get(pk=job.pk)
    backend_for(world.cluster).submit(dispatch.job_spec(job, first_handoff=True))
    assert Job.objects.get(pk=job.pk).state == JobState.DISPATCHING
    real_start = _own_start(world.cluster, job.pk)
    time.sleep(1.5)  # a lower bound on the re-dispatch's lateness, not a race: later is fine

    assert dispatch.dispatch_jobs([job.pk]) == []  # the poll's re-dispatch; submit is idempotent
    marked = Job.objects.get(pk=job.pk).started_at
    assert marked is not None and marked - real_start > timedelta(seconds=1.4)  # today's mark is late...
    poll_cluster(world.cluster)
    mended = Job.objects.get(pk=job.pk).started_at
    assert mended is not None and abs(mended - real_start) < timedelta(seconds=1)  # ...the poll mends it

    ended = _ended(job.pk, world.cluster)
    attempt = JobAttempt.objects.get(job_id=job.pk)
    assert ended.state == JobState.COMPLETED
    assert abs(attempt.started_at - real_start) < timedelta(seconds=1)
    assert abs((attempt.ended_at - attempt.started_at).total_seconds() - RUN_SECONDS) < 1


def test_a_job_that_ends_between_two_polls_is_charged_from_its_own_start(world):
    job = submit(world.alice, world.lab, command="date +%s.%N; sleep 1", walltime_seconds=60)
    run_tick()
    job = Job.objects.select_related("owner", "account").get(pk=job.pk)
    backend_for(world.cluster).submit(dispatch.job_spec(job, first_handoff=True))
    real_start = _own_start(world.cluster, job.pk)
    time.sleep(2)  # it ends before anyone marks it: the first poll sees the end
    assert dispatch.dispatch_jobs([job.pk]) == []

    _ended(job.pk, world.cluster)
    attempt = JobAttempt.objects.get(job_id=job.pk)
    assert abs(attempt.started_at - real_start) < timedelta(seconds=1)


def test_an_attempt_never_ends_before_it_starts(world):
    at = datetime(2026, 12, 1, 12, tzinfo=UTC)
    job = start(submit(world.alice, world.lab), at)

    assert end(job, at - timedelta(seconds=5), state="FAILED")

    job.refresh_from_db()
    attempt = JobAttempt.objects.get(job_id=job.pk)
    assert job.ended_at == job.started_at == at
    assert attempt.ended_at == attempt.started_at == at


def _running_jobs(world, count: int, at: datetime) -> list[Job]:  # type: ignore[no-untyped-def]
    return [start(submit(world.alice, world.lab), at) for _ in range(count)]


def _polled(jobs: list[Job], started: datetime) -> dict[str, PollResult]:
    return {job.external_id: PollResult(job.external_id, RemoteState.RUNNING, started_at=started) for job in jobs}


def test_the_polled_starts_are_written_only_on_the_attempt_polled(world):
    marked, real = datetime(2026, 12, 1, 12, tzinfo=UTC), datetime(2026, 12, 1, 11, 59, 58, tzinfo=UTC)
    jobs = _running_jobs(world, 3, marked)
    polled = {job.external_id: (job.id, job.attempt, job.started_at) for job in jobs}
    # Between the read and the write, one job was requeued and runs again as attempt 1
    # (under the same backend id here, which only the attempt tells apart).
    Job.objects.filter(pk=jobs[0].pk).update(attempt=1, started_at=marked + timedelta(minutes=5))

    assert _record_starts(polled, _polled(jobs, real)) == 2

    starts = dict(Job.objects.values_list("id", "started_at"))
    assert starts == {jobs[0].id: marked + timedelta(minutes=5), jobs[1].id: real, jobs[2].id: real}


@pytest.mark.postgres
def test_the_polled_starts_are_written_in_one_statement(world):
    marked, real = datetime(2026, 12, 1, 12, tzinfo=UTC), datetime(2026, 12, 1, 11, 59, 58, tzinfo=UTC)
    jobs = _running_jobs(world, 20, marked)
    polled = {job.external_id: (job.id, job.attempt, job.started_at) for job in jobs}
    with CaptureQueriesContext(connection) as queries:
        assert _record_starts(polled, _polled(jobs, real)) == 20
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["UPDATE"]
    assert set(Job.objects.values_list("started_at", flat=True)) == {real}
