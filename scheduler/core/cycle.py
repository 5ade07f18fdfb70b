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
from scheduler.core.positions import queue_positions
from scheduler.core.preemption import candidates, outserved, plan_preemption
from scheduler.core.priority import PriorityCalculator, cluster_gpu_count, order_by_priority
from scheduler.core.qos import caps_anything as qos_caps_anything
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
    QueuePosition,
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
                ordered = iter([(end if end > now else now, i, a) for end, i, a in ends if i not in gone])
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
    8. With ``policy.positions``, count the jobs and GPU-hours ahead of every waiting
       job on the nodes it could run on (see ``scheduler.core.positions``).

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
    """One cycle, as numbered steps; each is one function below.

    1. Build the ledger of free capacity, scored when a job may be placed by
       fragmentation (:func:`_ledger`).
    2. Choose the walk: a kept queue class by class, or every pending job in queue
       order (:func:`_walk_order`).
    3. Open the books the walk consults and updates: quota limits, guarantees, array
       throttles, windows, releases, the jobs that may be evicted (:class:`_Cycle`).
    4. Walk the queue: each job is screened out, held back, started (by eviction if
       need be) or blocked, with a reason and perhaps a reservation (:func:`_walk`).
    5. Settle what the walk leaves: a kept queue's priorities, the borrowed jobs, the
       carry's ledger (:func:`_settle`).
    6. With ``policy.explain``, give every waiting job its blockers (:func:`_explain`).
    7. With ``policy.estimates``, plan the rest of the queue forward (:func:`_estimate`).
    8. Name the windows that kept jobs out (:func:`_name_windows`).
    9. With ``policy.positions``, give every waiting job its place in line, from the
       final reasons (:func:`_positions`).
    """
    decisions = Decisions()
    ledger = _ledger(snapshot, policy)
    walk, order = _walk_order(snapshot, policy, now, decisions)
    cycle = _Cycle(snapshot, policy, now, decisions, ledger, walk)
    _walk(cycle, order)
    _settle(cycle)
    if policy.explain:
        decisions.blockers = _explain(cycle, order)
    if policy.estimates:
        decisions.estimates = _estimate(cycle, order)
    _name_windows(cycle)
    if policy.positions:
        decisions.positions = _positions(cycle, order)
    return decisions


#: What the reservations a job could delay are to it: the reservations, their ids and
#: what they hold back (they depend only on its walltime).
_InTheWay = tuple[list[Reservation], tuple[int, ...], Mapping[str, Allocation]]
#: The windows in the way of a job's start now and what they hold (``None``: a job of a
#: reservation that may not start now).
_WindowEntry = tuple[tuple[Window, ...], Mapping[str, Allocation] | None]


def _ledger(snapshot: Snapshot, policy: Policy) -> Ledger:
    """Step 1: node capacity minus running allocations (the carry's, brought up to date,
    when there is one), with a fragmentation scorer when a job may be scored."""
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
    return ledger


def _walk_order(
    snapshot: Snapshot, policy: Policy, now: datetime, decisions: Decisions
) -> tuple[QueueWalk | None, Iterable[PendingJob]]:
    """Step 2: the walk of a kept queue and the walk itself, or ``None`` and every pending
    job in queue order (see :func:`queue_order`).

    A kept queue is walked class by class, setting aside a class whose job could not
    start (see ``scheduler.core.queue``), unless every job needs its reason and place
    in the order (explain, estimates, positions).
    """
    if snapshot.queue is not None and not (policy.explain or policy.estimates or policy.positions):
        walk = QueueWalk(snapshot.queue, priority_calculator(snapshot, policy, now))
        return walk, walk
    return None, queue_order(snapshot, policy, now, decisions)


def _limit_book(snapshot: Snapshot) -> LimitBook | None:
    """The quota and QOS limits' book, or ``None`` when no account, user or QOS limit
    caps anything."""
    if not (
        caps_anything(snapshot.account_limits)
        or caps_anything(snapshot.user_limits)
        or qos_caps_anything(snapshot.qos_limits)
    ):
        return None
    return LimitBook(
        snapshot.nodes,
        snapshot.running,
        snapshot.account_limits,
        snapshot.user_limits,
        snapshot.account_parents,
        snapshot.qos_limits,
    )


