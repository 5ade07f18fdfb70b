"""Server time and queries of the portal's pages with many jobs, on a throwaway database
(see ``benchmarks/_common.py``).

Usage: ``DEBUG=1 python benchmarks/pages.py [--jobs 100000] [--nodes 1000] [--repeat 7]
[--page cluster_overview ...]`` (``DATABASE_URL=postgres://...`` to measure on PostgreSQL;
``--page``, repeatable, measures only the pages named, the seeding being the same).

Steps:
1. Create and migrate the throwaway database; seed one cluster of ``--nodes`` 8-GPU
   nodes, a lab account and its member as bulk rows, and ``--jobs`` jobs of the member
   (the worst case for "my jobs"): 90% ended, the rest pending, of which one 8-GPU job
   runs on each of 75% of the up nodes. The ended jobs' hourly GPU-hour rollups are
   built from them (``scheduler.jobs.hours.rebuild``, as the upgrade's migration does).
2. Seed the telemetry of every GPU as ``benchmarks/_telemetry.py`` lists: 24 h of
   hourly rollups, the last hour of minute rollups, the last 10 minutes of raw samples
   (every 10 s), 24 h of queue history. Its row counts are printed.
3. Render each page in-process with Django's test client, logged in as the member
   (and as staff for the job list and the cluster overview): one warm-up, then
   ``--repeat`` timed runs, counting queries on the last.
4. Print ``page_ms`` (median) and ``page_queries`` per page, with ``page`` in the
   context. Target: <= 200 ms each.

Pages: ``dashboard`` (``/``), ``job_list`` (``/jobs/``), ``job_list_filtered``
(``/jobs/?state=PENDING&sort=-id``), ``job_list_staff``, ``cluster_overview``
(``/manage/cluster/``: its six charts over the default 7-day range, GPU-hours by account).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, median_ms, throwaway_database, vacuum_analyze
from benchmarks._synthetic import BATCH, build_site, bulk_pending_jobs
from benchmarks._telemetry import seed_telemetry

PAGES = (
    ("dashboard", "/", "member"),
    ("job_list", "/jobs/", "member"),
    ("job_list_filtered", "/jobs/?state=PENDING&sort=-id", "member"),
    ("job_list_staff", "/jobs/", "staff"),
    ("cluster_overview", "/manage/cluster/", "staff"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--page", action="append", choices=[name for name, _, _ in PAGES], help="only these pages (default: all)"
    )
    return parser.parse_args(argv)


def seed(nodes: int, jobs: int) -> tuple[Any, Any, int]:
    """The site, its member, a staff user; 90% of the jobs ended (COMPLETED); running
    jobs and telemetry (``seed_telemetry``)."""
    from django.contrib.auth import get_user_model
    from django.db.models import F
    from django.utils import timezone

    from scheduler.jobs.hours import rebuild as rebuild_hours
    from scheduler.models import Job

    site = build_site(nodes)
    bulk_pending_jobs(site, jobs)
    cutoff = Job.objects.order_by("id").values_list("id", flat=True)[int(jobs * 0.9)]
    ended = Job.objects.filter(id__lt=cutoff)
    ended.update(state="COMPLETED", started_at=F("submitted_at"), ended_at=F("submitted_at") + timedelta(hours=1))
    began = time.perf_counter()
    rows = rebuild_hours()  # bulk-updated jobs: the hour rollups their ends would have written
    log(f"{rows} account-hour rollups in {time.perf_counter() - began:.1f}s")
    staff = get_user_model().objects.create_user("bench-admin", "a@example.org", "pw", is_staff=True)
    began = time.perf_counter()
    telemetry = seed_telemetry(site, timezone.now())
    log(f"telemetry in {time.perf_counter() - began:.1f}s: {telemetry}")
    vacuum_analyze()
    return site.user, staff, BATCH


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    with throwaway_database() as db:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        log(f"seeding {args.nodes} nodes and {args.jobs} jobs")
        member, staff, _ = seed(args.nodes, args.jobs)
        clients = {"member": Client(), "staff": Client()}
        clients["member"].force_login(member)
        clients["staff"].force_login(staff)
        for page, url, who in PAGES:
            if args.page and page not in args.page:
                continue
            client = clients[who]
            response = client.get(url)
            if response.status_code != 200:
                raise SystemExit(f"{url} answered {response.status_code}")
            samples = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                client.get(url)
                samples.append((time.perf_counter() - start) * 1000)
            with CaptureQueriesContext(connection) as queries:
                client.get(url)
            context = {"page": page, "url": url, "as": who, "jobs": args.jobs, "nodes": args.nodes, "vendor": db.vendor}
            emit("page_ms", median_ms(samples), "ms", **context)
            emit("page_queries", len(queries.captured_queries), "queries", **context)
    log(f"pages benchmark finished in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
