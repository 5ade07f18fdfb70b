"""Load the scheduler's view of the world from the database in a fixed number of queries.

A fixed number of queries whatever the cluster size (nodes, GPUs, active jobs, pending
jobs, the states of jobs they depend on, quotas, the account tree, QOS walltime
ceilings and limits), each
fetching plain values rather than model instances, so a tick over 1,000 nodes and
10,000 pending jobs spends its time deciding, not loading.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from monitoring.gpu_health import unhealthy_gpu_ids
from people.limits import CORE_LIMITS, QOS_LIMITS, quota_limit
from people.models import Account, Membership, Qos, Quota
from scheduler import stored_json
from scheduler.backends import FRACTIONAL_CPU_KINDS
from scheduler.choices import ACTIVE_STATES, TERMINAL_STATES, JobState, NodeState
from scheduler.core.fairshare import AccountNode, FairShareTree, UserAssociation
from scheduler.core.types import (
    CPU_MILLIS,
    GpuView,
    Limits,
    NodeView,
    PendingJob,
    Policy,
    QosLimits,
    RunningJob,
    Snapshot,
    Window,
)
from scheduler.jobs import allocations
from scheduler.jobs.request import PENDING_JSON, PENDING_VALUES, compute_capability, gpu_model_label, pending_from_row
from scheduler.models import Cluster, Gpu, Job, Node, Reservation
from scheduler.tick.history import load_attained_service, load_runtime_ratios
from scheduler.tick.kept import KeptRows, table_digest, versioned
from scheduler.tick.small_tables import UNVERSIONED, TableDigests

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """The core snapshot plus what the apply step needs to write only changes."""

    snapshot: Snapshot
    pending_reasons: dict[int, str]
    #: The blockers stored now (parsed JSON), so that the tick writes only what changed.
    pending_blockers: dict[int, Any] = field(default_factory=dict)
    borrowed: frozenset[int] = frozenset()
    #: The small tables' digests this snapshot was read at, for the policy inputs.
    tables: TableDigests = UNVERSIONED


def load_nodes() -> tuple[NodeView, ...]:
    """Nodes of enabled clusters with their allocatable GPUs, as the tick places on them now.

    A GPU split into MIG slices is not allocatable itself; its slices are. A GPU whose
    monitored health says so (``monitoring.gpu_health``: too hot, throttling, a recent
    XID) is marked unhealthy, and so are the slices of such a GPU.
    """
    return _node_views(unhealthy_gpu_ids(), UNVERSIONED)


def load_hardware() -> tuple[NodeView, ...]:
    """The same nodes with every GPU healthy: what the hardware could ever offer (health
    passes; a submit-time check asks this, never :func:`load_nodes`)."""
    return _node_views(frozenset(), UNVERSIONED)


#: What a node's view is made of, besides its GPUs (``values_list`` names).
NODE_COLUMNS = (
    "id",
    "name",
    "cluster__name",
    "cluster__kind",
    "cluster__reachable",
    "state",
    "cpus",
    "memory_mib",
    "labels",
)

#: Node views as last built, per set of unhealthy GPUs: the key they were built from
#: (the GPUs' row versions, the node rows) and the views.
_kept_nodes: dict[frozenset[int], tuple[tuple[object, ...], tuple[NodeView, ...]]] = {}


def _node_views(unhealthy: AbstractSet[int], tables: TableDigests) -> tuple[NodeView, ...]:
    """The node views, the same tuple object as last time while nothing they are made of
    changed (see ``scheduler.tick.kept``): the node rows (1,000 short rows, compared
    whole, since heartbeats rewrite them all the time) and the GPUs' row versions (a
    digest, on PostgreSQL: the tick's ``tables`` reading, else one of its own);
    elsewhere built afresh."""
    node_rows = list(Node.objects.filter(cluster__enabled=True).order_by("id").values_list(*NODE_COLUMNS))
    unhealthy = frozenset(unhealthy)
    key: tuple[object, ...] | None = None
    if versioned():
        key = (tables.digest(Gpu) or table_digest(Gpu), node_rows)
    kept = _kept_nodes.get(unhealthy)
    if key is not None and kept is not None and kept[0] == key:
        return kept[1]
    nodes = _build_node_views(node_rows, unhealthy)
    if key is not None:
        if len(_kept_nodes) >= 4:
            _kept_nodes.clear()
        _kept_nodes[unhealthy] = (key, nodes)
    return nodes


def _build_node_views(node_rows: list[tuple[Any, ...]], unhealthy: AbstractSet[int]) -> tuple[NodeView, ...]:
    gpu_rows = list(
        Gpu.objects.filter(node__cluster__enabled=True).values_list(
            "id",
            "node_id",
            "index",
            "model",
            "memory_mib",
            "compute_capability",
            "mig_profile",
            "parent_id",
            "sharing",
            "exclusive",
        )
    )
    split_parents = {row[7] for row in gpu_rows if row[7] is not None}
    gpus_by_node: dict[int, list[GpuView]] = defaultdict(list)
    # Tuples, not dicts: 8,000 GPUs a tick. A model's label and a capability's parse are
    # the same for thousands of GPUs: made once each.
    labels: dict[tuple[str, str], str] = {}
    capabilities: dict[str, tuple[int, int]] = {}
    for gpu_id, node_id, index, model, memory, cc, profile, parent, sharing, exclusive in gpu_rows:
        if gpu_id in split_parents:
            continue
        label = labels.get((model, profile))
        if label is None:
            label = labels[(model, profile)] = gpu_model_label(model, profile)
        capability = capabilities.get(cc)
        if capability is None:
            capability = capabilities[cc] = compute_capability(cc)
        healthy = gpu_id not in unhealthy and parent not in unhealthy
        view = GpuView(index, label, memory, capability, healthy, sharing, exclusive, mig_slice=bool(profile))
        gpus_by_node[node_id].append(view)
    return tuple(
        NodeView(
            name=name,
            cluster=cluster,
            cpu_millis=cpus * CPU_MILLIS,
            memory_mib=memory_mib,
            gpus=tuple(sorted(gpus_by_node[node_id], key=lambda g: g.index)),
            schedulable=state == NodeState.UP and reachable,
            labels=node_labels or {},
            fractional_cpus=kind in FRACTIONAL_CPU_KINDS,
        )
        for node_id, name, cluster, kind, reachable, state, cpus, memory_mib, node_labels in node_rows
    )


def load_windows(now: datetime) -> tuple[Window, ...]:
    """Every reservation that has not ended, as the core's windows (three queries)."""
    rows = list(
        Reservation.objects.filter(end_at__gt=now).prefetch_related("nodes", "accounts", "users").order_by("start_at")
    )
    return tuple(
        as_window(r.name, r.kind, r.start_at, r.end_at, r.nodes.all(), r.accounts.all(), r.users.all()) for r in rows
    )


