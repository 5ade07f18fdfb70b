"""The pending queue kept between cycles, walked class by class.

A replay of an overloaded cluster holds tens of thousands of pending jobs, and a cycle
that orders and walks all of them at every event costs minutes per replay. Most of
that walk is repetition: jobs that ask for the same thing (shape, walltime, account,
QOS...) meet the same fate in one cycle. A :class:`PendingQueue` keeps the pending
jobs across cycles in *classes* of such jobs, each oldest first; a cycle walks them
through a :class:`QueueWalk`, a merge of the classes in queue order, and may set a
class aside once its first job could not start: every later job of that class would
fail the same way, since within a cycle free capacity only shrinks. The walk then
costs about one step per class and per start instead of one per pending job.

Why the merge is exact: the queue order is ``(-priority, submitted_at, id)`` (priority
0 without multifactor weights). Within a class every factor but age is
the same and age only grows with the time waited, so a class's members, oldest first,
are already in queue order; merging the classes by their heads gives the order a sort
of every job would.

Decisions are the same as with ``Snapshot.pending`` (a property test replays both);
only the jobs the walk never reached get no reason or priority, so callers that show
reasons for every job (the tick) pass the pending jobs instead.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import fields
from datetime import datetime

from scheduler.core.placement import request_shape
from scheduler.core.priority import PriorityBreakdown, PriorityCalculator
from scheduler.core.types import PendingJob, Snapshot

#: What orders one job in a walk: ``(-priority, submitted_at, id)``.
OrderKey = tuple[float, datetime, int]

#: The fields two jobs must share to be treated alike in a cycle: all but identity
#: (``id``), age (``submitted_at``) and the service a job has had (only its level
#: counts, and the key gets that instead).
IDENTITY_FIELDS = frozenset({"id", "submitted_at", "attained_gpu_s"})
CLASS_FIELDS = tuple(f.name for f in fields(PendingJob) if f.name not in IDENTITY_FIELDS)


def service_level(attained_gpu_s: int, levels: tuple[int, ...]) -> int:
    """Which of the queues separated by ``levels`` (GPU-seconds, ascending) a job with
    that much service is in: 0 below the first threshold (Tiresias's discretized
    least-attained-service; no levels: everyone is in queue 0)."""
    return bisect.bisect_right(levels, attained_gpu_s)


def class_key(job: PendingJob, levels: tuple[int, ...] = ()) -> tuple[object, ...]:
    """The class of ``job``: every field in :data:`CLASS_FIELDS` (its request shape and
    the rest), and its service level."""
    return (
        *request_shape(job),
        job.walltime_seconds,
        job.account,
        job.user,
        job.qos,
        job.nice,
        job.dependencies,
        job.array_job,
        job.array_limit,
        job.reservation,
        service_level(job.attained_gpu_s, levels),
    )


def waiting(snapshot: Snapshot) -> list[PendingJob] | tuple[PendingJob, ...]:
    """The snapshot's pending jobs, from its kept queue if it has one."""
    return snapshot.queue.jobs() if snapshot.queue is not None else snapshot.pending


def _age_order(job: PendingJob) -> tuple[datetime, int]:
    return (job.submitted_at, job.id)


class JobClass:
    """The pending jobs of one class, oldest first (``first`` skips those gone)."""

    def __init__(self) -> None:
        self.jobs: list[PendingJob] = []
        self.first = 0

    def add(self, job: PendingJob) -> None:
        jobs = self.jobs
        if not jobs or _age_order(jobs[-1]) < _age_order(job):
            jobs.append(job)
        else:  # a requeued job goes back to its place by age
            bisect.insort(jobs, job, lo=self.first, key=_age_order)

    def remove(self, job_id: int) -> PendingJob:
        jobs = self.jobs
        if jobs[self.first].id == job_id:  # a cycle starts a class's jobs oldest first
            job = jobs[self.first]
            self.first += 1
            if self.first > 64 and self.first * 2 > len(jobs):
                del jobs[: self.first]
                self.first = 0
            return job
        for position in range(self.first, len(jobs)):
            if jobs[position].id == job_id:
                return jobs.pop(position)
        raise KeyError(job_id)

    def __len__(self) -> int:
        return len(self.jobs) - self.first


