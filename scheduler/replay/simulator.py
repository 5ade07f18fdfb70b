"""The replay loop: a trace through the real ``schedule()``, cycle by cycle."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol, cast

from scheduler.core.borrowing import GuaranteeBook
from scheduler.core.carry import Carry
from scheduler.core.cycle import schedule
from scheduler.core.fairness import bounded_slowdown
from scheduler.core.fairshare import AccountNode, FairShareTree, UsageInterval, UsagePolicy, charge, decay_usage_map
from scheduler.core.limits import LimitBook, caps_anything, duration_text
from scheduler.core.placement import IdleCluster
from scheduler.core.prediction import RuntimePredictor
from scheduler.core.priority import PriorityWeights
from scheduler.core.queue import PendingQueue
from scheduler.core.types import Allocation, Blocker, Limits, NodeView, PendingJob, Policy, RunningJob, Snapshot
from scheduler.replay.trace import EPOCH, SimulationError, TraceJob, request_for

#: Shortness and stretch (see ``scheduler.core.priority``) over fair-share: jobs
#: expected to be short go first, and a job whose wait passes twice its walltime
#: catches up with them.
SHORT_FIRST = PriorityWeights(shortness=200_000, stretch=200_000, stretch_target=2.0)
#: Stretch alone, far above fair-share and rising until a wait of 20 walltimes: the job
#: whose wait is longest for what it asked goes first (highest response ratio next),
#: which keeps every team's slowdown alike under overload.
STRETCH_FIRST = PriorityWeights(stretch=2_000_000, stretch_target=20.0)

#: Policies by name: strict-order FIFO, FIFO with EASY backfill, multifactor priority
#: with Fair Tree fair-share (each trace account one association, equal shares) plus
#: backfill, and the same with guarantees that are reclaimed by preemption (see
#: :data:`GUARANTEED`); then the overload policies: ``short-backfill`` orders by
#: :data:`SHORT_FIRST` (run times predicted from ended jobs), and
#: ``stretch-las-preempt`` by :data:`STRETCH_FIRST` with least-attained-service
#: preemption (a job with under 1,800 GPU-seconds of service may evict jobs past that
#: once they ran 2 h, by when they saved a checkpoint) and 12 backfill reservations
#: (whole-node jobs otherwise wait for nodes that small jobs keep filling). All with
#: pack placement. Replays need no blockers, so ``explain`` is off.
POLICIES: dict[str, Policy] = {
    "fifo": Policy(explain=False),
    "fifo-backfill": Policy(backfill=True, explain=False),
    "fairshare-backfill": Policy(backfill=True, priority=PriorityWeights(), explain=False),
    "fairshare-backfill-preempt": Policy(backfill=True, priority=PriorityWeights(), explain=False, reclaim=True),
    "short-backfill": Policy(backfill=True, priority=SHORT_FIRST, explain=False),
    "stretch-las-preempt": Policy(
        backfill=True,
        reservations=12,
        priority=STRETCH_FIRST,
        service_levels=(1_800,),
        preempt_min_runtime_seconds=7_200,
        reclaim=False,
        explain=False,
    ),
}

#: Policies replayed with guarantees (see :func:`guarantees_for`): accounts borrow idle
#: GPUs beyond them and reclaim them by preemption, as Philly's virtual clusters did
#: with their quotas.
GUARANTEED = frozenset({"fairshare-backfill-preempt"})

#: How often (simulated seconds) fair-share usage is brought up to date, as Slurm's
#: ``PriorityCalcPeriod`` (5 minutes by default).
USAGE_PERIOD_S = 300


def policy_named(name: str) -> Policy:
    """The registered policy ``name``. Raises :class:`SimulationError` listing the known ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise SimulationError(f"unknown policy {name!r}; known policies: {', '.join(sorted(POLICIES))}") from None


# --- Replay ---------------------------------------------------------------------------


#: What an eviction costs by default: a minute to reload, and work since the last of
#: the checkpoints a training job writes every half hour.
RESTART_S = 60
CHECKPOINT_INTERVAL_S = 1800


