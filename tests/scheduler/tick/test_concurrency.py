"""Races that only a real PostgreSQL can referee.

Each test runs workers in threads, each with its own database connection, against
committed data (``transaction=True``).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from rest_framework.test import APIClient

from people.models import Qos, Quota
from scheduler.choices import EventKind, JobState
from scheduler.clusters.dispatch import dispatch_job
from scheduler.jobs.remote import backend_for, cancel_remote
from scheduler.jobs.transitions import JobStateConflict
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job, JobEvent
from scheduler.tick.run import run_tick
from tests.builders import submit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def in_threads(count: int, work):  # type: ignore[no-untyped-def]
    """Run ``work(i)`` in ``count`` threads released together; return their results."""
    barrier = threading.Barrier(count)

    def run(i: int):  # type: ignore[no-untyped-def]
        try:
            barrier.wait()
            return work(i)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def test_two_ticks_at_once_never_dispatch_a_job_twice(world):
    world.cluster.config = {**world.cluster.config, "simulate": 30}
    world.cluster.save()
    for _ in range(3):
        jobs = [submit(world.alice, world.lab, gpus_per_node=g) for g in (1, 2, 4, 8, 1, 2)]
        results = in_threads(2, lambda _: run_tick())
        assert sum(r.ran for r in results) >= 1
        started = [job_id for r in results for job_id in r.started]
        assert len(started) == len(set(started)), "a job was claimed by both ticks"
        for job in Job.objects.filter(pk__in=[j.pk for j in jobs], state=JobState.DISPATCHING):
            dispatch_job(job.id)

    dispatched = Counter(JobEvent.objects.filter(kind=EventKind.DISPATCHED).values_list("job_id", flat=True))
    assert dispatched and max(dispatched.values()) == 1
    held = [
        (a["node"], i)
        for j in Job.objects.filter(state=JobState.RUNNING)
        for a in j.allocations
        for i in a["gpu_indices"]
    ]
    assert len(held) == len(set(held)), "a GPU was given to two jobs"


def test_fifty_concurrent_submits_against_a_quota_of_ten(world):
    Quota.objects.create(account=world.lab, max_pending_jobs=10)
    body = {"name": "burst", "account": "lab", "command": "true", "gpus_per_node": 1, "walltime_seconds": 60}

    def post(_: int) -> int:
        client = APIClient()
        client.force_authenticate(world.alice)
        return client.post("/api/v1/jobs/", body, format="json").status_code

    codes = Counter(in_threads(50, post))
    assert codes == {201: 10, 400: 40}
    assert Job.objects.filter(account=world.lab).count() == 10


def test_thirty_concurrent_submits_against_a_qos_that_allows_a_user_five(world):
    """Submissions in one QOS take turns on its row, as under a quota's: none counts the
    jobs before another's commit and overshoots MaxSubmitJobsPerUser."""
    debug = Qos.objects.create(name="debug", max_submitted_jobs_per_user=5)
    world.lab.allowed_qos.add(debug)
    body = {"name": "burst", "account": "lab", "qos": "debug", "command": "true", "walltime_seconds": 60}

    def post(_: int) -> int:
        client = APIClient()
        client.force_authenticate(world.alice)
        return client.post("/api/v1/jobs/", body, format="json").status_code

    codes = Counter(in_threads(30, post))
    assert codes == {201: 5, 400: 25}
    assert Job.objects.filter(qos=debug).count() == 5


def test_cancel_racing_dispatch_leaves_no_running_orphan(world):
    world.cluster.config = {**world.cluster.config, "simulate": 30}
    world.cluster.save()
    job = submit(world.alice, world.lab)
    run_tick()
    job.refresh_from_db()

    def act(i: int) -> None:
        if i == 0:
            dispatch_job(job.id)
        else:
            with contextlib.suppress(JobStateConflict):
                cancel_job(Job.objects.get(pk=job.pk), by="alice")

    in_threads(2, act)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    if job.external_id:
        backend = backend_for(world.cluster)
        cancel_remote(job.id)
        assert backend.poll([job.external_id])[job.external_id].state == "CANCELLED"
