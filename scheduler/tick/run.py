"""One scheduling cycle, single-flight: lock, snapshot, decide, apply, dispatch after commit."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from scheduler.clusters.dispatch import dispatch_jobs
from scheduler.config import SchedulerConfig, current_config
from scheduler.core import schedule
from scheduler.core.carry import Carry, holds_each_gpu_once
from scheduler.jobs.remote import after_commit
from scheduler.models import TickState
from scheduler.tick import stranded
from scheduler.tick.apply import claim, evict, store_borrowed, store_waiting
from scheduler.tick.positions import packed
from scheduler.tick.snapshot import load_snapshot, with_policy_inputs
from scheduler.tick.usage import update_usage, usage_policy

#: Advisory lock key for the scheduling tick on PostgreSQL ("QMTICK" in ASCII).
TICK_LOCK_KEY = 0x514D5449434B

#: The core's books kept between this process's ticks (``scheduler.core.carry``): the
#: free-capacity ledger with its placement heaps, brought up to date by the running
#: jobs that changed instead of rebuilt. Decisions are the same without it.
_carry = Carry()


@dataclass(frozen=True, slots=True)
class TickResult:
    ran: bool
    started: list[int]
    pending: int
    duration_ms: float


def _try_tick_lock() -> bool:
    """Take the single-flight tick lock for the current transaction.

    PostgreSQL: a transaction-scoped advisory lock; a second tick returns at once.
    SQLite: writing the tick row takes the database write lock, which serialises
    ticks (the second waits, then schedules on fresh state).
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [TICK_LOCK_KEY])
            return bool(cursor.fetchone()[0])
    _record_tick(started_at=timezone.now())
    return True


def _record_tick(**fields: Any) -> None:
    """Update the single TickState row in one statement (create it the first time)."""
    if not TickState.objects.filter(pk=1).update(**fields):
        TickState.objects.create(pk=1, **fields)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the duration, back as it was after.

    A tick allocates ~500,000 objects (rows, views, decisions) and keeps a few tens of
    thousands (``scheduler.tick.kept``); with the collector on, a full collection over
    every live object of the process (~0.1-0.2 s at site scale) fell inside one tick in
    three, while the database transaction and its lock were open. None of the tick's
    objects form reference cycles, so nothing is missed: the collections the tick
    would have run happen after it, once its transaction has committed."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def run_tick(now: datetime | None = None, config: SchedulerConfig | None = None) -> TickResult:
    """One scheduling cycle: lock, snapshot, decide, apply, then dispatch after commit.

    Steps:
    1. Take the tick lock; if another tick holds it, return ``ran=False``.
    2. Load the snapshot in bulk. ``now`` (unless given) is read after the snapshot, so
       every job the cycle sees was submitted before its ``now``, and no event the tick
       records predates the job it is about.
    3. Charge usage up to ``now`` and call the pure core.
    4. Evict the preempted (``apply.evict``); claim the started jobs that are still
       PENDING and store their allocations (``apply.claim``); store pending reasons,
       blockers and borrowing that changed; record the tick, with every waiting job's
       place in line (``scheduler.tick.positions``), in one statement.
    5. After commit, dispatch the claimed jobs as one batch (Celery task or inline).
    """
    began = time.perf_counter()
    config = config or current_config()
    policy = replace(config.policy, positions=True)  # the line the tick records (step 4)
    with collector_paused(), transaction.atomic():
        if not _try_tick_lock():
            return TickResult(ran=False, started=[], pending=0, duration_ms=0.0)
        loaded = load_snapshot()
        now = now or timezone.now()
        snapshot = with_policy_inputs(
            loaded.snapshot,
            policy,
            lambda: update_usage(
                now,
                loaded.snapshot.nodes,
                usage_policy(config.usage_half_life_days, config.sharing_overheads, config.billing_weights),
                period=timedelta(seconds=config.usage_calc_period_seconds),
            ),
            loaded.tables,
        )
        if holds_each_gpu_once(snapshot.running):
            snapshot = replace(snapshot, carry=_carry)
        decisions = schedule(snapshot, policy, now)
        evict(decisions.evictions, now, config)
        started = claim(decisions.starts, now, decisions.borrowed)
        store_waiting(decisions, loaded)
        store_borrowed(decisions, loaded, started)
        extra: dict[str, Any] = {}
        if stranded.due(now):
            extra = {"stranded": stranded.stranded_after(snapshot, decisions), "stranded_at": now}
        line = packed(decisions.positions)
        duration = (time.perf_counter() - began) * 1000
        _record_tick(
            finished_at=timezone.now(),
            duration_ms=duration,
            started_jobs=len(started),
            pending_jobs=len(loaded.snapshot.pending),
            queue_positions=line,
            **extra,
        )
        if started:  # one batch: one lookup and concurrent submissions (Backend.submit_many)
            after_commit("scheduler.dispatch_jobs", dispatch_jobs, started)
    return TickResult(ran=True, started=started, pending=len(loaded.snapshot.pending), duration_ms=duration)
