"""``make demo``'s two processes stop together on Ctrl-C (or SIGTERM) and take the demo's
running jobs with them: nothing of the demo runs on after it, and each job says why it ended."""

from __future__ import annotations

import os
import signal
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from scheduler.models import Job
from tests.e2e.conftest import child_env, free_port
from tests.scheduler.tick.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def processes_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:  # ended while we looked
            continue
    return found


def long_job(world, marker: str) -> int:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_authenticate(world.alice)
    body = {
        "name": "long",
        "account": "lab",
        "command": f"python3 -c 'import time; time.sleep(600)' {marker}",
        "gpus_per_node": 1,
        "walltime_seconds": 900,
    }
    response = client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_the_demo_stops_both_processes_and_ends_its_jobs(world, spawn, stop):
    port, marker = free_port(), f"qm-demo-{uuid.uuid4().hex}"
    demo = spawn([sys.executable, "manage.py", "run_demo", f"127.0.0.1:{port}"], child_env(SCHEDULER_DISPATCH="inline"))
    wait_for(lambda: answers(f"http://127.0.0.1:{port}/login/"), timeout=60, what="the web server")
    job_id = long_job(world, marker)
    wait_for(lambda: processes_with(marker), timeout=60, what="the job's process")

    # Ctrl-C on a terminal reaches the whole foreground group; SIGTERM only the command.
    os.killpg(demo.pid, stop) if stop == signal.SIGINT else demo.send_signal(stop)
    assert demo.wait(timeout=60) == 0

    assert not answers(f"http://127.0.0.1:{port}/login/")
    job = Job.objects.get(pk=job_id)
    assert job.state == "CANCELLED"
    assert job.events.filter(message="cancelled by demo-stop").exists()
    wait_for(lambda: not processes_with(marker), timeout=30, what="the job's process to end")
