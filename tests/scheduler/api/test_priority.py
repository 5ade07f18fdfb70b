"""Job priority (sprio), the fair-share tree (sshare), nice and dependencies over the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Job, Usage
from scheduler.tick.estimates import refresh_estimates
from tests.builders import submit

pytestmark = pytest.mark.django_db

GOOD = {"name": "train", "account": "lab", "command": "true", "gpus_per_node": 1, "walltime_seconds": 600}


def test_priority_of_a_pending_job_has_every_factor(world, client_for):
    job = submit(world.alice, world.lab)
    body = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/priority/").json()
    assert set(body) == {"job_id", "total", "age", "fairshare", "jobsize", "qos", "nice", "shortness", "stretch"}
    parts = body["age"] + body["fairshare"] + body["jobsize"] + body["qos"] + body["shortness"] + body["stretch"]
    assert body["total"] == pytest.approx(parts - body["nice"])
    assert body["shortness"] == body["stretch"] == 0  # off by default, as in Slurm


def test_with_the_overload_weights_the_priority_shows_shortness_and_stretch(world, client_for, settings):
    settings.PRIORITY_WEIGHT_SHORTNESS = 1000
    settings.PRIORITY_WEIGHT_STRETCH = 1000
    job = submit(world.alice, world.lab)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(hours=3))
    body = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/priority/").json()
    assert body["shortness"] > 0
    assert body["stretch"] == 1000  # waited 3 h, past 2 x its 1 h walltime (no history yet): full
    page = client_for(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert "<th>Shortness</th>" in page and "<th>Stretch</th>" in page


def test_priority_is_private_like_the_job(world, client_for):
    job = submit(world.alice, world.lab)
    assert client_for(world.charlie).get(f"/api/v1/jobs/{job.id}/priority/").status_code == 404


def test_priority_of_an_ended_job_is_409(world, client_for):
    job = submit(world.alice, world.lab)
    client = client_for(world.alice)
    client.post(f"/api/v1/jobs/{job.id}/cancel/")
    assert client.get(f"/api/v1/jobs/{job.id}/priority/").status_code == 409


def test_fairshare_tree_members_see_their_accounts_staff_all(world, client_for):
    Usage.objects.create(account=world.lab, user=world.alice, gpu_seconds=5000.0, as_of=timezone.now())
    mine = client_for(world.alice).get("/api/v1/fairshare/").json()
    assert {row["account"] for row in mine} == {"lab"}
    assert {row["account"] for row in client_for(world.admin).get("/api/v1/fairshare/").json()} == {"lab", "other"}
    alice = next(row for row in mine if row["user"] == "alice")
    assert alice["raw_usage"] == pytest.approx(5000.0, rel=1e-3)
    assert 0 <= alice["fairshare"] <= 1


def test_nice_is_stored_and_negative_nice_is_for_staff(world, client_for):
    created = client_for(world.alice).post("/api/v1/jobs/", {**GOOD, "nice": 100}, format="json")
    assert created.status_code == 201 and created.json()["nice"] == 100
    refused = client_for(world.alice).post("/api/v1/jobs/", {**GOOD, "nice": -100}, format="json")
    assert refused.status_code == 400 and "nice" in refused.json()


def test_dependencies_must_name_jobs_you_can_see(world, client_for):
    mine = submit(world.alice, world.lab)
    theirs = submit(world.charlie, world.other)
    client = client_for(world.alice)
    ok = client.post("/api/v1/jobs/", {**GOOD, "dependencies": [{"type": "afterok", "job": mine.id}]}, format="json")
    assert ok.status_code == 201 and ok.json()["dependencies"] == [{"type": "afterok", "job": mine.id}]
    hidden = client.post(
        "/api/v1/jobs/", {**GOOD, "dependencies": [{"type": "afterok", "job": theirs.id}]}, format="json"
    )
    assert hidden.status_code == 400 and str(theirs.id) in str(hidden.json()["dependencies"])
    bad_kind = client.post(
        "/api/v1/jobs/", {**GOOD, "dependencies": [{"type": "before", "job": mine.id}]}, format="json"
    )
    assert bad_kind.status_code == 400 and "dependencies" in bad_kind.json()


def test_estimates_cover_your_pending_jobs_only(world, client_for):
    from datetime import datetime

    world.cluster.config = {**world.cluster.config, "simulate": 60}
    world.cluster.save()
    big = [submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB") for _ in range(3)]
    hers = submit(world.charlie, world.other, gpus_per_node=8, gpu_model="H100-80GB")
    refresh_estimates()  # the periodic pass the endpoint reads
    rows = client_for(world.alice).get("/api/v1/jobs/estimates/").json()
    assert {row["job"] for row in rows} == {j.id for j in big}
    starts = sorted(datetime.fromisoformat(row["estimated_start"]) for row in rows)
    # two H100 nodes, four 8-GPU one-hour jobs: two start now, two an hour later, and
    # alice has one in each group
    assert (starts[-1] - starts[0]).total_seconds() == 3600
    assert hers.id not in {row["job"] for row in rows}
    assert client_for(world.charlie).get("/api/v1/jobs/estimates/").status_code == 200


def test_a_pending_job_shows_its_stored_estimate(world, client_for):
    job = submit(world.alice, world.lab)
    client = client_for(world.alice)
    assert client.get(f"/api/v1/jobs/{job.id}/").json()["estimated_start_at"] is None
    refresh_estimates()
    shown = client.get(f"/api/v1/jobs/{job.id}/").json()["estimated_start_at"]
    assert shown is not None
    assert client.get("/api/v1/jobs/estimates/").json() == [{"job": job.id, "estimated_start": shown}]
