"""Node inventory: bring a cluster's nodes and GPUs in line with what its backend reports."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Q

from scheduler.backends.base import Backend, BackendError, GpuInfo, NodeInfo
from scheduler.choices import NodeState
from scheduler.models import Cluster, Gpu, Node


def sync_nodes(cluster: Cluster, backend: Backend, now: datetime) -> int:
    """Bring the cluster's nodes and GPUs in line with the backend's inventory.

    Raises ``BackendError(permanent=True)`` if the backend reports a node name that
    another cluster already has (node names are unique across clusters).

    New nodes and GPUs are created in bulk; seen nodes get a heartbeat; a node the
    backend reports down is marked down, and comes back up when the backend reports it
    up again, as does one marked down for a missing heartbeat (an admin's drain is left
    alone). Likewise a node drained in the backend (``scontrol update state=drain``) is
    drained here with the backend's reason, and resumed when the backend resumes it.
    Returns the number of nodes seen.
    """
    infos = backend.list_nodes()
    taken = dict(
        Node.objects.filter(name__in=[i.name for i in infos])
        .exclude(cluster=cluster)
        .values_list("name", "cluster__name")
    )
    if taken:
        name, owner = next(iter(taken.items()))
        raise BackendError(f"node {name} already belongs to cluster {owner}; node names must be unique", permanent=True)
    existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    with transaction.atomic():
        new_nodes = [
            Node(
                cluster=cluster,
                name=info.name,
                cpus=info.cpus,
                memory_mib=info.memory_mib,
                labels=dict(info.labels),
                state=_NODE_STATES.get(info.state, NodeState.UP),
                reason=_backend_drain_reason(info) if info.state == "drain" else info.reason,
                last_heartbeat=now,
            )
            for info in infos
            if info.name not in existing
        ]
        Node.objects.bulk_create(new_nodes)
        if new_nodes:
            existing = {n.name: n for n in Node.objects.filter(cluster=cluster)}
            _create_gpus([(existing[info.name], info) for info in infos if info.name in {n.name for n in new_nodes}])
        Node.objects.filter(cluster=cluster, name__in=[i.name for i in infos]).update(last_heartbeat=now)
        down = [i.name for i in infos if i.state == "down"]
        Node.objects.filter(cluster=cluster, name__in=down).exclude(state=NodeState.DOWN).update(
            state=NodeState.DOWN, reason="reported down by backend", down_since=now
        )
        for info in infos:
            if info.state == "drain":
                Node.objects.filter(cluster=cluster, name=info.name, state=NodeState.UP).update(
                    state=NodeState.DRAIN, reason=_backend_drain_reason(info)
                )
        up = [i.name for i in infos if i.state == "up"]
        Node.objects.filter(cluster=cluster, name__in=up).filter(
            Q(state=NodeState.DOWN, reason="reported down by backend")
            | Q(state=NodeState.DOWN, reason__startswith="no heartbeat")
            | Q(state=NodeState.DRAIN, reason__startswith=_BACKEND_DRAIN)
        ).update(state=NodeState.UP, reason="", down_since=None)
    return len(infos)


_NODE_STATES = {"up": NodeState.UP, "drain": NodeState.DRAIN, "down": NodeState.DOWN}
#: The reason of a node drained because the backend reports it drained (and only then
#: resumed when the backend does).
_BACKEND_DRAIN = "drained in backend"


def _backend_drain_reason(info: NodeInfo) -> str:
    return f"{_BACKEND_DRAIN}: {info.reason}"[:200] if info.reason else _BACKEND_DRAIN


def _create_gpus(pairs: list[tuple[Node, NodeInfo]]) -> None:
    """Create GPUs for new nodes: physical GPUs first, then MIG slices pointing at them."""

    def row(node: Node, info: GpuInfo, parent_id: int | None = None) -> Gpu:
        return Gpu(
            node=node,
            index=info.index,
            uuid=info.uuid,
            model=info.model,
            memory_mib=info.memory_mib,
            compute_capability=info.compute_capability,
            mig_profile=info.mig_profile,
            parent_id=parent_id,
            sharing=info.sharing,
            exclusive=info.exclusive,
        )

    Gpu.objects.bulk_create([row(node, g) for node, info in pairs for g in info.gpus if g.parent_index is None])
    parents = {(g.node_id, g.index): g.id for g in Gpu.objects.filter(node__in=[n for n, _ in pairs])}
    Gpu.objects.bulk_create(
        [
            row(node, g, parents[(node.id, g.parent_index)])
            for node, info in pairs
            for g in info.gpus
            if g.parent_index is not None
        ]
    )
