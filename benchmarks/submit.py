"""How fast the API accepts jobs: ``POST /api/v1/jobs/`` over HTTP against gunicorn, on a
throwaway database (see ``benchmarks/_common.py``).

Usage: ``DEBUG=1 python benchmarks/submit.py [--n 1000] [--concurrency 8] [--workers 2]
[--client stdlib|httpx]``
(``DATABASE_URL=postgres://...`` to measure on PostgreSQL).

Steps:
1. Create and migrate the throwaway database; seed a lab account, a member with an API
   token, a ``normal`` QOS, an account quota (so submission counts the queue, as it does
   on a site with quotas) and one cluster of ``--nodes`` 8-GPU nodes as bulk rows
   (submission validates every request against the GPU inventory).
2. Start ``gunicorn quartermaster.wsgi`` with ``--workers`` sync workers on a free port, with
   ``DEBUG=0`` and that database, and wait until it answers.
3. Send a few untimed warm-up submissions, then ``--n`` submissions from
   ``--concurrency`` threads (one client each, ``--client``'s: the standard library's
   ``http.client`` unless asked for httpx, see ``benchmarks._http.StdlibHttp``) and
   check every answer is 201 and every job is in the database.
4. Time ``--n`` authenticated ``GET /api/v1/me/`` from the same clients: the cheapest
   request the stack serves, the floor submission is compared with.
5. Post one job array of ``--array-size`` tasks (``0-9999``) and time it until it is
   answered 201 (every task then stored, in one transaction); check that
   ``GET /api/v1/arrays/{id}/`` counts every task.
6. Print ``submit_jobs_per_s`` (n / wall time of the timed phase), ``submit_p50_ms`` and
   ``submit_p99_ms`` (per-request latency seen by the client), ``submit_floor_per_s``
   and ``submit_floor_ratio`` (submissions per second / floor requests per second), and
   ``submit_array_tasks_per_s`` (tasks / seconds of the array's POST). The two rates
   carry ``cpu_ms_per_request``: the CPU a request cost the clients, gunicorn and a
   local PostgreSQL during the timed phase (``benchmarks._http.CpuSplit``).
7. Stop gunicorn, always (also on an error or Ctrl-C), then drop the database.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, percentile, throwaway_database, vacuum_analyze
from benchmarks._http import (
    CLIENTS,
    ClientPool,
    CpuSplit,
    Http,
    free_port,
    probe_until_ready,
    start_gunicorn,
    stop_gunicorn,
)
from benchmarks._synthetic import build_site, job_request

JOBS_URL = "/api/v1/jobs/"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="timed submissions (default 1000)")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers (default 2)")
    parser.add_argument(
        "--nodes", type=int, default=1000, help="8-GPU nodes in the inventory (default 1000, at least 20)"
    )
    parser.add_argument(
        "--conn-max-age", type=int, default=60, help="DATABASE_CONN_MAX_AGE for gunicorn (default 60, as the app)"
    )
    parser.add_argument("--array-size", type=int, default=10_000, help="tasks of the timed array (default 10000)")
    parser.add_argument(
        "--client",
        choices=sorted(CLIENTS),
        default="stdlib",
        help="the clients' HTTP library (default stdlib: http.client, the least CPU taken from the server)",
    )
    args = parser.parse_args(argv)
    if min(args.n, args.concurrency, args.workers) < 1:
        parser.error("--n, --concurrency and --workers must be >= 1")
    if args.nodes < 20:
        parser.error("--nodes must be >= 20, so that every request of the mix fits (4 x 8 L4 GPUs)")
    return args


def read_me(client: Http, _: int) -> str:
    """The floor: one authenticated ``GET /api/v1/me/``."""
    answer = client.request("GET", "/api/v1/me/")
    return "" if answer.status == 200 else f"answer {answer.status}: {answer.text[:500]}"


def submit_array(client: Http, payload: dict[str, Any], size: int) -> float:
    """POST one array of ``size`` tasks; seconds until its 201 (every task then stored),
    after checking that the API counts every task."""
    t0 = time.perf_counter()
    answer = client.request("POST", JOBS_URL, {**payload, "array": f"0-{size - 1}"})
    seconds = time.perf_counter() - t0
    if answer.status != 201:
        raise SystemExit(f"array answered {answer.status}: {answer.text[:500]}")
    states = client.request("GET", f"/api/v1/arrays/{answer.json()['array_job']}/").json()["states"]
    if sum(states.values()) != size:
        raise SystemExit(f"the API counts {states} tasks of the array, not {size}")
    return seconds


def submit(client: Http, payload: dict[str, Any]) -> str:
    """One submission: ``""`` if answered 201, else what was answered."""
    answer = client.request("POST", JOBS_URL, payload)
    return "" if answer.status == 201 else f"answer {answer.status}: {answer.text[:500]}"


def seed(nodes: int, quota_pending: int) -> tuple[Any, str]:
    """Seed the site (see step 1); return it with the member's API token."""
    from people.models import Quota
    from people.services import create_api_token

    site = build_site(nodes)
    Quota.objects.create(account=site.account, max_pending_jobs=quota_pending)
    _, token = create_api_token(site.user, "bench")
    vacuum_analyze()
    return site, token


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    warmup = 2 * args.concurrency
    with throwaway_database() as db:
        from scheduler.models import Job

        log(f"seeding one cluster of {args.nodes} nodes")
        site, token = seed(args.nodes, quota_pending=10 * (args.n + warmup) + args.array_size)
        rng = random.Random(3)
        payloads = [job_request(rng, i, feasible_only=True) for i in range(warmup + args.n)]
        port = free_port()
        log(f"starting gunicorn ({args.workers} workers) on 127.0.0.1:{port}")
        proc = start_gunicorn(db, args.workers, port, args.conn_max_age)
        auth = {"Authorization": f"Bearer {token}"}
        submitter = ClientPool(f"http://127.0.0.1:{port}", submit, auth, args.client)
        try:
            probe_until_ready(proc, lambda: submitter.client().request("GET", "/api/v1/me/"))
            submitter.run(payloads[:warmup], args.concurrency)
            log(f"warmed up with {warmup} submissions; timing {args.n}")
            with CpuSplit(proc) as submit_cpu:
                latencies, wall_ms = submitter.run(payloads[warmup:], args.concurrency)
            reader = ClientPool(f"http://127.0.0.1:{port}", read_me, auth, args.client)
            try:
                reader.run(list(range(warmup)), args.concurrency)
                with CpuSplit(proc) as floor_cpu:
                    _, floor_ms = reader.run(list(range(args.n)), args.concurrency)
            finally:
                reader.close()
            log(f"timing one array of {args.array_size} tasks")
            # Its own client, with a longer timeout than a single job's (an array's POST stores every task).
            fresh = CLIENTS[args.client](f"http://127.0.0.1:{port}", auth, timeout=300)
            try:
                array_seconds = submit_array(fresh, payloads[0], args.array_size)
            finally:
                fresh.close()
        finally:
            submitter.close()
            stop_gunicorn(proc)
        stored = Job.objects.filter(owner=site.user, state="PENDING").count()
        if stored != warmup + args.n + args.array_size:
            raise SystemExit(f"expected {warmup + args.n + args.array_size} pending jobs, found {stored}")
        context = {
            "n": args.n,
            "concurrency": args.concurrency,
            "workers": args.workers,
            "vendor": db.vendor,
            "nodes": site.nodes,
            "gpus": site.gpus,
            "conn_max_age": args.conn_max_age,
            "warmup": warmup,
            "client": args.client,
        }
        emit(
            "submit_jobs_per_s",
            args.n / (wall_ms / 1000),
            "jobs/s",
            cpu_ms_per_request=submit_cpu.ms_per(args.n),
            **context,
        )
        emit("submit_p50_ms", percentile(latencies, 50), "ms", **context)
        emit("submit_p99_ms", percentile(latencies, 99), "ms", **context)
        rate, floor = args.n / (wall_ms / 1000), args.n / (floor_ms / 1000)
        emit(
            "submit_floor_per_s",
            floor,
            "requests/s",
            request="GET /api/v1/me/",
            cpu_ms_per_request=floor_cpu.ms_per(args.n),
            **context,
        )
        emit("submit_floor_ratio", rate / floor, "ratio", **context)
        emit("submit_array_tasks_per_s", args.array_size / array_seconds, "tasks/s", tasks=args.array_size, **context)
    log(f"submit benchmark finished in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
