"""``Job.allocations``: the one codec between the stored JSON and the core's ``Allocation``.

Every reader of a job's allocations (the snapshot, usage, dispatch, reconciliation,
pages, monitoring) goes through :func:`decode`; the claim writes with :func:`encode`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, TypedDict

from scheduler.choices import ACTIVE_STATES
from scheduler.core.types import Allocation, cpu_count, cpu_millis
from scheduler.models import Job


class AllocationJson(TypedDict):
    """One node's part of a job's allocation, as stored on the job."""

    node: str
    gpu_indices: list[int]
    #: In CPUs, as people read them (``0.5`` for half a CPU); the core counts millicores.
    cpus: int | float
    memory_mib: int
    #: Only on a fractional job's allocation (``gpu_share`` > 0).
    gpu_share: NotRequired[float]
    gpu_memory_mib: NotRequired[int]


def decode(data: Iterable[Mapping[str, Any]] | None) -> tuple[Allocation, ...]:
    """Stored allocations (missing keys read as zero or empty; ``None`` as none)."""
    return tuple(
        Allocation(
            node=str(item["node"]),
            gpu_indices=tuple(int(i) for i in item.get("gpu_indices", []) or []),
            cpu_millis=cpu_millis(float(item.get("cpus", 0) or 0)),
            memory_mib=int(item.get("memory_mib", 0) or 0),
            gpu_share=float(item.get("gpu_share", 0.0) or 0.0),
            gpu_memory_mib=int(item.get("gpu_memory_mib", 0) or 0),
        )
        for item in data or ()
    )


def encode(allocations: Iterable[Allocation]) -> list[AllocationJson]:
    """Allocations as stored on the job; share fields only on a fractional job's."""
    stored: list[AllocationJson] = []
    for a in allocations:
        item: AllocationJson = {
            "node": a.node,
            "gpu_indices": list(a.gpu_indices),
            "cpus": cpu_count(a.cpu_millis),
            "memory_mib": a.memory_mib,
        }
        if a.gpu_share:
            item["gpu_share"] = a.gpu_share
            item["gpu_memory_mib"] = a.gpu_memory_mib
        stored.append(item)
    return stored


def gpus_of(data: Iterable[Mapping[str, Any]] | None) -> set[tuple[str, int]]:
    """(node name, GPU index) of every GPU in stored allocations."""
    return {(a.node, i) for a in decode(data) for i in a.gpu_indices}


def held_gpus() -> set[tuple[str, int]]:
    """(node name, GPU index) of every GPU a dispatched or running job holds, whole or a
    share of it: what the pages, ``/metrics`` and the simulated collector call busy. One
    query."""
    held: set[tuple[str, int]] = set()
    for allocations in Job.objects.filter(state__in=ACTIVE_STATES).values_list("allocations", flat=True):
        held |= gpus_of(allocations)
    return held
