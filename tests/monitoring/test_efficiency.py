"""A finished job's efficiency (``seff`` for GPUs): measured from its own GPUs' samples
over its run, once its last samples can have arrived; unmeasured is never 0% or 100%."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine

from monitoring.efficiency import grace, record_efficiencies
from monitoring.models import GpuRollup, JobEfficiency, Resolution
from scheduler.models import Job
from tests.builders import T0, submit
from tests.monitoring.history import gpu, ran, samples

pytestmark = pytest.mark.django_db

END = T0 + timedelta(minutes=10)
LATER = END + timedelta(minutes=5)


def test_a_job_is_measured_on_its_own_gpus_over_its_run(world):
    job = ran(submit(world.alice, world.lab, gpus_per_node=2), T0, END, ("h100-01", 0), ("h100-01", 1))
    samples([gpu("h100-01", 0).id], T0, 60, utilization=90.0)  # 10 minutes at 10 s
    samples([gpu("h100-01", 1).id], T0, 60, utilization=30.0)
    samples([gpu("h100-01", 2).id], T0, 60, utilization=100.0)  # a neighbour's GPU
    samples([gpu("h100-01", 0).id], END + timedelta(minutes=1), 5, utilization=0.0)  # after its end

    assert record_efficiencies(LATER) == 1

    figures = JobEfficiency.objects.get(job=job)
    assert (figures.samples, figures.gpu_util_mean, figures.gpu_util_peak) == (120, 60.0, 90.0)
    assert figures.gpu_hours == pytest.approx(2 * 10 / 60) and figures.elapsed_seconds == 600
    assert (figures.memory_used_mean_mib, figures.memory_total_mib) == (1000.0, 81920)
    assert record_efficiencies(LATER) == 0  # once per attempt


def test_a_job_without_samples_is_unmeasured_not_idle(world, client_for):
    job = ran(submit(world.alice, world.lab), T0, END, ("h100-01", 0))
    record_efficiencies(LATER)
    figures = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()["efficiency"]
    assert figures["samples"] == 0 and figures["gpu_util_mean"] is None and figures["gpu_util_peak"] is None
    assert figures["walltime_used"] == pytest.approx(600 / job.walltime_seconds, abs=1e-4)


def test_a_job_is_measured_only_once_its_last_samples_can_have_arrived(world):
    ran(submit(world.alice, world.lab), T0, END, ("h100-01", 0))
    assert record_efficiencies(END + grace() / 2) == 0
    assert record_efficiencies(END + grace()) == 1


def test_a_requeued_job_is_measured_again_for_its_new_attempt(world):
    job = ran(submit(world.alice, world.lab), T0, END, ("h100-01", 0))
    record_efficiencies(LATER)
    Job.objects.filter(pk=job.pk).update(attempt=2, started_at=LATER, ended_at=LATER + timedelta(minutes=20))
    assert record_efficiencies(LATER + timedelta(minutes=30)) == 1
    assert JobEfficiency.objects.get(job=job).attempt == 2


def test_a_run_longer_than_raw_retention_is_measured_from_minute_rollups(world, settings):
    settings.MONITORING_RAW_RETENTION_HOURS = 1
    job = ran(submit(world.alice, world.lab), T0, T0 + timedelta(hours=3), ("h100-02", 5))
    bands = {f"memory_used_{k}": 2000.0 for k in ("min", "mean", "max")}
    GpuRollup.objects.bulk_create(
        GpuRollup(
            gpu=gpu("h100-02", 5),
            period=Resolution.MINUTE,
            at=T0 + timedelta(minutes=m),
            samples=6 if m % 2 else 2,  # the busy minutes count three times the idle ones
            utilization_min=0.0,
            utilization_mean=80.0 if m % 2 else 0.0,
            utilization_max=95.0 if m % 2 else 0.0,
            **bands,
        )
        for m in range(180)
    )
    record_efficiencies(T0 + timedelta(hours=4))
    figures = JobEfficiency.objects.get(job=job)
    assert figures.samples == 90 * 6 + 90 * 2
    assert figures.gpu_util_mean == pytest.approx(80.0 * 6 / 8) and figures.gpu_util_peak == 95.0


def flat_minute_rollups(of: Any, utilization: float | None, memory: float) -> None:
    """Three hours of minute rollups from T0 for GPU ``of``, six samples each, every one
    at ``utilization`` (``None``: the driver reported none) and ``memory`` MiB used."""
    GpuRollup.objects.bulk_create(
        GpuRollup(
            gpu=of,
            period=Resolution.MINUTE,
            at=T0 + timedelta(minutes=m),
            samples=6,
            utilization_min=utilization,
            utilization_mean=utilization,
            utilization_max=utilization,
            **{f"memory_used_{k}": memory for k in ("min", "mean", "max")},
        )
        for m in range(180)
    )


def test_rollups_without_utilization_do_not_dilute_a_long_runs_mean(world, settings):
    """Minute rollups of a GPU whose driver reports no utilization (MIG through NVML) keep
    a null mean: the job's mean is over the samples that measured it, as from raw samples,
    and its memory mean over every sample that measured memory."""
    settings.MONITORING_RAW_RETENTION_HOURS = 1
    job = ran(submit(world.alice, world.lab, gpus_per_node=2), T0, T0 + timedelta(hours=3), *WHOLE_AND_SILENT)
    for index, utilization, memory in ((5, 80.0, 2000.0), (6, None, 1000.0)):
        flat_minute_rollups(gpu("h100-02", index), utilization, memory)
    record_efficiencies(T0 + timedelta(hours=4))
    figures = JobEfficiency.objects.get(job=job)
    assert (figures.samples, figures.gpu_util_mean) == (180 * 6, pytest.approx(80.0))
    assert figures.memory_used_mean_mib == pytest.approx(1500.0)


def test_the_gpus_a_job_kept_busy_are_counted_each_by_its_own_mean(world, client_for):
    """What the right-sizing advice reads as "GPUs used": a 4-GPU job that kept two
    busy, one idle below the grid's idle line and one that reported nothing used two."""
    job = ran(submit(world.alice, world.lab, gpus_per_node=4), T0, END, *(("h100-01", i) for i in range(4)))
    samples([gpu("h100-01", 0).id, gpu("h100-01", 1).id], T0, 60, utilization=60.0)
    samples([gpu("h100-01", 2).id], T0, 60, utilization=2.0)
    record_efficiencies(LATER)
    assert JobEfficiency.objects.get(job=job).gpus_busy == 2
    assert client_for(world.alice).get(f"/api/v1/jobs/{job.id}/").json()["efficiency"]["gpus_busy"] == 2


