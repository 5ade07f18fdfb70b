"""``Job.pending_blockers``: what stands between a waiting job and a start, as stored and
as shown (the codec of the core's ``Blocker``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.choices import JobState
from scheduler.core.reason_words import reason_words
from scheduler.core.types import Blocker, PendingReason


def blockers_to_json(blockers: Iterable[Blocker]) -> list[dict[str, Any]]:
    return [{"code": str(b.code), "message": b.message, "evidence": dict(b.evidence)} for b in blockers]


def held_blockers(by: str) -> list[dict[str, Any]]:
    """What a held job shows: held is a blocker of its own, whatever else holds it."""
    return blockers_to_json([Blocker(PendingReason.HELD, f"held by {by}; release it to queue it", {"by": by})])


def blockers_for_api(job_state: str, stored: list[dict[str, Any]], reason: str) -> list[dict[str, Any]]:
    """The blockers a reader sees: stored ones, or the bare reason of a job the tick
    has not explained yet (stored before explanations existed, or held), in its
    sentence from ``scheduler.core.reason_words``."""
    if stored:
        return stored
    if reason and job_state in (JobState.PENDING, JobState.HELD):
        return [{"code": reason, "message": reason_words(reason).sentence, "evidence": {}}]
    return []
