"""What sharing a GPU costs one job: the mode its share runs in, how much slower it runs
than on a GPU of its own, and what that costs in accounting.

A share's capacity is its fraction of the GPU (placement never counts more), but the
jobs on a time-sliced GPU take turns and an MPS server shares the SMs, so each runs
longer than alone would. The same overhead (``SCHEDULER_SHARING_OVERHEAD``, by mode and
model, read through ``UsagePolicy.overhead``) is what accounting charges on top of the
share, so what a user is told to expect and what they pay agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from scheduler.core.fairshare import UsagePolicy
from scheduler.core.types import GpuView
from scheduler.jobs import allocations
from scheduler.jobs.request import gpu_model_label
from scheduler.models import Gpu, Job


@dataclass(frozen=True, slots=True)
class ShareCost:
    """One share a job holds and what sharing its GPU costs."""

    node: str
    gpu_index: int
    model: str
    share: float
    mode: str
    overhead: float

    @property
    def gpus_charged(self) -> float:
        """GPUs accounting charges for it: the share and its overhead."""
        return self.share * (1 + self.overhead)

    @property
    def longer_pct(self) -> int:
        """How much longer than alone the job is expected to run on it, in percent."""
        return round(self.overhead * 100)


def share_costs(job: Job) -> list[ShareCost]:
    """The shares ``job`` holds (none for whole GPUs or before it is placed). One query."""
    shares = [a for a in allocations.decode(job.allocations) if a.gpu_share]
    if not shares:
        return []
    policy = UsagePolicy(sharing_overheads=settings.SCHEDULER_SHARING_OVERHEAD)
    rows = Gpu.objects.filter(node__name__in={a.node for a in shares}).values_list(
        "node__name", "index", "model", "mig_profile", "memory_mib", "sharing"
    )
    gpus = {
        (node, index): GpuView(index, gpu_model_label(model, profile), memory, (0, 0), sharing=sharing)
        for node, index, model, profile, memory, sharing in rows
    }
    costs = []
    for allocation in shares:
        for index in allocation.gpu_indices:
            gpu = gpus.get((allocation.node, index))
            costs.append(
                ShareCost(
                    allocation.node,
                    index,
                    gpu.model if gpu else "",
                    allocation.gpu_share,
                    gpu.sharing if gpu else "",
                    policy.overhead(gpu),
                )
            )
    return costs
