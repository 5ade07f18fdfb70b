"""Preemption: free GPUs for a blocked job by evicting running jobs it outranks.

A running job is a candidate victim of a pending job when the pending job's QOS may
preempt the victim's QOS (Slurm's ``preempt/qos``) and the victim has run at least the
policy's minimum runtime. Among candidates, the chosen set is the smallest on one
feasible node set: fewest victims, then lowest QOS priority, then least work lost (GPU-seconds run so far);
and no victim is taken that is not needed (each one, removed, would leave the job
unplaceable).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime

from scheduler.core.placement import Ledger, NodeCapacity
from scheduler.core.types import Allocation, PendingJob, RunningJob, Start


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    start: Start
    victims: tuple[RunningJob, ...]


def candidates(
    job: PendingJob,
    running: Iterable[RunningJob],
    qos_preempts: Mapping[str, frozenset[str]],
    now: datetime,
    min_runtime_seconds: int,
) -> list[RunningJob]:
    """Running jobs ``job`` may evict: its QOS may preempt theirs, and they ran long enough."""
    preemptable = qos_preempts.get(job.qos, frozenset())
    if not preemptable:
        return []
    return [
        r
        for r in running
        if r.qos in preemptable
        and (r.started_at is None or (now - r.started_at).total_seconds() >= min_runtime_seconds)
    ]


def outserved(
    level: int,
    running: Iterable[RunningJob],
    levels: tuple[int, ...],
    now: datetime,
    min_runtime_seconds: int,
) -> list[RunningJob]:
    """Running jobs a job queued at ``level`` may evict under least attained service:
    their service so far (earlier runs plus GPUs x this run's time) puts them in a
    higher level, and this run has lasted ``min_runtime_seconds`` (so that a job is not
    stopped before it gets anywhere)."""
    if level >= len(levels):
        return []
    threshold = levels[level]  # service at which a job leaves that level
    chosen = []
    for r in running:
        ran = (now - r.started_at).total_seconds() if r.started_at is not None else 0.0
        if ran >= min_runtime_seconds and r.attained_gpu_s + ran * r.gpus >= threshold:
            chosen.append(r)
    return chosen


def _cost(
    victim: RunningJob, qos_priorities: Mapping[str, int], now: datetime, first: AbstractSet[int] = frozenset()
) -> tuple[bool, int, float, int]:
    """Lower is a better victim: running on borrowed capacity (``first``), then low QOS
    priority, then little work lost (GPU-seconds run so far, which a requeued job must
    redo)."""
    elapsed = (now - victim.started_at).total_seconds() if victim.started_at else 0.0
    return (victim.id not in first, qos_priorities.get(victim.qos, 0), elapsed * max(victim.gpus, 1), victim.id)


def _fits_after(
    capacity: NodeCapacity, job: PendingJob, victims: Iterable[RunningJob], held: Allocation | None
) -> Allocation | None:
    trial = capacity.copy()
    for victim in victims:
        for allocation in victim.allocations:
            if allocation.node == capacity.node.name:
                trial.give_back(allocation)
    return trial.fit(job, held)


def _victims_on(
    capacity: NodeCapacity,
    job: PendingJob,
    here: list[RunningJob],
    held: Allocation | None,
) -> tuple[list[RunningJob], Allocation] | None:
    """The smallest victim set on one node that lets the job's share fit there
    (``here``: the eligible jobs on that node, cheapest first)."""
    chosen: list[RunningJob] = []
    allocation = _fits_after(capacity, job, chosen, held)
    for victim in here:
        if allocation is not None:
            break
        chosen.append(victim)
        allocation = _fits_after(capacity, job, chosen, held)
    if allocation is None:
        return None
    for victim in reversed(list(chosen)):  # drop any victim that is not needed
        without = [v for v in chosen if v is not victim]
        if _fits_after(capacity, job, without, held) is not None:
            chosen = without
    final = _fits_after(capacity, job, chosen, held)
    return (chosen, final) if final is not None else None


def plan_preemption(
    job: PendingJob,
    ledger: Ledger,
    eligible: list[RunningJob],
    held: Mapping[str, Allocation],
    qos_priorities: Mapping[str, int],
    now: datetime,
    first: AbstractSet[int] = frozenset(),
) -> PreemptionPlan | None:
    """The cheapest way to start ``job`` now by evicting some of ``eligible``, or ``None``.

    Steps:
    1. Order candidates from cheapest to dearest victim (jobs in ``first``, those on
       borrowed capacity, before all others).
    2. For every schedulable node, find the smallest victim set that lets one share of
       the job fit there (greedy by cost, then drop victims that turn out unneeded).
    3. In each cluster take the ``job.nodes`` nodes with the fewest, cheapest victims;
       keep the cluster whose choice evicts the fewest jobs (then cheapest).
    """
    if not eligible:
        return None
    ordered = sorted(eligible, key=lambda v: _cost(v, qos_priorities, now, first))
    on_node: dict[str, list[RunningJob]] = {}  # node -> eligible jobs there, cheapest first
    for victim in ordered:
        for name in dict.fromkeys([a.node for a in victim.allocations]):
            on_node.setdefault(name, []).append(victim)
    best: tuple[tuple[int, tuple[object, ...]], PreemptionPlan] | None = None
    for cluster, capacities in ledger.by_cluster.items():
        options = []
        for capacity in capacities:
            found = _victims_on(capacity, job, on_node.get(capacity.node.name, []), held.get(capacity.node.name))
            if found is not None:
                victims, allocation = found
                options.append(
                    (len(victims), [_cost(v, qos_priorities, now, first) for v in victims], victims, allocation)
                )
        if len(options) < job.nodes:
            continue
        options.sort(key=lambda o: (o[0], o[1], o[3].node))
        chosen = options[: job.nodes]
        victims_by_id = {v.id: v for _, _, vs, _ in chosen for v in vs}
        if not victims_by_id:
            continue  # it fits without evicting anyone: not a preemption case
        evicted = tuple(sorted(victims_by_id.values(), key=lambda v: v.id))
        plan = PreemptionPlan(Start(job.id, cluster, tuple(a for _, _, _, a in chosen)), evicted)
        score = (len(evicted), tuple(_cost(v, qos_priorities, now, first) for v in evicted))
        if best is None or score < best[0]:
            best = (score, plan)
    return best[1] if best else None