class _Cycle:
    """What the steps of one cycle share (step 3): its inputs, the books the walk
    consults and updates, and what it decided that later steps read back."""

    def __init__(
        self,
        snapshot: Snapshot,
        policy: Policy,
        now: datetime,
        decisions: Decisions,
        ledger: Ledger,
        walk: QueueWalk | None,
    ) -> None:
        carry = snapshot.carry
        self.snapshot = snapshot
        self.policy = policy
        self.now = now
        self.decisions = decisions
        self.ledger = ledger
        self.walk = walk
        self.idle = IdleCluster.shared(snapshot.nodes)
        self.releases = _Releases(snapshot.running, now, carry)
        self.limits = _limit_book(snapshot)
        self.guarantees = (
            carry.guarantee_book(snapshot)
            if carry is not None
            else GuaranteeBook(snapshot.running, snapshot.account_limits, snapshot.account_parents)
        )
        self.throttled = ArrayThrottle.of(snapshot)
        guarantees = self.guarantees
        self.may_evict: bool = (
            policy.preemption or (policy.reclaim and guarantees.active) or bool(policy.service_levels)
        )
        self.evictable: dict[int, RunningJob] = {r.id: r for r in snapshot.running} if self.may_evict else {}
        #: Whether a set-aside class's job may start after all once a job starts (the
        #: guarantees it is reclaimed under changed) or is evicted (capacity came back).
        self.take_back_on_start: bool = self.may_evict and policy.reclaim and guarantees.active
        self.windows = WindowBook(snapshot.windows, snapshot.nodes, now) if snapshot.windows else None
        self.reservations: list[Reservation] = []
        #: Requests no eviction could start since the last start or eviction.
        self.no_victims: set[tuple[object, ...]] = set()
        #: Per walltime: what the reservations are to a job (:data:`_InTheWay`); emptied
        #: when one is added.
        self.in_the_way_by_walltime: dict[int, _InTheWay] = {}
        #: Per (walltime, reservation asked): the windows in the way (:data:`_WindowEntry`).
        self.window_entries: dict[tuple[int, str], _WindowEntry] = {}
        #: Jobs that would start now but for a window, with the windows: their reason names them.
        self.kept_out: dict[int, tuple[Window, ...]] = {}
        #: By placement key, until the next start: whether the job fits without the windows.
        self.fits_but_for_windows: dict[tuple[object, ...], bool] = {}
        #: Jobs of a reservation that may not start now, with why (their one blocker).
        self.outside: dict[int, Blocker] = {}


