"""A job on a shared GPU is told what sharing costs: about how much longer it runs than
alone, by its GPU's sharing mode (and model), and the GPUs accounting charges for it;
the same overhead as the accounting, so what it is told and what it pays agree."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.models import Cluster, Job
from tests.builders import local_node_group, make_local_cluster, submit

pytestmark = pytest.mark.django_db


def shared_site(world, mode: str) -> None:
    """Only GPUs shared in ``mode``: the world's own cluster is switched off."""
    Cluster.objects.filter(pk=world.cluster.pk).update(enabled=False)
    group = local_node_group("l4-shared", gpus=2, model="L4")
    group["gpus"]["sharing"] = mode
    make_local_cluster("shared", [group])


def page_of(world, job: Job) -> str:
    client = Client()
    client.force_login(world.alice)
    return client.get(f"/jobs/{job.id}/").content.decode()


@pytest.mark.parametrize(
    "mode,overheads,longer,charged",
    [
        ("time-slicing", {"time-slicing": 0.1, "mps": 0.05}, "about 10% longer", "charged 0.550 GPU"),
        ("mps", {"time-slicing": 0.1, "mps": 0.05}, "about 5% longer", "charged 0.525 GPU"),
        ("mps", {"mps": 0.05, "L4/mps": 0.2}, "about 20% longer", "charged 0.600 GPU"),
    ],
)
def test_a_share_is_told_its_longer_run_time_and_charge_by_mode_and_model(
    world, tick, settings, mode, overheads, longer, charged
):
    settings.SCHEDULER_SHARING_OVERHEAD = overheads
    shared_site(world, mode)
    job = submit(world.alice, world.lab, gpu_share=0.5)
    tick()
    job.refresh_from_db()
    assert job.allocations and job.allocations[0]["gpu_share"] == 0.5
    html = page_of(world, job)
    assert 'id="sharing"' in html and f"by {mode}: expect it to run {longer}" in html and charged in html


def test_whole_gpus_and_waiting_jobs_show_no_sharing_row(world, tick):
    whole = submit(world.alice, world.lab, gpus_per_node=1)
    tick()
    waiting = submit(world.alice, world.lab, gpu_share=0.5)  # no shared GPU on this site
    assert 'id="sharing"' not in page_of(world, whole) and 'id="sharing"' not in page_of(world, waiting)
