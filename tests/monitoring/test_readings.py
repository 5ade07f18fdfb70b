"""What the chart pages read: a job's GPUs over its lifetime, every GPU's allocation and
recent utilization, and the queue's history per account."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from monitoring import readings
from monitoring.charts import GpuCell
from monitoring.models import GpuRollup, QueueSample, Resolution
from monitoring.queue import queue_history, record_queue
from monitoring.series import RAW
from monitoring.services import record_health
from scheduler.models import Job, Node
from scheduler.reads.occupancy import read_occupancy
from tests.builders import T0, submit
from tests.monitoring.history import gpu, ran, samples

pytestmark = pytest.mark.django_db


# --- One job ----------------------------------------------------------------------------------


def test_a_job_charts_only_its_own_gpus_over_its_lifetime(world):
    job = ran(
        submit(world.alice, world.lab, gpus_per_node=2), T0, T0 + timedelta(minutes=5), ("h100-01", 0), ("h100-01", 3)
    )
    mine = [gpu("h100-01", 0).id, gpu("h100-01", 3).id]
    samples(mine, T0, 30, utilization=80.0)
    samples([gpu("h100-01", 1).id], T0, 30, utilization=5.0)  # a neighbour's GPU
    samples(mine, T0 + timedelta(minutes=10), 3, utilization=1.0)  # after the job ended
    assert readings.job_gpu_ids(job) == sorted(mine)
    charts = {s.metric: s for s in readings.job_series(job)}
    assert list(charts) == ["utilization", "memory_used", "temperature", "power"]
    assert charts["utilization"].resolution == RAW
    assert {p.mean for p in charts["utilization"].points} == {80.0}
    assert charts["temperature"].points == ()  # never reported


def test_a_long_job_reads_rollups_not_raw_samples(world):
    job = ran(submit(world.alice, world.lab), T0, T0 + timedelta(days=3), ("h100-02", 5))
    fields = {f"{m}_{k}": 50.0 for m in ("utilization", "memory_used") for k in ("min", "mean", "max")}
    GpuRollup.objects.bulk_create(
        GpuRollup(gpu=gpu("h100-02", 5), period=Resolution.HOUR, at=T0 + timedelta(hours=h), samples=360, **fields)
        for h in range(72)
    )
    utilization = readings.job_series(job)[0]
    assert utilization.resolution == Resolution.HOUR and len(utilization.points) == 72


def test_a_job_that_never_started_has_no_charts(world):
    assert readings.job_series(submit(world.alice, world.lab)) == []


# --- The cluster ------------------------------------------------------------------------------


def test_gpu_grid_flags_allocated_but_idle_gpus_and_unavailable_ones(world, django_assert_max_num_queries):
    now = T0 + timedelta(hours=1)
    busy = ran(submit(world.alice, world.lab), T0, None, ("h100-01", 0))
    idle = ran(submit(world.charlie, world.other), T0, None, ("h100-01", 1))
    samples([gpu("h100-01", 0).id], now - timedelta(seconds=30), 3, utilization=90.0)
    samples([gpu("h100-01", 1).id], now - timedelta(seconds=30), 3, utilization=0.5)
    samples([gpu("h100-01", 1).id], now - timedelta(hours=1), 3, utilization=100.0)  # long ago: not "recent"
    Node.objects.filter(name="l4-01").update(state="drain")
    record_health(Node.objects.get(name="h100-02"), {gpu("h100-02", 7).id: (now, {"temperature_c": 99.0})}, now)
    occupancy = read_occupancy()
    with django_assert_max_num_queries(2):  # the recent samples, the unhealthy GPUs
        nodes, cells = readings.gpu_grid(now, occupancy)
    assert nodes == ["h100-01", "h100-02", "l4-01"]
    state = {(c.node, c.index): c for c in map(GpuCell._make, cells)}
    assert (state["h100-01", 0].state, state["h100-01", 0].job) == ("allocated", busy.id)
    assert (state["h100-01", 1].state, state["h100-01", 1].account) == ("allocated, idle", "other")
    assert state["h100-01", 1].utilization == pytest.approx(0.5)
    assert state["h100-02", 7].state == "unavailable"  # too hot
    assert {state["l4-01", i].state for i in range(4)} == {"unavailable"}  # drained node
    assert state["h100-02", 0].state == "free" and len(cells) == 8 + 8 + 4
    assert idle.id in {c.job for c in state.values()}
    assert readings.gpu_grid(now) == (nodes, cells)  # reading the occupancy itself


# --- Queue history ----------------------------------------------------------------------------


def test_each_minute_stores_one_row_per_account_with_jobs(world, tick):
    submit(world.alice, world.lab, gpus_per_node=8, gpu_model="H100-80GB")  # runs on 8 GPUs
    submit(world.bob, world.lab, nodes=2, gpus_per_node=8, gpu_model="H100-80GB")  # waits for alice's
    shared = submit(world.charlie, world.other, gpu_share=0.5, gpu_model="L4")
    tick()
    Job.objects.filter(pk=shared.pk).update(state="RUNNING")  # on half a GPU (no shared GPUs here)
    submit(world.alice, world.lab)  # pending: no tick since
    with time_machine.travel(T0 + timedelta(seconds=30), tick=False):
        assert record_queue() == 2
        assert record_queue() == 2  # the same minute again: updated, not duplicated
    rows = {r.account.name: (r.at, r.pending, r.running, r.gpus) for r in QueueSample.objects.select_related("account")}
    assert set(rows) == {"lab", "other"}
    assert rows["lab"] == (T0, 2, 1, 8.0)
    assert rows["other"][1:] == (0, 1, pytest.approx(0.5))


def test_history_is_per_minute_for_short_ranges_and_hourly_means_for_long_ones(world, django_assert_num_queries):
    QueueSample.objects.bulk_create(
        QueueSample(at=T0 + timedelta(minutes=m), account=world.lab, pending=m % 2 * 4, running=2, gpus=2.0)
        for m in range(180)
    )
    with django_assert_num_queries(1):
        short = queue_history(T0, T0 + timedelta(minutes=60), max_points=720)
    assert len(short) == 60 and (short[1].pending, short[1].running) == (4, 2)
    long = queue_history(T0, T0 + timedelta(days=1), max_points=720)
    assert [r.at for r in long] == [T0 + timedelta(hours=h) for h in range(3)]
    assert {(r.account, r.pending, r.running) for r in long} == {("lab", 2, 2)}


def test_queue_history_is_pruned_with_the_minute_rollups(world, settings):
    from monitoring.services import prune

    settings.MONITORING_MINUTE_RETENTION_DAYS = 30
    QueueSample.objects.create(at=T0, account=world.lab, pending=1, running=0, gpus=0)
    QueueSample.objects.create(at=T0 + timedelta(days=40), account=world.lab, pending=1, running=0, gpus=0)
    assert prune(T0 + timedelta(days=40))["queue"] == 1
    assert QueueSample.objects.get().at == T0 + timedelta(days=40)


def test_gpus_without_recent_samples_have_no_utilization(world):
    samples([gpu("h100-01", 0).id], T0 - timedelta(hours=1), 3)  # an hour before: not recent
    _, cells = readings.gpu_grid(T0)
    assert all(GpuCell._make(c).utilization is None for c in cells)


def test_gpu_grid_names_the_gpu_each_mig_slice_belongs_to(world):
    from scheduler.models import Gpu, Node

    node = Node.objects.create(cluster=world.cluster, name="a100-mig", cpus=64, memory_mib=512_000)
    gpus = [
        Gpu.objects.create(node=node, index=i, uuid=f"GPU-m{i}", model="A100-40GB", memory_mib=40960) for i in (0, 1)
    ]
    for whole in gpus:
        for j in range(2):
            Gpu.objects.create(
                node=node,
                index=2 + whole.index * 2 + j,
                uuid=f"MIG-{whole.index}-{j}",
                model="A100-40GB",
                memory_mib=20480,
                mig_profile="3g.20gb",
                parent=whole,
            )
    _, cells = readings.gpu_grid(T0)
    mine = sorted((c.index, c.parent) for c in map(GpuCell._make, cells) if c.node == "a100-mig")
    assert mine == [(2, 0), (3, 0), (4, 1), (5, 1)]  # the slices, each with its GPU; not the split GPUs
