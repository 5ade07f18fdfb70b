"""Job arrays (``sbatch --array``): one submission, one job per task; each task scheduled,
limited, accounted and run as a job of its own, knowing its index; the array addressable
as a whole and shown compactly, as ``squeue`` shows it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from people.models import ClusterIdentity, Quota
from scheduler.backends.job_env import array_env, job_env
from scheduler.choices import EventKind, JobState
from scheduler.clusters.dispatch import job_spec
from scheduler.clusters.logs import read_job_log
from scheduler.clusters.poll import poll_backends
from scheduler.core.types import PendingReason
from scheduler.models import Job, JobEvent
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db

JOB = {"name": "sweep", "command": "echo task=$QM_ARRAY_TASK_ID", "gpus_per_node": 1, "walltime_seconds": 600}


def submit_array(client: Any, array: str, **changes: Any) -> Any:
    return client.post("/api/v1/jobs/", {**JOB, "array": array, **changes}, format="json")


def tasks_of(array_job: int) -> list[Job]:
    return list(Job.objects.filter(array_job_id=array_job).order_by("array_task_id"))


def test_an_array_is_one_job_per_task_named_by_its_first_task(world, client_for):
    response = submit_array(client_for(world.alice), "1,3,5-7%2")

    assert response.status_code == 201, response.json()
    first = response.json()
    tasks = tasks_of(first["id"])
    assert [t.array_task_id for t in tasks] == [1, 3, 5, 6, 7]
    assert tasks[0].id == first["id"] and first["display_id"] == f"{first['id']}_1"
    assert {(t.state, t.array_task_count, t.array_throttle, t.array_spec) for t in tasks} == {
        (JobState.PENDING, 5, 2, "1,3,5-7%2")
    }
    assert [t.id for t in tasks] == sorted(t.id for t in tasks)  # ids (FIFO order) follow the indices
    [submitted] = JobEvent.objects.filter(job__in=tasks, kind=EventKind.SUBMITTED)  # one, the array's
    assert submitted.job_id == first["id"] and submitted.data["tasks"] == 5


@pytest.mark.parametrize(
    ("array", "words"),
    [
        ("0,,2", "is not an index"),
        ("9-3", "ends before it starts"),
        ("0-9%0", "at least 1"),
        ("1;2", "is not an index"),
        ("0-10001", "from 0 to 10000"),
    ],
)
def test_a_bad_array_is_a_400_naming_the_field_and_writes_nothing(world, client_for, array, words):
    response = submit_array(client_for(world.alice), array)

    assert response.status_code == 400
    assert words in response.json()["array"][0]
    assert not Job.objects.exists()


def test_the_array_size_limit_is_a_setting(world, client_for, settings):
    settings.JOB_ARRAY_MAX_SIZE = 10

    assert submit_array(client_for(world.alice), "0-9").status_code == 201
    refused = submit_array(client_for(world.alice), "0-10")
    assert refused.status_code == 400 and "array size limit is 10" in refused.json()["array"][0]


def test_an_arrays_bytes_are_bounded(world, client_for, settings):
    settings.JOB_ARRAY_MAX_BYTES = 1000
    refused = submit_array(client_for(world.alice), "0-99", command="x" * 20)

    assert refused.status_code == 400 and "QM_ARRAY_TASK_ID" in refused.json()["array"][0]


def test_pending_job_quotas_count_every_task(world, client_for):
    Quota.objects.create(user=world.alice, max_pending_jobs=5)
    client = client_for(world.alice)

    refused = submit_array(client, "0-5")
    assert refused.status_code == 400
    assert "the array adds 6 tasks; the quota allows 5" in refused.json()["account"][0]
    assert submit_array(client, "0-4").status_code == 201


def test_the_throttle_is_its_own_pending_reason(world, client_for, tick):
    first = submit_array(client_for(world.alice), "0-5%2").json()["id"]

    result = tick()

    assert len(result.started) == 2
    waiting = [t for t in tasks_of(first) if t.state == JobState.PENDING]
    assert len(waiting) == 4
    assert {t.pending_reason for t in waiting} == {PendingReason.ARRAY_TASK_LIMIT}
    assert waiting[0].pending_blockers[0]["evidence"] == {"array_job": first, "running_tasks": 2, "limit": 2}


def test_every_task_knows_its_place_and_writes_its_own_output(world, client_for, tick):
    first = submit_array(client_for(world.alice), "0-2").json()["id"]
    tick()

    def all_ended() -> bool:
        poll_backends()
        return not Job.objects.filter(array_job_id=first).exclude(state=JobState.COMPLETED).exists()

    wait_for(all_ended, what="every task completed")
    logs = {t.array_task_id: read_job_log(t) for t in tasks_of(first)}
    assert {i: f"task={i}" in log for i, log in logs.items()} == {0: True, 1: True, 2: True}


def test_the_environment_every_backend_gives_a_task(world, client_for):
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, gid=20001)
    first = submit_array(client_for(world.alice), "4-6").json()["id"]
    task = Job.objects.get(array_job_id=first, array_task_id=5)
    task.allocations = [{"node": "n1", "gpu_indices": [0], "cpus": 1, "memory_mib": 0}]

    spec = job_spec(task)

    assert {k: v for k, v in job_env(spec).items() if "ARRAY" in k} == {
        "QM_ARRAY_JOB_ID": str(first),
        "QM_ARRAY_TASK_ID": "5",
        "QM_ARRAY_TASK_COUNT": "3",
    }
    assert array_env(spec, "SLURM_")["SLURM_ARRAY_TASK_ID"] == "5"  # the Slurm backend exports both


def test_the_queue_folds_an_arrays_waiting_tasks_into_one_row(world, client_for, tick):
    client = client_for(world.alice)
    first = submit_array(client, "0-9%2").json()["id"]
    plain = client.post("/api/v1/jobs/", JOB, format="json").json()["id"]
    tick()

    with CaptureQueriesContext(connection) as queries:
        rows = client.get("/api/v1/jobs/?collapse=arrays&ordering=id").json()["results"]
    few = len(queries)

    labels = [(r["display_id"], r["folded_tasks"], r["state"]) for r in rows]
    assert labels == [
        (f"{first}_0", None, JobState.RUNNING),
        (f"{first}_1", None, JobState.RUNNING),
        (f"{first}_[2-9]", 8, JobState.PENDING),
        (str(plain), None, JobState.RUNNING),
    ]
    assert len(client.get("/api/v1/jobs/").json()["results"]) == 11  # unfolded: every task
    assert len(client.get(f"/api/v1/jobs/?array_job={first}").json()["results"]) == 10
    assert client.get("/api/v1/jobs/?collapse=everything").status_code == 400
    submit_array(client, "0-999")
    with CaptureQueriesContext(connection) as more:
        client.get("/api/v1/jobs/?collapse=arrays")
    assert len(more) == few  # the number of queries does not grow with the tasks


def test_the_whole_array_is_held_released_throttled_and_cancelled(world, client_for, tick):
    client = client_for(world.alice)
    first = submit_array(client, "0-4").json()["id"]
    url = f"/api/v1/arrays/{first}/"

    held = client.post(url + "hold/").json()
    assert held["changed"] == 5 and held["array"]["states"] == {"HELD": 5}
    assert client.post(url + "hold/").status_code == 409
    assert client.post(url + "release/").json()["array"]["pending"] == f"{first}_[0-4]"
    assert client.patch(url, {"throttle": 1}, format="json").json()["throttle"] == 1
    assert client.patch(url, {"throtle": 1}, format="json").status_code == 400
    tick()
    summary = client.get(url).json()
    assert summary["states"] == {"PENDING": 4, "RUNNING": 1} and summary["pending"] == f"{first}_[1-4]"

    cancelled = client.post(url + "cancel/").json()

    assert cancelled["changed"] == 5 and cancelled["array"]["states"] == {"CANCELLED": 5}
    requeued = client.post(url + "requeue/").json()
    assert requeued["changed"] == 5 and {t.attempt for t in tasks_of(first)} == {1}


def test_one_task_is_a_job_of_its_own(world, client_for):
    client = client_for(world.alice)
    first = submit_array(client, "0-2").json()["id"]
    second = Job.objects.get(array_job_id=first, array_task_id=1)

    assert client.post(f"/api/v1/jobs/{second.id}/cancel/").status_code == 200

    assert client.get(f"/api/v1/arrays/{first}/").json()["states"] == {"PENDING": 2, "CANCELLED": 1}


def test_others_cannot_see_or_touch_an_array_but_its_coordinator_can(world, client_for):
    first = submit_array(client_for(world.alice), "0-2").json()["id"]

    assert client_for(world.charlie).get(f"/api/v1/arrays/{first}/").status_code == 404
    assert client_for(world.charlie).post(f"/api/v1/arrays/{first}/cancel/").status_code == 404
    assert client_for(world.bob).post(f"/api/v1/arrays/{first}/hold/").status_code == 200
    assert client_for(world.alice).get("/api/v1/arrays/999999/").status_code == 404


def test_a_dependency_on_an_array_waits_for_every_task(world, client_for, tick):
    """``afterok:42`` on an array means all of it, as in Slurm: not only its first task."""
    client = client_for(world.alice)
    first = submit_array(client, "0-2").json()["id"]
    after = client.post(
        "/api/v1/jobs/", {**JOB, "dependencies": [{"type": "afterok", "job": first}]}, format="json"
    ).json()["id"]
    tasks = tasks_of(first)
    Job.objects.filter(pk__in=[tasks[0].id, tasks[1].id]).update(state=JobState.COMPLETED)

    tick()
    assert Job.objects.get(pk=after).pending_reason == PendingReason.DEPENDENCY  # task 2 has not ended

    Job.objects.filter(pk=tasks[2].id).update(state=JobState.FAILED)
    tick()
    assert Job.objects.get(pk=after).pending_reason == PendingReason.DEPENDENCY_NEVER  # one task failed

    Job.objects.filter(pk=tasks[2].id).update(state=JobState.COMPLETED)
    tick()
    assert Job.objects.get(pk=after).state != JobState.PENDING  # every task completed: it starts


@pytest.mark.parametrize(
    "query",
    ["array_job=-1.7976931348623157e%2B308", "array_job=1.5", "array_job=99999999999999999999", "array_task=-1"],
)
def test_an_array_filter_that_no_id_can_match_is_a_400_naming_it(world, client_for, query):
    response = client_for(world.alice).get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400 and query.split("=")[0] in response.json()