@dataclass(frozen=True, slots=True)
class RestartCost:
    """What an eviction costs the evicted job, so that preemptive policies' figures stay
    honest: its requeued run resumes from its last checkpoint (taken every
    ``checkpoint_interval_s`` of the run's progress; 0: never, it starts over) and first
    spends ``restart_s`` reloading. Both count in ``Replay.lost_gpu_s``."""

    restart_s: int = RESTART_S
    checkpoint_interval_s: int = CHECKPOINT_INTERVAL_S

    def __post_init__(self) -> None:
        if self.restart_s < 0 or self.checkpoint_interval_s < 0:
            raise SimulationError("restart_s and checkpoint_interval_s must be >= 0")

    def kept(self, progress_s: int) -> int:
        """Of ``progress_s`` seconds of work in one run, what its checkpoints saved."""
        interval = self.checkpoint_interval_s
        return progress_s // interval * interval if interval else 0


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one replayed job. Times are seconds on the trace's clock.

    ``start_s`` and ``allocations`` are those of its last run; ``first_start_s`` when it
    first started and ``runs`` how many runs it took (1 unless it was evicted).
    """

    job: TraceJob
    start_s: int
    end_s: int
    allocations: tuple[Allocation, ...]
    first_start_s: int = -1
    runs: int = 1

    @property
    def wait_s(self) -> int:
        """Time not spent on its own work: queued, and redoing or reloading after an
        eviction (``start - submit`` for a job that ran once)."""
        return self.jct_s - self.run_s

    @property
    def run_s(self) -> int:
        """Its work: ``min(duration, walltime)``."""
        return self.job.run_s

    @property
    def jct_s(self) -> int:
        return self.end_s - self.job.submit_s

    @property
    def gpus_held(self) -> int:
        return sum(len(a.gpu_indices) for a in self.allocations)

    @property
    def timed_out(self) -> bool:
        return self.job.times_out

    @property
    def bounded_slowdown(self) -> float:
        return bounded_slowdown(self.jct_s, self.run_s)


@dataclass(frozen=True, slots=True)
class Replay:
    """The outcome of one replay: a record per replayed job, in submission order."""

    records: tuple[JobRecord, ...]
    unplaceable: tuple[TraceJob, ...]
    capacity_gpus: int
    cycles: int
    #: Evictions applied (a job evicted twice counts twice) and the GPU-seconds they
    #: cost (see :class:`RestartCost`): work since the last checkpoint, redone, and the
    #: restart.
    preemptions: int = 0
    lost_gpu_s: int = 0
    #: Jobs the limits would never let start, even alone on an idle cluster, each with
    #: why in words (see :func:`_never_allowed`): set aside like ``unplaceable`` ones, in
    #: no other figure. A preview of a cut below an account's largest jobs has some.
    refused: tuple[tuple[TraceJob, str], ...] = ()


class ReplayWatch(Protocol):
    """Sees a replay as it runs (the backtest of start predictions does): each job as it
    ends on its own, and each cycle's snapshot before the cycle runs. Must not change
    what it is shown."""

    def ended(self, sim_id: int, job: TraceJob) -> None: ...

    def cycle(self, now: datetime, snapshot: Callable[[], Snapshot]) -> None:
        """``snapshot()`` builds the cycle's snapshot with every pending job in
        ``pending`` (no kept queue, no carry): called only by a watch that wants it, as
        it costs a pass over the queue."""


def guarantees_for(trace: Sequence[TraceJob], capacity_gpus: int) -> dict[str, Limits]:
    """Each trace account's guaranteed GPUs: its share of the trace's GPU-seconds times
    the cluster's GPUs, rounded down (so the guarantees never add up to more than the
    cluster). A documented, deterministic rule: a trace carries no quotas."""
    demand: dict[str, float] = {}
    for job in trace:
        demand[job.account] = demand.get(job.account, 0.0) + job.gpus * job.duration_s
    total = sum(demand.values()) or 1.0
    return {a: Limits(guaranteed_gpus=int(capacity_gpus * d / total)) for a, d in sorted(demand.items())}


class _LimitsAlone:
    """The limits as they stand for a job with nothing else running: what
    :func:`_never_allowed` asks (built once per replay; ``None`` where nothing caps)."""

    def __init__(
        self, nodes: tuple[NodeView, ...], limits: Mapping[str, Limits], parents: Mapping[str, str | None]
    ) -> None:
        self.caps = LimitBook(nodes, (), limits, {}, parents) if caps_anything(limits) else None
        borrowing = any(lim.borrowing_limit_gpus is not None for lim in limits.values())
        self.guarantees = GuaranteeBook((), limits, parents) if borrowing else None

    def blockers(self, request: PendingJob) -> list[Blocker]:
        found = self.caps.blockers(request) if self.caps is not None else []
        beyond = self.guarantees.blocker(request) if self.guarantees is not None else None
        return [*found, beyond] if beyond is not None else found


def _never_allowed(request: PendingJob, alone: _LimitsAlone) -> str:
    """Why the limits would keep ``request`` waiting forever ("" if they would not): each
    limit it breaks with nothing else of its account running, in words for an admin
    (a cap on GPUs or running jobs below the job, a walltime cap below its walltime, a
    guarantee plus borrowing limit below its GPUs)."""
    return "; ".join(_never_words(blocker, request) for blocker in alone.blockers(request))


def _never_words(blocker: Blocker, request: PendingJob) -> str:
    evidence = blocker.evidence
    who, limit, cap = f"{evidence['scope']} {evidence['name']}", str(evidence["limit"]), _whole(evidence["cap"])
    if limit == "max_walltime_seconds":
        return (
            f"{who} would allow at most {duration_text(cap)} of walltime; "
            f"it asks for {duration_text(request.walltime_seconds)}"
        )
    if limit == "max_running_jobs":
        return f"{who} would run no jobs at all (max running jobs {cap})"
    needs = evidence["requested"]
    if limit == "borrowing_limit_gpus":
        guaranteed = _whole(evidence["guaranteed"])
        borrowed = cap - guaranteed
        held = f"{cap} GPUs (its guarantee of {guaranteed} plus {borrowed} borrowed)"
        return f"{who} would hold at most {held}; it needs {needs}"
    model = limit.removeprefix("max_gpus_per_model[").removesuffix("]") + " " if limit != "max_gpus" else ""
    return f"{who} would allow at most {cap} {model}GPUs at once; it needs {needs}"


def _whole(figure: object) -> int:
    """A limit's figure from a blocker's evidence: limits are whole numbers."""
    return cast(int, figure)


class _Runs:
    """Each job's runs: where its work stands between evictions (see :class:`RestartCost`)."""

    def __init__(self, count: int, cost: RestartCost) -> None:
        self.cost = cost
        self.first = [-1] * count  # first start
        self.start = [-1] * count  # start of the current (or last) run
        self.runs = [0] * count
        self.done = [0] * count  # seconds of work saved by checkpoints
        self.attained = [0] * count  # GPU-seconds of service, every run
        self.overhead = [0] * count  # the current run's restart time

    def begin(self, i: int, t: int, job: TraceJob) -> int:
        """Job ``i`` starts a run at ``t``: when it ends (a requeued run gets a fresh
        walltime limit, as Slurm gives one)."""
        if self.first[i] < 0:
            self.first[i] = t
        self.overhead[i] = self.cost.restart_s if self.runs[i] else 0
        self.runs[i] += 1
        self.start[i] = t
        return t + min(job.walltime_s, self.overhead[i] + job.run_s - self.done[i])

    def evict(self, i: int, t: int, gpus: int) -> int:
        """Job ``i``'s run is stopped at ``t``: the GPU-seconds that costs it."""
        ran = t - self.start[i]
        saved = self.cost.kept(max(0, ran - self.overhead[i]))
        self.done[i] += saved
        self.attained[i] += ran * gpus
        return (ran - saved + self.cost.restart_s) * gpus