def as_window(
    name: str,
    kind: str,
    start_at: datetime,
    end_at: datetime,
    nodes: Iterable[Node],
    accounts: Iterable[Account],
    users: Iterable[Any],
) -> Window:
    """A reservation, saved or only typed (a form's validated fields), as the core's window."""
    return Window(
        name=name,
        nodes=frozenset(n.name for n in nodes),
        start_at=start_at,
        end_at=end_at,
        maintenance=kind == Reservation.Kind.MAINTENANCE,
        accounts=frozenset(a.name for a in accounts),
        users=frozenset(u.get_username() for u in users),
    )


#: The joined names a job's view holds: part of its kept key (``scheduler.tick.kept``).
JOB_NAMES = ("account__name", "owner__username", "qos__name")

#: What a running job's view is read from.
ACTIVE_VALUES = (
    "id",
    "allocations",
    "started_at",
    "dispatched_at",
    "walltime_seconds",
    *JOB_NAMES,
    "borrowed",
    "array_job_id",
    "gpu_model",
)


def _running_from_row(row: Sequence[Any]) -> tuple[RunningJob, bool]:
    job_id, held, started_at, dispatched_at, walltime, account, user, qos, borrowed, array_job, gpu_model = row
    job = RunningJob(
        id=job_id,
        allocations=allocations.decode(held),
        started_at=started_at or dispatched_at,
        walltime_seconds=walltime,
        account=account,
        user=user,
        qos=qos or "",
        array_job=array_job or 0,
        gpu_model=gpu_model,
    )
    return job, borrowed


#: Where the JSON columns are among :data:`PENDING_VALUES`, with their empty value.
_JSON_AT = [(PENDING_VALUES.index(name), default) for name, default in PENDING_JSON.items()]


def _pending_from_row(row: Sequence[Any]) -> tuple[PendingJob, str, Any]:
    """A waiting job's view, its stored reason and blockers, from a row of
    :data:`PENDING_COLUMNS`."""
    values = list(row)
    for i, default in _JSON_AT:
        values[i] = stored_json.parsed(values[i], default)
    return pending_from_row(values), values[-2], stored_json.parsed(values[-1], [])


#: :data:`PENDING_VALUES` with JSON columns as text (``scheduler.stored_json``: almost
#: all are empty or what the last tick wrote, and parsing 30,000 of them was a third of
#: the load), then the stored reason and blockers.
PENDING_COLUMNS = (
    *(f"{name}__text" if name in PENDING_JSON else name for name in PENDING_VALUES),
    "pending_reason",
    "pending_blockers__text",
)

