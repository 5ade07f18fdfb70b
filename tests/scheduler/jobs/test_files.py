"""What the files jobs bring cost the portal (issue 34): stored once per submission (an
array's tasks share them), at most ``JOB_FILES_MAX_BYTES_PER_USER`` a user, dropped
``JOB_FILES_RETENTION_DAYS`` after their jobs end; and at most ``JOB_SUBMIT_RATE``
submissions a user, an array being one."""

from __future__ import annotations

import hashlib
import random
import string
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from quartermaster.periodic import periodic_jobs
from scheduler.choices import JobState
from scheduler.clusters.dispatch import _count_handoff, job_spec  # the loader dispatch uses
from scheduler.clusters.logs import read_job_log
from scheduler.clusters.poll import poll_backends
from scheduler.jobs.files import expire_files, stored_bytes
from scheduler.models import Job, JobFiles
from tests.builders import end, start, submit
from tests.scheduler.tick.waiting import wait_for

JOB = {"name": "sweep", "command": "sha256sum data.txt", "gpus_per_node": 1, "walltime_seconds": 600}
MB = 1_000_000


def text_of(size: int, seed: int = 0) -> str:
    """``size`` bytes of text no database compresses much (PostgreSQL's TOAST would shrink
    repeated characters to nothing and hide what is stored)."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_letters + string.digits, k=size))


def post(client: Any, **changes: Any) -> Any:
    return client.post("/api/v1/jobs/", {**JOB, **changes}, format="json")


def database_bytes() -> int:
    """What the job tables take in the database, as the database counts it: SQLite's
    pages in use, PostgreSQL's relations with their TOAST and indexes."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            tables = [Job._meta.db_table, JobFiles._meta.db_table]
            cursor.execute("SELECT " + " + ".join(["pg_total_relation_size(%s)"] * len(tables)), tables)
            return int(cursor.fetchone()[0])
        cursor.execute("PRAGMA page_count")
        pages = int(cursor.fetchone()[0])
        cursor.execute("PRAGMA freelist_count")
        free = int(cursor.fetchone()[0])
        cursor.execute("PRAGMA page_size")
        return (pages - free) * int(cursor.fetchone()[0])


# --- Stored once -------------------------------------------------------------------------


def test_a_100_task_array_with_1_mb_of_files_stores_about_1_mb(world, client_for):
    """It stored 100 MB before: every task a copy of the files."""
    files = {"data.txt": text_of(MB - 1000)}
    before = database_bytes()

    response = post(client_for(world.alice), array="0-99", files=files)

    assert response.status_code == 201, response.json()
    grown = database_bytes() - before
    assert grown < 2 * MB, f"the array stored {grown} bytes"
    assert JobFiles.objects.count() == 1 and stored_bytes(world.alice) == MB - 1000
    tasks = Job.objects.filter(array_job_id=response.json()["id"])
    assert tasks.count() == 100 and set(tasks.values_list("file_set", flat=True)) == {JobFiles.objects.get().pk}


def test_every_task_of_an_array_gets_the_files_at_dispatch_read_once(world, client_for):
    files = {"data.txt": text_of(10_000), "conf/run.yaml": "lr: 0.1\n"}
    first = post(client_for(world.alice), array="0-99", files=files).json()["id"]
    Job.objects.filter(array_job_id=first).update(state=JobState.DISPATCHING, cluster=world.cluster)

    with CaptureQueriesContext(connection) as queries:
        tasks = _count_handoff([job.pk for job in Job.objects.filter(array_job_id=first)])
        specs = [job_spec(task) for task in tasks]

    assert len(specs) == 100 and all(dict(spec.files) == files for spec in specs)
    assert sum("scheduler_jobfiles" in q["sql"] for q in queries.captured_queries) == 1


def test_every_task_runs_with_its_files_on_the_local_backend(world, client_for, tick):
    data = text_of(300_000, seed=7)
    digest = hashlib.sha256(data.encode()).hexdigest()
    first = post(client_for(world.alice), array="0-3", files={"data.txt": data}).json()["id"]
    tick()

    def all_ended() -> bool:
        poll_backends()
        return not Job.objects.filter(array_job_id=first).exclude(state__in=[JobState.COMPLETED, JobState.FAILED])

    wait_for(all_ended, what="every task ended")
    tasks = Job.objects.filter(array_job_id=first).order_by("array_task_id")
    assert [(t.state, digest in read_job_log(t)) for t in tasks] == [(JobState.COMPLETED, True)] * 4


def test_a_job_without_files_stores_no_file_set(world, client_for):
    response = post(client_for(world.alice), command="true")
    assert response.status_code == 201 and not JobFiles.objects.exists()
    assert client_for(world.alice).get(f"/api/v1/jobs/{response.json()['id']}/").json()["file_names"] == []


def test_an_arrays_byte_limit_counts_its_files_once(world, client_for, settings):
    settings.JOB_ARRAY_MAX_BYTES = 200_000
    accepted = post(client_for(world.alice), array="0-99", files={"data.txt": text_of(150_000)})
    assert accepted.status_code == 201, accepted.json()
    refused = post(client_for(world.alice), array="0-99", command="x" * 600, files={"data.txt": text_of(150_000)})
    assert refused.status_code == 400 and "150000 bytes of files" in refused.json()["array"][0]


# --- A cap per user --------------------------------------------------------------------------