def test_the_busy_gpus_of_a_long_run_come_from_its_minute_rollups(world, settings):
    settings.MONITORING_RAW_RETENTION_HOURS = 1
    job = ran(submit(world.alice, world.lab, gpus_per_node=2), T0, T0 + timedelta(hours=3), *WHOLE_AND_SILENT)
    for index, utilization in ((5, 1.0), (6, None)):
        flat_minute_rollups(gpu("h100-02", index), utilization, 1000.0)
    record_efficiencies(T0 + timedelta(hours=4))
    assert JobEfficiency.objects.get(job=job).gpus_busy == 0  # measured idle, not unmeasured


def test_a_job_with_no_utilization_measured_has_no_busy_count(world):
    job = ran(submit(world.alice, world.lab), T0, END, ("h100-01", 0))
    record_efficiencies(LATER)
    assert JobEfficiency.objects.get(job=job).gpus_busy is None


#: A whole GPU that reports utilization and one whose driver does not.
WHOLE_AND_SILENT = (("h100-02", 5), ("h100-02", 6))


def test_the_job_list_sorts_by_gpu_utilization_with_the_unmeasured_last(world, client_for):
    busy = ran(submit(world.alice, world.lab, name="busy"), T0, END, ("h100-01", 0))
    idle = ran(submit(world.alice, world.lab, name="idle"), T0, END, ("h100-01", 1))
    unmeasured = ran(submit(world.alice, world.lab, name="unmeasured"), T0, END, ("h100-01", 2))
    samples([gpu("h100-01", 0).id], T0, 10, utilization=90.0)
    samples([gpu("h100-01", 1).id], T0, 10, utilization=2.0)
    record_efficiencies(LATER)
    client = client_for(world.alice)

    rows = client.get("/api/v1/jobs/", {"ordering": "gpu_utilization"}).json()["results"]
    assert [r["name"] for r in rows][:2] == ["idle", "busy"]
    page = client.get("/jobs/", {"sort": "gpu_util"}).content.decode()
    assert page.index(f'/jobs/{idle.id}/"') < page.index(f'/jobs/{busy.id}/"') < page.index(f'/jobs/{unmeasured.id}/"')
    assert "unmeasured" in page


def test_a_job_on_a_gpu_whose_driver_does_not_report_utilization_is_unmeasured(world, agent):
    """A MIG-enabled GPU through NVML: samples come with memory but a null utilization.
    Its job is unmeasured (not 0% idle), and no idle alarm can fire for it."""
    job = ran(submit(world.alice, world.lab), T0, END, ("h100-01", 0))
    payloads = [
        {
            "index": 0,
            "at": (T0 + timedelta(seconds=10 * i)).isoformat(),
            "utilization_pct": None,
            "memory_used_mib": 900,
        }
        for i in range(60)
    ]
    with time_machine.travel(END, tick=False):
        response = agent.post_samples(payloads, node="h100-01")
    assert response.status_code == 200 and response.json()["accepted"] == 60

    record_efficiencies(LATER)

    figures = JobEfficiency.objects.get(job=job)
    assert (figures.samples, figures.gpu_util_mean, figures.gpu_util_peak) == (0, None, None)
