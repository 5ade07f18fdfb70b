"""One scheduling cycle: ``schedule(snapshot, policy, now) -> Decisions``.

FIFO first-fit, optionally with EASY backfill: jobs are considered in submit order and
each is placed on the first nodes that can hold it. Every policy keeps the same
invariants (no GPU given twice, gang all-or-nothing, only matching GPUs); priority
ordering and fair-share plug in by changing the order of the walk.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta

from scheduler.core.arrays import ArrayThrottle
from scheduler.core.backfill import Release, delayed_by, held_back, plan_reservation
from scheduler.core.borrowing import GuaranteeBook
from scheduler.core.carry import Carry
from scheduler.core.dependencies import Readiness, readiness
from scheduler.core.fairshare import fair_tree_factors
from scheduler.core.fragmentation import Scorer, WorkloadMix
from scheduler.core.limits import LimitBook, caps_anything
from scheduler.core.placement import IdleCluster, Ledger, request_shape
from scheduler.core.preemption import candidates, outserved, plan_preemption
from scheduler.core.priority import PriorityCalculator, cluster_gpu_count, order_by_priority
from scheduler.core.queue import QueueWalk, service_level, waiting
from scheduler.core.reasons import Circumstances, explain
from scheduler.core.timeline import estimate_queue
from scheduler.core.types import (
    Allocation,
    Blocker,
    Decisions,
    Eviction,
    PendingJob,
    PendingReason,
    PlacementStrategy,
    Policy,
    Reservation,
    RunningJob,
    Snapshot,
    Start,
    Window,
)
from scheduler.core.windows import WindowBook, merge_holds, reservation_blocker, window_text


def latest_end(job: RunningJob, now: datetime) -> datetime:
    """When a running job frees its resources at the latest (its walltime limit).

    A job past its limit (or with no known start) is counted as ending now.
    """
    if job.started_at is None:
        return now + timedelta(seconds=job.walltime_seconds)
    return max(now, job.started_at + timedelta(seconds=job.walltime_seconds))


class _Releases:
    """When running and just-started jobs give their resources back (their walltime
    limits), built only if the cycle needs it (a reservation, estimates): most cycles
    of a replay start what fits and plan nothing, and this costs one object per
    running job.

    In the order the cycle used to keep them: running jobs in snapshot order without
    the evicted ones, then the jobs started, in order.
    """

    def __init__(self, running: tuple[RunningJob, ...], now: datetime, carry: Carry | None) -> None:
        self.running = running
        self.now = now
        self.carry = carry
        self.gone: set[int] = set()
        self.started: list[Release] = []
        self._running: list[Release] | None = None
        self._ends: list[tuple[datetime, int, tuple[Allocation, ...]]] | None = None
        self._ends_read = False

    def for_reservation(self) -> tuple[list[Release], Iterator[tuple[datetime, int, tuple[Allocation, ...]]]]:
        """The releases as ``plan_reservation`` takes them: with a carry the running
        jobs' ends come from its sorted list, clamped to ``now``, and only the jobs
        started this cycle are listed."""
        carry = self.carry
        if carry is not None:
            if not self._ends_read:  # once per cycle: the running jobs do not change in it
                self._ends = carry.running_ends(self.running)
                self._ends_read = True
            ends = self._ends
            if ends is not None:
                now, gone = self.now, self.gone
                ordered = ((end if end > now else now, i, a) for end, i, a in ends if i not in gone)
                return self.started, ordered
        return self.all(), iter(())

    def all(self) -> list[Release]:
        if self._running is None:
            now = self.now  # latest_end, inlined: one per running job
            self._running = [
                Release(
                    latest_end(r, now)
                    if r.started_at is None
                    else max(now, r.started_at + timedelta(seconds=r.walltime_seconds)),
                    r.allocations,
                    r.id,
                )
                for r in self.running
            ]
        kept = [r for r in self._running if r.job_id not in self.gone] if self.gone else self._running
        return [*kept, *self.started]


def priority_calculator(snapshot: Snapshot, policy: Policy, now: datetime) -> PriorityCalculator | None:
    """How the cycle ranks jobs by multifactor priority (fair-share from the Fair Tree
    over the snapshot's usage), or ``None`` when the policy orders by age."""
    if policy.priority is None:
        return None
    factors = fair_tree_factors(snapshot.fairshare_tree, snapshot.usage) if snapshot.fairshare_tree else {}
    return PriorityCalculator(
        now=now,
        weights=policy.priority,
        fairshare=factors,
        qos_priorities=snapshot.qos_priorities,
        cluster_gpus=cluster_gpu_count(snapshot.nodes),
        runtime_ratios=snapshot.runtime_ratios,
    )


def queue_order(snapshot: Snapshot, policy: Policy, now: datetime, decisions: Decisions) -> list[PendingJob]:
    """Pending jobs in the order the cycle considers them.

    With ``policy.priority``: highest multifactor priority first, recording each job's
    breakdown in ``decisions.priorities``; otherwise oldest first. Ties: older, then
    lower id.
    """
    calculator = priority_calculator(snapshot, policy, now)
    if snapshot.queue is not None:
        walk = QueueWalk(snapshot.queue, calculator)
        ordered = list(walk)
        decisions.priorities = walk.priorities
        return ordered
    if calculator is None:
        return sorted(snapshot.pending, key=lambda j: (j.submitted_at, j.id))
    breakdown = calculator.breakdown
    breakdowns = [breakdown(job) for job in snapshot.pending]
    decisions.priorities = {b.job_id: b for b in breakdowns}
    return order_by_priority(snapshot.pending, breakdowns)


def schedule(snapshot: Snapshot, policy: Policy, now: datetime) -> Decisions:
    """Decide which pending jobs start now and where; give every other job a reason.

    Steps:
    1. Build the free-capacity ledger (node capacity minus running allocations).
    2. Walk pending jobs in queue order (see :func:`queue_order`).
    3. A job whose dependencies are not met gets ``Dependency`` (or
       ``DependencyNeverSatisfied``), a task of an array that runs as many tasks as its
       throttle allows gets ``JobArrayTaskLimit``, a job no schedulable node could ever hold gets
       ``ReqNodeNotAvail``, and a job that would break a quota limit gets that limit as
       its reason; none of them blocks others.
    4. A job that fits now, without touching what reservations hold back from it,
       starts and is committed to the ledger before the next job is tried.
    5. With preemption, a job that does not fit may evict running jobs its QOS may
       preempt (see ``scheduler.core.preemption``) and start on what they free.
    6. A job that fits the cluster but not the free capacity gets ``Resources``. Without
       backfill and under ``strict_order`` every later job then waits (``Priority``).
       With backfill it gets a reservation (up to ``policy.reservations`` of them, at
       most ``policy.reservations_per_account`` of one account's) and
       later jobs may still start if they cannot delay it; those that cannot start get
       ``Priority``.
    7. With ``policy.estimates``, plan the rest of the queue forward from this cycle's
       final ledger and releases (see ``scheduler.core.timeline.estimate_queue``).

    Capacity only shrinks during a cycle, so a request that failed once against the
    same held-back resources is not tried again, and feasibility on the idle cluster
    is computed once per request shape: a cycle over 10,000 pending jobs stays cheap.

    ``snapshot.carry`` (optional) lets consecutive cycles of one caller share their
    ledger (see ``scheduler.core.carry.Carry``); decisions are the same with
    or without it.
    """
    collecting = gc.isenabled()
    gc.disable()  # a cycle allocates ~100k short-lived objects; no reference cycles among them
    try:
        return _schedule(snapshot, policy, now)
    finally:
        if collecting:
            gc.enable()


def _schedule(snapshot: Snapshot, policy: Policy, now: datetime) -> Decisions:
    decisions = Decisions()
    carry = snapshot.carry
    ledger = carry.ledger(snapshot) if carry is not None else Ledger.from_snapshot(snapshot)
    if policy.placement is PlacementStrategy.FRAGMENTATION and (
        ledger.any_shared
        or (
            snapshot.queue.scored > 0
            if snapshot.queue is not None
            else any(j.gpu_share or j.cpu_millis_per_node or j.memory_mib_per_node for j in snapshot.pending)
        )
    ):
        # Only then may a job be scored (``Ledger._counts_only_gpus``): a queue of whole-GPU
        # jobs asking no CPUs or memory (a Philly replay) places as PACK and needs no mix.
        mix = carry.mix(snapshot) if carry is not None else WorkloadMix.of(snapshot.running, waiting(snapshot))
        ledger.scorer = Scorer.for_mix(mix)
    idle = IdleCluster.shared(snapshot.nodes)
    failed: set[tuple[object, ...]] = set()
    no_victims: set[tuple[object, ...]] = set()  # requests no eviction could start since the last change
    blocked = False
    reservations: list[Reservation] = []
    #: Blocked jobs that were given a try at a reservation: the first ``policy.reservations``,
    #: at most ``policy.reservations_per_account`` of one account's.
    tries = 0
    tries_by_account: dict[str, int] = {}
    per_account = policy.reservations_per_account
    releases = _Releases(snapshot.running, now, carry)
    limits = (
        LimitBook(
            snapshot.nodes, snapshot.running, snapshot.account_limits, snapshot.user_limits, snapshot.account_parents
        )
        if caps_anything(snapshot.account_limits) or caps_anything(snapshot.user_limits)
        else None
    )
    guarantees = (
        carry.guarantee_book(snapshot)
        if carry is not None
        else GuaranteeBook(snapshot.running, snapshot.account_limits, snapshot.account_parents)
    )
    throttled = ArrayThrottle.of(snapshot)
    may_evict = policy.preemption or (policy.reclaim and guarantees.active) or bool(policy.service_levels)
    evictable = {r.id: r for r in snapshot.running} if may_evict else {}
    #: A kept queue is walked class by class, setting aside a class whose job could not
    #: start (see ``scheduler.core.queue``), unless every job needs its reason and
    #: place in the order (explain, estimates).
    walk = (
        QueueWalk(snapshot.queue, priority_calculator(snapshot, policy, now))
        if snapshot.queue is not None and not (policy.explain or policy.estimates)
        else None
    )
    order: Iterable[PendingJob] = walk if walk is not None else queue_order(snapshot, policy, now, decisions)
    #: Whether a set-aside class's job may start after all once a job starts (the
    #: guarantees it is reclaimed under changed) or is evicted (capacity came back).
    take_back_on_start = may_evict and policy.reclaim and guarantees.active
    # Read once, not per job: the loop below runs for every pending job.
    reasons = decisions.pending_reasons
    starts = decisions.starts
    max_starts = policy.max_starts
    fits = idle.fits
    qos_max_walltime = snapshot.qos_max_walltime
    limit_blocker = limits.blocker if limits is not None else None
    #: Per walltime: the reservations a job could delay, their ids and what they hold
    #: back (they depend on nothing else of the job); emptied when one is added.
    in_the_way_by_walltime: dict[int, tuple[list[Reservation], tuple[int, ...], Mapping[str, Allocation]]] = {}
    no_reservation: tuple[list[Reservation], tuple[int, ...], Mapping[str, Allocation]] = ([], (), {})
    windows = WindowBook(snapshot.windows, snapshot.nodes, now) if snapshot.windows else None
    #: Per (walltime, reservation asked): the windows in the way of a start now and what
    #: they hold (``None``: a reservation job may not start now).
    window_entries: dict[tuple[int, str], tuple[tuple[Window, ...], Mapping[str, Allocation] | None]] = {}
    #: Jobs that would start now but for a window, with the windows: their reason names them.
    kept_out: dict[int, tuple[Window, ...]] = {}
    fits_but_for_windows: dict[tuple[object, ...], bool] = {}  # by key, until the next start
    #: Jobs of a reservation that may not start now, with why (their one blocker).
    outside: dict[int, Blocker] = {}

    for job in order:
        if job.dependencies:
            ready = readiness(job.dependencies, snapshot.dependency_states)
            if ready is not Readiness.READY:
                reasons[job.id] = (
                    PendingReason.DEPENDENCY if ready is Readiness.WAITING else PendingReason.DEPENDENCY_NEVER
                )
                if walk is not None:  # its class waits on the same jobs
                    walk.set_aside()
                continue
        if throttled is not None and job.array_limit and throttled.at_limit(job):
            reasons[job.id] = PendingReason.ARRAY_TASK_LIMIT
            if walk is not None:  # same array: until a task of it is evicted
                walk.set_aside()
            continue
        shape = request_shape(job)
        if not fits(job, shape):
            reasons[job.id] = PendingReason.NODES_UNAVAILABLE
            if walk is not None:
                walk.set_aside()
            continue
        if qos_max_walltime:
            qos_walltime = qos_max_walltime.get(job.qos)
            if qos_walltime is not None and job.walltime_seconds > qos_walltime:
                reasons[job.id] = PendingReason.WALLTIME_LIMIT
                if walk is not None:
                    walk.set_aside()
                continue
        if blocked:
            if walk is not None:  # nothing after it starts: its reason is all that is left
                break
            reasons[job.id] = PendingReason.PRIORITY
            continue
        if len(starts) >= max_starts:
            if walk is not None:
                break
            reasons[job.id] = PendingReason.CYCLE_LIMIT
            continue
        over = limit_blocker(job) if limit_blocker is not None else None
        if over is None and guarantees.active and guarantees.blocker(job) is not None:
            over = PendingReason.BORROW_LIMIT
        if over is not None:
            reasons[job.id] = over
            continue
        if reservations:
            in_the_way_entry = in_the_way_by_walltime.get(job.walltime_seconds)
            if in_the_way_entry is None:
                found = delayed_by(job, reservations, now)
                in_the_way_entry = (found, tuple(r.job_id for r in found), held_back(found))
                in_the_way_by_walltime[job.walltime_seconds] = in_the_way_entry
        else:
            in_the_way_entry = no_reservation
        in_the_way, in_the_way_ids, held = in_the_way_entry
        key: tuple[object, ...] = (shape, in_the_way_ids)
        unwindowed = held
        ways: tuple[Window, ...] = ()  # the windows in the way of a start now
        if windows is not None or job.reservation:
            window_key = (job.walltime_seconds, job.reservation)
            window_entry = window_entries.get(window_key)
            if window_entry is None:
                ways = tuple(windows.in_the_way(job, now)) if windows is not None else ()
                window_entry = window_entries[window_key] = (
                    ways,
                    windows.holds(job, now) if windows is not None else None,
                )
            ways, window_held = window_entry
            if window_held is None:  # a reservation job outside its window, or its window is gone
                there = windows.by_name.get(job.reservation) if windows is not None else None
                reasons[job.id] = PendingReason.RESERVATION if there is not None else PendingReason.NODES_UNAVAILABLE
                outside[job.id] = reservation_blocker(job, there)
                if walk is not None:
                    walk.set_aside()
                continue
            held = merge_holds(held, window_held)
            key = (shape, in_the_way_ids, job.reservation, ways)
        start = None if key in failed else ledger.place(job, held, policy.placement)
        if start is None and held is not unwindowed and not job.reservation and windows is not None:
            would_fit = fits_but_for_windows.get(key)
            if would_fit is None:
                would_fit = fits_but_for_windows[key] = ledger.place(job, unwindowed, policy.placement) is not None
            if would_fit:
                kept_out[job.id] = ways
        if start is None and may_evict:
            # What _preempt_for looks at of the job; the rest of its inputs change only on a start or an eviction
            level = service_level(job.attained_gpu_s, policy.service_levels) if policy.service_levels else 0
            asked = (key, job.account, job.qos, job.gpu_amount, level)
            victims = (
                None
                if asked in no_victims
                else _preempt_for(job, snapshot, policy, now, ledger, evictable, guarantees, in_the_way, level)
            )
            if victims is None:
                no_victims.add(asked)
            else:
                no_victims.clear()
                if walk is not None:  # capacity came back: a set-aside job may fit now
                    walk.take_back()
                start, evicted = victims
                decisions.evictions.extend(evicted)
                gone = {e.victim_id for e in evicted}
                releases.gone |= gone
                for victim_id in gone:
                    victim = evictable.pop(victim_id)
                    guarantees.release(victim)
                    if throttled is not None:
                        throttled.release(victim.array_job)
                    if limits is not None:
                        limits.release(victim)
        if start is not None and limits is not None:
            over = limits.blocker_after_placement(job, start)
            if over is not None:
                reasons[job.id] = over
                continue
            limits.commit(job, start)
        if start is not None:
            if fits_but_for_windows:
                fits_but_for_windows.clear()
            ledger.commit(start)
            guarantees.commit(job, start)
            if throttled is not None:
                throttled.commit(job.array_job)
            no_victims.clear()
            if take_back_on_start and walk is not None:
                walk.take_back()
            starts.append(start)
            if reservations:
                decisions.backfilled.add(job.id)
            releases.started.append(Release(now + timedelta(seconds=job.walltime_seconds), start.allocations, job.id))
            continue
        failed.add(key)
        if not policy.backfill:
            reasons[job.id] = PendingReason.RESOURCES
            blocked = policy.strict_order
            if walk is not None:
                walk.set_aside()
            continue
        account_tries = tries_by_account.get(job.account, 0)
        gets_one = tries < policy.reservations and (not per_account or account_tries < per_account)
        if gets_one:
            tries += 1
            account_tries += 1
            tries_by_account[job.account] = account_tries
        if walk is not None and (tries >= policy.reservations or (per_account and account_tries >= per_account)):
            # Its class meets a ledger no larger and holds no further reservation back.
            walk.set_aside()
        if not gets_one:
            reasons[job.id] = PendingReason.PRIORITY
            continue
        reasons[job.id] = PendingReason.RESOURCES
        listed, ordered = releases.for_reservation()
        reservation = plan_reservation(
            job, ledger, listed, reservations, policy.placement, ordered=ordered, windows=windows
        )
        if reservation is not None:
            reservations.append(reservation)
            decisions.reservations.append(reservation)
            in_the_way_by_walltime.clear()
    if walk is not None:
        decisions.priorities = walk.priorities
    decisions.borrowed = set(guarantees.borrowed)
    if carry is not None:
        carry.keep(decisions)
    if policy.explain:
        decisions.blockers = explain(
            order,
            decisions,
            Circumstances(snapshot, ledger, idle, limits, guarantees, reservations, policy.max_starts, throttled),
        )
    if policy.estimates:
        decisions.estimates = estimate_queue(
            order, decisions, ledger, ((r.at, r.allocations) for r in releases.all()), now, policy, windows
        )
    for job_id, set_aside in kept_out.items():
        if reasons.get(job_id) in (PendingReason.RESOURCES, PendingReason.PRIORITY):
            reasons[job_id] = PendingReason.NODES_UNAVAILABLE
            if policy.explain:
                names = [w.name for w in set_aside]
                decisions.blockers[job_id] = (
                    Blocker(PendingReason.NODES_UNAVAILABLE, window_text(set_aside), {"reservations": names}),
                )
    if policy.explain:
        for job_id, blocker in outside.items():
            decisions.blockers[job_id] = (blocker,)
    return decisions


def _preempt_for(
    job: PendingJob,
    snapshot: Snapshot,
    policy: Policy,
    now: datetime,
    ledger: Ledger,
    evictable: Mapping[int, RunningJob],
    guarantees: GuaranteeBook,
    in_the_way: list[Reservation],
    level: int,
) -> tuple[Start, list[Eviction]] | None:
    """Start ``job`` by evicting running jobs, if a victim set exists, and say who goes.

    Victims may come from three rules: the job's QOS may preempt theirs
    (``policy.preemption``), the job's account is below its guarantee and they run
    on borrowed capacity (``policy.reclaim``), or they have had more service than the
    job's service ``level`` allows (``policy.service_levels``). Borrowed jobs are taken
    first. The victims' resources go back to ``ledger``; the caller drops them from the
    books.
    """
    by_qos = (
        candidates(job, evictable.values(), snapshot.qos_preempts, now, policy.preempt_min_runtime_seconds)
        if policy.preemption
        else []
    )
    by_reclaim = (
        [
            r
            for r in guarantees.reclaimable(job, evictable.values())
            if r.started_at is None or (now - r.started_at).total_seconds() >= policy.preempt_min_runtime_seconds
        ]
        if policy.reclaim and guarantees.active
        else []
    )
    by_service = (
        outserved(level, evictable.values(), policy.service_levels, now, policy.preempt_min_runtime_seconds)
        if policy.service_levels
        else []
    )
    if not by_qos and not by_reclaim and not by_service:
        return None
    eligible = list({r.id: r for r in (*by_reclaim, *by_qos, *by_service)}.values())
    held = held_back(in_the_way)
    plan = plan_preemption(job, ledger, eligible, held, snapshot.qos_priorities, now, first=guarantees.borrowed)
    if plan is None:
        return None
    reclaimed = {r.id for r in by_reclaim}
    evictions = []
    for victim in plan.victims:
        ledger.release(victim.allocations)
        if victim.id in reclaimed:
            reason = (
                f"reclaimed for job {job.id}: account {job.account} is below its guarantee "
                f"and job {victim.id} ran on borrowed GPUs"
            )
        elif victim not in by_qos:
            reason = f"preempted by job {job.id}, which has had less service (least attained service first)"
        else:
            reason = f"preempted by job {job.id} (QOS {job.qos or '-'} over {victim.qos or '-'})"
        evictions.append(Eviction(victim.id, job.id, reason))
    return plan.start, evictions
