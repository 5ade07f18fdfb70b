"""Stranded GPUs: free capacity that no waiting request could use where it is.

A cluster can show free GPUs and still start nothing: the free part of a shared GPU is
smaller than every waiting share, the node's CPUs or memory are all taken, or the free
GPUs are spread one per node while the queue asks for four on one node. The cluster
overview shows, per GPU model, how much of the free capacity is stranded that way for
the requests now pending, so that an admin sees fragmentation instead of guessing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler.core.fragmentation import SHARE_UNITS, NodeState, kind_gpu, share_units
from scheduler.core.placement import Ledger, request_shape
from scheduler.core.types import NodeView, PendingJob


@dataclass(slots=True)
class ModelFree:
    """Free GPU capacity of one model, in GPUs (a shared GPU's free part counts as such),
    and the part of it no pending request could use."""

    free: float = 0.0
    stranded: float = 0.0


def stranded_by_model(ledger: Ledger, pending: Iterable[PendingJob]) -> dict[str, ModelFree]:
    """Per GPU model, the free capacity on schedulable nodes and how much of it none of
    ``pending`` (one per request shape is enough) could take on its node now: a GPU's
    free part is usable when some request fits the node's free CPUs, memory and labels
    and could take that GPU (a share no larger than its free part; a whole free GPU, with
    as many such GPUs on the node as the request needs per node).

    Nodes in the same free state (and labels) are looked at once; whether a request
    accepts a kind of GPU is asked once per request and kind."""
    requests = list({request_shape(job): job for job in pending if job.gpus_per_node}.values())
    accepts: dict[tuple[int, int], bool] = {}
    models: dict[str, ModelFree] = {}
    memo: dict[tuple[NodeState, tuple[tuple[str, str], ...]], list[tuple[str, int, bool]]] = {}
    for capacity in ledger.by_name.values():
        node = capacity.node
        if not node.schedulable or not node.gpus:
            continue
        state = capacity.state()
        key = (state, tuple(sorted(node.labels.items())) if node.labels else ())
        gpus = memo.get(key)
        if gpus is None:
            gpus = memo[key] = _usable(state, node, requests, accepts)
        for model, free, usable in gpus:
            entry = models.setdefault(model, ModelFree())
            entry.free += free / SHARE_UNITS
            if not usable:
                entry.stranded += free / SHARE_UNITS
    return models


def _usable(
    state: NodeState, node: NodeView, requests: list[PendingJob], accepts: dict[tuple[int, int], bool]
) -> list[tuple[str, int, bool]]:
    """(model, free units, whether some request could use it) per GPU with free capacity.
    ``accepts`` memoises ``(request position, GPU kind) -> job.accepts(gpu)``."""
    free_cpu_millis, free_memory, entries = state

    def takes(position: int, job: PendingJob, kind: int) -> bool:
        answer = accepts.get((position, kind))
        if answer is None:
            answer = accepts[(position, kind)] = job.accepts(kind_gpu(kind))
        return answer

    fitting = [
        (position, job)
        for position, job in enumerate(requests)
        if job.cpu_millis_per_node <= free_cpu_millis
        and job.memory_mib_per_node <= free_memory
        and (not job.picks_nodes or job.fits_node(node))
    ]
    whole_free: dict[int, int] = {}  # request position -> whole free GPUs it accepts here, once asked
    result = []
    for kind, free, memory in entries:
        if free == 0:
            continue
        gpu = kind_gpu(kind)
        if not gpu.healthy:
            continue  # held back by monitoring: unavailable, not stranded
        usable = False
        for position, job in fitting:
            if job.gpu_share:
                usable = (
                    free >= share_units(job.gpu_share)
                    and memory + job.gpu_memory_mib_share <= gpu.memory_mib
                    and takes(position, job, kind)
                )
            elif free == SHARE_UNITS and takes(position, job, kind):
                count = whole_free.get(position)
                if count is None:
                    count = whole_free[position] = sum(
                        1 for k, f, _ in entries if f == SHARE_UNITS and takes(position, job, k)
                    )
                usable = count >= job.gpus_per_node
            if usable:
                break
        result.append((gpu.model, free, usable))
    return result
