"""The GPUs and their holders as a page reads them once (``scheduler.reads.occupancy``), and the
figures drawn from that one read agreeing with each other: the free GPUs by model, the
allocation heatmap's cells, and ``held_gpus`` (what ``/metrics`` calls busy)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from monitoring import readings
from monitoring.charts import GpuCell
from scheduler.jobs.allocations import held_gpus
from scheduler.models import Cluster, Job, Node
from scheduler.reads.occupancy import read_occupancy
from tests.builders import T0, local_node_group, make_local_cluster, submit
from web import figures

pytestmark = pytest.mark.django_db

A100_SLICE = "A100-40GB/3g.20gb"


@pytest.fixture
def site(world):
    """Besides the world's cluster (h100-01, h100-02, l4-01): a node whose two A100s are
    split into two MIG slices each (indices 2-5; 0 and 1 are the split GPUs), a node of
    shared (time-sliced) L4s, and a disabled cluster's node."""
    mig = local_node_group("mig-01", gpus=2, model="A100-40GB")
    mig["gpus"]["mig"] = ["3g.20gb", "3g.20gb"]
    shared = local_node_group("shared-01", gpus=2, model="L4")
    shared["gpus"]["shared"] = True
    make_local_cluster("more", [mig, shared])
    make_local_cluster("old", [local_node_group("old-01", gpus=2, model="V100-16GB")])
    Cluster.objects.filter(name="old").update(enabled=False)
    return world


def holding(job: Job, *gpus: tuple[str, int], share: float = 0.0) -> Job:
    """``job`` running on ``gpus`` (a ``share`` of each, when given), written directly."""
    by_node: dict[str, list[int]] = {}
    for node, index in gpus:
        by_node.setdefault(node, []).append(index)
    extra = {"gpu_share": share, "gpu_memory_mib": 1024} if share else {}
    Job.objects.filter(pk=job.pk).update(
        state="RUNNING",
        started_at=T0,
        allocations=[{"node": n, "gpu_indices": i, "cpus": 1, "memory_mib": 0, **extra} for n, i in by_node.items()],
    )
    job.refresh_from_db()
    return job


def test_the_gpus_are_the_units_jobs_hold_slices_not_the_gpus_split_into_them(site, django_assert_num_queries):
    with django_assert_num_queries(4):  # nodes, split GPUs, GPUs, active jobs
        occupancy = read_occupancy()
    units = {(node, index): model for _, node, index, model, _ in occupancy.gpus}
    assert {k: m for k, m in units.items() if k[0] == "mig-01"} == {("mig-01", i): A100_SLICE for i in range(2, 6)}
    assert units["h100-01", 7] == "H100-80GB" and units["shared-01", 0] == "L4"
    assert len(units) == len(occupancy.gpus) == 8 + 8 + 4 + 4 + 2 + 2
    by_cluster = {"more": ["mig-01", "shared-01"], "old": ["old-01"], "test": ["h100-01", "h100-02", "l4-01"]}
    assert [name for name, _ in occupancy.nodes] == [n for cluster in sorted(by_cluster) for n in by_cluster[cluster]]
    assert "old-01" not in occupancy.enabled and "mig-01" in occupancy.enabled


def test_each_held_gpu_names_its_job_and_account_and_agrees_with_held_gpus(site):
    whole = holding(submit(site.alice, site.lab, gpus_per_node=2), ("h100-01", 0), ("h100-01", 1))
    on_slice = holding(submit(site.charlie, site.other), ("mig-01", 3))
    first = holding(submit(site.alice, site.lab), ("shared-01", 0), share=0.5)
    holding(submit(site.charlie, site.other), ("shared-01", 0), share=0.25)  # submitted later
    Job.objects.filter(pk=first.pk).update(submitted_at=T0 - timedelta(hours=1))
    ended = holding(submit(site.alice, site.lab), ("h100-02", 0))
    Job.objects.filter(pk=ended.pk).update(state="COMPLETED")
    submit(site.alice, site.lab)  # pending: holds nothing

    holders = {(node, index): holder for _, node, index, _, holder in read_occupancy().gpus if holder}
    assert holders == {
        ("h100-01", 0): (whole.id, "lab"),
        ("h100-01", 1): (whole.id, "lab"),
        ("mig-01", 3): (on_slice.id, "other"),
        ("shared-01", 0): (first.id, "lab"),  # of the jobs sharing it, the earliest submitted
    }
    assert set(holders) == held_gpus()


def test_free_gpus_by_model_and_the_heatmap_agree_on_one_read(site, django_assert_num_queries):
    holding(submit(site.alice, site.lab, gpus_per_node=2), ("h100-01", 0), ("h100-01", 1))
    holding(submit(site.charlie, site.other), ("mig-01", 3))
    holding(submit(site.alice, site.lab), ("shared-01", 0), share=0.5)
    holding(submit(site.charlie, site.other), ("shared-01", 0), share=0.25)
    holding(submit(site.alice, site.lab), ("l4-01", 1))
    Node.objects.filter(name="l4-01").update(state="drain")  # a job still runs on it
    occupancy = read_occupancy()

    with django_assert_num_queries(0):
        capacity = figures.free_gpus_by_model(occupancy)
    assert [(c.model, c.free, c.total) for c in capacity] == [
        (A100_SLICE, 3, 4),  # the split GPUs are not counted, their slices are
        ("H100-80GB", 14, 16),
        ("L4", 1, 2),  # a shared GPU with any share taken is busy; l4-01 is drained
    ]  # and the disabled cluster's V100s are not schedulable
    assert figures.free_gpus_by_model() == capacity  # reading the occupancy itself

    _, cells = readings.gpu_grid(T0, occupancy)
    named = [GpuCell._make(c) for c in cells]
    assert {(c.node, c.index) for c in named if c.job is not None} == held_gpus()
    schedulable = occupancy.schedulable()
    models = {(node, index): model for _, node, index, model, _ in occupancy.gpus}
    on_schedulable = [c for c in named if c.node in schedulable]
    assert Counter(models[c.node, c.index] for c in on_schedulable) == {c.model: c.total for c in capacity}
    assert Counter(models[c.node, c.index] for c in on_schedulable if c.state == "free") == {
        c.model: c.free for c in capacity
    }
    assert {c.state for c in named if c.node == "l4-01" and c.job is None} == {"unavailable"}  # drained
    # A free GPU is "free" exactly where the capacity table counts it free: never on a
    # disabled cluster's up node.
    assert {c.state for c in named if c.node == "old-01"} == {"unavailable"}
    assert sum(c.state == "free" for c in named) == sum(c.free for c in capacity)
