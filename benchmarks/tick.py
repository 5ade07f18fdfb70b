"""How long one scheduling tick takes at site scale (default 1,000 nodes x 8 GPUs, 10,000
pending jobs), on a throwaway database (see ``benchmarks/_common.py``).

Usage: ``DEBUG=1 python benchmarks/tick.py [--nodes N] [--pending N] [--repeat N]
[--core-pending 1000,10000,100000] [--core-only] [--qos-limits]`` (``DATABASE_URL=postgres://...`` to
measure on PostgreSQL).

Figures (one JSON line each, the median of ``--repeat`` runs after one warm-up run):

- ``tick_schedule_ms`` with ``"snapshot": "in-memory"``: the pure core alone, on the
  synthetic site of ``benchmarks/_core_site.py`` (1,000 nodes x 8 GPUs, some split into
  MIG slices, 5,000 running jobs, 50 accounts in a 3-level tree, limits) with the full
  policy (multifactor priority with Fair Tree, EASY backfill, limits, estimates for
  every waiting job), once per ``--core-pending`` size, to show how it grows. With
  ``--qos-limits`` every QOS of the site caps its users and itself as well
  (``benchmarks._core_site.QOS_LIMITS``; context ``waiting_on_qos``: the jobs they hold back).

Every figure says which core it timed (``core``: ``compiled`` or why it ran
interpreted; ``QM_NATIVE_CORE=off`` times the interpreted one, see
``scheduler/core/compiled.py``).

- ``tick_snapshot_load_ms``: ``scheduler.tick.snapshot.load_snapshot()``, the bulk read.
- ``tick_schedule_ms``: one pure ``scheduler.core.schedule()`` call on that snapshot,
  with the policy ``run_tick`` uses (``max_starts = SCHEDULER_MAX_STARTS_PER_TICK``).
- ``tick_positions_ms``: the queue positions step alone
  (``scheduler.core.positions.queue_positions``: the jobs and GPU-hours ahead of every
  waiting job), on that decision's order and reasons; ``run_tick`` runs it and stores
  the positions, so it is inside ``tick_full_ms`` and ``tick_full_steady_ms``.
- ``tick_positions_added_ms`` (with ``--positions-ab N``): what queue positions add to
  a whole tick, once the cluster is full and the ticks repeat one another (nothing
  starts): the median of N ticks that compute and record them less the median of N
  ticks that do not, taken in alternating pairs in this one process, so that the
  machine's load weighs on both alike.
- ``tick_full_ms``: one ``run_tick()`` from a fresh state (every job PENDING,
  no pending reason yet, so the tick also writes ~``pending`` reasons), measured as
  **wall time around the call**: lock, load, decide, apply, the COMMIT and the
  on-commit callbacks. ``TickResult.duration_ms`` (the same minus the commit) is given
  as context ``in_transaction_ms``; ``queries`` is the warm-up tick's query count.
  Between runs the jobs are put back to PENDING in bulk, the events deleted and, on
  PostgreSQL, the dead rows vacuumed (untimed), so every run starts from the same state.
- ``tick_full_steady_ms``: the median of ``--repeat`` consecutive ticks after that,
  without a reset: what a running scheduler pays per tick once reasons are written
  (context ``started_per_tick``), with what Python's cycle collector ran right after
  each, outside the tick (``collector_ms_per_tick``, see ``CollectorTime``). The
  ticks run in this one process, which keeps its views and books between them
  (``scheduler.tick.kept``, ``scheduler.core.carry``) as the scheduler's does.

Why dispatch is stubbed, and how: ``run_tick`` registers one ``transaction.on_commit``
callback per started job, which hands the job to its backend. There is no backend here
(the cluster's nodes are bare rows; a Celery dispatch would need a broker), and
dispatch is not part of a tick's cost by contract: it runs after the commit, in
workers. So the tick runs under ``SCHEDULER_DISPATCH="inline"`` with
``dispatch_jobs`` replaced by a no-op: the real commit happens and the
callbacks run (and are timed, at ~nothing), only the backend call is gone. Rolling back
an outer ``atomic()`` instead would have skipped the commit, which is part of the cost.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, median_ms, throwaway_database, vacuum_analyze
from benchmarks._synthetic import build_site, bulk_pending_jobs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000, help="8-GPU nodes (default 1000)")
    parser.add_argument("--pending", type=int, default=10_000, help="pending jobs (default 10000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per figure (default 5)")
    parser.add_argument(
        "--core-pending",
        default="1000,10000,100000",
        help="pending-queue sizes of the in-memory core figure, comma-separated (default 1000,10000,100000)",
    )
    parser.add_argument("--core-only", action="store_true", help="only the in-memory core figures (no database)")
    parser.add_argument(
        "--qos-limits",
        action="store_true",
        help="in the in-memory core figures, every QOS caps its users and itself (context qos_limits)",
    )
    parser.add_argument(
        "--array-tasks",
        type=int,
        default=0,
        help="make the pending jobs tasks of job arrays of this many tasks each, throttled to a tenth of them "
        "(context array_tasks; compare with a run without it: tasks must cost no more than jobs)",
    )
    parser.add_argument(
        "--positions-ab",
        type=int,
        default=0,
        help="after the steady ticks, this many pairs of ticks with and without queue positions "
        "(tick_positions_added_ms; default 0: not measured)",
    )
    args = parser.parse_args(argv)
    if min(args.nodes, args.pending, args.repeat) < 1:
        parser.error("--nodes, --pending and --repeat must be >= 1")
    if args.positions_ab < 0:
        parser.error("--positions-ab must be >= 0")
    return args


class QueryCounter:
    """A ``connection.execute_wrapper`` that counts the queries it sees."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


