"""What-if: ``POST /api/v1/jobs/estimate/`` says when a job would start if submitted now.

It takes a submission's body with a submission's validation and permissions (the shared
400 cases are in ``test_job_validation.py``), agrees with what the tick then does, and
writes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from people.models import Qos, Quota
from scheduler.choices import JobState
from scheduler.models import Job, JobEvent, TickState, Usage
from scheduler.tick.estimates import refresh_estimates
from tests.builders import submit

pytestmark = pytest.mark.django_db

URL = "/api/v1/jobs/estimate/"
#: A whole H100 node (the test cluster has two, and a 4-GPU L4 node) for ten minutes.
NODE_JOB = {
    "name": "train",
    "account": "lab",
    "command": "python train.py",
    "gpus_per_node": 8,
    "gpu_model": "H100-80GB",
    "walltime_seconds": 600,
}


@pytest.fixture
def simulated(world):
    """Jobs on the test cluster are simulated for ten minutes instead of run."""
    world.cluster.config = {**world.cluster.config, "simulate": 600}
    world.cluster.save()
    return world


@pytest.fixture
def full(simulated, tick):
    """Both H100 nodes busy: one job until its one-hour limit, one until two hours."""
    for hours in (1, 2):
        submit(simulated.alice, simulated.lab, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=hours * 3600)
    tick()
    return simulated


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_on_an_idle_cluster_it_would_start_now_and_the_tick_starts_it(simulated, client_for, tick):
    client = client_for(simulated.alice)
    answer = client.post(URL, NODE_JOB, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["would_start_now"] is True
    assert (body["estimated_wait_seconds"], body["pending_reason"]) == (0, "")
    assert "next scheduling tick would start it" in body["reasons"][0]

    job_id = client.post("/api/v1/jobs/", NODE_JOB, format="json").json()["id"]
    tick()
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING


def test_on_a_full_cluster_it_would_start_when_the_first_running_job_reaches_its_walltime(full, client_for, tick):
    first_to_end = Job.objects.get(walltime_seconds=3600)
    assert first_to_end.started_at is not None
    body = client_for(full.alice).post(URL, NODE_JOB, format="json").json()
    assert body["would_start_now"] is False and body["pending_reason"] == "Resources"
    assert at(body["estimated_start"]) == first_to_end.started_at + timedelta(hours=1)
    assert 3590 <= body["estimated_wait_seconds"] <= 3600

    # Submitted for real, the tick keeps it waiting for the same reason, and the estimate
    # pass stores the same start.
    job = submit(full.alice, full.lab, **{k: v for k, v in NODE_JOB.items() if k != "account"})
    tick()
    refresh_estimates()
    job.refresh_from_db()
    assert (job.state, job.pending_reason) == (JobState.PENDING, "Resources")
    assert job.estimated_start_at == at(body["estimated_start"])


def test_a_job_its_qos_caps_has_no_estimate_and_says_why(full, client_for):
    """One of alice's jobs that fill the H100 nodes runs in a QOS that allows a user 8
    GPUs: one more GPU there (on the free L4 node) would wait with QOSMaxGRESPerUser."""
    wide = Qos.objects.create(name="wide", max_gpus_per_user=8)
    full.lab.allowed_qos.add(wide)
    first = Job.objects.filter(owner=full.alice, state=JobState.RUNNING).order_by("pk")[0]
    Job.objects.filter(pk=first.pk).update(qos=wide)
    request = {**NODE_JOB, "qos": "wide", "gpus_per_node": 1, "gpu_model": "L4"}
    body = client_for(full.alice).post(URL, request, format="json").json()
    assert body["would_start_now"] is False and body["pending_reason"] == "QOSMaxGRESPerUser"
    assert body["blockers"][0]["title"] == "Its owner holds all the GPUs its QOS allows a user"
    assert body["blockers"][0]["evidence"]["used"] == 8 and body["blockers"][0]["evidence"]["cap"] == 8


def test_a_job_its_quota_blocks_has_no_estimate_and_says_why(full, client_for):
    Quota.objects.create(account=full.lab, max_gpus=16)
    body = client_for(full.alice).post(URL, {**NODE_JOB, "gpu_model": "L4", "gpus_per_node": 1}, format="json").json()
    assert (body["estimated_start"], body["estimated_wait_seconds"]) == (None, None)
    assert body["would_start_now"] is False and body["pending_reason"] == "AccountGpuLimit"
    assert body["reasons"][0] == "Its account (or an account above it) is at its GPU quota."
    assert "No estimate" in body["reasons"][1]
    assert body["blockers"][0]["code"] == "AccountGpuLimit"
    assert body["blockers"][0]["title"] == "Its account is at its GPU quota"
    assert body["blockers"][0]["evidence"]["cap"] == 16


def test_a_job_waiting_on_a_dependency_has_no_estimate(simulated, client_for, tick):
    running = submit(simulated.alice, simulated.lab)
    tick()
    after = {**NODE_JOB, "dependencies": [{"type": "afterok", "job": running.id}]}
    body = client_for(simulated.alice).post(URL, after, format="json").json()
    assert (body["estimated_start"], body["pending_reason"]) == (None, "Dependency")


def test_its_priority_has_the_factors_of_a_pending_jobs_priority(world, client_for, settings):
    client = client_for(world.alice)
    job = submit(world.alice, world.lab)
    factors = set(client.get(f"/api/v1/jobs/{job.id}/priority/").json()) - {"job_id"}
    priority = client.post(URL, NODE_JOB, format="json").json()["priority"]
    assert set(priority) == factors
    assert priority["age"] == 0  # submitted now
    settings.SCHEDULER_PRIORITY = "fifo"
    assert client.post(URL, NODE_JOB, format="json").json()["priority"] is None


def test_charlie_cannot_estimate_into_alices_account_only_his_own(world, client_for):
    client = client_for(world.charlie)
    refused = client.post(URL, NODE_JOB, format="json")
    assert refused.status_code == 400 and "not a member" in refused.json()["account"][0]
    assert client.post(URL, {**NODE_JOB, "account": "other"}, format="json").status_code == 200


def test_anonymous_gets_401_or_403(world, client_for):
    assert client_for(None).post(URL, NODE_JOB, format="json").status_code in (401, 403)


def test_a_full_pending_jobs_quota_refuses_it_as_submit_does(world, client_for):
    Quota.objects.create(account=world.lab, max_pending_jobs=1)
    submit(world.alice, world.lab)
    client = client_for(world.alice)
    refused = client.post(URL, NODE_JOB, format="json")
    assert refused.status_code == 400
    assert refused.json() == client.post("/api/v1/jobs/", NODE_JOB, format="json").json()


def test_nothing_is_written(full, client_for):
    def rows() -> tuple[int, ...]:
        return tuple(model.objects.count() for model in (Job, JobEvent, Usage, TickState, Quota))

    client = client_for(full.alice)
    before = rows()
    with CaptureQueriesContext(connection) as queries:
        assert client.post(URL, NODE_JOB, format="json").status_code == 200
    assert rows() == before
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].split()[0] in {"INSERT", "UPDATE", "DELETE"}]
    assert writes == []


def test_the_route_works_without_the_trailing_slash(world, client_for):
    """APPEND_SLASH cannot redirect a POST, so the slash-less form is routed too."""
    answer = client_for(world.alice).post(URL.rstrip("/"), NODE_JOB, format="json")
    assert answer.status_code == 200 and answer.json()["would_start_now"] is True


def test_a_user_over_the_what_if_rate_gets_429_with_retry_after_and_others_are_not_limited(world, client_for, settings):
    settings.SCHEDULER_WHATIF_RATE = "2/minute"
    alice = client_for(world.alice)
    assert [alice.post(URL, NODE_JOB, format="json").status_code for _ in range(2)] == [200, 200]
    refused = alice.post(URL, NODE_JOB, format="json")
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert client_for(world.bob).post(URL, NODE_JOB, format="json").status_code == 200
