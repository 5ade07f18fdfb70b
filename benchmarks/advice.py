"""What right-sizing advice costs (``scheduler.advice``): the task that measures a user's
shape, replaying the site's history twice, and the reads after it, served from the cache.

Usage: ``DEBUG=1 python benchmarks/advice.py [--jobs 7000] [--days 7] [--nodes 100]
[--repeat 7]`` (``DATABASE_URL=postgres://...`` to measure on PostgreSQL).

Steps:
1. Create and migrate a throwaway database (``benchmarks/_common.py``); seed a cluster of
   ``--nodes`` 8-GPU nodes and ``--jobs`` jobs of its member (the request mix of
   ``benchmarks/_synthetic.py``), submitted evenly over the last ``--days`` and ended
   (``COMPLETED``), each having run a random 5-100% of its walltime, started at once.
2. Give the member's last 20 8-GPU jobs an efficiency with 2 GPUs busy: the shape the
   advice reads.
3. Time ``advise`` for that shape: once as the task runs it (``wait=True``: the two
   replays; ``ADVICE_DAYS`` is set to ``--days``), then ``--repeat`` reads as a page
   makes them, from the cache, counting the last read's queries.
4. Time the same two replays over the whole ``--days`` (the worst case: a user whose
   jobs of the shape are spread over the whole of ``ADVICE_DAYS``).
5. Print ``advice_task_ms`` (with the days it replayed), ``advice_full_window_ms``,
   ``advice_cached_ms`` (median), ``advice_cached_queries`` and
   ``advice_started_sooner_s`` (what the replay measured, a sanity figure).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, median_ms, throwaway_database, vacuum_analyze
from benchmarks._synthetic import BATCH, build_site, bulk_pending_jobs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=7000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    return parser.parse_args(argv)


def seed_history(nodes: int, jobs: int, days: int) -> tuple[int, int]:
    """Steps 1 and 2; returns the member's id and the walltime of the shape advised."""
    from django.utils import timezone

    from monitoring.models import JobEfficiency
    from scheduler.models import Job

    site = build_site(nodes)
    bulk_pending_jobs(site, jobs)
    rng = random.Random(3)
    now = timezone.now()
    step = timedelta(days=days) / jobs
    rows = list(Job.objects.order_by("id").only("id", "walltime_seconds"))
    for i, job in enumerate(rows):
        job.submitted_at = job.started_at = now - timedelta(days=days) + i * step
        job.ended_at = job.started_at + timedelta(seconds=job.walltime_seconds * rng.uniform(0.05, 1.0))
        job.state = "COMPLETED"
    Job.objects.bulk_update(rows, ["submitted_at", "started_at", "ended_at", "state"], batch_size=BATCH)
    last = Job.objects.filter(nodes=1, gpus_per_node=8).order_by("-ended_at", "-id")
    shape = last.values_list("walltime_seconds", flat=True).first()
    if shape is None:
        raise SystemExit("no 8-GPU job was seeded: ask for more --jobs")
    chosen = list(last.filter(walltime_seconds=shape)[:20])
    elapsed = {job.id: job.ended_at - job.started_at for job in chosen if job.ended_at and job.started_at}
    JobEfficiency.objects.bulk_create(
        JobEfficiency(
            job=job,
            attempt=job.attempt,
            gpu_hours=8 * elapsed[job.id].total_seconds() / 3600,
            elapsed_seconds=int(elapsed[job.id].total_seconds()),
            samples=100,
            gpus_busy=2,
            computed_at=now,
        )
        for job in chosen
    )
    vacuum_analyze()
    return site.user.id, shape


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    with throwaway_database() as db:
        from django.conf import settings
        from django.core.cache import cache
        from django.db import connection
        from django.test.utils import CaptureQueriesContext
        from django.utils import timezone

        from scheduler.advice import LAST_JOBS, advise, started_sooner
        from scheduler.reads.advice import runs_of, shape_of

        log(f"seeding {args.nodes} nodes and {args.jobs} jobs over {args.days} days")
        owner, walltime = seed_history(args.nodes, args.jobs, args.days)
        settings.ADVICE_DAYS, settings.ADVICE_MIN_JOBS = args.days, 10
        cache.clear()
        shape = shape_of(8, walltime)
        now = timezone.now()
        start = time.perf_counter()
        advice = advise(owner, shape, now, wait=True)
        task = (time.perf_counter() - start) * 1000
        if advice is None:
            raise SystemExit("no advice: fewer than 10 jobs of the shape were seeded")
        start = time.perf_counter()
        runs = runs_of(owner, shape, since=now - timedelta(days=args.days), limit=LAST_JOBS)
        started_sooner(runs, advice.suggestion, now, float(args.days))
        full = (time.perf_counter() - start) * 1000
        samples = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            advise(owner, shape, now)
            samples.append((time.perf_counter() - start) * 1000)
        with CaptureQueriesContext(connection) as queries:
            advise(owner, shape, now)
        context = {"jobs": args.jobs, "days": args.days, "nodes": args.nodes, "vendor": db.vendor}
        emit("advice_task_ms", task, "ms", replayed_days=advice.replayed_days, **context)
        emit("advice_full_window_ms", full, "ms", replayed_days=args.days, **context)
        emit("advice_cached_ms", median_ms(samples), "ms", **context)
        emit("advice_cached_queries", len(queries.captured_queries), "queries", **context)
        emit("advice_started_sooner_s", advice.sooner_s or 0.0, "s", **context)
    log(f"advice benchmark finished in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
