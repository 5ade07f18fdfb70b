"""What consecutive scheduling cycles of one caller share (``Snapshot.carry``).

A replay calls ``schedule()`` tens of thousands of times on snapshots that differ by a
few jobs: a job ended, one was submitted, the last cycle's starts now run. Rebuilding
the per-cycle books from every running job each time is most of a replay's cost; a
:class:`Carry` keeps them and applies only the differences. Decisions are the same
with or without one (``tests/core/test_carry.py``).
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta

from scheduler.core.borrowing import GuaranteeBook
from scheduler.core.fragmentation import Shape, WorkloadMix, shapes_of_allocations
from scheduler.core.placement import Ledger
from scheduler.core.queue import waiting
from scheduler.core.types import Allocation, Decisions, NodeView, RunningJob, Snapshot

#: A running job's walltime end (start + walltime), its id and what it holds.
End = tuple[datetime, int, tuple[Allocation, ...]]


class Carry:
    """What one caller's consecutive cycles share (put the same object in the
    ``carry`` of every snapshot of a replay): the free-capacity ledger of the running
    jobs, kept up to date instead of rebuilt; the running jobs' walltime ends, kept
    sorted; and the guarantee book of the last running set, reused while it is the
    same.

    Building the ledger costs one update per running job every cycle; between two
    cycles of a replay only the jobs that ended, started or were evicted differ. The
    carried ledger is the one the last cycle ended with (its starts taken, its victims
    given back); the next snapshot's running jobs are compared to what it holds, by job
    id and allocations, and only the differences are given back or taken. Any snapshot
    may be passed: the result is the ledger ``Ledger.from_snapshot`` would build, for
    valid snapshots (no GPU held twice); shares are counted in integer units, so the
    order of updates never matters. The running jobs' request shapes are counted along
    (:meth:`mix`).
    """

    def __init__(self) -> None:
        self._ledger: Ledger | None = None  # None while a cycle uses it (or before the first)
        self._lent: Ledger | None = None
        self._nodes: tuple[NodeView, ...] | None = None
        self._held: dict[int, tuple[Allocation, ...]] = {}  # job id -> what the ledger took for it
        self._models: dict[int, str] = {}  # job id -> the models it accepted (if any named)
        self._shapes: dict[Shape, int] = {}  # the shapes of ``_held``, counted
        self._ends: dict[int, tuple[RunningJob, datetime]] = {}  # job id -> job, start + walltime
        self._by_end: list[End] = []  # sorted
        #: The running jobs (id -> job), limits and tree the last guarantee book was built
        #: from, and a copy of it.
        self._book: tuple[dict[int, RunningJob], object, object, GuaranteeBook] | None = None

    def ledger(self, snapshot: Snapshot) -> Ledger:
        """The ledger of ``snapshot`` (capacity minus running jobs), lent to one cycle
        until :meth:`keep`. A cycle that never hands it back leaves nothing to reuse."""
        ledger, self._ledger = self._ledger, None
        if ledger is not None and snapshot.nodes is not self._nodes:
            ledger = None
        if ledger is not None:
            held, models = self._held, self._models
            current = {r.id: r for r in snapshot.running}
            for job_id in [i for i in held if i not in current]:
                allocations = held.pop(job_id)
                ledger.release(allocations)
                self._count(allocations, models.pop(job_id, ""), -1)
            for job_id, job in current.items():
                allocations = job.allocations
                prior = held.get(job_id)
                if prior is allocations or prior == allocations:
                    if models.get(job_id, "") != job.gpu_model:  # a start, kept before its model was known
                        self._count(allocations, models.pop(job_id, ""), -1)
                        self._hold(job)
                    continue
                if prior is not None:
                    ledger.release(prior)
                    self._count(prior, models.pop(job_id, ""), -1)
                ledger.take(allocations)
                self._hold(job)
        else:
            ledger = Ledger.from_snapshot(snapshot)
            self._held, self._models, self._shapes = {}, {}, {}
            for job in snapshot.running:
                self._hold(job)
        self._lent, self._nodes = ledger, snapshot.nodes
        return ledger

    def _hold(self, job: RunningJob) -> None:
        """Note that the ledger took ``job``'s allocations, and count its shapes."""
        self._held[job.id] = job.allocations
        if job.gpu_model:
            self._models[job.id] = job.gpu_model
        self._count(job.allocations, job.gpu_model, 1)

    def _count(self, allocations: tuple[Allocation, ...], model: str, step: int) -> None:
        shapes = self._shapes
        for shape in shapes_of_allocations(allocations, model):
            count = shapes.get(shape, 0) + step
            if count:
                shapes[shape] = count
            else:
                del shapes[shape]

    def mix(self, snapshot: Snapshot) -> WorkloadMix:
        """``WorkloadMix.of(snapshot.running, snapshot.pending)``, from the running jobs'
        shapes counted as the ledger was brought up to date (call after :meth:`ledger`)."""
        return WorkloadMix.counted(self._shapes, waiting(snapshot))

    def running_ends(self, running: tuple[RunningJob, ...]) -> list[End] | None:
        """``(start + walltime, job id, allocations)`` of every running job, sorted,
        kept across cycles (only jobs that ended or started move); ``None`` if a job
        has no known start (its latest end depends on ``now``).

        A cycle that needs a reservation walks these in time order instead of making
        and sorting one release per running job (``plan_reservation(ordered=...)``).
        """
        ends, by_end = self._ends, self._by_end
        current = {r.id: r for r in running}
        for job_id in [i for i, (job, _) in ends.items() if current.get(i) is not job]:
            _, end = ends.pop(job_id)
            del by_end[bisect.bisect_left(by_end, (end, job_id))]
        for job in running:
            if job.id in ends:
                continue
            if job.started_at is None:
                return None
            end = job.started_at + timedelta(seconds=job.walltime_seconds)
            ends[job.id] = (job, end)
            bisect.insort(by_end, (end, job.id, job.allocations))
        return by_end

    def guarantee_book(self, snapshot: Snapshot) -> GuaranteeBook:
        """``GuaranteeBook(snapshot.running, ...)`` for one cycle to update; a copy of the
        last one while the running jobs (the same objects), limits and tree are the same.

        The book depends on nothing else (the running jobs' order does not matter: it
        sorts them), and a replay's cycles for a submission that started nothing see
        the same running jobs as the cycle before.
        """
        running, limits, parents = snapshot.running, snapshot.account_limits, snapshot.account_parents
        memo = self._book
        if memo is not None:
            jobs, last_limits, last_parents, book = memo
            if (
                last_limits is limits
                and last_parents is parents
                and len(jobs) == len(running)
                and all(jobs.get(r.id) is r for r in running)
            ):
                return book.copy()
        book = GuaranteeBook(running, limits, parents)
        self._book = ({r.id: r for r in running}, limits, parents, book.copy())
        return book

    def keep(self, decisions: Decisions) -> None:
        """Take the lent ledger back, noting what the cycle did to it: victims given
        back, starts taken."""
        for eviction in decisions.evictions:
            allocations = self._held.pop(eviction.victim_id, None)
            if allocations is not None:
                self._count(allocations, self._models.pop(eviction.victim_id, ""), -1)
        for start in decisions.starts:
            # counted as any model until the next snapshot runs it (see ``ledger``)
            self._held[start.job_id] = start.allocations
            self._count(start.allocations, "", 1)
        self._ledger, self._lent = self._lent, None


def holds_each_gpu_once(running: tuple[RunningJob, ...]) -> bool:
    """Whether no GPU is held whole by two running jobs, or whole by one and shared by
    another: what a :class:`Carry` needs to bring its ledger up to date by differences
    (a whole GPU is a flag, and a flag given back by one of two holders would read
    free). A replay's snapshots always are; a live one is unless the records are wrong."""
    whole: set[tuple[str, int]] = set()
    shared: set[tuple[str, int]] = set()
    for job in running:
        for allocation in job.allocations:
            node = allocation.node
            for index in allocation.gpu_indices:
                key = (node, index)
                if allocation.gpu_share:
                    if key in whole:
                        return False
                    shared.add(key)
                elif key in whole or key in shared:
                    return False
                else:
                    whole.add(key)
    return True
