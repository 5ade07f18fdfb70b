"""Requests beyond GPU counts, through the API and the tick: a share of a time-sliced GPU, node labels."""

from __future__ import annotations

import pytest

from scheduler.choices import JobState
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Gpu, Job
from tests.builders import local_node_group, make_local_cluster

pytestmark = pytest.mark.django_db

BASE = {"name": "notebook", "account": "lab", "command": "sleep 30", "walltime_seconds": 600}


@pytest.fixture
def shared_world(world):
    group = local_node_group("ts-01", gpus=1)
    group["gpus"]["shared"] = True
    make_local_cluster("sliced", [group])
    return world


def test_two_fractional_jobs_share_one_gpu(shared_world, client_for, tick):
    client = client_for(shared_world.alice)
    for _ in range(2):
        body = {**BASE, "gpu_share": 0.4, "gpu_memory_mib_share": 20_000}
        assert client.post("/api/v1/jobs/", body, format="json").status_code == 201
    tick()
    jobs = list(Job.objects.order_by("id"))
    assert [j.state for j in jobs] == [JobState.RUNNING, JobState.RUNNING]
    assert {(a["node"], tuple(a["gpu_indices"]), a["gpu_share"]) for j in jobs for a in j.allocations} == {
        ("ts-01", (0,), 0.4)
    }
    assert Gpu.objects.get(node__name="ts-01").shared
    for job in jobs:
        cancel_job(job, by="test")


@pytest.mark.parametrize(
    "extra,field",
    [
        ({"gpu_share": 1.0}, "gpu_share"),
        ({"gpu_share": -0.5}, "gpu_share"),
        ({"gpu_share": "NaN"}, "gpu_share"),
        ({"gpu_share": 0.5, "gpus_per_node": 2}, "gpus_per_node"),
        ({"gpu_memory_mib_share": 1000}, "gpu_memory_mib_share"),
    ],
)
def test_bad_shares_are_refused_with_the_field_named(shared_world, client_for, extra, field):
    response = client_for(shared_world.alice).post("/api/v1/jobs/", {**BASE, **extra}, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Job.objects.exists()


def test_a_share_on_a_site_without_shared_gpus_is_refused(world, client_for):
    response = client_for(world.alice).post("/api/v1/jobs/", {**BASE, "gpu_share": 0.5}, format="json")
    assert response.status_code == 400
    assert "No node has a shared GPU" in response.json()["gpu_share"][0]


def test_node_labels_pin_a_job_to_matching_nodes_and_unknown_labels_are_refused(world, client_for, tick):
    from scheduler.models import Node

    Node.objects.filter(name="h100-02").update(labels={"rack": "r2"})
    client = client_for(world.alice)
    wanted = {**BASE, "account": "lab", "gpu_model": "H100-80GB", "node_labels": {"rack": "r2"}}
    assert client.post("/api/v1/jobs/", wanted, format="json").status_code == 201
    refused = client.post("/api/v1/jobs/", {**wanted, "node_labels": {"rack": "r9"}}, format="json")
    assert refused.status_code == 400
    assert refused.json()["node_labels"] == ["No node has the labels rack=r9."]
    tick()
    job = Job.objects.get()
    assert job.state == JobState.RUNNING and job.allocations[0]["node"] == "h100-02"
    cancel_job(job, by="test")


def test_a_set_of_acceptable_models_places_on_any_of_them(world, client_for, tick):
    """An 8-GPU job that takes L4 or H100 can only go to an H100 node; a 4-GPU one fills the
    4-GPU L4 node rather than break the other H100 node. A set naming an unknown model is
    refused; spaces and repeats are normalised away."""
    client = client_for(world.alice)
    body = {**BASE, "gpus_per_node": 4, "gpu_model": " H100-80GB | L4 |L4"}
    response = client.post("/api/v1/jobs/", {**body, "gpus_per_node": 8, "gpu_model": "L4|H100-80GB"}, format="json")
    assert response.status_code == 201
    response = client.post("/api/v1/jobs/", {**body, "gpus_per_node": 4, "gpu_model": "L4|A100-40GB"}, format="json")
    assert response.status_code == 400
    assert response.json()["gpu_model"] == ["Unknown GPU model 'A100-40GB'; known models: H100-80GB, L4."]
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201 and response.json()["gpu_model"] == "H100-80GB|L4"
    tick()
    placed = {job.gpu_model: job.allocations[0]["node"] for job in Job.objects.filter(state=JobState.RUNNING)}
    assert placed["L4|H100-80GB"].startswith("h100-")
    assert placed["H100-80GB|L4"] == "l4-01"
    for job in Job.objects.all():
        cancel_job(job, by="test")


@pytest.mark.parametrize("text", ["L4||H100-80GB", "|", "L4|"])
def test_an_empty_alternative_in_a_model_set_is_refused(world, client_for, text):
    response = client_for(world.alice).post("/api/v1/jobs/", {**BASE, "gpu_model": text}, format="json")
    assert response.status_code == 400
    assert "alternatives separated by '|'" in response.json()["gpu_model"][0]
