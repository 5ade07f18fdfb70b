"""A synthetic site for the benchmarks: a mixed GPU cluster, one lab, a realistic job mix.

Rows are bulk-created directly (no backend sync): that is what a benchmark of the tick
or of submission needs, and it builds 1,000 nodes in about a second. Everything is drawn
from a seeded ``random.Random`` so two runs measure the same workload.

Call these only inside :func:`benchmarks._common.throwaway_database` (they import models).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

BATCH = 2000


@dataclass(frozen=True, slots=True)
class NodeType:
    prefix: str
    share: float  # fraction of the nodes
    model: str
    gpu_memory_mib: int  # what nvidia-smi reports
    compute_capability: str
    cpus: int
    memory_mib: int


NODE_TYPES = (
    NodeType("h100", 0.5, "H100-80GB", 81_559, "9.0", 224, 2_097_152),
    NodeType("a100", 0.3, "A100-40GB", 40_960, "8.0", 128, 1_048_576),
    NodeType("l4", 0.2, "L4", 23_034, "8.9", 64, 524_288),
)
GPUS_PER_NODE = 8
#: Per-job request shapes (nodes, gpus_per_node) and their weights.
SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8))
SHAPE_WEIGHTS = (35, 20, 15, 15, 10, 5)
WALLTIMES = (3600, 4 * 3600, 12 * 3600, 24 * 3600, 48 * 3600)


@dataclass(frozen=True, slots=True)
class Site:
    cluster_id: int
    nodes: int
    gpus: int
    user: Any
    account: Any


def build_site(nodes: int, *, seed: int = 1, drained_fraction: float = 0.01) -> Site:
    """One ``local`` cluster of ``nodes`` 8-GPU nodes, a lab account and a member.

    The cluster's config lists no nodes: nothing here syncs it, and the benchmarks never
    dispatch to it. About 1% of nodes are drained, as on any real site.
    """
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from people.models import Account, Membership, Qos
    from scheduler.models import Cluster, Gpu, Node

    rng = random.Random(seed)
    cluster = Cluster.objects.create(name="bench", kind="local", config={"nodes": []})
    now = timezone.now()
    rows: list[Node] = []
    types: dict[str, NodeType] = {}
    counts = [round(t.share * nodes) for t in NODE_TYPES]
    counts[0] += nodes - sum(counts)
    for node_type, count in zip(NODE_TYPES, counts, strict=True):
        for i in range(1, count + 1):
            name = f"{node_type.prefix}-{i:04d}"
            drained = rng.random() < drained_fraction
            rows.append(
                Node(
                    cluster=cluster,
                    name=name,
                    cpus=node_type.cpus,
                    memory_mib=node_type.memory_mib,
                    state="drain" if drained else "up",
                    reason="maintenance" if drained else "",
                    labels={"rack": f"r{i // 32:02d}"},
                    last_heartbeat=now,
                )
            )
            types[name] = node_type
    Node.objects.bulk_create(rows, batch_size=BATCH)
    ids = dict(Node.objects.filter(cluster=cluster).values_list("name", "id"))
    gpus = [
        Gpu(
            node_id=ids[name],
            index=index,
            uuid=f"GPU-{ids[name]:06d}-{index}",
            model=t.model,
            memory_mib=t.gpu_memory_mib,
            compute_capability=t.compute_capability,
        )
        for name, t in types.items()
        for index in range(GPUS_PER_NODE)
    ]
    Gpu.objects.bulk_create(gpus, batch_size=BATCH)

    Qos.objects.create(name="normal", max_walltime_seconds=max(WALLTIMES))
    account = Account.objects.create(name="bench-lab", shares=1)
    user = get_user_model().objects.create_user("bench", "bench@example.org", "bench-password")
    Membership.objects.create(user=user, account=account)
    return Site(cluster_id=cluster.id, nodes=len(rows), gpus=len(gpus), user=user, account=account)


def job_request(rng: random.Random, i: int, *, feasible_only: bool = False) -> dict[str, Any]:
    """One job request, as the API takes it (``POST /api/v1/jobs/`` body fields).

    The mix: mostly 1-8 GPUs on one node, 15% gangs of 2x8 or 4x8; a quarter ask for a
    model, some for a memory or compute-capability floor; unless ``feasible_only``, 1%
    ask for more GPU memory than any GPU has (they wait with ``ReqNodeNotAvail``).
    """
    nodes, gpus = rng.choices(SHAPES, SHAPE_WEIGHTS)[0]
    request: dict[str, Any] = {
        "name": f"bench-{i}",
        "command": f"python train.py --seed {i}",
        "nodes": nodes,
        "gpus_per_node": gpus,
        # <= 8 CPUs and 64 GiB per GPU: fits every node type, even the L4 nodes.
        "cpus_per_node": gpus * rng.choice((2, 4, 8)),
        "memory_mib_per_node": gpus * rng.choice((16, 32, 64)) * 1024,
        "walltime_seconds": rng.choice(WALLTIMES),
    }
    roll = rng.random()
    if roll < 0.25:
        request["gpu_model"] = rng.choices([t.model for t in NODE_TYPES], [t.share for t in NODE_TYPES])[0]
    elif roll < 0.35:
        request["min_gpu_memory_mib"] = 40_000
    elif roll < 0.45:
        request["min_compute_capability"] = rng.choice(("8.9", "9.0"))
    elif roll < 0.46 and not feasible_only:
        request["min_gpu_memory_mib"] = 200_000
    return request


def bulk_pending_jobs(site: Site, count: int, *, seed: int = 2) -> None:
    """``count`` PENDING jobs of the mix above, submitted one second apart until now."""
    from django.utils import timezone

    from scheduler.models import Job

    rng = random.Random(seed)
    first: datetime = timezone.now() - timedelta(seconds=count)
    Job.objects.bulk_create(
        (
            Job(owner=site.user, account=site.account, submitted_at=first + timedelta(seconds=i), **job_request(rng, i))
            for i in range(count)
        ),
        batch_size=BATCH,
    )
