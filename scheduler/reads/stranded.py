"""Stranded GPUs for the cluster overview: free capacity no pending request can use.

Reads the nodes as the tick places on them, what active jobs hold, and each distinct
pending request shape (one ``DISTINCT`` query, not every pending job), then asks the
core (``scheduler.core.stranded``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.choices import ACTIVE_STATES, JobState
from scheduler.core.placement import Ledger
from scheduler.core.stranded import ModelFree, stranded_by_model
from scheduler.core.types import PendingJob
from scheduler.jobs.allocations import decode
from scheduler.jobs.request import compute_capability
from scheduler.models import Job
from scheduler.tick.snapshot import load_nodes

#: The request fields that decide where a job fits (``scheduler.core.placement.request_shape``).
SHAPE_FIELDS = (
    "gpus_per_node",
    "cpus_per_node",
    "memory_mib_per_node",
    "gpu_model",
    "min_gpu_memory_mib",
    "min_compute_capability",
    "gpu_share",
    "gpu_memory_mib_share",
    "node_labels",
)


def stranded_gpus() -> dict[str, ModelFree]:
    """Per GPU model: free capacity on schedulable nodes and the part no pending job's
    request could use where it is (all of it while nothing is pending)."""
    ledger = Ledger(load_nodes())
    for (allocations,) in Job.objects.filter(state__in=ACTIVE_STATES).values_list("allocations"):
        ledger.take(decode(allocations))
    shapes = Job.objects.filter(state=JobState.PENDING, gpus_per_node__gt=0).values_list(*SHAPE_FIELDS).distinct()
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    requests = [
        PendingJob(
            0,
            epoch,
            gpus_per_node=gpus,
            cpus_per_node=cpus,
            memory_mib_per_node=memory,
            gpu_model=model,
            min_gpu_memory_mib=min_memory,
            min_compute_capability=compute_capability(cc) if cc else None,
            gpu_share=share,
            gpu_memory_mib_share=share_memory,
            node_labels=tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items())),
        )
        for gpus, cpus, memory, model, min_memory, cc, share, share_memory, labels in shapes.order_by()
    ]
    return stranded_by_model(ledger, requests)
