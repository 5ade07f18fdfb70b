"""Reconciliation: lost jobs requeued, silent nodes marked down, orphans found and cancelled."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.backends.base import JobSpec, Placement, RemoteState
from scheduler.backends.local import LocalBackend
from scheduler.choices import JobState, NodeState
from scheduler.clusters import reconcile
from scheduler.clusters.poll import _apply_poll_result, poll_backends
from scheduler.config import current_config
from scheduler.jobs.remote import backend_for
from scheduler.jobs.verbs import cancel_job, requeue_job
from scheduler.models import Cluster, Job, Node
from tests.builders import submit
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db


def running_job(world, tick, **fields):  # type: ignore[no-untyped-def]
    job = submit(world.alice, world.lab, command="sleep 60", **fields)
    tick()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def kill_runner(world, job: Job) -> None:
    backend = backend_for(world.cluster)
    assert isinstance(backend, LocalBackend)
    info = json.loads((backend.state_dir / "jobs" / job.external_id / "runner.json").read_text())
    os.kill(info["pid"], signal.SIGKILL)
    wait_for(lambda: backend.poll([job.external_id])[job.external_id].state is RemoteState.NODE_FAIL)


def test_a_job_whose_runner_died_is_requeued_as_a_new_attempt(world, tick):
    job = running_job(world, tick)
    kill_runner(world, job)
    poll_backends()
    job.refresh_from_db()
    assert (job.state, job.attempt, job.external_id) == (JobState.PENDING, 1, "")
    assert "requeued as attempt 1" in job.events.get(kind="requeued").message


def test_after_the_last_allowed_requeue_the_job_ends_node_fail(world, tick, settings):
    settings.SCHEDULER_MAX_REQUEUES = 0
    job = running_job(world, tick)
    kill_runner(world, job)
    poll_backends()
    job.refresh_from_db()
    assert job.state == JobState.NODE_FAIL and job.ended_at is not None


def test_a_silent_node_is_marked_down_and_its_jobs_requeued_and_cancelled(world, tick, settings):
    job = running_job(world, tick)
    node = job.allocations[0]["node"]
    old_key = job.external_id
    backend = backend_for(world.cluster)
    settings.SCHEDULER_NODE_TIMEOUT_SECONDS = 60
    later = timezone.now() + timedelta(minutes=5)
    Node.objects.filter(name=node).update(last_heartbeat=timezone.now() - timedelta(minutes=10))
    report = reconcile.reconcile(world.cluster, backend, later, current_config())
    assert report["silent_nodes"] >= 1 and report["requeued_from_down_nodes"] == 1
    down = Node.objects.get(name=node)
    assert down.state == NodeState.DOWN and down.reason == "no heartbeat for 60s"
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.attempt == 1
    assert f"node {node} is down (no heartbeat for 60s)" in job.events.get(kind="requeued").message
    wait_for(lambda: backend.poll([old_key])[old_key].state.is_terminal)

    poll_backends()  # the backend lists the node again: it is back
    assert Node.objects.get(name=node).state == NodeState.UP


def stray_spec(key: str) -> JobSpec:
    """A job submitted straight to the backend, behind the portal's back."""
    return JobSpec(
        key=key,
        name="stray",
        owner="nobody",
        account="none",
        command="sleep 60",
        script="",
        walltime_seconds=600,
        placements=(Placement("h100-01", (0,)),),
    )


def test_orphans_are_recorded_and_cancelled(world, settings):
    backend = backend_for(world.cluster)
    spec = stray_spec("00000000-0000-0000-0000-000000000001.0")
    orphan = backend.submit(spec)
    report = poll_backends()
    assert report[world.cluster.name]["orphans"] == 1
    assert Cluster.objects.get(pk=world.cluster.pk).orphans == [orphan]
    wait_for(lambda: backend.poll([orphan])[orphan].state is RemoteState.CANCELLED)


def test_orphans_are_only_reported_when_cancelling_is_off(world, settings):
    settings.SCHEDULER_CANCEL_ORPHANS = False
    backend = backend_for(world.cluster)
    spec = stray_spec("00000000-0000-0000-0000-000000000002.0")
    orphan = backend.submit(spec)
    poll_backends()
    assert backend.poll([orphan])[orphan].state is RemoteState.RUNNING
    backend.cancel(orphan)


def test_a_node_reported_down_keeps_its_jobs_through_the_grace_period(world, tick, settings):
    """A restarting workload manager reports its nodes down for a moment; their jobs are
    requeued only if the node stays down past SCHEDULER_NODE_DOWN_GRACE_SECONDS."""
    settings.SCHEDULER_NODE_DOWN_GRACE_SECONDS = 120
    job = running_job(world, tick)
    node = job.allocations[0]["node"]
    backend = backend_for(world.cluster)
    now = timezone.now()
    Node.objects.filter(name=node).update(state=NodeState.DOWN, reason="reported down by backend", down_since=now)

    assert (
        reconcile.reconcile(world.cluster, backend, now + timedelta(seconds=60), current_config())[
            "requeued_from_down_nodes"
        ]
        == 0
    )
    job.refresh_from_db()
    assert job.state == JobState.RUNNING

    assert (
        reconcile.reconcile(world.cluster, backend, now + timedelta(seconds=180), current_config())[
            "requeued_from_down_nodes"
        ]
        == 1
    )
    job.refresh_from_db()
    assert job.state == JobState.PENDING


def test_news_about_an_old_attempt_never_moves_the_new_one(world, tick):
    from scheduler.backends.base import PollResult

    job = running_job(world, tick)
    old = job.external_id
    requeue_job(job, by="alice")
    tick()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.external_id != old

    assert not _apply_poll_result(job.id, PollResult(old, RemoteState.CANCELLED), old, current_config())
    assert not _apply_poll_result(job.id, PollResult(old, RemoteState.NODE_FAIL), old, current_config())
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.attempt == 1
    cancel_job(job, by="test")


def test_a_job_the_backend_no_longer_knows_ends_node_fail_without_a_rerun(world, tick):
    from scheduler.backends.base import PollResult

    job = running_job(world, tick)
    assert _apply_poll_result(
        job.id, PollResult(job.external_id, RemoteState.UNKNOWN), job.external_id, current_config()
    )
    job.refresh_from_db()
    assert (job.state, job.attempt) == (JobState.NODE_FAIL, 0)
    assert job.state_reason == "the backend no longer knows this job"
