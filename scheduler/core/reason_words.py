"""The words people read for each :class:`~scheduler.core.types.PendingReason`.

One table, so a reason reads the same in the API, the what-if answer, the pages and a
blocker the cycle could not re-derive, and a new reason cannot ship without words:
``tests/core/test_reason_words.py`` fails until it has an entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.core.types import PendingReason


@dataclass(frozen=True, slots=True)
class ReasonWords:
    """How a reason reads: ``title`` heads a blocker on a page (no full stop);
    ``sentence`` says it in full, true of a waiting job and of a job not yet submitted
    (a what-if), so it names no one ("its owner", not "you")."""

    title: str
    sentence: str


REASON_WORDS: Mapping[PendingReason, ReasonWords] = {
    PendingReason.RESOURCES: ReasonWords(
        "Waiting for free GPUs, CPUs or memory",
        "The GPUs, CPUs or memory it needs are busy now.",
    ),
    PendingReason.PRIORITY: ReasonWords(
        "Jobs ahead of it in the queue go first",
        "Jobs ahead of it in the queue wait for resources first.",
    ),
    PendingReason.NODES_UNAVAILABLE: ReasonWords(
        "The nodes that could run it are down, drained or reserved",
        "No schedulable node can hold it now (the nodes that could are down, drained or reserved for maintenance "
        "or for others).",
    ),
    PendingReason.CYCLE_LIMIT: ReasonWords(
        "The scheduler starts a bounded number of jobs per tick",
        "The scheduler starts a bounded number of jobs per tick; it waits for a later one.",
    ),
    PendingReason.ACCOUNT_GPU_LIMIT: ReasonWords(
        "Its account is at its GPU quota",
        "Its account (or an account above it) is at its GPU quota.",
    ),
    PendingReason.ACCOUNT_JOB_LIMIT: ReasonWords(
        "Its account is at its running-jobs quota",
        "Its account (or an account above it) is at its running-jobs quota.",
    ),
    PendingReason.USER_GPU_LIMIT: ReasonWords(
        "Its owner is at their GPU quota",
        "Its owner is at their GPU quota.",
    ),
    PendingReason.USER_JOB_LIMIT: ReasonWords(
        "Its owner is at their running-jobs quota",
        "Its owner is at their running-jobs quota.",
    ),
    PendingReason.DEPENDENCY: ReasonWords(
        "Waiting for the jobs it depends on",
        "It waits for the jobs it depends on.",
    ),
    PendingReason.DEPENDENCY_NEVER: ReasonWords(
        "A job it depends on ended in a way that can never satisfy the dependency",
        "A job it depends on ended in a way that can never satisfy the dependency.",
    ),
    PendingReason.WALLTIME_LIMIT: ReasonWords(
        "It asks for more time than its QOS or quota allows",
        "It asks for more walltime than its QOS or quota now allows.",
    ),
    PendingReason.BORROW_LIMIT: ReasonWords(
        "Its account has borrowed all the idle GPUs it may",
        "Its account has borrowed all it may beyond its guarantee.",
    ),
    PendingReason.ARRAY_TASK_LIMIT: ReasonWords(
        "Its array runs as many tasks at once as it allows",
        "Its job array already runs as many tasks at once as its throttle (%) allows.",
    ),
    PendingReason.RESERVATION: ReasonWords(
        "Waiting for its reservation",
        "It runs only in the reservation it asks for, which has not begun or cannot hold it now.",
    ),
    PendingReason.QOS_USER_GPU_LIMIT: ReasonWords(
        "Its owner holds all the GPUs its QOS allows a user",
        "Its owner's running jobs in its QOS hold all the GPUs the QOS allows one user (MaxTRESPerUser).",
    ),
    PendingReason.QOS_USER_CPU_LIMIT: ReasonWords(
        "Its owner holds all the CPUs its QOS allows a user",
        "Its owner's running jobs in its QOS hold all the CPUs the QOS allows one user (MaxTRESPerUser).",
    ),
    PendingReason.QOS_USER_JOB_LIMIT: ReasonWords(
        "Its owner runs all the jobs its QOS allows a user",
        "Its owner runs as many jobs in its QOS as the QOS allows one user at once (MaxJobsPerUser).",
    ),
    PendingReason.QOS_GROUP_GPU_LIMIT: ReasonWords(
        "Its QOS's running jobs hold all the GPUs it allows",
        "The running jobs of its QOS together hold all the GPUs the QOS allows (GrpTRES).",
    ),
    PendingReason.HELD: ReasonWords(
        "Held: release it to queue it",
        "It is held by its owner or an admin; release it to queue it.",
    ),
}


def reason_words(code: str) -> ReasonWords:
    """The words for a stored reason code (``Job.pending_reason``, a blocker's ``code``).

    Never raises: a code this version does not know (a row written before a reason was
    renamed, or by a newer version during a rolling deploy) reads as itself, so a page
    shows the code rather than failing. ``""`` (no reason) gets empty words.
    """
    if not code:
        return ReasonWords("", "")
    try:
        return REASON_WORDS[PendingReason(code)]
    except (ValueError, KeyError):
        return ReasonWords(code, f"It waits ({code}).")
