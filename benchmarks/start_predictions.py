"""Calibrated start times: how often jobs start before their p90, and how long the backtest
that says so takes as a Celery task.

Usage: ``DEBUG=1 python benchmarks/start_predictions.py [--days 7] [--jobs-per-day 1000]
[--nodes 16] [--seeds 1,2,3,4,5]`` (``DATABASE_URL=postgres://...`` for the task on
PostgreSQL).

The history is Philly-shaped (``tests/traces.py``: bursty arrivals, log-normal run times
with a median of 10 minutes, mostly 1-GPU jobs, a few gangs up to 32 GPUs, ten teams of
Zipf-like sizes), ``--jobs-per-day`` for ``--days``, with the walltimes users would have
asked (``noisy_walltime``: the next standard limit of the run time times a log-normal
factor, sigma 0.5). On the default 16 8-GPU nodes its offered load (GPU-seconds asked
over GPU-seconds there are while jobs arrive; context ``offered_load``) is about 0.63,
near the real Philly window's 0.67 on 88 x 8 GPUs (see ``docs/benchmarks.md``): jobs
queue in the bursts.

Figures (one JSON line each):

- ``start_p90_coverage_pct``, ``start_p50_coverage_pct``, ``start_p50_error_min``: the
  pure backtest (``scheduler.replay.backtest``) of each seed's trace under the site's
  default policy (multifactor priority with fair-share, backfill: the replay's
  ``fairshare-backfill``): the share of the jobs that waited and were shown a prediction
  that started at or before their p90 / p50, and the median distance between their start
  and their p50. One line per seed (context ``seed``, ``judged``: how many jobs it
  judged) and one for all seeds' judged jobs together (``"seed": "all"``). Target: the
  p90 covers 85-95%.
- ``backtest_s``: the Celery task ``scheduler.backtest_starts`` run eagerly
  (``apply()``, in this process) on a throwaway database holding the first seed's history
  as ended jobs of the last ``--days`` days on ``--nodes`` nodes of the benchmark site's
  mixed types (``benchmarks/_synthetic.py``): the wall time around the task, which reads
  the history, replays it and stores the result (context: the stored figures). Target:
  <= 60 s for 7 days of 1,000 jobs a day.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, throwaway_database
from benchmarks._synthetic import GPUS_PER_NODE, build_site
from scheduler.replay.backtest import Backtest, StartCheck, backtest
from scheduler.replay.simulator import policy_named
from scheduler.replay.trace import TraceJob, homogeneous_cluster
from tests.traces import synthetic_trace, with_walltimes

DAY_S = 86_400
#: The walltime noise users show (see ``noisy_walltime``).
WALLTIME_NOISE = 0.5
#: The replay policy that is the site's default (``SCHEDULER_PRIORITY=multifactor``, backfill).
DEFAULT_POLICY = "fairshare-backfill"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7, help="days of history (default 7)")
    parser.add_argument("--jobs-per-day", type=int, default=1000, help="jobs submitted a day (default 1000)")
    parser.add_argument("--nodes", type=int, default=16, help="8-GPU nodes (default 16)")
    parser.add_argument("--seeds", default="1,2,3,4,5", help="trace seeds, comma-separated (default 1,2,3,4,5)")
    return parser.parse_args(argv)


def philly_history(seed: int, days: int, jobs_per_day: int) -> list[TraceJob]:
    """``days`` of a seeded Philly-shaped trace at ``jobs_per_day``, with walltimes."""
    rows = synthetic_trace(seed, days * jobs_per_day, mean_interarrival_s=DAY_S / jobs_per_day, max_gpus=32)
    return with_walltimes(rows, noise=WALLTIME_NOISE, seed=seed)


def offered_load(trace: list[TraceJob], nodes: int) -> float:
    """GPU-seconds the jobs run over the GPU-seconds ``nodes`` have from the first
    submission to the last."""
    span = max(job.submit_s for job in trace) - min(job.submit_s for job in trace)
    return sum(job.gpus * job.run_s for job in trace) / (nodes * GPUS_PER_NODE * max(span, 1))


def coverage_figures(result: Backtest, **context: object) -> None:
    emit("start_p90_coverage_pct", 100 * result.p90_coverage, "%", judged=len(result.checks), **context)
    emit("start_p50_coverage_pct", 100 * result.p50_coverage, "%", judged=len(result.checks), **context)
    emit("start_p50_error_min", result.p50_error_s / 60, "min", judged=len(result.checks), **context)


def pure_backtests(args: argparse.Namespace, seeds: list[int]) -> None:
    cluster = homogeneous_cluster(args.nodes, GPUS_PER_NODE)
    checks: list[StartCheck] = []
    replayed = 0
    for seed in seeds:
        trace = philly_history(seed, args.days, args.jobs_per_day)
        began = time.perf_counter()
        result = backtest(trace, cluster, policy_named(DEFAULT_POLICY))
        log(f"seed {seed}: {len(result.checks)} of {result.jobs} jobs judged in {time.perf_counter() - began:.1f}s")
        load = offered_load(trace, args.nodes)
        coverage_figures(
            result, seed=seed, jobs=result.jobs, nodes=args.nodes, offered_load=load, policy=DEFAULT_POLICY
        )
        checks.extend(result.checks)
        replayed += result.jobs
    coverage_figures(
        Backtest(tuple(checks), replayed), seed="all", jobs=replayed, nodes=args.nodes, policy=DEFAULT_POLICY
    )


def stored_history(trace: list[TraceJob], days: int) -> int:
    """The trace as ended jobs of the last ``days`` days (one user per team); jobs that
    would not have ended by now are left out. Returns how many were stored."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from people.models import Account, Membership
    from scheduler.choices import JobState
    from scheduler.models import Job

    now = timezone.now()
    origin = now - timedelta(days=days) + timedelta(minutes=1)
    teams: dict[str, tuple[Any, Any]] = {}
    for name in sorted({job.account for job in trace}):
        account = Account.objects.create(name=f"vc-{name}", shares=1)
        user = get_user_model().objects.create_user(f"u-{name}", f"{name}@example.org", "bench-password")
        Membership.objects.create(user=user, account=account)
        teams[name] = (user, account)
    rows = []
    for job in trace:
        submitted = origin + timedelta(seconds=job.submit_s)
        ended = submitted + timedelta(seconds=job.run_s)
        if ended > now:
            continue
        nodes = math.ceil(job.gpus / GPUS_PER_NODE)
        owner, account = teams[job.account]
        rows.append(
            Job(
                owner=owner,
                account=account,
                name=f"philly-{job.id}",
                command="python train.py",
                nodes=nodes,
                gpus_per_node=job.gpus // nodes,
                walltime_seconds=job.walltime_s,
                state=JobState.TIMEOUT if job.times_out else JobState.COMPLETED,
                submitted_at=submitted,
                started_at=submitted,
                ended_at=ended,
            )
        )
    Job.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def task_backtest(args: argparse.Namespace, seed: int) -> None:
    with throwaway_database() as database:
        from django.conf import settings

        from scheduler import tasks
        from scheduler.models import StartBacktest

        build_site(args.nodes, drained_fraction=0.0)
        stored = stored_history(philly_history(seed, args.days, args.jobs_per_day), args.days)
        log(f"stored {stored} ended jobs")
        settings.SCHEDULER_BACKTEST_DAYS = args.days
        began = time.perf_counter()
        row_id = tasks.backtest_starts.apply().get()
        took = time.perf_counter() - began
        row = StartBacktest.objects.get(pk=row_id)
        emit(
            "backtest_s",
            took,
            "s",
            days=args.days,
            jobs=row.jobs,
            judged=row.judged,
            p90_coverage_pct=round(100 * row.p90_coverage, 1),
            p50_coverage_pct=round(100 * row.p50_coverage, 1),
            p50_error_min=round(row.p50_error_s / 60, 1),
            nodes=args.nodes,
            seed=seed,
            database=database.vendor,
            summary=row.summary,
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not seeds:
        raise SystemExit("--seeds: give at least one seed")
    pure_backtests(args, seeds)
    task_backtest(args, seeds[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
