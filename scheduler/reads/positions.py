"""Where waiting jobs stand in line, as the last tick left it (``scheduler.tick.positions``),
for the API, the pages and ``qm``: read, never computed per request.

Only a PENDING job has a place: one that runs, ended or is held has none, even in the
minutes before the next tick writes the line again; one submitted or released since the
last tick has none yet (no reason either, which tells it without reading the line: a
submission's answer costs no query for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduler.choices import JobState
from scheduler.core.types import QueuePosition
from scheduler.models import TickState
from scheduler.tick.positions import unpacked


def stored_positions() -> dict[int, QueuePosition]:
    """Job id -> (jobs ahead, GPU-hours ahead) of every job the last tick placed (one
    query; ~1 ms to unpack for 10,000 jobs)."""
    blob = TickState.objects.filter(pk=1).values_list("queue_positions", flat=True).first()
    return unpacked(bytes(blob)) if blob else {}


class QueueLine:
    """The last tick's line, read at most once, at the first pending job asked about: one
    object per request, so that a list of jobs costs one query, and one with no pending
    job none."""

    def __init__(self) -> None:
        self._positions: dict[int, QueuePosition] | None = None

    def place_of(self, job: Any) -> QueuePosition | None:
        """``job``'s (jobs ahead, GPU-hours ahead), or ``None``: not pending, or not
        placed by the last tick (see the module docstring)."""
        if job.state != JobState.PENDING or not job.pending_reason:
            return None  # no tick has looked at it since it was submitted or released
        if self._positions is None:
            self._positions = stored_positions()
        return self._positions.get(job.id)

    def places_of(self, jobs: Iterable[Any]) -> dict[int, QueuePosition]:
        """Job id -> place of each of ``jobs`` that has one."""
        places = {}
        for job in jobs:
            place = self.place_of(job)
            if place is not None:
                places[job.id] = place
        return places
