"""Why a job waits: every blocker at once, each with the figures that show it.

Slurm shows one reason code per job (``squeue %r``), so a user fixes one blocker only
to meet the next. After a cycle, :func:`explain` checks each waiting job against every
rule independently (dependencies, hardware that could ever hold it, walltime limits,
quotas and borrowing, free resources now, its place in the queue, the cycle's start
limit) and returns all that hold, the cycle's own reason first. Evidence is measured
on the state the cycle ends with (after its starts and evictions), which is what the
user's next look at the cluster shows.

Blockers are stored and a job's row is rewritten whenever they differ, so their words
and figures carry only facts that change when the situation does: no times, ages or
durations that move with ``now`` or with a running job's recorded start (when a job
should start is its ``estimated_start_at``, kept elsewhere).

Cost: resource and hardware diagnoses depend only on a job's request shape, so each is
computed once per shape per cycle; the rest is a constant amount of work per job.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from scheduler.core.arrays import ArrayThrottle
from scheduler.core.borrowing import GuaranteeBook
from scheduler.core.dependencies import ENDED
from scheduler.core.limits import LimitBook, duration_text
from scheduler.core.placement import IdleCluster, Ledger, NodeCapacity, request_shape
from scheduler.core.reason_words import REASON_WORDS
from scheduler.core.types import (
    Blocker,
    Decisions,
    NodeView,
    PendingJob,
    PendingReason,
    Reservation,
    Snapshot,
    cpu_text,
)


@dataclass(frozen=True, slots=True)
class Circumstances:
    """What a cycle ends with, for :func:`explain` to measure blockers against."""

    snapshot: Snapshot
    ledger: Ledger
    idle: IdleCluster
    limits: LimitBook | None
    guarantees: GuaranteeBook
    reservations: Sequence[Reservation]
    max_starts: int
    throttle: ArrayThrottle | None = None


# A hot loop, kept inline: once per waiting job of every explaining cycle (benchmarks/tick.py).
def explain(order: Iterable[PendingJob], decisions: Decisions, c: Circumstances) -> dict[int, tuple[Blocker, ...]]:  # noqa: C901
    """Job id -> all its blockers (the cycle's reason first), for every waiting job.

    ``order`` is the queue order the cycle walked. The priority blocker says that jobs
    ahead wait first (and whether one holds a reservation it would delay) but not its
    place in the line nor which job is first: both move for every waiting job whenever
    the queue moves, and a blocker that changed on every tick made the tick rewrite
    every waiting job's row (9,500 of 10,000, ~0.7 s). ``GET .../priority/`` (sprio)
    and the what-if tell a job where it stands.
    """
    snapshot = c.snapshot
    # Diagnoses that depend only on a job's request shape, computed once per shape (and
    # those about the idle cluster kept while it is: see :func:`_never_answers`).
    free_now: dict[tuple[object, ...], Blocker | None] = {}
    never = _never_answers(c.idle, snapshot.unreachable_clusters)
    fits = c.idle.fits
    reserved = {r.job_id: r for r in c.reservations}
    first_reservation = c.reservations[0] if c.reservations else None
    # What the books say is fixed once the cycle ended: one answer per kind of request.
    over_limits = c.limits.usage_blockers if c.limits is not None else _no_blockers
    borrowing_limit = c.guarantees.blocker if c.guarantees.active else None
    qos_max_walltime = snapshot.qos_max_walltime
    reason_of = decisions.pending_reasons.get
    result: dict[int, tuple[Blocker, ...]] = {}
    for job in order:
        primary = reason_of(job.id)
        if primary is None:
            continue
        found: list[Blocker] = []
        if job.dependencies:
            found.extend(_dependencies(job, snapshot.dependency_states))
        if primary is _ARRAY_TASK_LIMIT and c.throttle is not None:
            found.append(_array_limit(job, c.throttle.running_tasks(job.array_job)))
        shape = request_shape(job)
        if not fits(job, shape):
            cause = never.get(shape)
            if cause is None:
                cause = never[shape] = _never_fits(job, snapshot.nodes, snapshot.unreachable_clusters)
            found.append(cause)
        else:
            if qos_max_walltime:
                found.extend(_walltime(job, qos_max_walltime))
            found.extend(over_limits(job))
            if borrowing_limit is not None:
                borrowing = borrowing_limit(job)
                if borrowing is not None:
                    found.append(borrowing)
            if primary is _CYCLE_LIMIT:
                # The cycle stopped before looking at it: what is free at the cycle's end
                # says nothing about it, and changes with every tick's starts (a stored
                # blocker that moved with it would rewrite thousands of rows a tick).
                short = None
            elif shape in free_now:
                short = free_now[shape]
            else:
                short = free_now[shape] = _resources(job, c.ledger, c.idle.holders(job, shape))
            if short is not None:
                own = reserved.get(job.id) if reserved else None
                if own is not None:
                    # Where, not when: the reservation's start moves with every running
                    # job's recorded start, and a stored blocker that moved with it would
                    # rewrite the row on ticks where nothing changed. The time is the job's
                    # estimated_start_at, kept by the estimates pass.
                    nodes = [a.node for a in own.allocations]
                    short = Blocker(
                        short.code,
                        f"{short.message}; reserved to start on " + ", ".join(nodes),
                        {**short.evidence, "reserved_nodes": nodes},
                    )
                found.append(short)
            if primary is _PRIORITY or (
                primary is not _CYCLE_LIMIT and short is None and reserved and job.id not in reserved
            ):
                found.append(_BEHIND_RESERVATION if first_reservation is not None else _BEHIND_OTHERS)
            if primary is _CYCLE_LIMIT:
                found.append(
                    Blocker(
                        _CYCLE_LIMIT,
                        f"this cycle started its maximum of {c.max_starts} jobs before reaching it",
                        {"max_starts": c.max_starts},
                    )
                )
        result[job.id] = _primary_first(primary, found)
    return result


def _no_blockers(job: PendingJob) -> tuple[Blocker, ...]:
    return ()


#: Read once: an enum member looked up on its class costs a descriptor call, per job.
_PRIORITY = PendingReason.PRIORITY
_CYCLE_LIMIT = PendingReason.CYCLE_LIMIT
_ARRAY_TASK_LIMIT = PendingReason.ARRAY_TASK_LIMIT


def _array_limit(job: PendingJob, running: int) -> Blocker:
    return Blocker(
        _ARRAY_TASK_LIMIT,
        f"array {job.array_job} runs {running} tasks and allows {job.array_limit} at once",
        {"array_job": job.array_job, "running_tasks": running, "limit": job.array_limit},
    )


def _primary_first(primary: PendingReason, found: list[Blocker]) -> tuple[Blocker, ...]:
    """The cycle's reason leads; duplicates by code are dropped; a reason no rule here
    re-derived (the state moved on within the cycle) still gets its sentence from
    ``scheduler.core.reason_words``.

    A job has a handful of blockers: they are compared pairwise (by identity of their
    codes, then message) rather than hashed, as hashing an enum member calls Python.
    """
    lead: list[Blocker] = []
    rest: list[Blocker] = []
    for blocker in found:
        code = blocker.code
        kept = lead if code is primary else rest  # where an earlier duplicate would be
        for other in kept:
            if other.code is code and other.message == blocker.message:
                break
        else:
            kept.append(blocker)
    if not lead:
        lead.append(Blocker(primary, REASON_WORDS[primary].sentence))
    return (*lead, *rest)


def _dependencies(job: PendingJob, states: Mapping[int, str]) -> list[Blocker]:
    waiting, never = [], []
    for kind, other in job.dependencies:
        state = states.get(other, "CANCELLED")
        entry = {"job": other, "kind": kind, "state": state}
        if state not in ENDED:
            waiting.append(entry)
        elif (kind == "afterok" and state != "COMPLETED") or (kind == "afternotok" and state == "COMPLETED"):
            never.append(entry)
    found = []
    if never:
        found.append(
            Blocker(
                PendingReason.DEPENDENCY_NEVER,
                "can never start: "
                + "; ".join(f"job {d['job']} ended {d['state']}, which {d['kind']} does not accept" for d in never),
                {"dependencies": never},
            )
        )
    if waiting:
        found.append(
            Blocker(
                PendingReason.DEPENDENCY,
                "waits for " + ", ".join(f"job {d['job']} ({d['kind']}; now {d['state']})" for d in waiting),
                {"dependencies": waiting},
            )
        )
    return found


def _walltime(job: PendingJob, qos_max: Mapping[str, int]) -> list[Blocker]:
    cap = qos_max.get(job.qos)
    if cap is None or job.walltime_seconds <= cap:
        return []
    return [
        Blocker(
            PendingReason.WALLTIME_LIMIT,
            f"QOS {job.qos} allows at most {duration_text(cap)} of walltime; "
            f"this job asks for {duration_text(job.walltime_seconds)}",
            {
                "scope": "qos",
                "name": job.qos,
                "limit": "max_walltime_seconds",
                "cap": cap,
                "requested": job.walltime_seconds,
            },
        )
    ]


#: How the priority blocker starts: jobs ahead of it wait first.
_AHEAD = "jobs ahead of it in priority order wait first"


#: The priority blocker behind a reservation (made once: blockers are shared, never changed).
_BEHIND_RESERVATION = Blocker(
    PendingReason.PRIORITY, f"{_AHEAD}; one of them holds a reservation that this job would delay", {}
)
#: The priority blocker without a reservation in the way: jobs wait behind those ahead.
_BEHIND_OTHERS = Blocker(PendingReason.PRIORITY, _AHEAD, {})


def constraint_text(job: PendingJob) -> str:
    """The per-GPU constraints of a request, as a phrase ("H100-80GB GPUs with >= 40000 MiB")."""
    parts = [f"{job.gpu_model} GPUs" if job.gpu_model else "GPUs"]
    if job.min_gpu_memory_mib:
        parts.append(f"with >= {job.min_gpu_memory_mib} MiB")
    if job.min_compute_capability:
        parts.append("compute capability >= {}.{}".format(*job.min_compute_capability))
    return " ".join(parts)


def _resources(job: PendingJob, ledger: Ledger, holders: AbstractSet[str]) -> Blocker | None:
    """``None`` if the job fits the free capacity now, else how far it is from fitting.

    Only nodes that could hold the job were they idle (``holders``: see
    ``IdleCluster.holders``) are "closest to fitting": a node of another GPU model with
    every GPU free is further from holding the job than a busy node of the right one.
    """
    if ledger.place(job) is not None:
        return None
    best: tuple[int, str] = (-1, "")
    fitting_gpus: dict[str, int] = defaultdict(int)  # cluster -> nodes with enough GPUs free
    fitting_all: dict[str, int] = defaultdict(int)  # ... and enough CPUs and memory
    short_of: tuple[str, str, int | str, int | str] | None = None  # (node, resource, free, wanted)
    for cluster, capacities in ledger.by_cluster.items():
        for capacity in capacities:
            if capacity.node.name not in holders:
                continue  # named nowhere: waiting for it would never help
            usable = _usable(capacity, job)
            if usable > best[0]:
                best = (usable, capacity.node.name)
            if usable < job.gpus_per_node:
                continue
            fitting_gpus[cluster] += 1
            if capacity.free_cpu_millis < job.cpu_millis_per_node:
                short_of = short_of or (
                    capacity.node.name,
                    "CPUs",
                    cpu_text(capacity.free_cpu_millis),
                    cpu_text(job.cpu_millis_per_node),
                )
            elif capacity.free_memory_mib < job.memory_mib_per_node:
                short_of = short_of or (
                    capacity.node.name,
                    "MiB of memory",
                    capacity.free_memory_mib,
                    job.memory_mib_per_node,
                )
            else:
                fitting_all[cluster] += 1
    nodes_ready = max(fitting_all.values(), default=0)
    evidence: dict[str, object] = {
        "best_node": best[1],
        "best_node_free_gpus": max(best[0], 0),
        "gpus_per_node": job.gpus_per_node,
        "nodes": job.nodes,
        "nodes_ready": nodes_ready,
    }
    what = constraint_text(job)
    if job.nodes > 1:
        message = f"needs {job.nodes} nodes with {job.gpus_per_node} free {what} each; {nodes_ready} have them now"
    elif best[0] < job.gpus_per_node:
        message = f"best node {best[1]} has {max(best[0], 0)} of the {job.gpus_per_node} {what} it needs free"
    else:
        message = "GPUs are free but CPUs or memory are not"
    if short_of is not None and nodes_ready < job.nodes:
        node, resource, free, wanted = short_of
        evidence |= {"short_node": node, "short_resource": resource, "short_free": free, "short_wanted": wanted}
        message += f" ({node} has the GPUs free but only {free} of {wanted} {resource})"
    return Blocker(PendingReason.RESOURCES, message, evidence)


def _usable(capacity: NodeCapacity, job: PendingJob) -> int:
    if not capacity.free_count or job.gpus_per_node == 0:
        return 0 if job.gpus_per_node else capacity.free_count
    return len(capacity.usable_gpus(job))


def _never_answers(idle: IdleCluster, unreachable: Mapping[str, str]) -> dict[tuple[object, ...], Blocker]:
    """Why a request shape never fits (:func:`_never_fits`), per shape: the answers of
    the last cycle while its idle cluster (the same nodes) and the unreachable clusters
    are the same, so a tick does not ask 1,000 nodes again for each shape that never
    fits; a fresh memo otherwise."""
    global _last_never
    key = tuple(sorted(unreachable.items()))
    if _last_never is None or _last_never[0] is not idle or _last_never[1] != key:
        _last_never = (idle, key, {})
    return _last_never[2]


_last_never: tuple[IdleCluster, tuple[tuple[str, str], ...], dict[tuple[object, ...], Blocker]] | None = None


def _never_fits(job: PendingJob, nodes: Sequence[NodeView], unreachable: Mapping[str, str]) -> Blocker:
    """Why no schedulable node set can hold the job even when idle (cluster-wide)."""
    what = constraint_text(job)
    code = PendingReason.NODES_UNAVAILABLE
    if job.picks_nodes:
        nodes = [n for n in nodes if job.fits_node(n)]
        if not nodes and not job.node_labels:
            cpus = cpu_text(job.cpu_millis_per_node)
            return Blocker(
                code,
                f"no node can hand out part of a CPU ({cpus} CPUs asked; Slurm allocates whole CPUs)",
                {"nodes_matching": 0, "cpus_per_node": cpus},
            )
        if not nodes:
            wanted = ", ".join(f"{k}={v}" for k, v in job.node_labels)
            return Blocker(code, f"no node has the labels {wanted}", {"nodes_matching": 0, "node_labels": wanted})
    matching = {n.name: sum(1 for g in n.gpus if job.accepts(g)) for n in nodes}
    if job.gpus_per_node and not any(matching.values()):
        return Blocker(code, f"no node has {what}", {"nodes_matching": 0, "constraint": what})
    big = [n for n in nodes if matching[n.name] >= job.gpus_per_node]
    if not big:
        most = max(matching.values())
        return Blocker(
            code,
            f"the largest node has {most} {what}; this job asks for {job.gpus_per_node} per node",
            {"max_matching_gpus_per_node": most, "gpus_per_node": job.gpus_per_node, "constraint": what},
        )
    roomy = [n for n in big if n.cpu_millis >= job.cpu_millis_per_node and n.memory_mib >= job.memory_mib_per_node]
    if not roomy:
        most_cpus = cpu_text(max(n.cpu_millis for n in big))
        cpus = cpu_text(job.cpu_millis_per_node)
        most_memory = max(n.memory_mib for n in big)
        return Blocker(
            code,
            f"no node with {job.gpus_per_node} {what} has {cpus} CPUs and {job.memory_mib_per_node} MiB "
            f"(largest: {most_cpus} CPUs, {most_memory} MiB)",
            {
                "max_cpus": most_cpus,
                "max_memory_mib": most_memory,
                "cpus_per_node": cpus,
                "memory_mib_per_node": job.memory_mib_per_node,
            },
        )
    up: dict[str, int] = defaultdict(int)
    down: dict[str, int] = defaultdict(int)
    for node in roomy:
        (up if node.schedulable else down)[node.cluster] += 1
    best_cluster = max(roomy, key=lambda n: (up[n.cluster], down[n.cluster])).cluster
    evidence: dict[str, object] = {
        "nodes": job.nodes,
        "nodes_up": up[best_cluster],
        "nodes_down": down[best_cluster],
        "cluster": best_cluster,
    }
    message = (
        f"needs {job.nodes} node{'s' if job.nodes != 1 else ''} in one cluster that can hold "
        f"{job.gpus_per_node} {what}; "
        f"{up[best_cluster]} in {best_cluster} are up and {down[best_cluster]} more are down or drained"
    )
    if best_cluster in unreachable:
        evidence["cluster_error"] = unreachable[best_cluster]
        message += f" (cluster {best_cluster} is unreachable: {unreachable[best_cluster]})"
    return Blocker(code, message, evidence)
