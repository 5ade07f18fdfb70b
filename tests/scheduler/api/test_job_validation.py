"""Every bad job request is a 400 naming the field, whether submitted or only estimated
(the what-if takes the same body); nothing is written."""

from __future__ import annotations

import pytest

from people.models import Qos, Quota
from scheduler.models import Job, JobEvent

pytestmark = pytest.mark.django_db

GOOD = {"name": "train", "account": "lab", "command": "python train.py", "gpus_per_node": 1, "walltime_seconds": 600}


#: Submission, and the what-if that takes the same body.
ROUTES = pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/jobs/estimate/"], ids=["submit", "what-if"])


def post(client, url="/api/v1/jobs/", **changes):
    body = {**GOOD, **changes}
    for key in [k for k, v in changes.items() if v is None]:
        del body[key]
    return client.post(url, body, format="json")


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        ({"gpus_per_node": -1}, "gpus_per_node", "greater than or equal to 0"),
        ({"cpus_per_node": 0}, "cpus_per_node", ""),
        ({"memory_mib_per_node": -5}, "memory_mib_per_node", ""),
        ({"nodes": 0}, "nodes", ""),
        ({"walltime_seconds": 0}, "walltime_seconds", ""),
        ({"walltime_seconds": None}, "walltime_seconds", "required"),
        ({"gpus_per_node": 9}, "gpus_per_node", "the most on one node is 8"),
        ({"gpu_model": "TPUv5"}, "gpu_model", "known models: H100-80GB, L4"),
        ({"gpu_model": "L4", "gpus_per_node": 8}, "gpus_per_node", "model L4"),
        ({"min_gpu_memory_mib": 100_000}, "gpus_per_node", ">= 100000 MiB"),
        ({"min_compute_capability": "ten"}, "min_compute_capability", "8.0"),
        ({"nodes": 3, "gpus_per_node": 8}, "nodes", "At most 2 nodes"),
        ({"cpus_per_node": 4096}, "cpus_per_node", "largest has 64"),
        ({"cpus_per_node": 0.0001}, "cpus_per_node", "thousandths"),
        ({"cpus_per_node": "-500m"}, "cpus_per_node", "not a number of CPUs"),
        ({"cpus_per_node": "lots"}, "cpus_per_node", "not a number of CPUs"),
        ({"cpus_per_node": "NaN"}, "cpus_per_node", "more than 0"),
        ({"cpus_per_node": True}, "cpus_per_node", "as a number"),
        ({"cpus_per_node": 64.5}, "cpus_per_node", "largest has 64"),
        ({"account": "other"}, "account", "not a member"),
        ({"account": "nope"}, "account", "does not exist"),
        ({"command": "", "script": ""}, "command", "command or a script"),
        ({"script": "#!/bin/bash\ntrue"}, "script", "not both"),
        ({"env": {"1BAD": "x"}}, "env", "Invalid variable names"),
        ({"env": {"A\n": "x"}}, "env", "Invalid variable names"),
        ({"env": {"MASTER_PORT": "1", "QM_NODE_RANK": "2"}}, "env", "You may not set MASTER_PORT, QM_NODE_RANK"),
        ({"env": {"SLURM_JOB_ID": "1"}}, "env", "names starting QM_, SLURM_, SBATCH_ are set by the cluster"),
        ({"env": {"OK": "a\x00b"}}, "env", ""),
        ({"name": "x" * 200}, "name", ""),
        ({"gpus_per_node": 2**40}, "gpus_per_node", ""),
        ({"qos": "platinum"}, "qos", "does not exist"),
    ],
    ids=lambda v: str(v)[:40],
)
@ROUTES
def test_bad_request_names_the_field(world, client_for, url, changes, field, fragment):
    response = post(client_for(world.alice), url, **changes)
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert fragment in " ".join(map(str, response.json()[field]))
    assert not Job.objects.exists() and not JobEvent.objects.exists()


@ROUTES
def test_walltime_over_the_qos_maximum(world, client_for, url):
    Qos.objects.create(name="short", max_walltime_seconds=300)
    response = post(client_for(world.alice), url, qos="short", walltime_seconds=301)
    assert response.status_code == 400
    assert "QOS 'short' (5 min)" in response.json()["walltime_seconds"][0]


def test_full_pending_quota(world, client_for):
    Quota.objects.create(account=world.lab, max_pending_jobs=2)
    client = client_for(world.alice)
    assert [post(client).status_code for _ in range(3)] == [201, 201, 400]
    assert "the quota allows 2" in post(client).json()["account"][0]
    assert Job.objects.count() == 2


@ROUTES
def test_user_quota_walltime(world, client_for, url):
    Quota.objects.create(user=world.alice, max_walltime_seconds=100)
    response = post(client_for(world.alice), url, walltime_seconds=101)
    assert response.status_code == 400 and "walltime_seconds" in response.json()


def test_good_request_creates_a_pending_job_with_an_event(world, client_for):
    response = post(client_for(world.alice), gpu_model="H100-80GB", min_compute_capability="9.0", env={"A": "1"})
    assert response.status_code == 201
    body = response.json()
    assert (body["state"], body["owner"], body["account"], body["total_gpus"]) == ("PENDING", "alice", "lab", 1)
    assert [e.kind for e in JobEvent.objects.filter(job_id=body["id"])] == ["submitted"]


def test_a_full_node_request_is_accepted_while_every_node_has_a_gpu_in_its_xid_hold(
    world, client_for, tick, monkeypatch
):
    """Submit asks whether the hardware could ever hold a request, so health passes; the
    tick, which places on healthy GPUs only, keeps the job waiting until the holds end."""
    from django.utils import timezone

    from monitoring.models import GpuHealth
    from scheduler.choices import JobState
    from scheduler.models import Gpu, Node
    from scheduler.reads import inventory

    monkeypatch.setattr(inventory, "_cache", None)  # as in a fresh process: nothing cached yet
    now = timezone.now()
    for node in Node.objects.all():
        held = Gpu.objects.filter(node=node).order_by("index")[0]
        GpuHealth.objects.create(gpu=held, xid=79, xid_at=now, since=now)
    response = post(client_for(world.alice), gpu_model="H100-80GB", gpus_per_node=8)
    assert response.status_code == 201, response.json()
    tick()
    job = Job.objects.get()
    assert job.state == JobState.PENDING and not job.allocations


def test_account_may_be_omitted_with_a_single_membership(world, client_for):
    assert post(client_for(world.alice), account=None).status_code == 201
