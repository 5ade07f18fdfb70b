"""Fair-share usage: every span of every job is charged once, decayed, in the tick."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.models import Job, TickState, Usage
from scheduler.tick.run import run_tick
from scheduler.tick.snapshot import load_nodes
from scheduler.tick.usage import update_usage, usage_policy
from tests.builders import submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def hour_old_job(world, django_capture_on_commit_callbacks):
    """A 2-GPU job of alice's that has run for an hour; usage last brought forward then."""
    world.cluster.config = {**world.cluster.config, "simulate": 86400}
    world.cluster.save()
    job = submit(world.alice, world.lab, gpus_per_node=2)
    with django_capture_on_commit_callbacks(execute=True):
        run_tick()
    hour_ago = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(started_at=hour_ago)
    TickState.objects.update_or_create(pk=1, defaults={"usage_as_of": hour_ago})
    Usage.objects.all().delete()
    return job


def charged(world) -> float:  # type: ignore[no-untyped-def]
    """Alice's stored usage in lab (no row = nothing charged yet)."""
    row = Usage.objects.filter(account=world.lab, user=world.alice).first()
    return row.gpu_seconds if row else 0.0


def test_an_hour_on_two_gpus_is_about_7200_gpu_seconds(world, hour_old_job):
    update_usage(timezone.now(), load_nodes(), usage_policy(7))
    # 7,200 GPU-s, decayed over the hour by at most 0.5 ** (1 / 168)
    assert 7200 * 0.5 ** (1 / 168) < charged(world) <= 7200


def test_charging_twice_at_once_adds_nothing(world, hour_old_job):
    now = timezone.now()
    update_usage(now, load_nodes(), usage_policy(7))
    first = charged(world)
    update_usage(now, load_nodes(), usage_policy(7))
    assert charged(world) == pytest.approx(first)


def test_a_job_that_ended_between_ticks_is_charged_up_to_its_end(world, hour_old_job):
    Job.objects.filter(pk=hour_old_job.pk).update(state="COMPLETED", ended_at=timezone.now() - timedelta(minutes=30))
    update_usage(timezone.now(), load_nodes(), usage_policy(7))
    assert 3500 < charged(world) < 3601


def test_qos_usage_factor_scales_the_charge(world, hour_old_job):
    from portal.models import Qos

    free = Qos.objects.create(name="scavenger", usage_factor=0.0)
    Job.objects.filter(pk=hour_old_job.pk).update(qos=free)
    update_usage(timezone.now(), load_nodes(), usage_policy(7))
    assert charged(world) == 0.0


def test_billing_weights_price_each_gpu_model(world, hour_old_job, settings):
    from scheduler.models import Gpu

    node = Job.objects.get(pk=hour_old_job.pk).allocations[0]["node"]
    model = Gpu.objects.filter(node__name=node).values_list("model", flat=True)[0]
    weights = {model: 2.0, "some-other-model": 10.0}
    update_usage(timezone.now(), load_nodes(), usage_policy(7, billing_weights=weights))
    # 2 GPUs of a model billed at 2.0 for an hour: 2 x 7,200
    assert 2 * 7200 * 0.5 ** (1 / 168) < charged(world) <= 2 * 7200


def test_a_share_of_a_gpu_is_charged_with_the_sharing_overhead(world, hour_old_job):
    stored = Job.objects.get(pk=hour_old_job.pk).allocations[0]
    allocation = {**stored, "gpu_indices": stored["gpu_indices"][:1], "gpu_share": 0.5, "gpu_memory_mib": 0}
    Job.objects.filter(pk=hour_old_job.pk).update(allocations=[allocation])
    update_usage(timezone.now(), load_nodes(), usage_policy(7, sharing_overhead=0.1))
    # 0.5 x 1.1 GPUs for an hour
    assert 0.55 * 3600 * 0.5 ** (1 / 168) < charged(world) <= 0.55 * 3600


def test_usage_decays_by_half_each_half_life(world, hour_old_job):
    Job.objects.filter(pk=hour_old_job.pk).update(state="COMPLETED", ended_at=timezone.now() - timedelta(hours=1))
    Usage.objects.create(account=world.lab, user=world.alice, gpu_seconds=1000.0, as_of=timezone.now())
    now = timezone.now()
    TickState.objects.filter(pk=1).update(usage_as_of=now - timedelta(days=7))
    update_usage(now, load_nodes(), usage_policy(7))
    assert charged(world) == pytest.approx(500.0, abs=0.1)
