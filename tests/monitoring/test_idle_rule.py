"""The idle-GPU rule: a running job whose measured GPUs stay under the account's (or the
site's) threshold is flagged once, its owner told, and, if the account asks, requeued or
cancelled later if it is still idle; unmeasured GPUs are never idle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.idle import enforce
from monitoring.services import insert_samples
from scheduler.choices import EventKind, JobState
from scheduler.models import Gpu, Job, JobEvent
from tests.builders import submit

pytestmark = pytest.mark.django_db


def running_on(world, gpu_index: int, *, hours: float = 2) -> Job:
    job = submit(world.alice, world.lab, gpus_per_node=1)
    Job.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING,
        started_at=timezone.now() - timedelta(hours=hours),
        allocations=[{"node": "h100-01", "gpu_indices": [gpu_index], "cpus": 1, "memory_mib": 0}],
    )
    job.refresh_from_db()
    return job


def samples(gpu_index: int, utilization, *, minutes: int = 120, end=None) -> None:
    end = end or timezone.now()
    gpu = Gpu.objects.get(node__name="h100-01", index=gpu_index)
    insert_samples(
        [
            (gpu.id, end - timedelta(minutes=m), {"utilization_pct": utilization, "memory_used_mib": 5})
            for m in range(minutes)
        ]
    )


def idle_events(job: Job) -> list[JobEvent]:
    return list(JobEvent.objects.filter(job=job, kind=EventKind.IDLE))


def test_an_idle_job_is_flagged_once_and_a_busy_or_unmeasured_one_never(world):
    idle, busy, unmeasured = running_on(world, 0), running_on(world, 1), running_on(world, 2)
    samples(0, 1.0)
    samples(1, 90.0)
    samples(2, None)  # MIG through NVML
    now = timezone.now()

    assert enforce(now) == {"flagged": 1, "acted": 0}
    assert enforce(now + timedelta(minutes=1))["flagged"] == 0

    [event] = idle_events(idle)
    assert "averaged 1.0% over the last 30 min (under 5%)" in event.message and event.data["attempt"] == 0
    assert idle_events(busy) == [] and idle_events(unmeasured) == []
    assert Job.objects.get(pk=idle.pk).state == JobState.RUNNING  # the site's default action: none


def test_a_job_younger_than_the_window_is_not_judged(world):
    job = running_on(world, 0, hours=0.25)
    samples(0, 0.0, minutes=15)
    assert enforce()["flagged"] == 0 and idle_events(job) == []


@pytest.mark.parametrize("action, state", [("requeue", JobState.PENDING), ("cancel", JobState.CANCELLED)])
def test_an_account_may_requeue_or_cancel_a_job_still_idle_after_the_grace(world, action, state):
    world.lab.idle_action, world.lab.idle_action_minutes = action, 20
    world.lab.save()
    job = running_on(world, 0, hours=3)
    samples(0, 2.0, minutes=180)
    now = timezone.now()

    enforce(now)  # flagged
    assert "if still idle" in idle_events(job)[0].message
    assert enforce(now + timedelta(minutes=10))["acted"] == 0  # within the grace
    samples(0, 2.0, minutes=30, end=now + timedelta(minutes=25))
    assert enforce(now + timedelta(minutes=25))["acted"] == 1

    job.refresh_from_db()
    assert job.state == state
    verb = "requeued" if action == "requeue" else "cancelled"
    assert JobEvent.objects.filter(job=job, message=f"{verb} by idle policy").exists()


def test_a_job_that_went_back_to_work_is_left_alone(world):
    world.lab.idle_action = "cancel"
    world.lab.save()
    job = running_on(world, 0, hours=3)
    samples(0, 1.0, minutes=180)
    now = timezone.now()
    enforce(now)
    samples(0, 95.0, minutes=40, end=now + timedelta(minutes=45))
    assert enforce(now + timedelta(minutes=45))["acted"] == 0
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


def test_an_account_sets_its_own_threshold(world):
    world.lab.idle_below_pct, world.lab.idle_minutes = 50.0, 60
    world.lab.save()
    job = running_on(world, 0)
    samples(0, 30.0)
    enforce()
    [event] = idle_events(job)
    assert "over the last 60 min (under 50%)" in event.message


def test_a_pass_costs_the_same_few_queries_for_many_running_jobs(world, django_assert_max_num_queries):
    for i in range(24):
        running_on(world, i % 8)
    for gpu in range(8):
        samples(gpu, 90.0, minutes=60)  # all busy: the pass only reads
    with django_assert_max_num_queries(4):  # the running jobs, their flags, their GPUs, the samples
        assert enforce() == {"flagged": 0, "acted": 0}