def test_a_user_may_store_up_to_the_cap_and_is_told_it_beyond(world, client_for, settings):
    settings.JOB_FILES_MAX_BYTES_PER_USER = 2500
    alice = client_for(world.alice)
    assert post(alice, array="0-99", files={"data.txt": text_of(1000)}).status_code == 201  # 1000, not 100,000
    assert post(alice, files={"data.txt": text_of(1000)}).status_code == 201

    refused = post(alice, files={"data.txt": text_of(1000)})

    assert refused.status_code == 400
    message = refused.json()["files"][0]
    assert "already hold 2000 bytes and these add 1000" in message and "at most 2500" in message
    assert Job.objects.count() == 101 and JobFiles.objects.count() == 2
    assert post(client_for(world.bob), files={"data.txt": text_of(1000)}).status_code == 201  # bob's own cap


def test_expired_files_no_longer_count_against_the_cap(world, client_for, settings):
    settings.JOB_FILES_MAX_BYTES_PER_USER = 1500
    now = timezone.now()
    job = submit(world.alice, world.lab, files={"data.txt": text_of(1000)})
    end(start(job, now - timedelta(hours=1)), now)
    assert post(client_for(world.alice), files={"data.txt": text_of(1000)}).status_code == 400

    expire_files(now + timedelta(days=31))

    assert post(client_for(world.alice), files={"data.txt": text_of(1000)}).status_code == 201


def test_the_cap_and_retention_are_settings(settings):
    assert settings.JOB_FILES_MAX_BYTES_PER_USER == 50_000_000 and settings.JOB_FILES_RETENTION_DAYS == 30
    assert settings.JOB_SUBMIT_RATE == "60/minute"


# --- Expiry ------------------------------------------------------------------------------


@pytest.fixture
def ended(world):
    """Alice's job with two files, ended now."""
    now = timezone.now()
    job = submit(world.alice, world.lab, files={"train.py": "print(1)\n", "conf/run.yaml": "lr: 1\n"})
    end(start(job, now - timedelta(hours=1)), now)
    job.refresh_from_db()
    return job


def test_files_expire_the_retention_after_the_job_ended_and_the_api_says_so(world, client_for, ended):
    assert expire_files(ended.ended_at + timedelta(days=29)) == {"expired": 0, "deleted": 0}
    assert Job.objects.get(pk=ended.pk).files == {"train.py": "print(1)\n", "conf/run.yaml": "lr: 1\n"}

    assert expire_files(ended.ended_at + timedelta(days=31)) == {"expired": 1, "deleted": 0}

    job = Job.objects.get(pk=ended.pk)
    assert job.files == {} and job.files_expired_at is not None
    detail = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()
    assert detail["file_names"] == ["conf/run.yaml", "train.py"] and detail["files_expired_at"] is not None
    page = client_for(world.alice).get(f"/jobs/{job.id}/")
    assert page.status_code == 200 and "expired" in page.content.decode()


def test_an_array_keeps_its_files_while_any_task_has_not_ended(world, client_for):
    first = post(client_for(world.alice), array="0-2", files={"data.txt": "x"}).json()["id"]
    now = timezone.now()
    for task in Job.objects.filter(array_job_id=first).exclude(array_task_id=2):
        end(start(task, now - timedelta(hours=1)), now)

    assert expire_files(now + timedelta(days=365))["expired"] == 0

    end(start(Job.objects.get(array_job_id=first, array_task_id=2), now), now)
    assert expire_files(now + timedelta(days=31))["expired"] == 1


def test_a_job_whose_files_expired_cannot_be_requeued(world, client_for, ended):
    expire_files(ended.ended_at + timedelta(days=31))

    response = client_for(world.alice).post(f"/api/v1/jobs/{ended.id}/requeue/")

    assert response.status_code == 409 and "files expired" in response.json()["detail"]
    assert Job.objects.get(pk=ended.pk).state == JobState.COMPLETED


def test_files_no_job_refers_to_are_deleted(world, ended):
    Job.objects.filter(pk=ended.pk).delete()
    assert expire_files(timezone.now() + timedelta(days=31)) == {"expired": 0, "deleted": 1}
    assert not JobFiles.objects.exists()


def test_expiry_runs_periodically(settings):
    assert "scheduler.expire_job_files" in {job.task for job in periodic_jobs(settings)}


# --- A submission rate --------------------------------------------------------------------


def test_submissions_beyond_the_rate_are_a_429_with_retry_after_and_an_array_is_one(world, client_for, settings):
    settings.JOB_SUBMIT_RATE = "2/minute"
    alice = client_for(world.alice)
    assert post(alice, command="true", array="0-99").status_code == 201
    assert post(alice, command="true").status_code == 201

    refused = post(alice, command="true")

    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert Job.objects.count() == 101
    assert post(client_for(world.bob), command="true").status_code == 201  # bob's own rate
    assert alice.get("/api/v1/jobs/").status_code == 200  # only submissions count


def test_the_submit_page_keeps_the_same_rate(world, client_for, settings):
    settings.JOB_SUBMIT_RATE = "1/minute"
    alice = client_for(world.alice)
    form = {**alice.get("/jobs/new/").context["form"].initial, "name": "x", "account": "lab", "command": "true"}
    assert post(alice, command="true").status_code == 201

    page = alice.post("/jobs/new/", {**form, "walltime_seconds": "10m"})

    assert page.status_code == 200 and "Too many submissions" in page.content.decode()
    assert Job.objects.count() == 1


def test_a_what_if_with_files_stores_nothing(world, client_for):
    response = client_for(world.alice).post("/api/v1/jobs/estimate/", {**JOB, "files": {"a.py": "x"}}, format="json")
    assert response.status_code == 200, response.json()
    assert not JobFiles.objects.exists() and not Job.objects.exists()
