"""Job dependencies, as Slurm's ``--dependency``: afterok, afternotok, afterany.

A dependency is on another job's end: ``afterok`` wants it COMPLETED, ``afternotok``
wants it ended any other way (failed, cancelled, timed out, preempted, node failure),
``afterany`` just wants it ended. A dependency that can no longer be met (an
``afterok`` job that failed) is reported as such, so the job does not wait forever.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

KINDS = ("afterok", "afternotok", "afterany")
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"})


class Readiness(enum.Enum):
    READY = "ready"
    WAITING = "waiting"
    NEVER = "never"


def readiness(dependencies: Iterable[tuple[str, int]], states: Mapping[int, str]) -> Readiness:
    """Whether all ``(kind, job_id)`` dependencies are met, pending, or impossible.

    ``states`` maps job ids to their current state; a job missing from it (deleted)
    counts as ended without success, as Slurm treats a purged job.
    """
    result = Readiness.READY
    for kind, job_id in dependencies:
        state = states.get(job_id, "CANCELLED")
        if state not in ENDED:
            result = Readiness.WAITING
            continue
        succeeded = state == "COMPLETED"
        if (kind == "afterok" and not succeeded) or (kind == "afternotok" and succeeded):
            return Readiness.NEVER
    return result