#: The views of running and waiting jobs, kept between ticks (``scheduler.tick.kept``).
_active_rows = KeptRows(ACTIVE_VALUES, JOB_NAMES, _running_from_row)
_pending_rows = KeptRows(PENDING_COLUMNS, JOB_NAMES, _pending_from_row)


def waiting_versions(ids: Sequence[int]) -> list[str] | None:
    """The row versions the last :func:`load_snapshot` read these waiting jobs at, or
    ``None`` if one is not known (not PostgreSQL, or not read)."""
    if not versioned():
        return None
    versions = [_pending_rows.version(job_id) for job_id in ids]
    return None if None in versions else [v for v in versions if v is not None]


def waiting_written(rows: Iterable[Sequence[Any]]) -> None:
    """Note the reasons and blockers the tick wrote (``common.db.bulk.update_versioned_rows``
    rows: id, version, reason, blockers as text), so the next load keeps those jobs."""
    _pending_rows.written(rows, lambda view, values: (view[0], values[0], stored_json.parsed(values[1], [])))


def load_snapshot() -> LoadedSnapshot:
    """Read nodes, active and pending jobs in bulk and convert them to core types; what
    comes from the small tables (quotas, the account tree, clusters, QOS) is read again
    only when they changed (``scheduler.tick.small_tables``)."""
    tables = TableDigests.read()
    nodes = _node_views(unhealthy_gpu_ids(), tables)
    active = _active_rows.read(Job.objects.filter(state__in=ACTIVE_STATES))
    running = tuple(job for job, _ in active)
    texts = {f"{name}__text": stored_json.as_text(name) for name in (*PENDING_JSON, "pending_blockers")}
    waiting = _pending_rows.read(Job.objects.filter(state=JobState.PENDING), **texts)
    pending = [job for job, _, _ in waiting]
    reasons = {job.id: reason for job, reason, _ in waiting}
    blockers = {job.id: stored for job, _, stored in waiting}
    dependency_states = load_dependency_states(pending)
    account_limits, user_limits = tables.kept(load_limits, Quota, Account, get_user_model())
    snapshot = Snapshot(
        nodes=nodes,
        running=running,
        pending=tuple(pending),
        account_limits=account_limits,
        user_limits=user_limits,
        account_parents=tables.kept(load_account_parents, Account),
        dependency_states=dependency_states,
        unreachable_clusters=tables.kept(load_unreachable_clusters, Cluster),
        qos_max_walltime=tables.kept(load_qos_walltimes, Qos),
        qos_limits=tables.kept(load_qos_limits, Qos),
        windows=load_windows(timezone.now()),
    )
    borrowed = frozenset(job.id for job, borrowed in active if borrowed)
    return LoadedSnapshot(snapshot, reasons, blockers, borrowed, tables)


def load_account_parents() -> dict[str, str | None]:
    return dict(Account.objects.values_list("name", "parent__name"))


def load_unreachable_clusters() -> dict[str, str]:
    return dict(Cluster.objects.filter(enabled=True, reachable=False).values_list("name", "last_error"))


def load_qos_walltimes() -> dict[str, int]:
    return {
        name: limit
        for name, limit in Qos.objects.filter(max_walltime_seconds__isnull=False).values_list(
            "name", "max_walltime_seconds"
        )
        if limit is not None
    }


def load_qos_limits() -> dict[str, QosLimits]:
    """QOS name -> the caps it puts on its running jobs, for every QOS that has one: each
    limit of ``people.limits.QOS_LIMITS`` the core enforces (CPUs as millicores)."""
    enforced = [limit for limit in QOS_LIMITS if limit.core]
    found: dict[str, QosLimits] = {}
    for row in Qos.objects.values("name", *(limit.name for limit in enforced)):
        values = {limit.core: row[limit.name] for limit in enforced}
        if values["max_cpu_millis_per_user"] is not None:
            values["max_cpu_millis_per_user"] *= CPU_MILLIS
        limits = QosLimits(**values)
        if limits.caps_anything:
            found[row["name"]] = limits
    return found


def load_dependency_states(jobs: Iterable[PendingJob]) -> dict[int, str]:
    """Job id -> state of every job that one of ``jobs`` depends on (no query if none does).

    A job array's id stands for the whole array, as in Slurm (``afterok:42`` waits for
    every task of array 42): its state is COMPLETED once every task completed, FAILED
    once every task ended and one did not complete, PENDING while any task has not
    ended. One more query, only when a dependency names an array.
    """
    depends_on = {job_id for job in jobs for _, job_id in job.dependencies}
    if not depends_on:
        return {}
    rows = Job.objects.filter(pk__in=depends_on).values_list("id", "state", "array_job_id")
    states = {job_id: state for job_id, state, _ in rows}
    arrays = [job_id for job_id, _, array in rows if array == job_id]
    if arrays:
        tasks = Job.objects.filter(array_job_id__in=arrays).order_by().values_list("array_job_id", "state").distinct()
        by_array: dict[int, set[str]] = defaultdict(set)
        for array, state in tasks:
            if array is not None:
                by_array[array].add(state)
        for array, found in by_array.items():
            states[array] = array_state(found)
    return states


