"""A synthetic site in memory, for timing the pure core without a database.

:func:`build_snapshot` makes what ``scheduler.tick.snapshot.load_snapshot()`` plus the policy
inputs would give at a large site: mixed GPU models, some nodes whose A100s are split
into MIG slices (one :class:`GpuView` per slice, model ``"<model>/<profile>"`` as
``scheduler.jobs.request.gpu_model_label`` names it), a 3-level account tree with users,
decayed usage, quota limits on some accounts and users (and, with
``SiteShape.qos_limits``, limits on every QOS), running jobs that really hold
GPUs (valid, non-overlapping allocations) and a queue of pending jobs. Everything comes
from one seeded generator, so the same arguments give the same snapshot.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from scheduler.core.fairshare import AccountNode, FairShareTree
from scheduler.core.priority import PriorityWeights
from scheduler.core.types import (
    CPU_MILLIS,
    Allocation,
    GpuView,
    Limits,
    NodeView,
    PendingJob,
    PlacementStrategy,
    Policy,
    QosLimits,
    RunningJob,
    Snapshot,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = 3600
WALLTIMES = (1 * HOUR, 4 * HOUR, 12 * HOUR, 24 * HOUR, 72 * HOUR)

#: (model, memory MiB, compute capability, share of nodes). The rest of the nodes are MIG.
WHOLE_GPU_MODELS = (
    ("H100-80GB", 81920, (9, 0), 0.35),
    ("A100-80GB", 81920, (8, 0), 0.35),
    ("L40S", 46068, (8, 9), 0.20),
)
MIG_MODEL = "A100-80GB/3g.40gb"  # two 3g.40gb slices per A100: 16 slices per node
MIG_MEMORY_MIB = 40960


@dataclass(frozen=True, slots=True)
class SiteShape:
    """How big the synthetic site is."""

    nodes: int = 1000
    running: int = 5000
    pending: int = 10_000
    accounts: int = 50
    seed: int = 1
    #: Whether every QOS caps its users and itself (:data:`QOS_LIMITS`).
    qos_limits: bool = False


#: QOS limits that bind at this site: a debug-like ``high`` lane, per-user caps on
#: ``normal``, a group cap on ``low`` (with ``SiteShape.qos_limits``).
QOS_LIMITS = {
    "high": QosLimits(max_gpus_per_user=8, max_running_jobs_per_user=4, max_gpus=512),
    "normal": QosLimits(max_gpus_per_user=64, max_cpu_millis_per_user=512 * CPU_MILLIS, max_running_jobs_per_user=40),
    "low": QosLimits(max_gpus=2000),
}


def site_policy() -> Policy:
    """The full policy: multifactor priority with Fair Tree, EASY backfill, pack placement."""
    return Policy(
        backfill=True,
        reservations=1,
        placement=PlacementStrategy.PACK,
        priority=PriorityWeights(),
        max_starts=1000,
    )


def _nodes(count: int, rng: random.Random) -> tuple[NodeView, ...]:
    nodes = []
    for i in range(count):
        roll = rng.random()
        cumulative = 0.0
        gpus: tuple[GpuView, ...] = ()
        for model, memory, cc, share in WHOLE_GPU_MODELS:
            cumulative += share
            if roll < cumulative:
                gpus = tuple(GpuView(g, model, memory, cc) for g in range(8))
                break
        else:
            gpus = tuple(GpuView(g, MIG_MODEL, MIG_MEMORY_MIB, (8, 0), mig_slice=True) for g in range(16))
        if rng.random() < 0.01:  # a few broken GPUs, as on any real site
            broken = rng.randrange(len(gpus))
            gpus = tuple(replace(g, healthy=g.index != broken) for g in gpus)
        nodes.append(
            NodeView(
                name=f"gpu{i:05d}",
                cluster="main" if i < count * 0.8 else "east",
                cpu_millis=128 * CPU_MILLIS,
                memory_mib=1024 * 1024,
                gpus=gpus,
                schedulable=rng.random() > 0.01,
            )
        )
    return tuple(nodes)


def _accounts(count: int) -> tuple[list[AccountNode], list[tuple[str, str]]]:
    """A 3-level tree: 5 divisions, groups under them, ``count`` leaf accounts; 4 users each."""
    divisions = [AccountNode(f"div{d}", None, shares=d + 1) for d in range(5)]
    groups = [AccountNode(f"grp{g}", f"div{g % 5}", shares=1 + g % 3) for g in range(15)]
    leaves = [AccountNode(f"acct{a:02d}", f"grp{a % 15}", shares=1 + a % 4) for a in range(count)]
    users = [(leaf.name, f"u{a:02d}{k}") for a, leaf in enumerate(leaves) for k in range(4)]
    return divisions + groups + leaves, users


#: GPUs per job and their weights: the queue holds bigger jobs than what runs (big jobs
#: wait longer), and running jobs must fit the site's ~8,800 GPUs.
PENDING_SIZES = ((1, 2, 4, 8, 16), (50, 20, 15, 10, 5))
RUNNING_SIZES = ((1, 2, 4, 8, 16), (70, 20, 6, 3, 1))


def _request(rng: random.Random, sizes: tuple[tuple[int, ...], tuple[int, ...]]) -> tuple[int, int, str]:
    """``(nodes, gpus per node, gpu model)``: mostly small jobs, some whole nodes and gangs."""
    roll = rng.random()
    model = ""
    if roll < 0.05:
        return 1, rng.choice((1, 2)), MIG_MODEL
    if roll < 0.25:
        model = rng.choice(("H100-80GB", "A100-80GB"))
    size = rng.choices(*sizes)[0]
    if size == 16:
        return 2, 8, model
    return 1, size, model


def build_snapshot(shape: SiteShape = SiteShape()) -> Snapshot:
    """The site at :data:`NOW`. Running jobs are placed first-fit onto free GPUs of
    matching nodes, so their allocations are valid and never overlap."""
    rng = random.Random(shape.seed)
    nodes = _nodes(shape.nodes, rng)
    accounts, users = _accounts(shape.accounts)
    tree = FairShareTree.build(accounts, users)
    usage = {key: rng.expovariate(1 / 50_000.0) for key in users}

    free = {n.name: [g.index for g in n.gpus] for n in nodes}
    by_model: dict[str, list[NodeView]] = {}
    for n in nodes:
        by_model.setdefault(n.gpus[0].model, []).append(n)
        if n.gpus[0].model != MIG_MODEL:
            by_model.setdefault("", []).append(n)
    running: list[RunningJob] = []
    job_id, attempts = 1, 0
    while len(running) < shape.running:
        count, per_node, model = _request(rng, RUNNING_SIZES)
        pool = by_model[model]
        chosen = [n for n in rng.sample(pool, min(len(pool), 12)) if len(free[n.name]) >= per_node][:count]
        if len(chosen) < count:
            chosen = [n for n in pool if len(free[n.name]) >= per_node][:count]
        if len(chosen) < count:  # that request no longer fits: draw another
            attempts += 1
            if attempts > 10 * shape.running:
                raise ValueError(f"{shape.running} running jobs do not fit {shape.nodes} nodes")
            continue
        account, user = rng.choice(users)
        walltime = rng.choice(WALLTIMES)
        allocations = []
        for n in chosen:
            taken, free[n.name] = free[n.name][:per_node], free[n.name][per_node:]
            allocations.append(Allocation(n.name, tuple(taken), 8 * per_node * CPU_MILLIS, 65536 * per_node))
        running.append(
            RunningJob(
                id=job_id,
                allocations=tuple(allocations),
                started_at=NOW - timedelta(seconds=rng.randrange(walltime)),
                walltime_seconds=walltime,
                account=account,
                user=user,
                qos=rng.choice(("normal", "normal", "low")),
            )
        )
        job_id += 1

    pending: list[PendingJob] = []
    for _ in range(shape.pending):
        count, per_node, model = _request(rng, PENDING_SIZES)
        account, user = rng.choice(users)
        pending.append(
            PendingJob(
                id=job_id,
                submitted_at=NOW - timedelta(seconds=rng.randrange(3 * 24 * HOUR)),
                nodes=count,
                gpus_per_node=per_node,
                cpu_millis_per_node=8 * per_node * CPU_MILLIS,
                memory_mib_per_node=65536 * per_node,
                gpu_model=model,
                walltime_seconds=rng.choice(WALLTIMES),
                account=account,
                user=user,
                qos=rng.choice(("normal", "normal", "normal", "high")),
                nice=0,
            )
        )
        job_id += 1

    limited_accounts = {a.name: Limits(max_gpus=1024, max_running_jobs=800) for a in accounts[5:20:3]}
    limited_accounts["acct07"] = Limits(max_gpus_per_model={"H100-80GB": 32})
    limited_users = {user: Limits(max_gpus=96) for _, user in users[::17]}
    return Snapshot(
        nodes=nodes,
        running=tuple(running),
        pending=tuple(pending),
        account_limits=limited_accounts,
        user_limits=limited_users,
        account_parents={a.name: a.parent for a in accounts},
        fairshare_tree=tree,
        usage=usage,
        qos_priorities={"low": 0, "normal": 10, "high": 100},
        qos_limits=QOS_LIMITS if shape.qos_limits else {},
    )
