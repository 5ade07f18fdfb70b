"""A waiting job's place in line in the API: as the tick stored it, only while it is
pending, and only to those who may see the job.

alice owns the job; bob coordinates her account; dora is a plain member of it;
charlie is in another account; admin is staff.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler.models import Job
from tests.builders import queue_line, run_attempt, submit

pytestmark = pytest.mark.django_db

SEES_ALICES_JOB = {"alice": True, "bob": True, "dora": False, "charlie": False, "admin": True}


@pytest.fixture
def placed(world):
    """alice's waiting job, with the place the last tick gave it: 3 jobs and 12.5 GPU-hours ahead."""
    job = submit(world.alice, world.lab, name="alices-train")
    queue_line({job.id: (3, 12.5)})
    return job


@pytest.mark.parametrize("who,sees", SEES_ALICES_JOB.items())
def test_the_position_is_shown_only_to_those_who_may_see_the_job(world, client_for, placed, who, sees):
    response = client_for(getattr(world, who)).get(f"/api/v1/jobs/{placed.id}/")
    if not sees:
        assert response.status_code == 404
        assert "queue_jobs_ahead" not in response.content.decode()
        return
    body = response.json()
    assert (body["queue_jobs_ahead"], body["queue_gpu_hours_ahead"]) == (3, 12.5)


@pytest.mark.parametrize("who,sees", SEES_ALICES_JOB.items())
def test_the_list_gives_positions_of_visible_jobs_only(world, client_for, placed, who, sees):
    rows = client_for(getattr(world, who)).get("/api/v1/jobs/").json()["results"]
    assert [(r["id"], r["queue_jobs_ahead"], r["queue_gpu_hours_ahead"]) for r in rows] == (
        [(placed.id, 3, 12.5)] if sees else []
    )


@pytest.mark.parametrize("state", ["HELD", "DISPATCHING", "RUNNING", "COMPLETED", "CANCELLED"])
def test_a_job_that_is_not_pending_has_no_position_even_before_the_next_tick(world, client_for, state):
    job = submit(world.alice, world.lab)
    queue_line({job.id: (0, 0.0)})
    Job.objects.filter(pk=job.pk).update(state=state)
    body = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()
    assert (body["queue_jobs_ahead"], body["queue_gpu_hours_ahead"]) == (None, None)


def test_a_list_reads_the_line_once_and_not_at_all_without_a_pending_job(world, client_for):
    jobs = [submit(world.alice, world.lab) for _ in range(5)]
    queue_line({job.id: (i, float(i)) for i, job in enumerate(jobs)})
    client = client_for(world.alice)
    client.get("/api/v1/jobs/")  # warm: the session, the user
    with CaptureQueriesContext(connection) as pending:
        rows = client.get("/api/v1/jobs/").json()["results"]
    assert sorted(r["queue_jobs_ahead"] for r in rows) == [0, 1, 2, 3, 4]
    assert sum("queue_positions" in q["sql"] for q in pending.captured_queries) == 1
    Job.objects.update(state="CANCELLED")
    with CaptureQueriesContext(connection) as ended:
        client.get("/api/v1/jobs/")
    assert not any("queue_positions" in q["sql"] for q in ended.captured_queries)


def test_the_tick_s_position_reaches_the_api(world, client_for, tick, settings):
    settings.SCHEDULER_PRIORITY = "fifo"
    began = timezone.now() - timedelta(minutes=5)
    for node, gpus in (("h100-01", 8), ("h100-02", 8), ("l4-01", 4)):
        run_attempt(submit(world.charlie, world.other, gpus_per_node=gpus), began, None, node=node, gpus=gpus)
    first = submit(world.alice, world.lab, gpus_per_node=2, walltime_seconds=3 * 3600)
    second = submit(world.alice, world.lab)
    tick()
    client = client_for(world.alice)
    assert [client.get(f"/api/v1/jobs/{j.id}/").json()["queue_jobs_ahead"] for j in (first, second)] == [0, 1]
    assert client.get(f"/api/v1/jobs/{second.id}/").json()["queue_gpu_hours_ahead"] == 6.0