def array_state(task_states: AbstractSet[str]) -> str:
    """The state a whole array counts as for a dependency on it (see
    :func:`load_dependency_states`)."""
    if not task_states <= TERMINAL_STATES:
        return JobState.PENDING
    return JobState.COMPLETED if task_states == {JobState.COMPLETED} else JobState.FAILED


def load_accounts() -> list[AccountNode]:
    """The accounts with their parents and shares, as the fair-share tree takes them (one
    query; the tree links parents by name, in any order)."""
    return [
        AccountNode(name, parent, shares)
        for name, parent, shares in Account.objects.values_list("name", "parent__name", "shares")
    ]


def load_fairshare_tree() -> FairShareTree | None:
    """The account tree with every member as a user leaf (shares 1), or ``None`` if the
    stored tree is not valid (a cycle made in the admin, say): the tick then orders by
    the other factors rather than failing."""
    accounts = load_accounts()
    users = [UserAssociation(a, u) for a, u in Membership.objects.values_list("account__name", "user__username")]
    try:
        return FairShareTree.build(accounts, users)
    except ValueError as exc:
        log.error("fair-share tree is invalid, ignoring fair-share this tick: %s", exc)
        return None


def with_policy_inputs(
    snapshot: Snapshot,
    policy: Policy,
    usage: Callable[[], Mapping[tuple[str, str], float]],
    tables: TableDigests = UNVERSIONED,
) -> Snapshot:
    """Add what the policy needs beyond the base snapshot, and only that.

    Priority needs the fair-share tree, usage (``usage()`` is called only then: the tick
    charges it, reports only read it) and QOS priorities; preemption needs which QOS
    may preempt which, and QOS priorities to rank victims. ``tables``: the reading the
    snapshot was loaded at (``LoadedSnapshot.tables``), to reuse unchanged loads.
    """
    extra: dict[str, Any] = {}
    if policy.priority is not None or policy.preemption:
        extra["qos_priorities"] = tables.kept(load_qos_priorities, Qos)
    if policy.priority is not None:
        tree = tables.kept(load_fairshare_tree, Account, Membership, get_user_model())
        extra.update(usage=usage(), fairshare_tree=tree)
    if policy.preemption:
        extra["qos_preempts"] = tables.kept(load_qos_preemption, Qos, Qos.may_preempt.through)
    if policy.priority is not None and policy.priority.expects_run_times:
        extra["runtime_ratios"] = load_runtime_ratios()
    if policy.service_levels:
        extra.update(with_attained_service(snapshot))
    return replace(snapshot, **extra) if extra else snapshot


def with_attained_service(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshot's running and pending jobs with the service their earlier attempts
    had (``attained_gpu_s``), for least-attained-service preemption."""
    attained = load_attained_service()
    if not attained:
        return {}
    return {
        "running": tuple(
            replace(j, attained_gpu_s=attained[j.id]) if j.id in attained else j for j in snapshot.running
        ),
        "pending": tuple(
            replace(j, attained_gpu_s=attained[j.id]) if j.id in attained else j for j in snapshot.pending
        ),
    }


def load_qos_preemption() -> dict[str, frozenset[str]]:
    """QOS name -> the QOS whose jobs it may preempt."""
    preempts: dict[str, set[str]] = defaultdict(set)
    for qos, victim in Qos.may_preempt.through.objects.values_list("from_qos__name", "to_qos__name"):
        preempts[qos].add(victim)
    return {qos: frozenset(victims) for qos, victims in preempts.items()}


def load_qos_priorities() -> dict[str, int]:
    return dict(Qos.objects.values_list("name", "priority"))


def load_limits() -> tuple[dict[str, Limits], dict[str, Limits]]:
    """Concurrent-use limits from quotas, keyed by account name and by username: every
    limit of ``people.limits.CORE_LIMITS`` (the fields of the core's ``Limits``)."""
    accounts: dict[str, Limits] = {}
    users: dict[str, Limits] = {}
    for row in Quota.objects.values("account__name", "user__username", *CORE_LIMITS):
        values: dict[str, Any] = {name: row[name] for name in CORE_LIMITS}
        for name in CORE_LIMITS:
            if quota_limit(name).per_model:  # JSON: {model: GPUs}, keys and values as the core types them
                values[name] = {str(k): int(v) for k, v in (row[name] or {}).items()}
        limits = Limits(**values)
        if row["account__name"]:
            accounts[row["account__name"]] = limits
        elif row["user__username"]:
            users[row["user__username"]] = limits
    return accounts, users
