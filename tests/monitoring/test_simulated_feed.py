"""The demo's simulated telemetry: GPUs held by running jobs look busy."""

from __future__ import annotations

import pytest

from monitoring.models import GpuSample
from monitoring.services import record_simulated_samples
from scheduler.choices import NodeState
from scheduler.models import Node
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_every_local_gpu_gets_a_sample_and_held_ones_are_busy(world, tick):
    Node.objects.exclude(name="h100-01").update(state=NodeState.DRAIN)
    job = submit(world.alice, world.lab, gpus_per_node=2)
    tick()
    job.refresh_from_db()
    held = set(job.allocations[0]["gpu_indices"])
    stored = record_simulated_samples()
    assert stored == GpuSample.objects.count() == 2 * 8 + 4  # two H100 nodes and the L4 node
    on_node = {s.gpu.index: s for s in GpuSample.objects.filter(gpu__node__name="h100-01").select_related("gpu")}
    assert all((on_node[i].utilization_pct or 0) >= 65 for i in held)
    assert all(on_node[i].utilization_pct == 0 for i in set(on_node) - held)


def test_running_it_twice_in_one_interval_stores_once(world):
    record_simulated_samples()
    record_simulated_samples()
    assert GpuSample.objects.count() == 2 * 8 + 4


def test_run_scheduler_feeds_the_demo_when_simulation_is_on(world, settings):
    from django.core.management import call_command

    settings.MONITORING_SIMULATE = True
    call_command("run_scheduler", "--once")
    assert GpuSample.objects.count() == 2 * 8 + 4


def test_run_scheduler_records_the_queue_history(world):
    from django.core.management import call_command

    from monitoring.models import QueueSample

    submit(world.alice, world.lab)
    call_command("run_scheduler", "--once")
    assert QueueSample.objects.get().account == world.lab
