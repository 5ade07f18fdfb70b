"""Exactly once: a Celery worker killed between Slurm accepting a job and the database
recording it leaves exactly one Slurm job, and the portal shows it RUNNING.

Real parts only: the Slurm dev cluster, Redis, a Celery worker with beat on the test
database. The kill happens at the ``dispatch.after_submit`` failpoint (SIGKILL right
after ``sbatch`` returned), which no outside timing could hit reliably.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from rest_framework.test import APIClient

from people.models import ClusterIdentity
from scheduler.choices import JobState
from scheduler.clusters.poll import poll_cluster
from scheduler.jobs.remote import cancel_remote
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Cluster, Job
from tests import slurm_dev
from tests.conftest import redis_url
from tests.e2e.conftest import child_env
from tests.scheduler.tick.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.redis, pytest.mark.django_db(transaction=True)]


#: The worker runs tasks in its own process (solo pool), so the failpoint's SIGKILL
#: takes the whole worker down, as ``kill -9 <worker pid>`` would; beat runs apart.
WORKER = [sys.executable, "-m", "celery", "-A", "quartermaster", "worker", "--pool=solo", "--loglevel=INFO"]
WORKER += ["--without-gossip", "--without-mingle"]


def slurm_jobs_with_key(key: str) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-a", "-t", "all", "-o", "%i|%k"],
        env={**os.environ, "SLURM_CONF": slurm_dev.slurm_conf()},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return [
        job_id
        for job_id, _, comment in (line.partition("|") for line in out.splitlines())
        if comment.startswith("qm:") and comment.endswith(f":{key}")  # qm:<instance>:<key>
    ]


def test_a_worker_killed_right_after_sbatch_leaves_exactly_one_slurm_job(world, spawn, tmp_path):
    world.cluster.enabled = False
    world.cluster.save()
    output = f"{{home}}/.quartermaster/test-{uuid.uuid4().hex[:12]}"  # jobs run as alice, output in her home
    cluster = Cluster.objects.create(
        name="devcluster", kind="slurm", config={"slurm_conf": slurm_dev.slurm_conf(), "output_dir": output}
    )
    ClusterIdentity.objects.create(user=world.alice, username="alice")
    poll_cluster(cluster)
    env = child_env(
        CELERY_BROKER_URL=redis_url(),
        CELERY_QUEUE=f"qm-test-{uuid.uuid4().hex[:8]}",
        SCHEDULER_DISPATCH="celery",
        SCHEDULER_REDISPATCH_SECONDS="2",
        SLURM_CONF=slurm_dev.slurm_conf(),
    )
    spawn([sys.executable, "-m", "celery", "-A", "quartermaster", "beat", "--schedule", str(tmp_path / "beat")], env)
    crashing = spawn(WORKER, {**env, "QM_FAILPOINTS": "dispatch.after_submit"})

    client = APIClient()
    client.force_authenticate(world.alice)
    body = {"name": "once", "account": "lab", "command": "sleep 120", "gpus_per_node": 1, "walltime_seconds": 600}
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])

    # The worker dies by SIGKILL after sbatch: Slurm has the job, the database does not.
    try:
        crashing.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("the worker never reached the failpoint")
    assert crashing.returncode == -9
    job.refresh_from_db()
    assert job.state == JobState.DISPATCHING and job.external_id == ""
    assert len(slurm_jobs_with_key(job.backend_key)) == 1

    spawn(WORKER, env)  # a restarted worker, without the failpoint
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING, timeout=90, what="job RUNNING")

    job.refresh_from_db()
    assert slurm_jobs_with_key(job.backend_key) == [job.external_id]
    cancel_job(job, by="test")
    cancel_remote(job.id)