# A measured hot loop, kept inline: once per pending job (10,000 in benchmarks/tick.py's figure).
def _walk(cycle: _Cycle, order: Iterable[PendingJob]) -> None:  # noqa: C901, PLR0915
    """Step 4: decide every job of ``order`` in turn (:func:`schedule`'s steps 3 to 6).

    In order: a job is screened out (dependencies, array throttle, no node could ever
    hold it, its QOS's walltime), held back (behind a blocked job, past the start cap,
    over a limit or guarantee), placed against the ledger less what reservations and
    windows hold back from it, started by eviction, and otherwise blocked.

    The books are read into locals once; what happens to few jobs (a cache miss, a
    start, an eviction, a reservation, a job outside its window) is a call.
    """
    snapshot, policy, decisions = cycle.snapshot, cycle.policy, cycle.decisions
    reasons = decisions.pending_reasons
    starts = decisions.starts
    max_starts = policy.max_starts
    placement = policy.placement
    backfill, strict_order = policy.backfill, policy.strict_order
    most_tries, per_account = policy.reservations, policy.reservations_per_account
    service_levels = policy.service_levels
    dependency_states = snapshot.dependency_states
    qos_max_walltime = snapshot.qos_max_walltime
    fits = cycle.idle.fits
    ledger, guarantees, limits, throttled = cycle.ledger, cycle.guarantees, cycle.limits, cycle.throttled
    limit_blocker = limits.blocker if limits is not None else None
    windows, walk, may_evict = cycle.windows, cycle.walk, cycle.may_evict
    reservations = cycle.reservations
    in_the_way_by_walltime, window_entries = cycle.in_the_way_by_walltime, cycle.window_entries
    fits_but_for_windows, kept_out, no_victims = cycle.fits_but_for_windows, cycle.kept_out, cycle.no_victims
    no_reservation: _InTheWay = ([], (), {})
    #: Placement keys that failed: not tried again this cycle (see :func:`schedule`).
    failed: set[tuple[object, ...]] = set()
    blocked = False
    #: Blocked jobs that were given a try at a reservation: the first ``policy.reservations``,
    #: at most ``policy.reservations_per_account`` of one account's.
    tries = 0
    tries_by_account: dict[str, int] = {}

    for job in order:
        # Screened out (step 3): none of these blocks a later job, and its class waits on
        # the same thing (jobs, array, request, QOS).
        if job.dependencies and (ready := readiness(job.dependencies, dependency_states)) is not Readiness.READY:
            screened = PendingReason.DEPENDENCY if ready is Readiness.WAITING else PendingReason.DEPENDENCY_NEVER
        elif throttled is not None and job.array_limit and throttled.at_limit(job):
            screened = PendingReason.ARRAY_TASK_LIMIT
        elif not fits(job, shape := request_shape(job)):
            screened = PendingReason.NODES_UNAVAILABLE
        elif qos_max_walltime and job.walltime_seconds > qos_max_walltime.get(job.qos, job.walltime_seconds):
            screened = PendingReason.WALLTIME_LIMIT
        else:
            screened = None
        if screened is not None:
            reasons[job.id] = screened
            if walk is not None:
                walk.set_aside()
            continue
        # Held back: behind a blocked job, past the cycle's start cap, over a limit.
        if blocked or len(starts) >= max_starts:
            if walk is not None:  # nothing after it starts: its reason is all that is left
                break
            reasons[job.id] = PendingReason.PRIORITY if blocked else PendingReason.CYCLE_LIMIT
            continue
        over = limit_blocker(job) if limit_blocker is not None else None
        if over is None and guarantees.active and guarantees.blocker(job) is not None:
            over = PendingReason.BORROW_LIMIT
        if over is not None:
            reasons[job.id] = over
            continue
        # Placed (step 4) on what reservations and windows do not hold back from it.
        if reservations:
            in_the_way_entry = in_the_way_by_walltime.get(job.walltime_seconds)
            if in_the_way_entry is None:
                in_the_way_entry = _in_the_way(cycle, job)
        else:
            in_the_way_entry = no_reservation
        in_the_way, in_the_way_ids, held = in_the_way_entry
        key: tuple[object, ...] = (shape, in_the_way_ids)
        unwindowed = held
        ways: tuple[Window, ...] = ()  # the windows in the way of a start now
        if windows is not None or job.reservation:
            window_entry = window_entries.get((job.walltime_seconds, job.reservation))
            if window_entry is None:
                window_entry = _window_entry(cycle, job)
            ways, window_held = window_entry
            if window_held is None:  # a reservation job outside its window, or its window is gone
                _keep_outside(cycle, job)
                continue
            held = merge_holds(held, window_held)
            key = (shape, in_the_way_ids, job.reservation, ways)
        start = None if key in failed else ledger.place(job, held, placement)
        if start is None and held is not unwindowed and not job.reservation and windows is not None:
            would_fit = fits_but_for_windows.get(key)
            if would_fit is None:
                would_fit = fits_but_for_windows[key] = ledger.place(job, unwindowed, placement) is not None
            if would_fit:
                kept_out[job.id] = ways
        # Started by eviction (step 5).
        if start is None and may_evict:
            # What _preempt_for looks at of the job; the rest of its inputs change only on a start or an eviction
            level = service_level(job.attained_gpu_s, service_levels) if service_levels else 0
            asked = (key, job.account, job.qos, job.gpu_amount, level)
            if asked not in no_victims:
                start = _evict_for(cycle, job, asked, in_the_way, level)
        if start is not None:
            if limits is not None:
                over = limits.blocker_after_placement(job, start)
                if over is not None:
                    reasons[job.id] = over
                    continue
                limits.commit(job, start)
            _start(cycle, job, start)
            continue
        # Blocked (step 6): it fits the cluster but not the free capacity.
        failed.add(key)
        if not backfill:
            reasons[job.id] = PendingReason.RESOURCES
            blocked = strict_order
            if walk is not None:
                walk.set_aside()
            continue
        account_tries = tries_by_account.get(job.account, 0)
        gets_one = tries < most_tries and (not per_account or account_tries < per_account)
        if gets_one:
            tries += 1
            account_tries += 1
            tries_by_account[job.account] = account_tries
        if walk is not None and (tries >= most_tries or (per_account and account_tries >= per_account)):
            # Its class meets a ledger no larger and holds no further reservation back.
            walk.set_aside()
        if gets_one:
            reasons[job.id] = PendingReason.RESOURCES
            _reserve(cycle, job)
        else:
            reasons[job.id] = PendingReason.PRIORITY