class PendingQueue:
    """Pending jobs kept across the cycles of one caller (a replay), in classes.

    Add jobs as they are submitted or requeued and remove them as they start; hand it
    to ``schedule()`` as ``Snapshot.queue`` (with ``Snapshot.pending`` empty).
    ``levels`` are the policy's service levels (``Policy.service_levels``).
    """

    def __init__(self, levels: tuple[int, ...] = ()) -> None:
        self.levels = levels
        self.classes: dict[tuple[object, ...], JobClass] = {}
        self._class_of: dict[int, JobClass] = {}
        #: Jobs that ask for a GPU share, CPUs or memory: only they make placement score.
        self.scored = 0
        #: Throttled arrays -> their pending tasks.
        self.throttled: dict[int, int] = {}

    def add(self, job: PendingJob) -> None:
        """Queue ``job``. Raises ``ValueError`` if a job with its id is queued."""
        if job.id in self._class_of:
            raise ValueError(f"job {job.id} is already queued")
        key = class_key(job, self.levels)
        members = self.classes.get(key)
        if members is None:
            members = self.classes[key] = JobClass()
        members.add(job)
        self._class_of[job.id] = members
        if job.gpu_share or job.cpu_millis_per_node or job.memory_mib_per_node:
            self.scored += 1
        if job.array_limit:
            self.throttled[job.array_job] = self.throttled.get(job.array_job, 0) + 1

    def remove(self, job_id: int) -> PendingJob:
        """Take job ``job_id`` out (it started). Raises ``KeyError`` if it is not queued."""
        members = self._class_of.pop(job_id)
        job = members.remove(job_id)
        if job.gpu_share or job.cpu_millis_per_node or job.memory_mib_per_node:
            self.scored -= 1
        if job.array_limit:
            left = self.throttled[job.array_job] - 1
            if left:
                self.throttled[job.array_job] = left
            else:
                del self.throttled[job.array_job]
        return job

    def __len__(self) -> int:
        return len(self._class_of)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._class_of

    def jobs(self) -> list[PendingJob]:
        """Every queued job, class by class (not in queue order)."""
        return [job for members in self.classes.values() for job in members.jobs[members.first :]]


class QueueWalk:
    """One cycle's walk of a :class:`PendingQueue` in queue order, class by class.

    Iterating yields the jobs in the order ``schedule()`` would sort them. After a job,
    the cycle may call :meth:`set_aside` (no later job of its class can start in this
    cycle) and, when something happened that may let such a job start after all (an
    eviction), :meth:`take_back` to walk the set-aside classes again from where the
    walk is now.
    """

    def __init__(self, queue: PendingQueue, calculator: PriorityCalculator | None) -> None:
        self.calculator = calculator
        #: The walked jobs' priorities (``Decisions.priorities`` of a kept queue).
        self.priorities: dict[int, PriorityBreakdown] = {}
        self._heap: list[tuple[OrderKey, JobClass, int]] = []
        for members in queue.classes.values():
            if members.first < len(members.jobs):
                self._heap.append((self.key(members.jobs[members.first]), members, members.first))
        heapq.heapify(self._heap)
        self._after: tuple[JobClass, int] | None = None  # the class of the job just yielded, and its next index
        self._now: OrderKey | None = None
        self._set_aside: list[tuple[JobClass, int]] = []

    def key(self, job: PendingJob) -> OrderKey:
        calculator = self.calculator
        if calculator is None:
            return (0.0, job.submitted_at, job.id)
        breakdown = calculator.breakdown(job)
        self.priorities[job.id] = breakdown
        return (-breakdown.total, job.submitted_at, job.id)

    def __iter__(self) -> Iterator[PendingJob]:
        return self

    def __next__(self) -> PendingJob:
        after = self._after
        if after is not None:
            members, position = after
            self._push(members, position)
        if not self._heap:
            raise StopIteration
        order, members, position = heapq.heappop(self._heap)
        self._now = order
        self._after = (members, position + 1)
        return members.jobs[position]

    def _push(self, members: JobClass, position: int) -> None:
        if position < len(members.jobs):
            heapq.heappush(self._heap, (self.key(members.jobs[position]), members, position))

    def set_aside(self) -> None:
        """The rest of the class of the job just yielded cannot start in this cycle."""
        if self._after is not None:
            self._set_aside.append(self._after)
            self._after = None

    def take_back(self) -> None:
        """Walk the set-aside classes again, each from its first job after the walk's
        position (the jobs before it were passed while they could not start)."""
        now = self._now
        if now is None:
            return
        for members, position in self._set_aside:
            # the first job ordered after the walk's position
            self._push(members, bisect.bisect_right(members.jobs, now, lo=position, key=self.key))
        self._set_aside.clear()