class CollectorTime:
    """Time Python's cycle collector runs while inside (``gc.callbacks``). A tick pauses
    the collector (``scheduler.tick.run.collector_paused``); what it defers runs right
    after it, outside the tick's wall time, and is reported beside it."""

    def __init__(self) -> None:
        self.ms = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.ms += (time.perf_counter() - self._began) * 1000

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def as_arrays(size: int) -> None:
    """Group the pending jobs, in id order, into arrays of ``size`` tasks (the first of
    each names it), each throttled to ``max(1, size // 10)`` running tasks."""
    from django.db.models import F

    from scheduler.models import Job

    ids = list(Job.objects.filter(state="PENDING").order_by("id").values_list("id", flat=True))
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        Job.objects.filter(pk__in=chunk).update(
            array_job_id=chunk[0],
            array_task_id=F("id") - chunk[0],
            array_task_count=len(chunk),
            array_throttle=max(1, size // 10),
            array_spec=f"0-{len(chunk) - 1}%{max(1, size // 10)}",
        )


def reset_jobs() -> None:
    """Put every job back to a fresh PENDING state and forget the ticks' writes."""
    from scheduler.choices import JobState
    from scheduler.models import Job, JobEvent, TickState

    Job.objects.update(state=JobState.PENDING, cluster=None, allocations=[], dispatched_at=None, pending_reason="")
    JobEvent.objects.all().delete()
    TickState.objects.all().delete()
    vacuum_analyze()


def core_figures(args: argparse.Namespace) -> None:
    """``tick_schedule_ms`` of the pure core on the in-memory site, per queue size.

    Fewer repeats for the biggest queues: a figure of many seconds needs no median of five.
    """
    from dataclasses import replace

    from benchmarks._core_site import NOW, SiteShape, build_snapshot, site_policy
    from scheduler.core import compiled, schedule

    policy = replace(site_policy(), estimates=True)
    for size in (int(part) for part in args.core_pending.split(",") if part.strip()):
        # Two equal snapshots, used in turn: the core keeps the last fair-share factors
        # and idle-cluster answers while it is handed the same objects (a replay does
        # that), and a live tick, which loads a new snapshot each time, never is.
        shape = SiteShape(nodes=args.nodes, pending=size, qos_limits=args.qos_limits)
        snapshots = (build_snapshot(shape), build_snapshot(shape))
        repeat = args.repeat if size <= 10_000 else 1
        samples = []
        for run in range(repeat + 1):
            snapshot = snapshots[run % 2]
            t0 = time.perf_counter()
            decisions = schedule(snapshot, policy, NOW)
            samples.append((time.perf_counter() - t0) * 1000)
        emit(
            "tick_schedule_ms",
            median_ms(samples[1:]),
            "ms",
            snapshot="in-memory",
            pending=size,
            running=len(snapshot.running),
            nodes=len(snapshot.nodes),
            gpus=sum(len(n.gpus) for n in snapshot.nodes),
            started=len(decisions.starts),
            estimated=len(decisions.estimates),
            policy="multifactor+fairtree+easy-backfill+limits+estimates",
            qos_limits=args.qos_limits,
            waiting_on_qos=sum(1 for r in decisions.pending_reasons.values() if r.value.startswith("QOS")),
            repeat=repeat,
            core=compiled.state,
        )


def positions_figure(
    snapshot: Any, policy: Any, now: Any, decisions: Any, repeat: int, context: dict[str, Any]
) -> None:
    """``tick_positions_ms``: the queue positions step alone, on the cycle's order and
    final reasons (the idle cluster's answers per request shape are warm, as the
    explain step leaves them in a tick)."""
    from scheduler.core.cycle import queue_order
    from scheduler.core.placement import IdleCluster
    from scheduler.core.positions import queue_positions
    from scheduler.core.types import Decisions

    order = queue_order(snapshot, policy, now, Decisions())
    idle = IdleCluster.shared(snapshot.nodes)
    samples = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        positions = queue_positions(order, decisions.pending_reasons, idle)
        samples.append((time.perf_counter() - t0) * 1000)
    emit("tick_positions_ms", median_ms(samples[1:]), "ms", positioned=len(positions), **context)


def positions_added_figure(pairs: int, context: dict[str, Any]) -> None:
    """``tick_positions_added_ms``: ticks with and without the positions step (the policy
    ``run_tick`` hands the core, with ``positions`` set as asked), in alternating pairs,
    after ticking until nothing more starts. Call it where ``run_tick`` may run (dispatch
    stubbed). No pairs: nothing measured."""
    if not pairs:
        return
    from dataclasses import replace
    from unittest import mock

    import scheduler.tick.run as tick_run

    real = tick_run.schedule
    wanted = {"positions": True}

    def schedule(snapshot: Any, policy: Any, now: Any) -> Any:
        return real(snapshot, replace(policy, positions=wanted["positions"]), now)

    with mock.patch.object(tick_run, "schedule", schedule):
        while tick_run.run_tick().started:
            pass
        samples: dict[bool, list[float]] = {True: [], False: []}
        for pair in range(pairs):
            for positions in (True, False) if pair % 2 == 0 else (False, True):
                wanted["positions"] = positions
                t0 = time.perf_counter()
                tick_run.run_tick()
                samples[positions].append((time.perf_counter() - t0) * 1000)
    emit(
        "tick_positions_added_ms",
        round(median_ms(samples[True]) - median_ms(samples[False]), 1),
        "ms",
        with_ms=median_ms(samples[True]),
        without_ms=median_ms(samples[False]),
        pairs=pairs,
        **{**context, "repeat": pairs},
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    core_figures(args)
    if args.core_only:
        return 0
    with throwaway_database() as db:
        from unittest import mock

        from django.db import connection
        from django.test.utils import override_settings
        from django.utils import timezone

        from scheduler.config import current_policy
        from scheduler.core import compiled, schedule
        from scheduler.tick.run import run_tick
        from scheduler.tick.snapshot import load_snapshot

        log(f"building {args.nodes} nodes and {args.pending} pending jobs")
        site = build_site(args.nodes)
        bulk_pending_jobs(site, args.pending)
        if args.array_tasks:
            as_arrays(args.array_tasks)
        vacuum_analyze()
        log(f"built in {time.perf_counter() - began:.1f}s (including migrate)")
        context = {
            "pending": args.pending,
            "nodes": site.nodes,
            "gpus": site.gpus,
            "vendor": db.vendor,
            "repeat": args.repeat,
            "core": compiled.state,
            "array_tasks": args.array_tasks,
        }

        # 1. The bulk read.
        samples = []
        for _ in range(args.repeat + 1):
            t0 = time.perf_counter()
            loaded = load_snapshot()
            samples.append((time.perf_counter() - t0) * 1000)
        emit("tick_snapshot_load_ms", median_ms(samples[1:]), "ms", **context)

        # 2. The pure decision, on the snapshot loaded once.
        policy = current_policy()
        now = timezone.now()
        samples = []
        for _ in range(args.repeat + 1):
            t0 = time.perf_counter()
            decisions = schedule(loaded.snapshot, policy, now)
            samples.append((time.perf_counter() - t0) * 1000)
        emit(
            "tick_schedule_ms",
            median_ms(samples[1:]),
            "ms",
            started=len(decisions.starts),
            max_starts=policy.max_starts,
            backfill=policy.backfill,
            **context,
        )
        positions_figure(loaded.snapshot, policy, now, decisions, args.repeat, context)

        # 3. The whole tick, from a fresh state each time (see the module docstring).
        walls, inside, queries = [], [], 0
        with (
            override_settings(SCHEDULER_DISPATCH="inline"),
            mock.patch("scheduler.tick.run.dispatch_jobs", lambda job_ids: []),
        ):
            for run in range(args.repeat + 1):
                reset_jobs()
                counter = QueryCounter()
                with connection.execute_wrapper(counter) if run == 0 else nullcontext():
                    t0 = time.perf_counter()
                    result = run_tick()
                    wall = (time.perf_counter() - t0) * 1000
                if not result.ran:
                    raise SystemExit("run_tick did not run (tick lock held?)")
                if run == 0:
                    queries = counter.count
                    log(f"warm-up tick: {wall:.0f} ms, {queries} queries, {len(result.started)} started")
                else:
                    walls.append(wall)
                    inside.append(result.duration_ms)
            # 4. Steady state: consecutive ticks after that one, as a running scheduler
            # sees them (pending reasons already written, capacity partly used).
            steady, steady_started = [], []
            with CollectorTime() as collector:
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    later = run_tick()
                    steady.append((time.perf_counter() - t0) * 1000)
                    steady_started.append(len(later.started))
            positions_added_figure(args.positions_ab, context)
        emit(
            "tick_full_ms",
            median_ms(walls),
            "ms",
            clock="wall, incl. commit; dispatch stubbed",
            in_transaction_ms=median_ms(inside),
            started=len(result.started),
            queries=queries,
            **context,
        )
        emit(
            "tick_full_steady_ms",
            median_ms(steady),
            "ms",
            clock="wall, incl. commit; dispatch stubbed",
            started_per_tick=steady_started,
            each_ms=[round(ms) for ms in steady],
            collector_ms_per_tick=round(collector.ms / args.repeat, 1),
            **context,
        )
    log(f"tick benchmark finished in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
