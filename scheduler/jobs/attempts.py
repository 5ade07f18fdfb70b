"""The record of each ended attempt (``JobAttempt``), written beside the hour rollups in
the transaction of the state change that ended it (``scheduler.jobs.transitions``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from people.models import Qos
from scheduler.core.hours import job_gpus
from scheduler.jobs.allocations import decode
from scheduler.jobs.request import gpu_model_label
from scheduler.models import Gpu, JobAttempt

#: The job's fields the record needs, read (locked) before the change clears them.
FIELDS = ("id", "attempt", "account_id", "owner_id", "qos_id", "allocations", "nodes", "gpus_per_node", "gpu_share")


def first_gpu(allocations: Any) -> tuple[str, int] | None:
    """(node, index) of an attempt's first GPU, whose model names the attempt's; None for
    a CPU-only one."""
    return next(((a.node, a.gpu_indices[0]) for a in decode(allocations) if a.gpu_indices), None)


def gpu_models(gpus: Iterable[tuple[str, int] | None]) -> dict[tuple[str, int], str]:
    """The model label (MIG slices as ``model/profile``) of each of these GPUs: one query."""
    wanted = {gpu for gpu in gpus if gpu is not None}
    if not wanted:
        return {}
    rows = Gpu.objects.filter(node__name__in={node for node, _ in wanted}).values_list(
        "node__name", "index", "model", "mig_profile"
    )
    return {(node, index): gpu_model_label(model, mig) for node, index, model, mig in rows if (node, index) in wanted}


def record(job: Mapping[str, Any], started: datetime | None, ended: datetime) -> None:
    """Record one attempt that held its GPUs from ``started`` to ``ended``; nothing for one
    that never started. Two small queries (its GPUs' model, its QOS's name)."""
    if started is None:
        return
    first = first_gpu(job["allocations"])
    model = gpu_models([first]).get(first, "") if first is not None else ""
    qos = Qos.objects.filter(pk=job["qos_id"]).values_list("name", flat=True).first() if job["qos_id"] else ""
    JobAttempt.objects.get_or_create(
        job_id=job["id"],
        attempt=job["attempt"],
        defaults={
            "account_id": job["account_id"],
            "owner_id": job["owner_id"],
            "qos": qos or "",
            "gpu_model": model,
            "gpus": job_gpus(job["nodes"], job["gpus_per_node"], job["gpu_share"]),
            "started_at": started,
            "ended_at": ended,
        },
    )
