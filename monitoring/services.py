"""Writes of the monitoring side: ingest, health, rollups, retention, node tokens.

Every function here is safe to run twice: ingest is idempotent on ``(gpu, at)``, a
rollup recomputes and upserts the same rows, pruning deletes what is already old.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, Max, Min, Sum
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from agent.collectors.simulated import SimulatedGpu, simulate
from monitoring import health
from monitoring.ingest import validate_sample
from monitoring.models import AllGpuRollup, GpuHealth, GpuRollup, GpuSample, NodeToken, QueueSample, Resolution
from monitoring.sample_fields import CHART_METRICS, LISTS, MEASUREMENTS
from scheduler.choices import BackendKind, NodeState
from scheduler.clusters.nodes import drain_node
from scheduler.jobs.allocations import gpus_of, held_gpus
from scheduler.models import Gpu, Job, Node

log = logging.getLogger(__name__)


class ForeignGpu(Exception):
    """A batch names a GPU of another node: the whole batch is refused (403)."""


def thresholds() -> health.Thresholds:
    return health.Thresholds(
        temperature_c=settings.MONITORING_TEMPERATURE_LIMIT_C,
        throttle_reasons=frozenset(settings.MONITORING_UNHEALTHY_THROTTLE_REASONS),
        critical_xids=frozenset(settings.MONITORING_CRITICAL_XIDS),
        xid_hold=timedelta(seconds=settings.MONITORING_XID_HOLD_SECONDS),
    )


# --- Node tokens ---------------------------------------------------------------------------


def create_node_token(node: Node) -> tuple[NodeToken, str]:
    """A new token for ``node``; returns the record and the secret (shown once, never stored)."""
    prefix, secret = NodeToken.new_secret()
    return NodeToken.objects.create(node=node, key_prefix=prefix, digest=NodeToken.hash(secret)), secret


# --- Ingest --------------------------------------------------------------------------------


@dataclass
class IngestResult:
    received: int = 0
    accepted: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    drained: bool = False


def ingest_batch(node: Node, samples: Sequence[Any], now: datetime | None = None) -> IngestResult:
    """Store a node's batch of samples; return what was accepted and what was rejected.

    Steps:
    1. Validate each sample (``monitoring.ingest.validate_sample``); a bad one is
       rejected with its position and errors, the rest are kept.
    2. Resolve each sample's GPU on this node by ``uuid``, else ``index``. Raises
       ``ForeignGpu`` if a ``uuid`` belongs to another node's GPU (nothing is stored).
    3. In one transaction: insert in bulk, skipping ``(gpu, at)`` pairs already stored
       (idempotent: an agent may resend a batch whose answer it never got), and update
       the health of every GPU in the batch from its newest sample
       (:func:`record_health`), which may drain the node on a critical XID.
    """
    now = now or timezone.now()
    oldest = now - timedelta(hours=settings.MONITORING_RAW_RETENTION_HOURS)
    result = IngestResult(received=len(samples))
    by_index: dict[int, int] = {}
    by_uuid: dict[str, int] = {}
    gpu_id: int | None
    for gpu_id, index, uuid in Gpu.objects.filter(node=node).values_list("id", "index", "uuid"):
        by_index[index] = gpu_id
        if uuid:
            by_uuid[uuid] = gpu_id
    rows: list[tuple[int, datetime, dict[str, Any]]] = []
    newest: dict[int, tuple[datetime, dict[str, Any]]] = {}
    unknown_uuids: set[str] = set()
    for position, raw in enumerate(samples):
        sample, errors = validate_sample(raw, now=now, oldest=oldest)
        if sample is None:
            result.rejected.append({"index": position, "errors": errors})
            continue
        gpu_id = by_uuid.get(sample.uuid) if sample.uuid else None
        if gpu_id is None and sample.uuid and sample.uuid not in by_uuid:
            unknown_uuids.add(sample.uuid)
        if gpu_id is None and sample.index is not None:
            gpu_id = by_index.get(sample.index)
        if gpu_id is None:
            named = f"uuid {sample.uuid}" if sample.index is None else f"index {sample.index}"
            result.rejected.append({"index": position, "errors": {"gpu": f"No GPU with {named} on node {node.name}."}})
            continue
        rows.append((gpu_id, sample.at, sample.values))
        if gpu_id not in newest or sample.at > newest[gpu_id][0]:
            newest[gpu_id] = (sample.at, sample.values)
    if unknown_uuids:
        foreign = Gpu.objects.filter(uuid__in=unknown_uuids).exclude(node=node).values_list("uuid", flat=True).first()
        if foreign:
            raise ForeignGpu(f"GPU {foreign} belongs to another node; node {node.name} may post only its own GPUs.")
    # One transaction (one commit to wait for) for the samples and the health they imply.
    with transaction.atomic():
        insert_samples(rows)
        if newest:
            result.drained = record_health(node, newest, now)
    result.accepted = len(rows)
    return result


#: Sample columns besides ``gpu_id`` and ``at``: numbers with their PostgreSQL types,
#: then the JSON lists (``[]`` when absent), as ``monitoring.sample_fields`` lists them.
_NUMBER_COLUMNS = tuple((f.name, "integer" if f.kind == "integer" else "double precision") for f in MEASUREMENTS)
_NUMBERS = tuple(name for name, _ in _NUMBER_COLUMNS)
_JSON_COLUMNS = LISTS
_NAMES = ("gpu_id", "at", *_NUMBERS, *_JSON_COLUMNS)
#: ``name type, ...`` of the staging table.
_STAGE_COLUMNS = ", ".join(
    [
        "gpu_id bigint",
        "at timestamptz",
        *(f"{n} {t}" for n, t in _NUMBER_COLUMNS),
        *(f"{n} jsonb" for n in _JSON_COLUMNS),
    ]
)


def insert_samples(rows: Sequence[tuple[int, datetime, dict[str, Any]]]) -> None:
    """Insert ``(gpu_id, at, values)`` rows, skipping ``(gpu, at)`` pairs already stored.

    PostgreSQL (several times faster than ``bulk_create``, whose per-value preparation
    dominated the ingest path):
    1. ``COPY`` the rows straight into the table, inside a savepoint. A batch of new
       samples, the usual case, is done.
    2. If a row's ``(gpu, at)`` is already stored (an agent resending a batch whose
       answer it never got) or repeats within the rows, the COPY fails on the unique
       constraint: roll back to the savepoint, ``COPY`` into a temporary table and
       ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``.

    Elsewhere (SQLite): ``bulk_create(ignore_conflicts=True)``. Runs in the caller's
    transaction if there is one.
    """
    if not rows:
        return
    if connection.vendor != "postgresql":
        GpuSample.objects.bulk_create(
            [GpuSample(gpu_id=gpu_id, at=at, **values) for gpu_id, at, values in rows],
            batch_size=500,
            ignore_conflicts=True,
        )
        return
    import psycopg

    columns = ", ".join(_NAMES)
    table = GpuSample._meta.db_table
    data = _copy_text(rows)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        try:
            # A savepoint, to carry on after a conflict.
            with transaction.atomic(), raw.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                copy.write(data)
            return
        except psycopg.errors.UniqueViolation:
            pass
        # A temporary staging table, emptied at commit (COPY itself cannot skip conflicts).
        cursor.execute(f"CREATE TEMP TABLE IF NOT EXISTS qm_sample_stage ({_STAGE_COLUMNS}) ON COMMIT DELETE ROWS")
        with raw.copy(f"COPY qm_sample_stage ({columns}) FROM STDIN") as copy:
            copy.write(data)
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM qm_sample_stage ON CONFLICT (gpu_id, at) DO NOTHING"
        )


def _copy_text(rows: Sequence[tuple[int, datetime, dict[str, Any]]]) -> str:
    """``rows`` in ``COPY``'s text format, columns as in ``_NAMES``: building the text
    here costs less than psycopg adapting each value of each row.

    Numbers are written as Python prints them; JSON needs only its backslashes doubled
    (``json.dumps`` escapes tabs, newlines and every other control character).
    """
    lines = []
    for gpu_id, at, values in rows:
        get = values.get
        numbers = "\t".join([r"\N" if (v := get(name)) is None else str(v) for name in _NUMBERS])
        lists = "\t".join([json.dumps(v).replace("\\", "\\\\") if (v := get(name)) else "[]" for name in _JSON_COLUMNS])
        lines.append(f"{gpu_id}\t{at.isoformat()}\t{numbers}\t{lists}\n")
    return "".join(lines)


def record_health(node: Node, newest: dict[int, tuple[datetime, dict[str, Any]]], now: datetime) -> bool:
    """Update ``GpuHealth`` of the given GPUs from their newest samples (one read, writes
    only where something changed); drain the node on a new critical XID.

    A sample older than the health already recorded (a buffered batch arriving late)
    does not overwrite it. Returns whether the node was drained by this call.
    """
    rules = thresholds()
    existing = {h.gpu_id: h for h in GpuHealth.objects.filter(gpu_id__in=newest)}
    created: list[GpuHealth] = []
    changed: list[GpuHealth] = []
    critical: list[tuple[int, int]] = []
    for gpu_id, (at, values) in newest.items():
        state = existing.get(gpu_id)
        if state is not None and at < state.since:
            continue
        text = health.condition(values, rules)[:200]
        xid = values.get("xid")
        new_xid = health.is_new_xid(xid, state.xid if state else None)
        if state is None:
            created.append(GpuHealth(gpu_id=gpu_id, condition=text, since=at, xid=xid, xid_at=at if xid else None))
        elif text != state.condition or new_xid:
            if text != state.condition:
                state.condition, state.since = text, at
            if new_xid:
                state.xid, state.xid_at = xid, at
            changed.append(state)
        if new_xid and xid is not None and health.is_critical(xid, rules.critical_xids):
            critical.append((gpu_id, int(xid)))
    GpuHealth.objects.bulk_create(created, ignore_conflicts=True)
    GpuHealth.objects.bulk_update(changed, ["condition", "since", "xid", "xid_at"])
    if not critical:
        return False
    gpu_id, xid = critical[0]
    index = Gpu.objects.filter(pk=gpu_id).values_list("index", flat=True).first()
    node.refresh_from_db(fields=["state"])
    if node.state != NodeState.UP:
        return False  # already drained or down: keep the reason an admin or backend gave
    reason = f"{health.describe_xid(xid)} on GPU {index} (monitoring)"
    drain_node(node, reason=reason, by="monitoring")
    log.warning("drained node %s: %s", node.name, reason)
    return True


def health_notes_for_job(job: Job, now: datetime | None = None) -> list[str]:
    """Lines for a job's detail page about the health of the GPUs it holds (empty if
    all is well, or it holds none): the condition, a recent XID, a drained node."""
    now = now or timezone.now()
    wanted = gpus_of(job.allocations)
    if not wanted:
        return []
    hold = timedelta(seconds=settings.MONITORING_XID_HOLD_SECONDS)
    notes = []
    rows = GpuHealth.objects.filter(
        gpu__node__name__in={n for n, _ in wanted}, gpu__index__in={i for _, i in wanted}
    ).values("gpu__node__name", "gpu__index", "condition", "xid", "xid_at")
    for row in sorted(rows, key=lambda r: (r["gpu__node__name"], r["gpu__index"])):
        where = f"GPU {row['gpu__index']} on {row['gpu__node__name']}"
        if (row["gpu__node__name"], row["gpu__index"]) not in wanted:
            continue
        if row["condition"]:
            notes.append(f"{where}: {row['condition']}.")
        if row["xid"] and row["xid_at"] and now - row["xid_at"] < hold:
            notes.append(f"{where}: {health.describe_xid(row['xid'])} at {row['xid_at']:%Y-%m-%d %H:%M} UTC.")
    for name, reason in Node.objects.filter(
        name__in={n for n, _ in wanted}, state=NodeState.DRAIN, reason__endswith="(monitoring)"
    ).values_list("name", "reason"):
        notes.append(f"Node {name} is drained: {reason}.")
    return notes


# --- Rollups and retention --------------------------------------------------------------------

#: Chart metric -> sample column: each has min, mean and max columns in the rollups.
_METRICS = tuple(CHART_METRICS.items())


def floor_time(at: datetime, seconds: int) -> datetime:
    epoch = int(at.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=at.tzinfo)


def rollup(period: int, start: datetime, end: datetime) -> int:
    """(Re)compute the ``period`` rollups of every GPU for the whole periods in
    ``[start, end)`` and upsert them. Minutes come from raw samples, hours from minutes
    (mean weighted by sample count). Idempotent: recomputing gives the same rows.
    Returns the number of rows written.
    """
    start, end = floor_time(start, period), floor_time(end, period)
    if end <= start:
        return 0
    rows: Any
    if period == Resolution.MINUTE:
        source = GpuSample.objects.filter(at__gte=start, at__lt=end).annotate(bucket=TruncMinute("at"))
        aggregates: dict[str, Any] = {"n": Count("id")}
        for name, column in _METRICS:
            aggregates |= {f"{name}_min": Min(column), f"{name}_mean": Avg(column), f"{name}_max": Max(column)}
        rows = source.values("gpu_id", "bucket").annotate(**aggregates).order_by()
    else:
        minutes = GpuRollup.objects.filter(period=Resolution.MINUTE, at__gte=start, at__lt=end)
        aggregates = {"n": Sum("samples")}
        for name, _ in _METRICS:
            aggregates |= {
                f"{name}_min": Min(f"{name}_min"),
                f"{name}_weighted": Sum(_weighted(f"{name}_mean")),
                f"{name}_count": Sum(_counted(f"{name}_mean")),
                f"{name}_max": Max(f"{name}_max"),
            }
        rows = minutes.annotate(bucket=TruncHour("at")).values("gpu_id", "bucket").annotate(**aggregates).order_by()
    objects = []
    for row in rows:
        values = {"samples": row["n"]}
        for name, _ in _METRICS:
            values[f"{name}_min"] = row[f"{name}_min"]
            values[f"{name}_max"] = row[f"{name}_max"]
            if period == Resolution.MINUTE:
                values[f"{name}_mean"] = row[f"{name}_mean"]
            else:
                count = row[f"{name}_count"]
                values[f"{name}_mean"] = row[f"{name}_weighted"] / count if count else None
        objects.append(GpuRollup(gpu_id=row["gpu_id"], period=period, at=row["bucket"], **values))
    fields = [f.name for f in GpuRollup._meta.concrete_fields if f.name not in {"id", "gpu", "period", "at"}]
    with transaction.atomic():
        GpuRollup.objects.bulk_create(
            objects,
            batch_size=1000,
            update_conflicts=True,
            unique_fields=["gpu", "period", "at"],
            update_fields=fields,
        )
        if period == Resolution.HOUR:
            rollup_all_gpus(start, end)
    return len(objects)


def rollup_all_gpus(start: datetime, end: datetime, gpu_rollup: Any = GpuRollup, all_gpus: Any = AllGpuRollup) -> int:
    """(Re)compute ``AllGpuRollup`` for the hours in ``[start, end)`` from every GPU's
    hourly rollups, in one grouped read, and upsert them (idempotent). The models are
    parameters for the migration that fills the table. Returns the hours written."""
    aggregates: dict[str, Any] = {"gpus": Count("id")}
    for name, _ in _METRICS:
        aggregates |= {
            f"{name}_min": Min(f"{name}_min"),
            f"{name}_mean": Avg(f"{name}_mean"),
            f"{name}_max": Max(f"{name}_max"),
        }
    rows = (
        gpu_rollup.objects.filter(period=Resolution.HOUR, at__gte=start, at__lt=end)
        .values("at")
        .annotate(**aggregates)
        .order_by()
    )
    objects = [all_gpus(**row) for row in rows]
    all_gpus.objects.bulk_create(
        objects, batch_size=1000, update_conflicts=True, unique_fields=["at"], update_fields=list(aggregates)
    )
    return len(objects)


def _weighted(column: str) -> Any:
    from django.db.models import F, FloatField
    from django.db.models.functions import Cast

    return Cast(F(column), FloatField()) * F("samples")


def _counted(column: str) -> Any:
    from django.db.models import Case, F, When

    return Case(When(**{f"{column}__isnull": False}, then=F("samples")), default=0)


def rollup_recent(now: datetime | None = None) -> dict[str, int]:
    """Roll up the last ``MONITORING_ROLLUP_LOOKBACK_MINUTES`` (minutes) and the hours
    that window touches; the lookback lets batches an agent buffered arrive late."""
    now = now or timezone.now()
    start = now - timedelta(minutes=settings.MONITORING_ROLLUP_LOOKBACK_MINUTES)
    minutes = rollup(Resolution.MINUTE, start, now)
    hours = rollup(Resolution.HOUR, start, now + timedelta(hours=1)) if minutes else 0
    return {"minutes": minutes, "hours": hours}


def prune(now: datetime | None = None) -> dict[str, int]:
    """Delete raw samples, rollups and queue history past their retention. Returns the
    rows deleted per kind."""
    now = now or timezone.now()
    raw, _ = GpuSample.objects.filter(at__lt=now - timedelta(hours=settings.MONITORING_RAW_RETENTION_HOURS)).delete()
    minute_cutoff = now - timedelta(days=settings.MONITORING_MINUTE_RETENTION_DAYS)
    minutes, _ = GpuRollup.objects.filter(period=Resolution.MINUTE, at__lt=minute_cutoff).delete()
    hour_cutoff = now - timedelta(days=settings.MONITORING_HOUR_RETENTION_DAYS)
    hours, _ = GpuRollup.objects.filter(period=Resolution.HOUR, at__lt=hour_cutoff).delete()
    AllGpuRollup.objects.filter(at__lt=hour_cutoff).delete()
    queue, _ = QueueSample.objects.filter(at__lt=minute_cutoff).delete()  # one row a minute, as minute rollups
    return {"raw": raw, "minutes": minutes, "hours": hours, "queue": queue}


# --- The simulated collector's feed ------------------------------------------------------------


def record_simulated_samples(now: datetime | None = None, clusters: Iterable[int] | None = None) -> int:
    """One simulated sample for every GPU of the enabled local clusters (or ``clusters``),
    busy where a running job holds it. Returns the number of samples stored."""
    now = now or timezone.now()
    gpus = Gpu.objects.filter(node__cluster__enabled=True)
    gpus = gpus.filter(node__cluster_id__in=list(clusters)) if clusters is not None else gpus
    gpus = gpus.filter(node__cluster__kind=BackendKind.LOCAL) if clusters is None else gpus
    rows = list(gpus.values("id", "node_id", "node__name", "index", "memory_mib"))
    if not rows:
        return 0
    busy = held_gpus()
    at = floor_time(now, max(1, int(settings.MONITORING_SAMPLE_SECONDS)))  # one sample per GPU per interval
    nodes = {row["node_id"]: row["node__name"] for row in rows}
    stored = 0
    for node_id, name in nodes.items():
        mine = [r for r in rows if r["node_id"] == node_id]
        readings = simulate(
            [SimulatedGpu(r["index"], r["memory_mib"], (name, r["index"]) in busy) for r in mine], at, seed=name
        )
        node = Node(pk=node_id, name=name, state=NodeState.UP)
        stored += ingest_batch(node, [r.to_payload(at) for r in readings], now).accepted
    return stored
