"""End to end with real processes: submit over the API, watch the job run and finish.

The scheduler runs in a separate process, once as ``manage.py run_scheduler`` (the
embedded mode) and once as a real Celery worker with beat against Redis, both on the
test database, so what they see is only what was committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from scheduler.models import Job
from tests.conftest import redis_url
from tests.e2e.conftest import child_env, free_port
from tests.scheduler.tick.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def submit_over_api(world) -> int:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_authenticate(world.alice)
    response = client.post(
        "/api/v1/jobs/",
        {
            "name": "e2e",
            "account": "lab",
            "command": "echo hello from $CUDA_VISIBLE_DEVICES; exit 7",
            "gpus_per_node": 2,
            "gpu_model": "H100-80GB",
            "walltime_seconds": 60,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


def wait_until_ended(job_id: int) -> None:
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}
    wait_for(lambda: Job.objects.get(pk=job_id).state in ended, timeout=90, interval=0.1, what=f"job {job_id} to end")


def assert_ran_to_completion(job_id: int) -> None:
    """The audit trail, not sampled states, shows every step (a fast job can pass
    through RUNNING between two samples on a loaded machine)."""
    job = Job.objects.get(pk=job_id)
    trail = [(e.kind, e.data.get("to")) for e in job.events.all()]
    assert trail == [
        ("submitted", None),
        ("scheduled", None),
        ("dispatched", "RUNNING"),
        ("state", "FAILED"),
    ], trail
    assert job.exit_code == 7
    from scheduler.clusters.logs import read_job_log

    assert "hello from 0,1" in read_job_log(job)


def test_run_scheduler_loop_runs_a_submitted_job(world, spawn):
    spawn([sys.executable, "manage.py", "run_scheduler", "--interval", "0.2"], child_env(SCHEDULER_DISPATCH="inline"))
    job_id = submit_over_api(world)
    wait_until_ended(job_id)
    assert_ran_to_completion(job_id)


def worker_with_beat(tmp_path: Path) -> list[str]:
    """A Celery worker (prefork, 2 processes) with beat embedded, its schedule in ``tmp_path``."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "quartermaster",
        "worker",
        "--beat",
        "--loglevel=INFO",
        "--concurrency=2",
        "--pool=prefork",
        "--schedule",
        str(tmp_path / "beat-schedule"),
        "--without-gossip",
        "--without-mingle",
    ]


@pytest.mark.redis
def test_celery_worker_and_beat_run_a_submitted_job(world, spawn, tmp_path):
    queue = f"qm-test-{uuid.uuid4().hex[:8]}"
    env = child_env(CELERY_BROKER_URL=redis_url(), CELERY_QUEUE=queue, SCHEDULER_DISPATCH="celery")
    spawn(
        worker_with_beat(tmp_path),
        env,
    )
    job_id = submit_over_api(world)
    wait_until_ended(job_id)
    assert_ran_to_completion(job_id)


@pytest.mark.redis
def test_a_redis_restart_loses_no_job_and_ticks_resume(world, spawn, tmp_path):
    """The broker goes away while the scheduler runs and a job is submitted; when it is
    back, beat ticks again and both jobs run exactly once. A private redis-server (the
    same binary as the site's) is restarted, so the shared one is left alone."""
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    redis_cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]
    redis = spawn(redis_cmd, dict(os.environ))
    wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout == b"PONG\n")
    env = child_env(
        CELERY_BROKER_URL=broker, CELERY_QUEUE=f"qm-test-{uuid.uuid4().hex[:8]}", SCHEDULER_DISPATCH="celery"
    )
    spawn(
        worker_with_beat(tmp_path),
        env,
    )
    first = submit_over_api(world)
    wait_until_ended(first)

    redis.terminate()
    redis.wait(timeout=15)
    second = submit_over_api(world)  # submitting needs only the database
    assert Job.objects.get(pk=second).state == "PENDING"
    spawn(redis_cmd, dict(os.environ))
    wait_until_ended(second)

    for job_id in (first, second):
        assert_ran_to_completion(job_id)
        assert Job.objects.get(pk=job_id).attempt == 0