# The event loop of a replay, kept in one frame: once per event of traces of 10^5-10^6 jobs.
def replay(  # noqa: C901, PLR0915
    trace: Sequence[TraceJob],
    cluster: Sequence[NodeView],
    policy: Policy,
    guarantees: Mapping[str, Limits] | None = None,
    accounts: Sequence[AccountNode] = (),
    *,
    restart: RestartCost = RestartCost(),
    incremental: bool = True,
    watch: ReplayWatch | None = None,
) -> Replay:
    """Replay ``trace`` on ``cluster`` under ``policy``, calling the real ``schedule()``.

    ``guarantees`` are the accounts' limits (guarantees, GPU and job quotas: any
    ``Limits``); ``accounts`` the account tree with its shares (a site's own, for a
    preview of a change to it): without it every trace account is a top-level account
    of one share, and a trace account missing from it is added as one. ``restart`` is
    what an eviction costs its job. ``watch`` is shown every end and each cycle's
    snapshot (the simulator's ids are positions in ``Replay.records``).

    Steps:
    1. Order jobs by submit time, keeping row order for ties; shape each request
       (rule 2) with ``G`` = the largest GPU count of a node; set aside the jobs no
       idle cluster could hold (``unplaceable``) and those the limits would never let
       start (``refused``, with why).
    2. Take the next event time ``t``: the earliest pending submission or end.
    3. Release every job ending at ``t``; queue every job submitted at ``t``.
    4. If any job is pending, build the snapshot and call ``schedule()`` with
       ``now = EPOCH + t``; start what it says: the job holds its allocations from
       ``t`` until its work is done (``min(duration, walltime)``, less what earlier
       runs saved, plus the restart time after an eviction).
    5. Apply the cycle's evictions before its starts: a victim stops holding its GPUs
       at ``t`` and goes back to pending with its original submission (a requeue),
       keeping the work its checkpoints saved and carrying the service it had
       (``attained_gpu_s``); what it loses counts in ``lost_gpu_s``.
    6. Repeat from 2 until no event is left.

    Running jobs live in an insertion-ordered dict; pending ones in a
    :class:`~scheduler.core.queue.PendingQueue` kept across cycles, which the cycle
    walks class by class, so a cycle costs about one step per class of alike jobs and
    per start, not one per pending job. ``incremental=False`` hands every cycle all
    pending jobs instead (the same decisions, slower; the property tests compare).

    Raises :class:`SimulationError` if the policy starts an unknown or already started
    job, or leaves jobs pending when no event can ever wake it again (a policy bug).
    """
    nodes = tuple(cluster)
    if not nodes:
        raise SimulationError("the cluster has no nodes")
    gpus_per_node = max(len(n.gpus) for n in nodes)
    parents: dict[str, str | None] = {account: None for account in guarantees or {}}
    parents.update({a.name: a.parent for a in accounts})
    idle = IdleCluster(nodes)
    carry = Carry()  # consecutive cycles share their books

    # 1. Submission order; the simulator's ids are positions in it.
    ordered = sorted(trace, key=lambda j: j.submit_s)  # stable: row order breaks ties
    jobs: list[TraceJob] = []
    requests: list[PendingJob] = []
    unplaceable: list[TraceJob] = []
    refused: list[tuple[TraceJob, str]] = []
    alone = _LimitsAlone(nodes, guarantees or {}, parents)
    for job in ordered:
        request = request_for(job, gpus_per_node, sim_id=len(jobs))
        if not idle.fits(request):
            unplaceable.append(job)
        elif why := _never_allowed(request, alone):
            refused.append((job, why))
        else:
            jobs.append(job)
            requests.append(request)

    usage = _UsageBook(jobs, accounts) if policy.priority is not None else None
    #: Learns from jobs as they end, so a cycle sees only what had ended before it.
    predictor = RuntimePredictor() if policy.priority is not None and policy.priority.expects_run_times else None
    runs = _Runs(len(jobs), restart)
    allocations: list[tuple[Allocation, ...]] = [()] * len(jobs)
    pending: dict[int, PendingJob] = {}
    queue = PendingQueue(policy.service_levels) if incremental else None
    running: dict[int, RunningJob] = {}
    ends: list[tuple[int, int]] = []  # heap of (end_s, sim id); an evicted run's entry is stale
    end_of: dict[int, int] = {}  # sim id -> end of its current run
    finished: list[int] = [-1] * len(jobs)
    next_submit = 0
    cycles = 0
    preemptions = lost_gpu_s = 0

    def enqueue(request: PendingJob) -> None:
        pending[request.id] = request
        if queue is not None:
            queue.add(request)

    while next_submit < len(jobs) or ends:
        # 2.
        t = ends[0][0] if ends else jobs[next_submit].submit_s
        if next_submit < len(jobs):
            t = min(t, jobs[next_submit].submit_s)
        # 3.
        while ends and ends[0][0] == t:
            end_s, sim_id = heapq.heappop(ends)
            if end_of.get(sim_id) != end_s or sim_id not in running:
                continue  # the run it ended was evicted
            ended = running.pop(sim_id)
            del end_of[sim_id]
            finished[sim_id] = t
            if usage is not None:
                usage.ended.append((ended, t))
            if predictor is not None:
                done = jobs[sim_id]
                predictor.observe(done.account, done.account, done.walltime_s, done.run_s)
            if watch is not None:
                watch.ended(sim_id, jobs[sim_id])
        while next_submit < len(jobs) and jobs[next_submit].submit_s == t:
            enqueue(requests[next_submit])
            next_submit += 1
        if not pending:
            continue
        # 4.
        now = EPOCH + timedelta(seconds=t)
        snapshot = Snapshot(
            nodes,
            tuple(running.values()),
            tuple(pending.values()) if queue is None else (),
            account_limits=guarantees or {},
            account_parents=parents,
            carry=carry,
            queue=queue,
            runtime_ratios=predictor.ratios if predictor is not None else {},
        )
        if usage is not None:
            snapshot = replace(snapshot, fairshare_tree=usage.tree, usage=usage.as_of(t, running.values()))
        if watch is not None:
            watch.cycle(now, partial(_listing_pending, snapshot, pending))
        decisions = schedule(snapshot, policy, now)
        cycles += 1
        # 5.
        for eviction in decisions.evictions:
            victim = running.pop(eviction.victim_id, None)
            if victim is None:
                raise SimulationError(f"policy evicted job {eviction.victim_id}, which is not running at t={t}")
            del end_of[eviction.victim_id]
            if usage is not None:
                usage.ended.append((victim, t))
            preemptions += 1
            lost_gpu_s += runs.evict(eviction.victim_id, t, victim.gpus)
            enqueue(replace(requests[eviction.victim_id], attained_gpu_s=runs.attained[eviction.victim_id]))
        for start in decisions.starts:
            waited = pending.pop(start.job_id, None)
            if waited is None:
                raise SimulationError(f"policy started job {start.job_id}, which is not pending at t={t}")
            if queue is not None:
                queue.remove(start.job_id)
            job = jobs[start.job_id]
            allocations[start.job_id] = start.allocations
            end = runs.begin(start.job_id, t, job)
            running[start.job_id] = RunningJob(
                id=start.job_id,
                allocations=start.allocations,
                started_at=now,
                walltime_seconds=job.walltime_s,
                account=job.account,
                user=job.account,
                attained_gpu_s=waited.attained_gpu_s,
                gpu_model=waited.gpu_model,
            )
            heapq.heappush(ends, (end, start.job_id))
            end_of[start.job_id] = end

    if pending:
        raise SimulationError(
            f"policy left {len(pending)} job(s) pending with nothing left to happen (first: trace job "
            f"{jobs[next(iter(pending))].id}); a policy must start a job that fits an idle cluster"
        )
    records = tuple(
        JobRecord(job, runs.start[i], finished[i], allocations[i], runs.first[i], runs.runs[i])
        for i, job in enumerate(jobs)
    )
    capacity = sum(len(n.gpus) for n in nodes if n.schedulable)
    return Replay(records, tuple(unplaceable), capacity, cycles, preemptions, lost_gpu_s, tuple(refused))


