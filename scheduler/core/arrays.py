"""Job array throttles (``sbatch --array=0-999%50``): at most N tasks of one array run at once.

A task is a job of its own everywhere else in the core; only this book knows that tasks
belong together. It counts the running tasks of every throttled array and the tasks a
cycle starts, so a waiting task past its array's limit gets ``JobArrayTaskLimit`` and,
like a job waiting on a dependency, holds no one else up.
"""

from __future__ import annotations

from scheduler.core.types import PendingJob, Snapshot


class ArrayThrottle:
    """Running tasks per throttled array, kept through one cycle."""

    def __init__(self, running: dict[int, int]) -> None:
        self.running = running

    @classmethod
    def of(cls, snapshot: Snapshot) -> ArrayThrottle | None:
        """The book for ``snapshot``, or ``None`` when no waiting task is throttled (the
        common case costs one pass over the pending jobs and nothing per running job)."""
        queue = snapshot.queue
        arrays = (
            set(queue.throttled)
            if queue is not None
            else {job.array_job for job in snapshot.pending if job.array_limit}
        )
        if not arrays:
            return None
        running: dict[int, int] = dict.fromkeys(arrays, 0)
        for job in snapshot.running:
            if job.array_job in running:
                running[job.array_job] += 1
        return cls(running)

    def at_limit(self, job: PendingJob) -> bool:
        """Whether ``job``'s array already runs as many tasks as its limit allows."""
        return self.running.get(job.array_job, 0) >= job.array_limit

    def running_tasks(self, array_job: int) -> int:
        return self.running.get(array_job, 0)

    def commit(self, array_job: int) -> None:
        """A task of ``array_job`` started this cycle."""
        if array_job in self.running:
            self.running[array_job] += 1

    def release(self, array_job: int) -> None:
        """A running task of ``array_job`` was evicted this cycle."""
        if array_job in self.running:
            self.running[array_job] -= 1
