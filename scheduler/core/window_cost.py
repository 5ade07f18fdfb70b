"""What a reservation or maintenance window would cost, before it is made.

The queue is planned twice with the core's own start estimates
(:func:`scheduler.core.estimate.estimate_starts`: nothing new arrives, every job runs to
its walltime limit): once as the world is, once with the window added. A pending job
whose planned start moves later is **delayed** by the difference; one planned without
the window and not at all with it is **unplanned** (its delay has no bound the plan
can see).

**GPU-hours displaced** is the work the window moves out of its way, in two parts:

- queued: for each delayed job, the GPUs it asks for times its delay in hours (a job
  of 4 GPUs planned 2 h later displaces 8 GPU-hours); jobs the window lets start
  sooner are not netted against it;
- running: for each job running on the window's nodes whose walltime limit falls
  after the window begins, its GPUs times the hours of its run inside the window. A
  window does not stop running jobs (Slurm's ``IGNORE_JOBS``, see
  ``scheduler.core.windows``): that work has to end, be cut, or overlap the window.

One start is better than another when it leaves fewer jobs unplanned, then when it
displaces fewer GPU-hours, then when it is earlier (:attr:`WindowCost.rank`).
:func:`least_costly_start` tries the starts an admin allows (a grid over the range plus
the instants jobs on the window's nodes end) and keeps the best.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from scheduler.core.cycle import latest_end
from scheduler.core.estimate import estimate_starts
from scheduler.core.types import Policy, Snapshot, Window

#: The spacing of the starts tried across an admin's range, unless more are needed.
STEP = timedelta(minutes=15)
#: The most starts of each kind (grid steps, job ends) one search plans the queue for.
MAX_CANDIDATES = 96
#: About how many jobs one search may plan in all (each start tried plans the queue):
#: a long queue gets fewer, more widely spaced starts (:func:`starts_for`), so that a
#: search answers within a web request.
PLANNED_JOBS = 100_000

_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Delay:
    """A pending job the window plans later."""

    job_id: int
    gpus: float
    #: Its planned start without the window, and with it (``None``: never, in the plan).
    before: datetime
    after: datetime | None

    @property
    def seconds(self) -> float | None:
        """How much later it starts; ``None`` when it is unplanned with the window."""
        return None if self.after is None else (self.after - self.before).total_seconds()

    @property
    def gpu_hours(self) -> float:
        """Its GPUs times its delay in hours (0 when unplanned: the delay is unknown)."""
        seconds = self.seconds
        return 0.0 if seconds is None else self.gpus * seconds / _HOUR


@dataclass(frozen=True, slots=True)
class Overrun:
    """A running job on the window's nodes still within its walltime when it begins."""

    job_id: int
    #: The GPUs it holds on the window's nodes.
    gpus: float
    #: Its walltime limit (the latest it ends).
    until: datetime
    #: Its GPUs times the hours of its run that fall inside the window.
    gpu_hours: float


@dataclass(frozen=True, slots=True)
class WindowCost:
    """What one window, at one start, does to the plan."""

    start_at: datetime
    end_at: datetime
    #: The jobs it plans later, the longest delay first (unplanned ones before all).
    delays: tuple[Delay, ...]
    #: The running jobs on its nodes that reach into it, the latest end first.
    overruns: tuple[Overrun, ...]

    @property
    def unplanned(self) -> int:
        return sum(1 for d in self.delays if d.after is None)

    @property
    def queued_gpu_hours(self) -> float:
        return sum(d.gpu_hours for d in self.delays)

    @property
    def running_gpu_hours(self) -> float:
        return sum(o.gpu_hours for o in self.overruns)

    @property
    def gpu_hours(self) -> float:
        """GPU-hours displaced: the queued part plus the running part."""
        return self.queued_gpu_hours + self.running_gpu_hours

    @property
    def rank(self) -> tuple[int, float, datetime]:
        """Smaller is better: fewer unplanned jobs, fewer GPU-hours displaced, earlier."""
        return (self.unplanned, self.gpu_hours, self.start_at)


@dataclass(frozen=True, slots=True)
class Suggestion:
    """The best start found in a range, and every start tried (in time order, up to the
    first that displaces nothing)."""

    best: WindowCost
    tried: tuple[WindowCost, ...]


def plan_without(snapshot: Snapshot, policy: Policy, now: datetime) -> dict[int, datetime]:
    """Job id -> planned start on ``snapshot`` as it is: the baseline every cost is
    measured against (computed once for a search)."""
    return estimate_starts(_alone(snapshot), policy, now)


