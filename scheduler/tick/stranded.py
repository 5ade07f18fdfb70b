"""Stranded GPUs after a tick, for the cluster overview.

The tick has everything the figure needs in memory (the nodes, what runs, what waits,
what the cycle just started): it asks the core (``scheduler.core.stranded``) and keeps
the answer on the ``TickState`` row, at most every ``SCHEDULER_STRANDED_SECONDS``, so the
page reads one row instead of the whole inventory and queue.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from scheduler.core.placement import Ledger
from scheduler.core.stranded import stranded_by_model
from scheduler.core.types import Decisions, Snapshot
from scheduler.models import TickState


def stranded_after(snapshot: Snapshot, decisions: Decisions) -> dict[str, object]:
    """``{"waiting": jobs still waiting, "models": {model: [free GPUs, stranded GPUs]}}``
    once the cycle's evictions and starts are applied, against the requests still
    waiting (with none waiting, every free GPU counts as stranded)."""
    ledger = Ledger.from_snapshot(snapshot)
    evicted = {e.victim_id for e in decisions.evictions}
    for job in snapshot.running:
        if job.id in evicted:
            ledger.release(job.allocations)
    for start in decisions.starts:
        ledger.take(start.allocations)
    started = {s.job_id for s in decisions.starts}
    waiting = [job for job in snapshot.pending if job.id not in started]
    by_model = stranded_by_model(ledger, waiting)
    models = {model: [round(f.free, 3), round(f.stranded, 3)] for model, f in sorted(by_model.items())}
    return {"waiting": len(waiting), "models": models}


def due(now: datetime) -> bool:
    """Whether the stored figure is older than ``SCHEDULER_STRANDED_SECONDS`` (or absent)."""
    last = TickState.objects.filter(pk=1).values_list("stranded_at", flat=True).first()
    return last is None or now - last >= timedelta(seconds=settings.SCHEDULER_STRANDED_SECONDS)
