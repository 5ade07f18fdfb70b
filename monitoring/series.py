"""Time series for charts, at the resolution that fits the range.

``series(gpu_ids, start, end)`` aggregates the chosen GPUs into one min/mean/max band
per time bucket, so its size depends on the range, never on how many GPUs are in it:
a 30-day chart of 8,000 GPUs reads the hourly rollups grouped by hour in the database
and returns at most ``max_points`` points; a chart of every GPU by the hour reads the
hours combined in advance (``AllGpuRollup``), one row an hour.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Avg, Max, Min, QuerySet

from monitoring.models import AllGpuRollup, GpuRollup, GpuSample, Resolution
from monitoring.sample_fields import CHART_METRICS
from scheduler.models import Gpu

#: Chartable metrics: name -> raw sample column (``monitoring.sample_fields``).
METRICS = CHART_METRICS
RAW = 0


@dataclass(frozen=True, slots=True)
class Point:
    at: datetime
    low: float
    mean: float
    high: float


@dataclass(frozen=True, slots=True)
class Series:
    metric: str
    #: 0 for raw samples, else the rollup period in seconds.
    resolution: int
    #: Seconds each point covers (at least the resolution; more after downsampling).
    bucket_seconds: int
    points: tuple[Point, ...]
    #: Where the series was read from: the range's start, or later where the site's
    #: readings begin later (a fresh site), so a chart can start its time axis there.
    since: datetime | None = None


def choose_resolution(span: timedelta, gpus: int, *, max_points: int, raw_interval: float, row_budget: int) -> int:
    """The finest source that gives at most ``max_points`` points per GPU and reads at
    most ``row_budget`` rows: raw samples, then minute rollups, else hour rollups."""
    seconds = max(span.total_seconds(), 1.0)
    for resolution, step in ((RAW, raw_interval), (Resolution.MINUTE, 60), (Resolution.HOUR, 3600)):
        per_gpu = seconds / step
        if resolution == Resolution.HOUR or (per_gpu <= max_points and per_gpu * max(gpus, 1) <= row_budget):
            return int(resolution)
    raise AssertionError("unreachable")


def downsample(points: Sequence[Point], bucket_seconds: int, max_points: int) -> tuple[list[Point], int]:
    """Merge neighbouring points until at most ``max_points`` remain (min of lows, mean of
    means, max of highs). Returns the points and the seconds each now covers."""
    if len(points) <= max_points:
        return list(points), bucket_seconds
    factor = math.ceil(len(points) / max_points)
    merged = []
    for i in range(0, len(points), factor):
        group = points[i : i + factor]
        merged.append(
            Point(
                group[0].at,
                min(p.low for p in group),
                sum(p.mean for p in group) / len(group),
                max(p.high for p in group),
            )
        )
    return merged, bucket_seconds * factor


def series(
    gpu_ids: Iterable[int] | QuerySet[Any] | None,
    start: datetime,
    end: datetime,
    metric: str = "utilization",
    *,
    max_points: int | None = None,
) -> Series:
    """The ``metric`` of the GPUs ``gpu_ids`` (ids, a queryset of ids, or ``None`` for
    every GPU, read without a filter on them) over ``[start, end)``.

    Raises ``ValueError`` for an unknown metric or an empty range.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
    if end <= start:
        raise ValueError("end must be after start")
    max_points = max_points or settings.MONITORING_CHART_MAX_POINTS
    ids: Any = gpu_ids if gpu_ids is None or isinstance(gpu_ids, QuerySet) else list(gpu_ids)
    which = {} if ids is None else {"gpu_id__in": ids}
    count = len(ids) if isinstance(ids, list) else (ids if ids is not None else Gpu.objects).count()

    def fitting(since: datetime) -> int:
        return choose_resolution(
            end - since,
            count,
            max_points=max_points,
            raw_interval=settings.MONITORING_SAMPLE_SECONDS,
            row_budget=settings.MONITORING_CHART_ROW_BUDGET,
        )

    resolution = fitting(start)
    if resolution != RAW:
        # A long range: if the readings begin inside it, the resolution fits the time
        # they cover (a week-long chart of a site up for an hour: its minutes, not one
        # hourly mean). One query, only for ranges too long for raw samples.
        origin = readings_origin()
        if origin is not None and start < origin < end:
            start, resolution = origin, fitting(origin)
    if resolution == RAW:
        bucket = max(1, math.ceil((end - start).total_seconds() / max_points))
        points = _raw_points(which, start, end, METRICS[metric], bucket)
    elif ids is None and resolution == Resolution.HOUR:
        # Every GPU, by the hour: combined in advance, one row an hour.
        bucket = resolution
        combined = AllGpuRollup.objects.filter(at__gte=start, at__lt=end).exclude(**{f"{metric}_mean": None})
        points = [
            Point(at, low, mean, high)
            for at, low, mean, high in combined.values_list(
                "at", f"{metric}_min", f"{metric}_mean", f"{metric}_max"
            ).order_by("at")
        ]
    else:
        bucket = resolution
        rows = (
            GpuRollup.objects.filter(period=resolution, at__gte=start, at__lt=end, **which)
            .exclude(**{f"{metric}_mean": None})
            .values("at")
            .annotate(low=Min(f"{metric}_min"), mean=Avg(f"{metric}_mean"), high=Max(f"{metric}_max"))
            .order_by("at")
        )
        points = [Point(r["at"], r["low"], r["mean"], r["high"]) for r in rows]
    points, bucket = downsample(points, bucket, max_points)
    return Series(metric, resolution, bucket, tuple(points), since=start)


def readings_origin() -> datetime | None:
    """When the oldest GPU reading still kept was taken: the first combined hour (hour
    rollups outlive raw samples) or the first raw sample, whichever is earlier; ``None``
    without any. One query of two index lookups."""
    quote = connection.ops.quote_name
    first = "(SELECT MIN({at}) FROM {table})"
    parts = [first.format(at=quote("at"), table=quote(model._meta.db_table)) for model in (AllGpuRollup, GpuSample)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts))
        row = cursor.fetchone()
    field = GpuSample._meta.get_field("at")
    # PostgreSQL answers aware datetimes; SQLite the stored UTC text, read here as UTC.
    times = [field.to_python(value) for value in row if value is not None]
    aware = [t if t.tzinfo is not None else t.replace(tzinfo=UTC) for t in times]
    return min(aware) if aware else None


def _raw_points(which: dict[str, Any], start: datetime, end: datetime, column: str, bucket: int) -> list[Point]:
    origin = start.timestamp()
    groups: dict[int, list[float]] = {}
    rows = GpuSample.objects.filter(at__gte=start, at__lt=end, **which, **{f"{column}__isnull": False})
    for at, value in rows.values_list("at", column).order_by():
        groups.setdefault(int((at.timestamp() - origin) // bucket), []).append(float(value))
    return [
        Point(start + timedelta(seconds=key * bucket), min(v), sum(v) / len(v), max(v))
        for key, v in sorted(groups.items())
    ]
