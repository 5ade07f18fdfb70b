"""Part of a CPU (Kubernetes' millicores): asked as 0.5 or "500m" in the API, the form
and ``qm``, held exactly by the scheduler, refused at submit where every cluster
allocates whole CPUs (Slurm)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduler.choices import JobState
from scheduler.models import Cluster, Job
from scheduler.reads import inventory

pytestmark = pytest.mark.django_db

BODY = {"name": "infer", "account": "lab", "command": "serve", "gpus_per_node": 0, "walltime_seconds": 600}


@pytest.fixture(autouse=True)
def fresh_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory, "_cache", None)  # each test's clusters, not a former test's


@pytest.mark.parametrize(
    "asked,stored,shown", [(0.5, "0.5", 0.5), ("250m", "0.25", 0.25), ("2.125", "2.125", 2.125), (8, "8", 8)]
)
def test_the_api_takes_cpus_whole_or_in_part_and_shows_them_as_numbers(world, client_for, asked, stored, shown):
    response = client_for(world.alice).post("/api/v1/jobs/", {**BODY, "cpus_per_node": asked}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["cpus_per_node"] == shown and type(response.json()["cpus_per_node"]) is type(shown)
    assert Job.objects.get().cpus_per_node == Decimal(stored)


def test_half_cpu_jobs_share_a_cpu_and_run_with_their_part_recorded(world, client_for, tick):
    client = client_for(world.alice)
    for _ in range(2):
        assert client.post("/api/v1/jobs/", {**BODY, "cpus_per_node": "500m"}, format="json").status_code == 201
    tick()
    jobs = list(Job.objects.order_by("id"))
    assert all(job.state != JobState.PENDING for job in jobs)
    assert [job.allocations[0]["cpus"] for job in jobs] == [0.5, 0.5]
    shown = client.get(f"/api/v1/jobs/{jobs[0].id}/").json()
    assert shown["allocations"][0]["cpus"] == 0.5


def test_a_site_of_whole_cpu_clusters_refuses_part_of_a_cpu_at_submit(world, client_for):
    Cluster.objects.filter(pk=world.cluster.pk).update(kind="slurm")
    client = client_for(world.alice)
    response = client.post("/api/v1/jobs/", {**BODY, "cpus_per_node": 0.5}, format="json")
    assert response.status_code == 400
    assert "allocate whole CPUs (Slurm)" in response.json()["cpus_per_node"][0]
    assert not Job.objects.exists()
    assert client.post("/api/v1/jobs/", {**BODY, "cpus_per_node": 2}, format="json").status_code == 201


def test_the_form_takes_millicores_and_a_copy_shows_them_as_typed(world):
    from django.test import Client

    client = Client()
    client.force_login(world.alice)
    form = client.get("/jobs/new/").context["form"].initial
    response = client.post("/jobs/new/", {**form, **BODY, "cpus_per_node": "750m", "walltime_seconds": "10m"})
    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get()
    assert job.cpus_per_node == Decimal("0.75")
    copied = client.get("/jobs/new/", {"copy": job.id}).context["form"].initial
    assert copied["cpus_per_node"] == "0.75"
