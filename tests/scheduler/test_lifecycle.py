"""A job's life through tick, dispatch and poll on the real local backend."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduler.choices import JobState
from scheduler.clusters.dispatch import dispatch_job
from scheduler.clusters.logs import read_job_log
from scheduler.clusters.nodes import drain_node
from scheduler.clusters.poll import poll_backends
from scheduler.jobs.remote import backend_for
from scheduler.jobs.verbs import cancel_job, requeue_job
from scheduler.models import Job
from scheduler.tick.run import run_tick
from tests.builders import submit
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db


def finished(job: Job) -> Job | None:
    poll_backends()
    job.refresh_from_db()
    return job if job.state not in (JobState.RUNNING, JobState.DISPATCHING) else None


def test_job_runs_on_its_assigned_gpus_and_completes(world, tick):
    job = submit(
        world.alice, world.lab, command="echo gpus=$CUDA_VISIBLE_DEVICES", gpus_per_node=2, gpu_model="H100-80GB"
    )
    result = tick()
    job.refresh_from_db()
    assert result.started == [job.id]
    assert job.state == JobState.RUNNING
    assert job.allocations == [{"node": "h100-01", "gpu_indices": [0, 1], "cpus": 1, "memory_mib": 0}]
    wait_for(lambda: finished(job), what="job end")
    assert (job.state, job.exit_code) == (JobState.COMPLETED, 0)
    assert "gpus=0,1" in read_job_log(job)
    assert [e.kind for e in job.events.all()] == ["submitted", "scheduled", "dispatched", "state"]


def test_nonzero_exit_is_failed_with_its_code(world, tick):
    job = submit(world.alice, world.lab, command="exit 3")
    tick()
    wait_for(lambda: finished(job))
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)


def test_walltime_is_enforced(world, tick):
    job = submit(world.alice, world.lab, command="sleep 30", walltime_seconds=1)
    tick()
    wait_for(lambda: finished(job))
    assert job.state == JobState.TIMEOUT


def test_cancel_stops_the_running_process(world, tick, django_capture_on_commit_callbacks):
    job = submit(world.alice, world.lab, command="sleep 30")
    tick()
    job.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        cancel_job(job, by="alice")
    backend = backend_for(world.cluster)
    remote_state = wait_for(
        lambda: (state := backend.poll([job.external_id])[job.external_id].state).is_terminal and state
    )
    assert remote_state == "CANCELLED"
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED


def test_running_jobs_gpus_are_not_reused(world, tick):
    first = submit(world.alice, world.lab, command="sleep 5", gpus_per_node=8, nodes=2)
    tick()
    second = submit(world.alice, world.lab, command="true", gpus_per_node=8, gpu_model="H100-80GB")
    tick()
    second.refresh_from_db()
    assert (second.state, second.pending_reason) == (JobState.PENDING, "Resources")
    cancel_job(Job.objects.get(pk=first.pk), by="alice")


def test_drained_node_gets_no_new_jobs(world, tick):
    drain_node(world.cluster.nodes.get(name="h100-01"), reason="maintenance", by=world.admin)
    job = submit(world.alice, world.lab, gpu_model="H100-80GB")
    tick()
    job.refresh_from_db()
    assert job.allocations[0]["node"] == "h100-02"


def test_permanent_backend_error_fails_the_job(world, tick):
    world.cluster.config = {"nodes": []}  # the backend no longer knows the nodes we placed on
    world.cluster.save()
    job = submit(world.alice, world.lab)
    tick()
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert "backend refused" in job.events.last().message


def test_job_stuck_in_dispatching_is_dispatched_again_once(world, tick, django_capture_on_commit_callbacks):
    job = submit(world.alice, world.lab, command="sleep 2")
    run_tick()  # claims the job but its dispatch never runs: a worker died
    job.refresh_from_db()
    assert job.state == JobState.DISPATCHING
    Job.objects.filter(pk=job.pk).update(dispatched_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        report = poll_backends()
    assert report["test"]["redispatched"] == 1
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    dispatch_job(job.id)  # a late duplicate delivery changes nothing
    assert Job.objects.get(pk=job.pk).external_id == job.external_id


def test_requeue_of_a_running_job_cancels_it_and_starts_a_new_attempt(world, tick):
    job = submit(world.alice, world.lab, command="sleep 30")
    tick()
    job.refresh_from_db()
    old_id = job.external_id
    requeue_job(job, by="alice")
    tick()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.attempt == 1 and job.external_id != old_id
    cancel_job(job, by="alice")


def test_tick_records_pending_reasons_only_when_they_change(world, tick):
    for _ in range(3):
        submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB", command="sleep 5")
    tick()
    reasons = sorted(Job.objects.values_list("state", "pending_reason"))
    assert reasons == [("PENDING", "Resources"), ("RUNNING", ""), ("RUNNING", "")]
    with CaptureQueriesContext(connection) as queries:
        run_tick()
    assert not [q for q in queries.captured_queries if "pending_reason" in q["sql"] and "UPDATE" in q["sql"]]
    for job in Job.objects.filter(state=JobState.RUNNING):
        cancel_job(job, by="test")


def test_tick_queries_do_not_grow_with_the_queue(world, tick):
    def queries_of_a_tick() -> int:
        with CaptureQueriesContext(connection) as queries:
            run_tick()
        return len(queries)

    submit(world.alice, world.lab, gpus_per_node=8, nodes=2, gpu_model="H100-80GB", command="sleep 5")
    tick()
    submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()  # writes its reason once
    few = queries_of_a_tick()
    for _ in range(30):
        submit(world.bob, world.lab, gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()  # writes the new jobs' reasons once
    assert queries_of_a_tick() == few
    for job in Job.objects.filter(state=JobState.RUNNING):
        cancel_job(job, by="test")


def test_broker_outage_at_dispatch_loses_no_job(world, settings, monkeypatch, django_capture_on_commit_callbacks):
    from kombu.exceptions import OperationalError

    from quartermaster.celery import app

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to redis:6379. Connection refused.")

    settings.SCHEDULER_DISPATCH = "celery"
    monkeypatch.setattr(app, "send_task", broker_down)
    jobs = [submit(world.alice, world.lab, command="true") for _ in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        assert len(run_tick().started) == 2  # the tick commits whatever the broker does
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.DISPATCHING}

    settings.SCHEDULER_DISPATCH = "inline"  # the broker is back (or the embedded loop runs)
    Job.objects.update(dispatched_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        poll_backends()
    for job in jobs:
        wait_for(partial(finished, job), what="job end")
        assert job.state == JobState.COMPLETED


def test_account_gpu_quota_keeps_a_job_waiting_with_the_limit_as_reason(world, tick):
    from people.models import Quota

    Quota.objects.create(account=world.lab, max_gpus=8)
    first = submit(world.alice, world.lab, command="sleep 5", gpus_per_node=8)
    tick()
    second = submit(world.bob, world.lab, command="true", gpus_per_node=1)
    outsider = submit(world.charlie, world.other, command="true", gpus_per_node=1)
    tick()
    for job in (first, second, outsider):
        job.refresh_from_db()
    assert (first.state, second.state, outsider.state) == (JobState.RUNNING, JobState.PENDING, JobState.RUNNING)
    assert second.pending_reason == "AccountGpuLimit"
    cancel_job(first, by="test")


def test_afterok_dependency_waits_then_starts_when_the_first_job_completes(world, tick):
    first = submit(world.alice, world.lab, command="true")
    then = submit(world.alice, world.lab, command="true", dependencies=[{"type": "afterok", "job": first.id}])
    tick()
    then.refresh_from_db()
    assert (then.state, then.pending_reason) == (JobState.PENDING, "Dependency")
    wait_for(lambda: finished(first), what="first job end")
    tick()
    then.refresh_from_db()
    assert then.state == JobState.RUNNING
