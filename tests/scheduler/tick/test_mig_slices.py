"""The tick reads a split GPU's MIG slices as slices, so a request for whole GPUs never
lands on one (the core's rule: tests/core/test_mig_slices.py)."""

from __future__ import annotations

import pytest

from scheduler.choices import JobState
from scheduler.models import Cluster
from scheduler.tick.snapshot import load_nodes
from tests.builders import local_node_group, make_local_cluster, submit

pytestmark = pytest.mark.django_db


def _mig_cluster() -> None:
    """The demo's a100-04: eight A100s, each split into two 3g.20gb slices."""
    group = local_node_group("a100-04", model="A100-40GB")
    group["gpus"]["mig"] = ["3g.20gb", "3g.20gb"]
    make_local_cluster("mig", [group])


def test_the_ticks_nodes_mark_slices_and_only_slices(world):
    _mig_cluster()
    nodes = {n.name: n for n in load_nodes()}
    assert {(g.model, g.mig_slice) for g in nodes["a100-04"].gpus} == {("A100-40GB/3g.20gb", True)}
    assert len(nodes["a100-04"].gpus) == 16
    assert {g.mig_slice for g in nodes["h100-01"].gpus} == {False}


def test_a_whole_gpu_job_waits_rather_than_run_on_a_slice_and_a_slice_job_takes_one(world, tick):
    _mig_cluster()
    whole = submit(world.alice, world.lab)
    sliced = submit(world.alice, world.lab, gpu_model="A100-40GB/3g.20gb")
    Cluster.objects.filter(pk=world.cluster.pk).update(enabled=False)  # only slices are left
    tick()
    whole.refresh_from_db()
    sliced.refresh_from_db()
    assert whole.state == JobState.PENDING and whole.allocations == []
    assert whole.pending_blockers[0]["message"] == "no node has GPUs"
    assert sliced.state != JobState.PENDING and sliced.allocations[0]["node"] == "a100-04"
