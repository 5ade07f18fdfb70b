"""Where each waiting job stands in line: how many jobs, and how many GPU-hours, are
ahead of it.

"How many are in front of me?" is the first thing a person waiting asks. The answer is
read off the cycle's own order (the order ``schedule()`` walked the queue in: priority,
then age), once per cycle, so that a page or ``qm show`` shows it without planning
anything (``Policy.positions``; the tick records the line, ``scheduler.tick.positions``).

What stands **ahead** of a waiting job J, and so what is counted:

1. a pending job that the cycle ordered before J,
2. that waits only for its turn at the capacity (its reason is ``Resources``,
   ``Priority`` or ``SchedCycleLimit``, :data:`IN_LINE`): a job waiting first for
   something else (a dependency, a quota limit, its array's throttle, a reservation or
   maintenance window, hardware no node has) does not stand in J's way now, nor does a
   held job (the scheduler does not see it) or a job this cycle started,
3. and that could run on a node J could run on: J's *pool* is the nodes that could hold
   (one node's share of) J were they idle (``IdleCluster.holders``), whether up now or
   not. A job whose pool shares no node with J's (another cluster, another GPU model)
   is in another line.

The **GPU-hours ahead** are those jobs' GPUs (a share of a GPU counts as its fraction)
times their walltimes: the most GPU time they may take before J's turn, as the start
estimate assumes every job runs to its limit.

J gets a position if the cycle did not start it and its pool is not empty (some node
could ever hold it); a position of 0 jobs ahead means next in line.

Cost: one step per waiting job plus one per pool its pool overlaps. Pools are found once
per request shape (the idle cluster keeps each shape's nodes) and are few, since many
shapes share one set of nodes: the synthetic site's 10,000 waiting jobs fall in 7.
``tick_positions_ms`` in ``benchmarks/tick.py`` times this step alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.core.placement import IdleCluster, request_shape
from scheduler.core.types import PendingJob, PendingReason, QueuePosition

#: The reasons of a job that waits only for its turn at the capacity: such a job stands
#: ahead of those after it in the order.
IN_LINE = frozenset({PendingReason.RESOURCES, PendingReason.PRIORITY, PendingReason.CYCLE_LIMIT})

_SECONDS_PER_HOUR = 3600.0


class _Pools:
    """The pools of one cycle's jobs: distinct sets of node names, numbered as they are
    met, each with the numbers of the pools it shares a node with (itself included)."""

    def __init__(self, idle: IdleCluster) -> None:
        self.idle = idle
        self.by_shape: dict[tuple[object, ...], int] = {}
        self.numbers: dict[frozenset[str], int] = {}
        self.nodes: list[frozenset[str]] = []
        #: Pool number -> the numbers of the pools that overlap it.
        self.overlapping: list[list[int]] = []

    def number(self, job: PendingJob, shape: tuple[object, ...]) -> int:
        """The number of ``job``'s pool (``shape``: its request shape, not met before),
        or -1 when no node could ever hold it."""
        pool = self.by_shape[shape] = self._number(self.idle.holders(job, shape))
        return pool

    def _number(self, nodes: frozenset[str]) -> int:
        if not nodes:
            return -1
        pool = self.numbers.get(nodes)
        if pool is not None:
            return pool
        pool = len(self.nodes)
        self.numbers[nodes] = pool
        mine = [pool]
        for other, names in enumerate(self.nodes):
            if not names.isdisjoint(nodes):
                mine.append(other)
                self.overlapping[other].append(pool)
        self.nodes.append(nodes)
        self.overlapping.append(mine)
        return pool


def queue_positions(
    order: Iterable[PendingJob], reasons: Mapping[int, PendingReason], idle: IdleCluster
) -> dict[int, QueuePosition]:
    """Each waiting job's position (see the module docstring), from the cycle's ``order``
    of the pending jobs, its final ``reasons`` (a job without one started) and the idle
    cluster that says which nodes could hold a job.

    Every pool keeps the jobs in line met so far and their GPU-seconds; a job's position
    is the sum over the pools that overlap its own. (Summing on each read, rather than
    adding each job to every pool it overlaps, keeps a pool met late in the walk right:
    the pools before it have kept their own counts.)"""
    pools = _Pools(idle)
    by_shape, overlapping = pools.by_shape, pools.overlapping
    in_line = IN_LINE
    jobs: list[int] = []  # per pool: its jobs in line so far
    gpu_seconds: list[float] = []  # per pool: their GPUs x walltime seconds
    positions: dict[int, QueuePosition] = {}
    for job in order:
        reason = reasons.get(job.id)
        if reason is None:
            continue  # started by this cycle
        shape = request_shape(job)
        pool = by_shape.get(shape)
        if pool is None:
            pool = pools.number(job, shape)
            if pool == len(jobs):
                jobs.append(0)
                gpu_seconds.append(0.0)
        if pool < 0:
            continue
        ahead = 0
        seconds = 0.0
        for other in overlapping[pool]:
            ahead += jobs[other]
            seconds += gpu_seconds[other]
        positions[job.id] = (ahead, seconds / _SECONDS_PER_HOUR)
        if reason in in_line:
            jobs[pool] += 1
            gpu_seconds[pool] += job.gpu_amount * job.walltime_seconds
    return positions
