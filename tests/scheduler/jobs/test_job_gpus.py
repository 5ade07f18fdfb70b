"""One rule for "a job's GPUs" (``scheduler.core.hours.job_gpus``): whole GPUs are
``nodes x gpus_per_node``, a share of one GPU per node counts as ``nodes x gpu_share``.
The model's ``Job.total_gpus``, the core's ``PendingJob.gpu_amount``, the SQL form
(``common.db.dbfunctions.job_gpus``) and what the API serves all count the same.

Personas (tests/conftest.py): alice is a member of lab.
"""

from __future__ import annotations

import pytest

from common.db.dbfunctions import job_gpus as job_gpus_sql
from scheduler.core.hours import job_gpus
from scheduler.models import Job
from tests.builders import local_node_group, make_local_cluster, pending, submit

pytestmark = pytest.mark.django_db

#: (scenario, nodes, gpus_per_node, gpu_share, GPUs it holds)
JOBS = [
    ("one whole GPU", 1, 1, 0.0, 1.0),
    ("8 whole GPUs on each of 2 nodes", 2, 8, 0.0, 16.0),
    ("a quarter of one GPU", 1, 1, 0.25, 0.25),
    ("a quarter of one GPU on each of 2 nodes", 2, 1, 0.25, 0.5),
    ("no GPU", 1, 0, 0.0, 0.0),
]


@pytest.fixture
def shared_cluster(world):
    group = local_node_group("sh-{:02d}", count=2, gpus=8)
    group["gpus"]["shared"] = True
    return make_local_cluster("shared", [group])


def make_job(world, nodes: int, per_node: int, share: float) -> Job:
    extra = {"gpu_share": share, "gpu_memory_mib_share": 1000} if share else {}
    return submit(world.alice, world.lab, nodes=nodes, gpus_per_node=per_node, **extra)


@pytest.mark.parametrize(("nodes", "per_node", "share", "gpus"), [row[1:] for row in JOBS], ids=[r[0] for r in JOBS])
def test_the_model_the_core_and_sql_count_a_jobs_gpus_alike(world, shared_cluster, nodes, per_node, share, gpus):
    job = make_job(world, nodes, per_node, share)
    assert job_gpus(nodes, per_node, share) == gpus
    assert job.total_gpus == gpus
    assert pending(job.pk, nodes=nodes, gpus_per_node=per_node, gpu_share=share).gpu_amount == gpus
    assert Job.objects.filter(pk=job.pk).annotate(gpus=job_gpus_sql()).get().gpus == pytest.approx(gpus)


@pytest.mark.parametrize(
    ("nodes", "per_node", "share", "gpus"),
    [pytest.param(*row[1:], id=row[0]) for row in JOBS],
)
def test_the_api_serves_the_same_count(world, shared_cluster, client_for, nodes, per_node, share, gpus):
    job = make_job(world, nodes, per_node, share)
    assert client_for(world.alice).get(f"/api/v1/jobs/{job.pk}/").json()["total_gpus"] == gpus