def _in_the_way(cycle: _Cycle, job: PendingJob) -> _InTheWay:
    """The reservations ``job`` could delay and what they hold back, kept for its walltime."""
    found = delayed_by(job, cycle.reservations, cycle.now)
    entry = (found, tuple(r.job_id for r in found), held_back(found))
    cycle.in_the_way_by_walltime[job.walltime_seconds] = entry
    return entry


def _window_entry(cycle: _Cycle, job: PendingJob) -> _WindowEntry:
    """The windows in the way of ``job`` starting now and what they hold, kept for its
    walltime and the reservation it asks for."""
    windows, now = cycle.windows, cycle.now
    ways = tuple(windows.in_the_way(job, now)) if windows is not None else ()
    entry = cycle.window_entries[(job.walltime_seconds, job.reservation)] = (
        ways,
        windows.holds(job, now) if windows is not None else None,
    )
    return entry


def _keep_outside(cycle: _Cycle, job: PendingJob) -> None:
    """``job`` asks for a reservation it may not start in now (or that is gone): its
    reason, and its one blocker for step 8."""
    windows = cycle.windows
    there = windows.by_name.get(job.reservation) if windows is not None else None
    cycle.decisions.pending_reasons[job.id] = (
        PendingReason.RESERVATION if there is not None else PendingReason.NODES_UNAVAILABLE
    )
    cycle.outside[job.id] = reservation_blocker(job, there)
    if cycle.walk is not None:
        cycle.walk.set_aside()


def _evict_for(
    cycle: _Cycle, job: PendingJob, asked: tuple[object, ...], in_the_way: list[Reservation], level: int
) -> Start | None:
    """Where ``job`` starts once the running jobs :func:`_preempt_for` picks are evicted,
    dropping them from the books, or ``None`` (remembering ``asked`` until the next
    start or eviction)."""
    victims = _preempt_for(
        job,
        cycle.snapshot,
        cycle.policy,
        cycle.now,
        cycle.ledger,
        cycle.evictable,
        cycle.guarantees,
        in_the_way,
        level,
    )
    if victims is None:
        cycle.no_victims.add(asked)
        return None
    cycle.no_victims.clear()
    if cycle.walk is not None:  # capacity came back: a set-aside job may fit now
        cycle.walk.take_back()
    start, evicted = victims
    cycle.decisions.evictions.extend(evicted)
    gone = {e.victim_id for e in evicted}
    cycle.releases.gone |= gone
    throttled, limits = cycle.throttled, cycle.limits
    for victim_id in gone:
        victim = cycle.evictable.pop(victim_id)
        cycle.guarantees.release(victim)
        if throttled is not None:
            throttled.release(victim.array_job)
        if limits is not None:
            limits.release(victim)
    return start


