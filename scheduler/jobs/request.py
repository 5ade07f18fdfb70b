"""THE one list of request fields, and a job's request as the core's ``PendingJob``.

A request field is what a submitter says about the resources and conditions of a job.
The snapshot, the API serializer, the web form, "resubmit as copy" and the submit-time
feasibility check all read :data:`REQUEST_FIELDS`, so a field added here reaches every
one of them (a test checks that every request field of ``PendingJob`` is listed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from scheduler.core.types import CPU_MILLIS, PendingJob, cpu_millis, parse_compute_capability
from scheduler.models import Job

#: The ``PendingJob`` fields that are not part of a request: the job's identity and
#: bookkeeping (who submitted it, when, charged to which account, in which QOS), which
#: :data:`PENDING_VALUES` reads beside the request, for a task of a job array, its
#: array and throttle, and the service earlier attempts had (the tick adds it, see
#: ``scheduler.tick.history``). Every other ``PendingJob`` field is a request field
#: (a test checks it).
NOT_REQUEST_FIELDS: frozenset[str] = frozenset(
    {"id", "submitted_at", "account", "user", "qos", "array_job", "array_limit", "attained_gpu_s"}
)

#: The ``Job`` fields that make up a request, each also a ``PendingJob`` field.
REQUEST_FIELDS: tuple[str, ...] = (
    "nodes",
    "gpus_per_node",
    "cpus_per_node",
    "memory_mib_per_node",
    "gpu_model",
    "min_gpu_memory_mib",
    "min_compute_capability",
    "walltime_seconds",
    "nice",
    "dependencies",
    "gpu_share",
    "gpu_memory_mib_share",
    "node_labels",
    "reservation",
)

#: Request fields whose ``PendingJob`` field is named otherwise, because the core counts
#: them in another unit: people ask for CPUs (``0.5``), the core counts millicores.
PENDING_NAMES: dict[str, str] = {"cpus_per_node": "cpu_millis_per_node"}

#: The JSON columns among :data:`PENDING_VALUES`, with their empty value.
PENDING_JSON: dict[str, Any] = {"dependencies": [], "node_labels": {}}

#: What a pending job's core view is read from (``values()`` names).
PENDING_VALUES: tuple[str, ...] = (
    "id",
    "submitted_at",
    *REQUEST_FIELDS,
    "account__name",
    "owner__username",
    "qos__name",
    "array_job_id",
    "array_throttle",
)


#: The most CPUs one node's request may name.
MAX_CPUS_PER_NODE = 100_000
_MILLICORES = re.compile(r"^\s*(\d{1,9})m\s*$")


def parse_cpus(value: object) -> Decimal:
    """CPUs per node as people write them: ``8``, ``0.5``, ``"2.25"``, or Kubernetes'
    ``"500m"``. At most three decimals (millicores, the finest unit a workload manager
    hands out), more than 0 and at most :data:`MAX_CPUS_PER_NODE`; anything else raises
    ``ValueError`` with the message a person should read."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ValueError("Give CPUs as a number (8, 0.5) or in millicores ('500m').")
    millicores = _MILLICORES.match(value) if isinstance(value, str) else None
    try:
        cpus = Decimal(millicores.group(1)) / CPU_MILLIS if millicores else Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number of CPUs; give 8, 0.5 or '500m'.") from None
    if not cpus.is_finite() or cpus <= 0 or cpus > MAX_CPUS_PER_NODE:
        raise ValueError(f"CPUs per node must be more than 0 and at most {MAX_CPUS_PER_NODE}.")
    if cpus != cpus.quantize(Decimal("0.001")):
        raise ValueError("CPUs come in thousandths at the finest (0.001, Kubernetes' 1m).")
    return cpus.quantize(Decimal("0.001"))


def gpu_model_label(model: str, mig_profile: str) -> str:
    """The model name a job asks for: MIG slices are ``<model>/<profile>``."""
    return f"{model}/{mig_profile}" if mig_profile else model


def compute_capability(text: str) -> tuple[int, int]:
    """A stored compute capability (``"9.0"``); ``(0, 0)`` for one that does not parse."""
    try:
        return parse_compute_capability(text)
    except ValueError:
        return (0, 0)


#: Where each of :data:`PENDING_VALUES` is in a row of them.
_AT: dict[str, int] = {name: i for i, name in enumerate(PENDING_VALUES)}


def pending_from_values(row: dict[str, Any]) -> PendingJob:
    """The core's view of one job from its :data:`PENDING_VALUES` (by name)."""
    return pending_from_row([row[name] for name in PENDING_VALUES])


def pending_from_row(row: Sequence[Any]) -> PendingJob:
    """The core's view of one job from its :data:`PENDING_VALUES` in that order (a
    ``values_list`` row: the tick reads 10,000 of them, without a dict each)."""
    at = _AT
    cc = row[at["min_compute_capability"]]
    dependencies = row[at["dependencies"]]
    labels = row[at["node_labels"]]
    return PendingJob(
        row[at["id"]],
        row[at["submitted_at"]],
        row[at["nodes"]],
        row[at["gpus_per_node"]],
        cpu_millis(row[at["cpus_per_node"]]),  # a Decimal from the database: exact
        row[at["memory_mib_per_node"]],
        row[at["gpu_model"]],
        row[at["min_gpu_memory_mib"]],
        compute_capability(cc) if cc else None,
        row[at["walltime_seconds"]],
        row[at["account__name"]],
        row[at["owner__username"]],
        row[at["qos__name"]] or "",
        row[at["nice"]],
        tuple((str(d["type"]), int(d["job"])) for d in dependencies) if dependencies else (),
        row[at["gpu_share"]],
        row[at["gpu_memory_mib_share"]],
        tuple(sorted((str(k), str(v)) for k, v in labels.items())) if labels else (),
        row[at["array_job_id"]] or 0,
        row[at["array_throttle"]],
        row[at["reservation"]],
    )


def pending_job(job: Job) -> PendingJob:
    """One job as the core sees a pending job: for reports on a single job, and for a
    job not yet submitted (an unsaved ``Job``; see ``scheduler.tick.estimates.what_if``)."""
    return pending_from_values(
        {
            "id": job.id,
            "submitted_at": job.submitted_at,
            **{f: getattr(job, f) for f in REQUEST_FIELDS},
            "account__name": job.account.name,
            "owner__username": job.owner.get_username(),
            "qos__name": job.qos.name if job.qos else "",
            "array_job_id": job.array_job_id,
            "array_throttle": job.array_throttle,
        }
    )


def pending_request(values: Mapping[str, Any]) -> PendingJob:
    """A request that is not a job yet (``values`` has every :data:`REQUEST_FIELDS`
    entry, as the API validates it) as the core's ``PendingJob``, without identity: what
    the submit-time feasibility check looks at."""
    return pending_from_values(
        {
            "id": 0,
            "submitted_at": None,
            **{f: values[f] for f in REQUEST_FIELDS},
            "account__name": "",
            "owner__username": "",
            "qos__name": "",
            "array_job_id": None,
            "array_throttle": 0,
        }
    )


def request_values(job: Job) -> dict[str, Any]:
    """The request fields of a stored job (for "resubmit as copy" and templates)."""
    return {f: getattr(job, f) for f in REQUEST_FIELDS}
