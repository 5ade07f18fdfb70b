"""Synthetic GPU telemetry and queue history for the page benchmarks, written in bulk
(``COPY`` on PostgreSQL, ``executemany`` on SQLite).

What :func:`seed_telemetry` writes for ``G`` GPUs (8,000 for 1,000 nodes), all ending at
``now``:

- hourly rollups of every GPU for the last ``hours`` (24 by default: 24 G rows), and
  those hours combined (``AllGpuRollup``, one row an hour) as the rollup pass writes them;
- minute rollups of every GPU for the last ``minutes`` (60: 60 G rows);
- raw samples of every GPU every 10 s for the last ``raw_minutes`` (10: 60 G rows);
- one queue row per account per minute for the last ``hours``.

24 h of raw samples (69 M rows for 8,000 GPUs) or of minute rollups (11.5 M) is left
out: the cluster overview reads hourly rollups for ranges over a day, and raw samples
only for the last minute or so, so those rows would only make the load slower.

Call these only inside :func:`benchmarks._common.throwaway_database`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

ROLLUP_METRICS = ("utilization", "memory_used", "temperature", "power")


@dataclass(frozen=True, slots=True)
class Telemetry:
    running_jobs: int
    allocated_gpus: int
    hourly_rollups: int
    minute_rollups: int
    raw_samples: int
    queue_rows: int


def copy_rows(table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Append ``rows`` to ``table``; returns how many. Datetimes must be adapted already
    (``connection.ops.adapt_datetimefield_value``)."""
    from django.db import connection, transaction

    count = 0
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
            return count
        batch: list[Sequence[Any]] = []
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
        for row in rows:
            batch.append(row)
            if len(batch) == 10_000:
                cursor.executemany(sql, batch)
                count, batch = count + len(batch), []
        if batch:
            cursor.executemany(sql, batch)
            count += len(batch)
    return count


def band(mean: float, cap: float | None = None) -> tuple[float, float, float]:
    """(min, mean, max) of a rollup around ``mean``: +-10%, the max capped at ``cap``."""
    high = mean * 1.1
    return mean * 0.9, mean, min(high, cap) if cap is not None else high


def run_jobs_on_nodes(site: Any, fraction: float, *, seed: int = 3) -> tuple[int, set[int]]:
    """Turn pending jobs into RUNNING 1-node, 8-GPU jobs, one on each of ``fraction`` of
    the up nodes. Returns the jobs changed and the ids of the GPUs they hold."""
    from django.utils import timezone

    from scheduler.models import Gpu, Job, Node

    rng = random.Random(seed)
    now = timezone.now()
    nodes = list(Node.objects.filter(state="up").order_by("name").values_list("name", flat=True))
    chosen = sorted(rng.sample(nodes, int(len(nodes) * fraction)))
    jobs = list(Job.objects.filter(state="PENDING").order_by("id")[: len(chosen)])
    for job, node in zip(jobs, chosen, strict=False):
        job.state, job.nodes, job.gpus_per_node, job.gpu_share, job.gpu_model = "RUNNING", 1, 8, 0.0, ""
        job.started_at = now - timedelta(minutes=rng.randrange(30, 1440))
        job.allocations = [{"node": node, "gpu_indices": list(range(8)), "cpus": 8, "memory_mib": 0}]
    fields = ["state", "nodes", "gpus_per_node", "gpu_share", "gpu_model", "started_at", "allocations"]
    Job.objects.bulk_update(jobs, fields, batch_size=1000)
    held = set(Gpu.objects.filter(node__name__in=chosen[: len(jobs)]).values_list("id", flat=True))
    return len(jobs), held


def seed_telemetry(
    site: Any, now: datetime, *, hours: int = 24, minutes: int = 60, raw_minutes: int = 10, busy_fraction: float = 0.75
) -> Telemetry:
    """Running jobs on ``busy_fraction`` of the nodes, then the rows listed above. Held
    GPUs run at 60-100% except one node in ten whose GPUs sit idle at 1% (allocated but
    idle); free GPUs read 0%."""
    from django.db import connection

    from monitoring.models import GpuRollup, GpuSample, QueueSample
    from monitoring.services import floor_time, rollup_all_gpus
    from people.models import Account
    from scheduler.models import Gpu

    running, held = run_jobs_on_nodes(site, busy_fraction)
    gpus = list(Gpu.objects.order_by("id").values_list("id", "node_id"))
    adapt = connection.ops.adapt_datetimefield_value

    def utilization(gpu_id: int, node_id: int, tick: int) -> float:
        if gpu_id not in held:
            return 0.0
        return 1.0 if node_id % 10 == 0 else 60.0 + (gpu_id * 7 + tick) % 40

    columns = ["gpu_id", "period", "at", "samples"] + [
        f"{m}_{k}" for m in ROLLUP_METRICS for k in ("min", "mean", "max")
    ]

    def rollups(period: int, count: int) -> Iterable[tuple[Any, ...]]:
        last = floor_time(now, period)
        for step in range(count):
            at = adapt(last - timedelta(seconds=period * step))
            for gpu_id, node_id in gpus:
                u = utilization(gpu_id, node_id, step)
                spread = (*band(u, cap=100.0), *band(20_000 + u * 100), *band(35 + u / 3), *band(70 + u * 6))
                yield (gpu_id, period, at, period // 10, *spread)

    hourly = copy_rows(GpuRollup._meta.db_table, columns, rollups(3600, hours))
    # What the rollup pass writes with every hour it recomputes: the hours combined.
    rollup_all_gpus(floor_time(now, 3600) - timedelta(hours=hours), now + timedelta(hours=1))
    minutely = copy_rows(GpuRollup._meta.db_table, columns, rollups(60, minutes))

    def raw() -> Iterable[tuple[Any, ...]]:
        last = floor_time(now, 10)
        for step in range(raw_minutes * 6):
            at = adapt(last - timedelta(seconds=10 * step))
            for gpu_id, node_id in gpus:
                u = utilization(gpu_id, node_id, step)
                yield (gpu_id, at, u, int(20_000 + u * 100), 35.0 + u / 3, 70.0 + u * 6, "[]", "[]")

    raw_columns = ["gpu_id", "at", "utilization_pct", "memory_used_mib", "temperature_c", "power_w"]
    samples = copy_rows(GpuSample._meta.db_table, [*raw_columns, "throttle_reasons", "processes"], raw())

    accounts = list(Account.objects.values_list("id", flat=True))
    first = floor_time(now, 60)
    queue = copy_rows(
        QueueSample._meta.db_table,
        ["at", "account_id", "pending", "running", "gpus"],
        (
            (adapt(first - timedelta(minutes=m)), account, 9000 + m % 500, running, running * 8.0)
            for m in range(hours * 60)
            for account in accounts
        ),
    )
    return Telemetry(running, len(held), hourly, minutely, samples, queue)
