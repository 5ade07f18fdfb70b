"""Load the scheduler's view of the world from the database in a fixed number of queries.

A fixed number of queries whatever the cluster size (nodes, GPUs, active jobs, pending
jobs, the states of jobs they depend on, quotas, the account tree, QOS walltime
limits), each
fetching plain values rather than model instances, so a tick over 1,000 nodes and
10,000 pending jobs spends its time deciding, not loading.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from portal.models import Account, Membership, Qos, Quota
from scheduler.choices import ACTIVE_STATES, JobState, NodeState
from scheduler.core.fairshare import AccountNode, FairShareTree, UserAssociation
from scheduler.core.types import (
    Allocation,
    GpuView,
    Limits,
    NodeView,
    PendingJob,
    Policy,
    RunningJob,
    Snapshot,
    parse_compute_capability,
)
from scheduler.models import Cluster, Gpu, Job, Node

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """The core snapshot plus what the apply step needs to write only changes."""

    snapshot: Snapshot
    pending_reasons: dict[int, str]
    #: What is stored now, so that the tick writes only what changed.
    pending_blockers: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    borrowed: frozenset[int] = frozenset()


def gpu_model_label(model: str, mig_profile: str) -> str:
    """The model name a job asks for: MIG slices are ``<model>/<profile>``."""
    return f"{model}/{mig_profile}" if mig_profile else model


def _cc(text: str) -> tuple[int, int]:
    try:
        return parse_compute_capability(text)
    except ValueError:
        return (0, 0)


def load_nodes() -> tuple[NodeView, ...]:
    """Nodes of enabled clusters with their allocatable GPUs.

    A GPU split into MIG slices is not allocatable itself; its slices are. A GPU whose
    monitored health says so (``monitoring.services.unhealthy_gpu_ids``: too hot,
    throttling, a recent XID) is marked unhealthy, and so are the slices of such a GPU.
    """
    from monitoring.services import unhealthy_gpu_ids  # monitoring imports the scheduler

    unhealthy = unhealthy_gpu_ids()
    gpu_rows = list(
        Gpu.objects.filter(node__cluster__enabled=True).values(
            "id", "node_id", "index", "model", "memory_mib", "compute_capability", "mig_profile", "parent_id", "shared"
        )
    )
    split_parents = {row["parent_id"] for row in gpu_rows if row["parent_id"] is not None}
    gpus_by_node: dict[int, list[GpuView]] = defaultdict(list)
    for row in gpu_rows:
        if row["id"] in split_parents:
            continue
        gpus_by_node[row["node_id"]].append(
            GpuView(
                index=row["index"],
                model=gpu_model_label(row["model"], row["mig_profile"]),
                memory_mib=row["memory_mib"],
                compute_capability=_cc(row["compute_capability"]),
                shared=row["shared"],
                healthy=row["id"] not in unhealthy and row["parent_id"] not in unhealthy,
            )
        )
    nodes = Node.objects.filter(cluster__enabled=True).values(
        "id", "name", "cluster__name", "cluster__reachable", "state", "cpus", "memory_mib", "labels"
    )
    return tuple(
        NodeView(
            name=row["name"],
            cluster=row["cluster__name"],
            cpus=row["cpus"],
            memory_mib=row["memory_mib"],
            gpus=tuple(sorted(gpus_by_node[row["id"]], key=lambda g: g.index)),
            schedulable=row["state"] == NodeState.UP and row["cluster__reachable"],
            labels=row["labels"] or {},
        )
        for row in nodes
    )


def held_gpus() -> set[tuple[str, int]]:
    """(node name, GPU index) of every GPU a dispatched or running job holds, whole or a
    share of it: what the pages, ``/metrics`` and the simulated collector call busy. One
    query."""
    held: set[tuple[str, int]] = set()
    for allocations in Job.objects.filter(state__in=ACTIVE_STATES).values_list("allocations", flat=True):
        for a in allocations_from_json(allocations or []):
            held.update((a.node, i) for i in a.gpu_indices)
    return held


def allocations_from_json(data: list[dict[str, Any]]) -> tuple[Allocation, ...]:
    return tuple(
        Allocation(
            node=str(item["node"]),
            gpu_indices=tuple(int(i) for i in item.get("gpu_indices", []) or []),
            cpus=int(item.get("cpus", 0) or 0),
            memory_mib=int(item.get("memory_mib", 0) or 0),
            gpu_share=float(item.get("gpu_share", 0.0) or 0.0),
            gpu_memory_mib=int(item.get("gpu_memory_mib", 0) or 0),
        )
        for item in data
    )


def allocations_to_json(allocations: tuple[Allocation, ...]) -> list[dict[str, object]]:
    """Allocations as stored on the job; share fields only on a fractional job's."""
    return [
        {"node": a.node, "gpu_indices": list(a.gpu_indices), "cpus": a.cpus, "memory_mib": a.memory_mib}
        | ({"gpu_share": a.gpu_share, "gpu_memory_mib": a.gpu_memory_mib} if a.gpu_share else {})
        for a in allocations
    ]


