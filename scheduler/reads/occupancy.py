"""Every GPU and which active job holds it, read once for a page that shows the GPUs
several ways (free GPUs by model, the allocation heatmap, the idle allocated GPUs), so
that 8,000 GPUs are read once a page, not once a figure.

Four queries whatever the cluster size: the nodes, the split GPUs, the GPUs (no join:
node names come from the node rows) and the active jobs' allocations. A GPU is a plain
tuple: at 8,000 GPUs an object each costs more than the queries, and plain tuples of
plain values are the one kind the garbage collector stops tracking.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.choices import ACTIVE_STATES, NodeState
from scheduler.jobs.allocations import decode
from scheduler.jobs.request import gpu_model_label
from scheduler.models import Gpu, Job, Node

#: One allocatable GPU: (id, node name, index on the node, the model a job asks for
#: (``model/profile`` for a MIG slice), (job id, account name) of the active job holding
#: it or ``None``).
GpuRow = tuple[int, str, int, str, tuple[int, str] | None]


@dataclass(frozen=True, slots=True)
class Occupancy:
    """The GPUs as the scheduler allocates them, and their holders, at one instant."""

    #: (name, state) of every node, by cluster name, then node name.
    nodes: list[tuple[str, str]]
    #: Names of the nodes of enabled clusters.
    enabled: frozenset[str]
    #: Every allocatable unit: a GPU, or each MIG slice of a split one (never the split
    #: GPU itself: jobs hold its slices), in no particular order. A GPU is held when a
    #: dispatched or running job holds it whole or a share of it; of several jobs sharing
    #: it, the row names the earliest submitted.
    gpus: list[GpuRow]
    #: GPU id of each MIG slice -> the index of the GPU it is a slice of, on its node.
    slice_parents: dict[int, int] = field(default_factory=dict)

    def schedulable(self) -> frozenset[str]:
        """Names of the nodes a job may be placed on: up, on an enabled cluster."""
        return frozenset(name for name, state in self.nodes if state == NodeState.UP) & self.enabled


def read_occupancy() -> Occupancy:
    """Read the nodes, their allocatable GPUs and which active job holds each. Four
    queries: nodes, split GPUs, GPUs, active jobs."""
    nodes = list(Node.objects.order_by("cluster__name", "name").values_list("id", "name", "state", "cluster__enabled"))
    names = {pk: name for pk, name, _, _ in nodes}
    holders = _holders()
    # The split GPUs in a query of their own (an index scan; usually none): cheaper than
    # the parent id of every GPU, or an anti-join.
    slices = Gpu.objects.filter(parent__isnull=False).order_by().values_list("id", "parent_id", "parent__index")
    split: set[int] = set()
    slice_parents: dict[int, int] = {}
    for pk, parent_id, parent_index in slices:
        split.add(parent_id)
        slice_parents[pk] = parent_index
    gpus: list[GpuRow] = []
    for pk, node_id, index, model, mig in Gpu.objects.order_by().values_list(
        "id", "node_id", "index", "model", "mig_profile"
    ):
        if pk not in split:
            node = names[node_id]
            gpus.append((pk, node, index, gpu_model_label(model, mig), holders.get(node, {}).get(index)))
    return Occupancy(
        nodes=[(name, state) for _, name, state, _ in nodes],
        enabled=frozenset(name for _, name, _, enabled in nodes if enabled),
        gpus=gpus,
        slice_parents=slice_parents,
    )


def _holders() -> dict[str, dict[int, tuple[int, str]]]:
    """Node name -> GPU index -> (job id, account name) of the active job holding it.
    Jobs come newest first (their ordering), so that of jobs sharing a GPU the earliest
    submitted is written last and kept. One query."""
    holders: dict[str, dict[int, tuple[int, str]]] = {}
    active = Job.objects.filter(state__in=ACTIVE_STATES).values_list("id", "account__name", "allocations")
    for job_id, account, allocations in active:
        holder = (job_id, account)
        for allocation in decode(allocations):
            on_node = holders.setdefault(allocation.node, {})
            for index in allocation.gpu_indices:
                on_node[index] = holder
    return holders