def _listing_pending(snapshot: Snapshot, pending: Mapping[int, PendingJob]) -> Snapshot:
    """``snapshot`` with every pending job in ``pending``, without a kept queue or a carry."""
    return replace(snapshot, pending=tuple(pending.values()), queue=None, carry=None)


class _UsageBook:
    """Fair-share usage during a replay: decayed GPU-seconds per trace account.

    Brought up to date at most every ``USAGE_PERIOD_S`` simulated seconds, charging
    running jobs and those that ended since, with the same functions as the tick.
    """

    def __init__(self, jobs: Sequence[TraceJob], tree: Sequence[AccountNode] = ()) -> None:
        accounts = sorted({j.account for j in jobs})
        known = {a.name for a in tree}
        nodes = [*tree, *(AccountNode(a) for a in accounts if a not in known)]
        self.tree = FairShareTree.build(nodes, [(a, a) for a in accounts])
        self.policy = UsagePolicy()
        self.usage: dict[tuple[str, str], float] = {}
        self.updated_s: int | None = None
        self.ended: list[tuple[RunningJob, int]] = []  # jobs that ended, and when

    def as_of(self, t: int, running: Iterable[RunningJob]) -> dict[tuple[str, str], float]:
        if self.updated_s is not None and t - self.updated_s < USAGE_PERIOD_S:
            return self.usage
        now = EPOCH + timedelta(seconds=t)
        since = EPOCH + timedelta(seconds=self.updated_s) if self.updated_s is not None else None
        if since is not None:
            self.usage = decay_usage_map(self.usage, since, now, self.policy.half_life)
        spans: list[tuple[RunningJob, datetime | None]] = [
            (job, EPOCH + timedelta(seconds=end_s)) for job, end_s in self.ended
        ]
        spans += [(job, None) for job in running]
        for job, end in spans:
            if job.started_at is not None:
                interval = UsageInterval(job.account, job.user, job.started_at, end, job.gpus)
                self.usage = charge(self.usage, interval, now, self.policy, since)
        self.ended.clear()
        self.updated_s = t
        return self.usage
