"""Store what a cycle says about jobs that do not start: reasons, blockers, borrowing.

The tick writes only what changed since the snapshot, in one statement (see
``scheduler.bulk``: a waiting job's blockers change on most ticks, as the jobs ahead of
it start), and only on jobs still in the state the cycle saw (a job cancelled meanwhile
keeps what its cancel wrote).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

from scheduler.bulk import update_rows
from scheduler.choices import ACTIVE_STATES, JobState
from scheduler.core.types import Blocker, Decisions, PendingReason
from scheduler.models import Job
from scheduler.snapshot import LoadedSnapshot


def blockers_to_json(blockers: Iterable[Blocker]) -> list[dict[str, Any]]:
    return [{"code": str(b.code), "message": b.message, "evidence": dict(b.evidence)} for b in blockers]


def held_blockers(by: str) -> list[dict[str, Any]]:
    """What a held job shows: held is a blocker of its own, whatever else holds it."""
    return blockers_to_json([Blocker(PendingReason.HELD, f"held by {by}; release it to queue it", {"by": by})])


def store_waiting(decisions: Decisions, loaded: LoadedSnapshot) -> int:
    """Write changed pending reasons and blockers of still-PENDING jobs; returns the count."""
    changed: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    for job_id, reason in decisions.pending_reasons.items():
        stored = blockers_to_json(decisions.blockers.get(job_id, ()))
        if loaded.pending_reasons.get(job_id) != reason or loaded.pending_blockers.get(job_id) != stored:
            changed[job_id] = (str(reason), stored)
    ids = list(changed)
    update_rows(
        Job,
        ids,
        {"pending_reason": [changed[i][0] for i in ids], "pending_blockers": [changed[i][1] for i in ids]},
        where={"state": JobState.PENDING},
    )
    return len(ids)


def store_borrowed(decisions: Decisions, loaded: LoadedSnapshot, started: Iterable[int]) -> None:
    """Mark running jobs that now run on borrowed GPUs, and unmark those that no longer do
    (older jobs of their account ended). Jobs started by this cycle are marked by the claim."""
    running = decisions.borrowed - set(started)
    _set_flag(running - loaded.borrowed, True)
    _set_flag(loaded.borrowed - decisions.borrowed, False)


def _set_flag(ids: AbstractSet[int], value: bool) -> None:
    if ids:
        Job.objects.filter(pk__in=ids, state__in=ACTIVE_STATES).update(borrowed=value)


def blockers_for_api(job_state: str, stored: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    """The blockers an API reader sees: stored ones, or the bare reason of a job the tick
    has not explained yet (stored before explanations existed, or held)."""
    if stored:
        return stored
    if reason and job_state in (JobState.PENDING, JobState.HELD):
        return [{"code": reason, "message": reason, "evidence": {}}]
    return []
