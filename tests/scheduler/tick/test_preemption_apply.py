"""Preemption applied by the tick: victims requeued (or ended) and cancelled remotely."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from people.models import Qos
from scheduler.choices import JobState
from scheduler.jobs.remote import backend_for
from scheduler.jobs.verbs import cancel_job
from scheduler.models import Job
from tests.builders import local_node_group, make_local_cluster, submit
from tests.scheduler.tick.waiting import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_world(world):
    """One 2-GPU node, so a 2-GPU high job must evict a 2-GPU low job."""
    world.cluster.delete()
    world.cluster = make_local_cluster("tiny", [local_node_group("t-01", gpus=2)])
    high = Qos.objects.create(name="high", priority=100)
    low = Qos.objects.create(name="low", preemptible=True)
    high.may_preempt.add(low)
    return world


def running_low_job(world, tick):  # type: ignore[no-untyped-def]
    victim = submit(world.bob, world.lab, command="sleep 60", gpus_per_node=2, qos=Qos.objects.get(name="low"))
    tick()
    Job.objects.filter(pk=victim.pk).update(started_at=timezone.now() - timedelta(hours=1))
    victim.refresh_from_db()
    assert victim.state == JobState.RUNNING
    return victim


@pytest.mark.parametrize("mode,victim_state", [("requeue", JobState.PENDING), ("cancel", JobState.PREEMPTED)])
def test_high_qos_job_preempts_and_starts(small_world, tick, settings, mode, victim_state):
    settings.SCHEDULER_PREEMPT_MODE = mode
    victim = running_low_job(small_world, tick)
    backend = backend_for(small_world.cluster)
    old_external_id = victim.external_id
    urgent = submit(
        small_world.alice, small_world.lab, command="true", gpus_per_node=2, qos=Qos.objects.get(name="high")
    )
    tick()
    victim.refresh_from_db()
    urgent.refresh_from_db()
    assert urgent.state == JobState.RUNNING
    assert victim.state == victim_state
    event = victim.events.get(kind="preempted")
    assert event.data["by"] == urgent.id and f"preempted by job {urgent.id}" in event.message
    state = wait_for(lambda: (s := backend.poll([old_external_id])[old_external_id].state).is_terminal and s)
    assert state == "CANCELLED"
    if mode == "requeue":
        assert victim.attempt == 1 and victim.external_id == ""


def test_young_jobs_are_protected_by_the_minimum_runtime(small_world, tick, settings):
    settings.SCHEDULER_PREEMPT_MIN_RUNTIME_SECONDS = 3 * 3600
    victim = running_low_job(small_world, tick)
    urgent = submit(small_world.alice, small_world.lab, gpus_per_node=2, qos=Qos.objects.get(name="high"))
    tick()
    urgent.refresh_from_db()
    victim.refresh_from_db()
    assert (urgent.state, victim.state) == (JobState.PENDING, JobState.RUNNING)
    cancel_job(victim, by="test")