#: What a pending job's core view is built from.
_PENDING_FIELDS = (
    "id",
    "submitted_at",
    "nodes",
    "gpus_per_node",
    "cpus_per_node",
    "memory_mib_per_node",
    "gpu_model",
    "min_gpu_memory_mib",
    "min_compute_capability",
    "walltime_seconds",
    "account__name",
    "owner__username",
    "qos__name",
    "nice",
    "dependencies",
    "gpu_share",
    "gpu_memory_mib_share",
    "node_labels",
)


def load_snapshot() -> LoadedSnapshot:
    """Read nodes, active and pending jobs in bulk and convert them to core types."""
    nodes = load_nodes()
    active = list(
        Job.objects.filter(state__in=ACTIVE_STATES).values(
            "id",
            "allocations",
            "started_at",
            "dispatched_at",
            "walltime_seconds",
            "account__name",
            "owner__username",
            "qos__name",
            "borrowed",
        )
    )
    running = tuple(
        RunningJob(
            id=row["id"],
            allocations=allocations_from_json(row["allocations"] or []),
            started_at=row["started_at"] or row["dispatched_at"],
            walltime_seconds=row["walltime_seconds"],
            account=row["account__name"],
            user=row["owner__username"],
            qos=row["qos__name"] or "",
        )
        for row in active
    )
    pending: list[PendingJob] = []
    reasons: dict[int, str] = {}
    blockers: dict[int, list[dict[str, Any]]] = {}
    for row in Job.objects.filter(state=JobState.PENDING).values(
        *_PENDING_FIELDS, "pending_reason", "pending_blockers"
    ):
        pending.append(_pending_from_values(row))
        reasons[row["id"]] = row["pending_reason"]
        blockers[row["id"]] = row["pending_blockers"]
    dependency_states = load_dependency_states(pending)
    account_limits, user_limits = load_limits()
    parents = dict(Account.objects.values_list("name", "parent__name"))
    snapshot = Snapshot(
        nodes=nodes,
        running=running,
        pending=tuple(pending),
        account_limits=account_limits,
        user_limits=user_limits,
        account_parents=parents,
        dependency_states=dependency_states,
        unreachable_clusters=dict(
            Cluster.objects.filter(enabled=True, reachable=False).values_list("name", "last_error")
        ),
        qos_max_walltime={
            name: limit
            for name, limit in Qos.objects.filter(max_walltime_seconds__isnull=False).values_list(
                "name", "max_walltime_seconds"
            )
            if limit is not None
        },
    )
    return LoadedSnapshot(snapshot, reasons, blockers, frozenset(row["id"] for row in active if row["borrowed"]))


def _pending_from_values(row: dict[str, Any]) -> PendingJob:
    cc = row["min_compute_capability"]
    return PendingJob(
        id=row["id"],
        submitted_at=row["submitted_at"],
        nodes=row["nodes"],
        gpus_per_node=row["gpus_per_node"],
        cpus_per_node=row["cpus_per_node"],
        memory_mib_per_node=row["memory_mib_per_node"],
        gpu_model=row["gpu_model"],
        min_gpu_memory_mib=row["min_gpu_memory_mib"],
        min_compute_capability=_cc(cc) if cc else None,
        walltime_seconds=row["walltime_seconds"],
        account=row["account__name"],
        user=row["owner__username"],
        qos=row["qos__name"] or "",
        nice=row["nice"],
        dependencies=tuple((str(d["type"]), int(d["job"])) for d in row["dependencies"] or []),
        gpu_share=row["gpu_share"],
        gpu_memory_mib_share=row["gpu_memory_mib_share"],
        node_labels=tuple(sorted((str(k), str(v)) for k, v in (row["node_labels"] or {}).items())),
    )