def window_cost(
    snapshot: Snapshot,
    policy: Policy,
    now: datetime,
    window: Window,
    baseline: dict[int, datetime] | None = None,
) -> WindowCost:
    """What adding ``window`` to ``snapshot`` (which must not hold it already) costs.

    ``baseline`` is :func:`plan_without` of the same arguments, when the caller has it.
    Pure: plans copies, returns the delays and overruns (see the module's definitions).
    """
    before = baseline if baseline is not None else plan_without(snapshot, policy, now)
    with_it = replace(_alone(snapshot), windows=(*snapshot.windows, window))
    after = estimate_starts(with_it, policy, now)
    gpus = {job.id: job.gpu_amount for job in snapshot.pending}
    delays = []
    for job_id, start in before.items():
        moved = after.get(job_id)
        if moved is None or moved > start:
            delays.append(Delay(job_id, gpus.get(job_id, 0.0), start, moved))
    delays.sort(key=lambda d: (d.after is not None, -(d.seconds or 0.0), d.job_id))
    return WindowCost(window.start_at, window.end_at, tuple(delays), _overruns(snapshot, now, window))


def starts_for(pending: int) -> int:
    """How many steps (and job ends) a search over a queue of ``pending`` jobs tries:
    :data:`MAX_CANDIDATES`, or fewer (at least 2) so that it plans about
    :data:`PLANNED_JOBS` jobs at most."""
    return max(2, min(MAX_CANDIDATES, PLANNED_JOBS // (2 * max(1, pending))))


def candidate_starts(
    snapshot: Snapshot,
    now: datetime,
    nodes: frozenset[str],
    earliest: datetime,
    latest: datetime,
    step: timedelta = STEP,
    most: int = MAX_CANDIDATES,
) -> list[datetime]:
    """The starts a search tries in ``[earliest, latest]``, in time order: ``earliest``,
    then every ``step`` (widened so that at most ``most`` steps fit), ``latest``, and the
    first ``most`` walltime limits of the jobs running on ``nodes`` that fall inside (the
    instants the nodes free up: a window starting then displaces no running work).

    Raises ``ValueError`` when ``latest`` is before ``earliest``, ``step`` is not
    positive or ``most`` is below 1.
    """
    if latest < earliest:
        raise ValueError("the range ends before it begins")
    if step <= timedelta(0):
        raise ValueError("the step must be positive")
    if most < 1:
        raise ValueError("a search tries at least one step")
    span = latest - earliest
    steps = span // step
    if steps > most:
        step = span / most
        steps = most
    starts = {earliest + step * k for k in range(steps + 1)}
    starts.add(latest)
    ends = sorted(
        {
            end
            for job in snapshot.running
            if any(a.node in nodes for a in job.allocations)
            for end in (latest_end(job, now),)
            if earliest < end < latest
        }
    )
    starts.update(ends[:most])
    return sorted(starts)


def least_costly_start(
    snapshot: Snapshot,
    policy: Policy,
    now: datetime,
    window: Window,
    earliest: datetime,
    latest: datetime,
    step: timedelta = STEP,
    baseline: dict[int, datetime] | None = None,
    most: int | None = None,
) -> Suggestion:
    """The start in ``[earliest, latest]`` at which ``window`` (its nodes and length;
    its own start is ignored) costs least by :attr:`WindowCost.rank`, among
    :func:`candidate_starts` (``most``: :func:`starts_for` the snapshot's queue unless
    given); ties go to the earliest. ``baseline`` as for :func:`window_cost`. Raises
    ``ValueError`` as :func:`candidate_starts` does.

    Starts are tried in time order, and the search stops at the first that displaces
    nothing: no cost is below zero, so no later start can rank better (each start
    tried plans the whole queue; on a quiet site this spares most of them).
    """
    length = window.end_at - window.start_at
    baseline = baseline if baseline is not None else plan_without(snapshot, policy, now)
    tried: list[WindowCost] = []
    most = most if most is not None else starts_for(len(snapshot.pending))
    for start in candidate_starts(snapshot, now, window.nodes, earliest, latest, step, most):
        cost = window_cost(snapshot, policy, now, replace(window, start_at=start, end_at=start + length), baseline)
        tried.append(cost)
        if not cost.delays and not cost.overruns:
            break
    return Suggestion(min(tried, key=lambda cost: cost.rank), tuple(tried))


def _alone(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` without the state a replay's consecutive cycles share: each plan
    here is a one-off that must not advance it."""
    return snapshot if snapshot.carry is None else replace(snapshot, carry=None)


def _overruns(snapshot: Snapshot, now: datetime, window: Window) -> tuple[Overrun, ...]:
    found = []
    for job in snapshot.running:
        gpus = sum(a.gpu_amount for a in job.allocations if a.node in window.nodes)
        if not gpus:
            continue
        end = latest_end(job, now)
        inside = (min(end, window.end_at) - max(window.start_at, now)).total_seconds()
        if inside > 0:
            found.append(Overrun(job.id, gpus, end, gpus * inside / _HOUR))
    found.sort(key=lambda o: (-o.until.timestamp(), o.job_id))
    return tuple(found)