def _start(cycle: _Cycle, job: PendingJob, start: Start) -> None:
    """Start ``job`` at ``start``: commit it to the ledger and the books before the next
    job is tried (its limits are already committed)."""
    if cycle.fits_but_for_windows:
        cycle.fits_but_for_windows.clear()
    cycle.ledger.commit(start)
    cycle.guarantees.commit(job, start)
    if cycle.throttled is not None:
        cycle.throttled.commit(job.array_job)
    cycle.no_victims.clear()
    if cycle.take_back_on_start and cycle.walk is not None:
        cycle.walk.take_back()
    decisions = cycle.decisions
    decisions.starts.append(start)
    if cycle.reservations:
        decisions.backfilled.add(job.id)
    cycle.releases.started.append(
        Release(cycle.now + timedelta(seconds=job.walltime_seconds), start.allocations, job.id)
    )


def _reserve(cycle: _Cycle, job: PendingJob) -> None:
    """Plan a reservation for blocked ``job`` from the releases (see
    ``scheduler.core.backfill.plan_reservation``); later jobs may not delay it."""
    listed, ordered = cycle.releases.for_reservation()
    reservation = plan_reservation(
        job, cycle.ledger, listed, cycle.reservations, cycle.policy.placement, ordered=ordered, windows=cycle.windows
    )
    if reservation is not None:
        cycle.reservations.append(reservation)
        cycle.decisions.reservations.append(reservation)
        cycle.in_the_way_by_walltime.clear()


def _settle(cycle: _Cycle) -> None:
    """Step 5: a kept queue's priorities (computed as it was walked), the running and
    started jobs on borrowed capacity; the carry takes its ledger back."""
    decisions = cycle.decisions
    if cycle.walk is not None:
        decisions.priorities = cycle.walk.priorities
    decisions.borrowed = set(cycle.guarantees.borrowed)
    carry = cycle.snapshot.carry
    if carry is not None:
        carry.keep(decisions)


def _explain(cycle: _Cycle, order: Iterable[PendingJob]) -> dict[int, tuple[Blocker, ...]]:
    """Step 6: every waiting job's blockers (see ``scheduler.core.reasons.explain``)."""
    circumstances = Circumstances(
        cycle.snapshot,
        cycle.ledger,
        cycle.idle,
        cycle.limits,
        cycle.guarantees,
        cycle.reservations,
        cycle.policy.max_starts,
        cycle.throttled,
    )
    return explain(order, cycle.decisions, circumstances)


def _estimate(cycle: _Cycle, order: Iterable[PendingJob]) -> dict[int, datetime]:
    """Step 7: each waiting job's latest expected start, planned forward from this
    cycle's final ledger and releases (see ``scheduler.core.timeline.estimate_queue``)."""
    releases = [(r.at, r.allocations) for r in cycle.releases.all()]
    return estimate_queue(order, cycle.decisions, cycle.ledger, releases, cycle.now, cycle.policy, cycle.windows)


def _positions(cycle: _Cycle, order: Iterable[PendingJob]) -> dict[int, QueuePosition]:
    """Step 9: every waiting job's place in line, read off the walk's order and the
    final reasons (see ``scheduler.core.positions.queue_positions``)."""
    return queue_positions(order, cycle.decisions.pending_reasons, cycle.idle)


def _name_windows(cycle: _Cycle) -> None:
    """Step 8: a job that would have started but for a window waits for
    ``ReqNodeNotAvail`` naming the windows, not ``Resources`` or ``Priority``; a job
    outside its reservation gets the blocker that says why."""
    decisions, explaining = cycle.decisions, cycle.policy.explain
    reasons = decisions.pending_reasons
    for job_id, set_aside in cycle.kept_out.items():
        if reasons.get(job_id) in (PendingReason.RESOURCES, PendingReason.PRIORITY):
            reasons[job_id] = PendingReason.NODES_UNAVAILABLE
            if explaining:
                names = [w.name for w in set_aside]
                decisions.blockers[job_id] = (
                    Blocker(PendingReason.NODES_UNAVAILABLE, window_text(set_aside), {"reservations": names}),
                )
    if explaining:
        for job_id, blocker in cycle.outside.items():
            decisions.blockers[job_id] = (blocker,)


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
