"""Storage: rollups (idempotent), retention, and series at the resolution that fits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitoring import services
from monitoring.models import AllGpuRollup, GpuRollup, GpuSample, Resolution
from monitoring.series import RAW, Point, choose_resolution, downsample, series
from tests.builders import T0

pytestmark = pytest.mark.django_db


def store(gpu, start, values, step=timedelta(seconds=10)):
    GpuSample.objects.bulk_create(
        GpuSample(gpu=gpu, at=start + i * step, utilization_pct=v, memory_used_mib=100, temperature_c=40 + v / 10)
        for i, v in enumerate(values)
    )


@pytest.fixture
def gpus(world):
    from scheduler.models import Gpu

    return list(Gpu.objects.filter(node__name="h100-01").order_by("index")[:2])


def test_minute_rollups_hold_min_mean_max_and_count(gpus):
    store(gpus[0], T0, [10, 20, 30, 40, 50, 60, 90])  # 6 in the first minute, 1 in the next
    assert services.rollup(Resolution.MINUTE, T0, T0 + timedelta(minutes=2)) == 2
    first = GpuRollup.objects.get(gpu=gpus[0], period=60, at=T0)
    assert (first.samples, first.utilization_min, first.utilization_mean, first.utilization_max) == (6, 10, 35, 60)
    assert first.temperature_mean == pytest.approx(43.5)


def test_recomputing_a_rollup_gives_the_same_row(gpus):
    store(gpus[0], T0, [10, 20, 30])
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(minutes=1))
    before = list(GpuRollup.objects.values())
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(minutes=1))
    assert list(GpuRollup.objects.values()) == before


def test_late_samples_update_the_minute_they_belong_to(gpus):
    store(gpus[0], T0, [10, 20])
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(minutes=1))
    store(gpus[0], T0 + timedelta(seconds=30), [90])
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(minutes=1))
    row = GpuRollup.objects.get()
    assert (row.samples, row.utilization_max) == (3, 90)


def test_hour_rollups_weight_minutes_by_their_samples(gpus):
    store(gpus[0], T0, [0] * 6)  # minute 0: 6 samples at 0
    store(gpus[0], T0 + timedelta(minutes=1), [60, 60])  # minute 1: 2 samples at 60
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(hours=1))
    services.rollup(Resolution.HOUR, T0, T0 + timedelta(hours=1))
    hour = GpuRollup.objects.get(period=3600)
    assert (hour.samples, hour.utilization_min, hour.utilization_mean, hour.utilization_max) == (8, 0, 15, 60)


def test_pruning_keeps_what_is_within_retention(gpus, settings):
    settings.MONITORING_RAW_RETENTION_HOURS = 48
    now = T0 + timedelta(days=3)
    store(gpus[0], T0, [1])  # 72 h old
    store(gpus[0], now - timedelta(hours=1), [2])
    GpuRollup.objects.create(gpu=gpus[0], period=60, at=T0 - timedelta(days=40), samples=1, **_flat(1))
    GpuRollup.objects.create(gpu=gpus[0], period=3600, at=T0 - timedelta(days=40), samples=1, **_flat(1))
    assert services.prune(now) == {"raw": 1, "minutes": 1, "hours": 0, "queue": 0}
    assert list(GpuSample.objects.values_list("utilization_pct", flat=True)) == [2]


def test_pruning_drops_the_combined_hours_with_the_hours_they_combine(gpus, settings):
    now = T0 + timedelta(days=settings.MONITORING_HOUR_RETENTION_DAYS + 1)
    for at in (T0, now - timedelta(hours=1)):
        GpuRollup.objects.create(gpu=gpus[0], period=3600, at=at, samples=1, **_flat(1))
    services.rollup_all_gpus(T0, now)
    services.prune(now)
    assert list(AllGpuRollup.objects.values_list("at", flat=True)) == [now - timedelta(hours=1)]


def _flat(value):
    return {
        f"{m}_{s}": value
        for m in ("utilization", "memory_used", "temperature", "power")
        for s in ("min", "mean", "max")
    }


@pytest.mark.parametrize(
    "span,gpus,expected",
    [
        (timedelta(hours=1), 8, RAW),
        (timedelta(hours=1), 800, Resolution.MINUTE),
        (timedelta(hours=6), 8, Resolution.MINUTE),
        (timedelta(days=2), 8, Resolution.HOUR),
        (timedelta(hours=1), 8000, Resolution.HOUR),
        (timedelta(days=30), 8000, Resolution.HOUR),
    ],
    ids=[
        "an hour of a node: raw",
        "an hour of 800 GPUs: minutes",
        "6 h: minutes",
        "2 days: hours",
        "an hour of 8k GPUs: hours",
        "30 days: hours",
    ],
)
def test_resolution_fits_the_range(span, gpus, expected):
    assert choose_resolution(span, gpus, max_points=720, raw_interval=10, row_budget=200_000) == expected


def test_downsampling_bounds_the_points():
    points = [Point(T0 + timedelta(hours=i), i, i, i) for i in range(2160)]  # 90 days of hours
    merged, bucket = downsample(points, 3600, 720)
    assert len(merged) == 720 and bucket == 3 * 3600
    assert (merged[0].low, merged[0].mean, merged[0].high) == (0, 1, 2)


def test_a_short_range_reads_raw_samples_across_gpus(gpus):
    store(gpus[0], T0, [10, 20])
    store(gpus[1], T0, [30, 40])
    result = series([g.id for g in gpus], T0, T0 + timedelta(minutes=10), max_points=60)
    assert result.resolution == RAW and result.bucket_seconds == 10
    assert [(p.low, p.mean, p.high) for p in result.points] == [(10, 20, 30), (20, 30, 40)]


def test_a_30_day_chart_of_many_gpus_reads_hours_and_stays_small(gpus, django_assert_max_num_queries):
    rows = [
        GpuRollup(gpu=g, period=3600, at=T0 + timedelta(hours=h), samples=360, **_flat(h % 100))
        for g in gpus
        for h in range(30 * 24)
    ]
    GpuRollup.objects.bulk_create(rows)
    with django_assert_max_num_queries(2):
        result = series([g.id for g in gpus], T0, T0 + timedelta(days=30), max_points=720)
    assert result.resolution == Resolution.HOUR and len(result.points) == 720


def test_series_api_is_for_staff_and_returns_points_and_figure(client_for, world, gpus):
    store(gpus[0], T0, [10, 20])
    assert client_for(world.alice).get("/api/v1/monitoring/series/").status_code == 403
    response = client_for(world.admin).get(
        "/api/v1/monitoring/series/",
        {"gpus": f"{gpus[0].id}", "start": T0.isoformat(), "end": (T0 + timedelta(minutes=5)).isoformat()},
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["resolution"] == 0 and [p["mean"] for p in body["points"]] == [10, 20]
    assert len(body["figure"]["data"]) == 3


def test_series_api_refuses_a_backwards_range(client_for, world):
    response = client_for(world.admin).get(
        "/api/v1/monitoring/series/", {"start": T0.isoformat(), "end": (T0 - timedelta(hours=1)).isoformat()}
    )
    assert response.status_code == 400


def test_rollup_command_recomputes_a_range(gpus):
    from django.core.management import call_command

    store(gpus[0], T0, [10, 20])
    call_command("rollup_samples", "--since", T0.isoformat(), "--until", (T0 + timedelta(minutes=5)).isoformat())
    assert GpuRollup.objects.filter(period=60).count() == 1
    assert GpuRollup.objects.filter(period=3600).count() == 1


def test_a_series_of_every_gpu_needs_no_list_of_them(gpus, django_assert_num_queries):
    store(gpus[0], T0, [10, 30])
    store(gpus[1], T0, [50, 70])
    with django_assert_num_queries(2):  # the GPU count (to pick the resolution), the points
        everything = series(None, T0, T0 + timedelta(minutes=1))
    assert [(p.low, p.high) for p in everything.points] == [(10, 50), (30, 70)]


def test_every_gpu_by_the_hour_reads_the_hours_combined_as_they_were_rolled_up(gpus, django_assert_num_queries):
    store(gpus[0], T0, [10, 30], step=timedelta(minutes=70))  # two hours of GPU 0
    store(gpus[1], T0, [50, 70, 90], step=timedelta(minutes=20))  # the first hour of GPU 1
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(hours=3))
    services.rollup(Resolution.HOUR, T0, T0 + timedelta(hours=3))
    assert list(AllGpuRollup.objects.values_list("gpus", flat=True)) == [2, 1]
    span = (T0, T0 + timedelta(days=2))  # long enough for hours
    per_gpu = series([g.id for g in gpus], *span)
    with django_assert_num_queries(3):  # the GPU count, where the readings begin, one row an hour
        everything = series(None, *span)
    assert everything.resolution == Resolution.HOUR
    assert everything.points == per_gpu.points
    assert [(p.low, p.mean, p.high) for p in everything.points] == [(10, 40, 90), (30, 30, 30)]  # mean of the means


def test_a_week_long_chart_of_a_fresh_site_draws_the_hours_it_has_not_one_dot(gpus):
    """A demo up for 90 minutes, charted over 7 days: the points cover those 90 minutes
    at a resolution that fits them (minutes, not one hourly mean), from where they begin."""
    for gpu in gpus:
        store(gpu, T0 + timedelta(minutes=30), [float(i % 100) for i in range(540)])  # 90 min every 10 s
    services.rollup(Resolution.MINUTE, T0, T0 + timedelta(hours=3))
    services.rollup(Resolution.HOUR, T0, T0 + timedelta(hours=3))
    end = T0 + timedelta(hours=2)
    result = series(None, end - timedelta(days=7), end, max_points=720)
    assert result.resolution in (RAW, Resolution.MINUTE) and len(result.points) >= 60
    assert result.since == T0 and result.points[0].at >= T0 + timedelta(minutes=30)