def load_dependency_states(jobs: Iterable[PendingJob]) -> dict[int, str]:
    """Job id -> state of every job that one of ``jobs`` depends on (no query if none does)."""
    depends_on = {job_id for job in jobs for _, job_id in job.dependencies}
    return dict(Job.objects.filter(pk__in=depends_on).values_list("id", "state")) if depends_on else {}


def pending_job(job: Job) -> PendingJob:
    """One job as the core sees a pending job: for reports on a single job, and for a
    job not yet submitted (an unsaved ``Job``; see ``scheduler.estimates.what_if``)."""
    return _pending_from_values(
        {
            **{f: getattr(job, f) for f in _PENDING_FIELDS if "__" not in f},
            "account__name": job.account.name,
            "owner__username": job.owner.get_username(),
            "qos__name": job.qos.name if job.qos else "",
        }
    )


def load_fairshare_tree() -> FairShareTree | None:
    """The account tree with every member as a user leaf (shares 1), or ``None`` if the
    stored tree is not valid (a cycle made in the admin, say): the tick then orders by
    the other factors rather than failing."""
    accounts = [
        AccountNode(name, parent, shares)
        for name, parent, shares in Account.objects.values_list("name", "parent__name", "shares")
    ]
    users = [UserAssociation(a, u) for a, u in Membership.objects.values_list("account__name", "user__username")]
    try:
        return FairShareTree.build(accounts, users)
    except ValueError as exc:
        log.error("fair-share tree is invalid, ignoring fair-share this tick: %s", exc)
        return None


def with_policy_inputs(
    snapshot: Snapshot, policy: Policy, usage: Callable[[], Mapping[tuple[str, str], float]]
) -> Snapshot:
    """Add what the policy needs beyond the base snapshot, and only that.

    Priority needs the fair-share tree, usage (``usage()`` is called only then: the tick
    charges it, reports only read it) and QOS priorities; preemption needs which QOS
    may preempt which, and QOS priorities to rank victims.
    """
    extra: dict[str, Any] = {}
    if policy.priority is not None or policy.preemption:
        extra["qos_priorities"] = load_qos_priorities()
    if policy.priority is not None:
        extra.update(usage=usage(), fairshare_tree=load_fairshare_tree())
    if policy.preemption:
        extra["qos_preempts"] = load_qos_preemption()
    return replace(snapshot, **extra) if extra else snapshot


def load_qos_preemption() -> dict[str, frozenset[str]]:
    """QOS name -> the QOS whose jobs it may preempt."""
    preempts: dict[str, set[str]] = defaultdict(set)
    for qos, victim in Qos.may_preempt.through.objects.values_list("from_qos__name", "to_qos__name"):
        preempts[qos].add(victim)
    return {qos: frozenset(victims) for qos, victims in preempts.items()}


def load_qos_priorities() -> dict[str, int]:
    return dict(Qos.objects.values_list("name", "priority"))


def load_limits() -> tuple[dict[str, Limits], dict[str, Limits]]:
    """Concurrent-use limits from quotas, keyed by account name and by username."""
    accounts: dict[str, Limits] = {}
    users: dict[str, Limits] = {}
    for row in Quota.objects.values(
        "account__name",
        "user__username",
        "max_gpus",
        "max_gpus_per_model",
        "max_running_jobs",
        "max_walltime_seconds",
        "guaranteed_gpus",
        "borrowing_limit_gpus",
    ):
        limits = Limits(
            max_gpus=row["max_gpus"],
            max_gpus_per_model={str(k): int(v) for k, v in (row["max_gpus_per_model"] or {}).items()},
            max_running_jobs=row["max_running_jobs"],
            max_walltime_seconds=row["max_walltime_seconds"],
            guaranteed_gpus=row["guaranteed_gpus"],
            borrowing_limit_gpus=row["borrowing_limit_gpus"],
        )
        if row["account__name"]:
            accounts[row["account__name"]] = limits
        elif row["user__username"]:
            users[row["user__username"]] = limits
    return accounts, users
