"""How fast the ingest API stores GPU samples: ``POST /api/v1/monitoring/samples/`` over
HTTP against gunicorn, on a throwaway database (see ``benchmarks/_common.py``; the server
and the client threads are ``benchmarks/_http.py``).

Usage: ``DEBUG=1 python benchmarks/ingest.py [--samples 200000] [--batch 1000]
[--concurrency 4] [--workers 2] [--nodes 64] [--client stdlib|httpx]`` (``DATABASE_URL=postgres://...`` for
PostgreSQL, the figure that matters: target >= 20,000 samples/s).

Steps:
1. Create and migrate the throwaway database; seed ``--nodes`` 8-GPU nodes (bulk rows)
   and one node token per node.
2. Build every request body before timing: each is one node's batch of ``--batch``
   samples (its 8 GPUs at consecutive 10-second instants, as an agent sends after
   buffering), realistic values, some with throttle reasons and processes.
3. Start ``gunicorn quartermaster.wsgi`` (``--workers`` sync workers), wait until it answers an
   empty batch (``/metrics`` is not open to anonymous callers),
   send a few untimed warm-up batches, then all batches from ``--concurrency`` threads.
4. Check every answer is 200 with every sample accepted, and that the database holds
   exactly the samples sent; print ``ingest_samples_per_s`` (samples / wall time) and
   ``ingest_batch_p50_ms`` / ``ingest_batch_p99_ms``.
5. Stop gunicorn, always, then drop the database.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from benchmarks._common import emit, log, percentile, throwaway_database, vacuum_analyze
from benchmarks._http import (
    CLIENTS,
    Answer,
    ClientPool,
    Http,
    free_port,
    probe_until_ready,
    start_gunicorn,
    stop_gunicorn,
)

INGEST_URL = "/api/v1/monitoring/samples/"
GPUS_PER_NODE = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200_000, help="timed samples (default 200000)")
    parser.add_argument("--batch", type=int, default=1000, help="samples per request (default 1000)")
    parser.add_argument("--concurrency", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers (default 2)")
    parser.add_argument("--nodes", type=int, default=64, help="posting nodes (default 64)")
    parser.add_argument(
        "--client", choices=sorted(CLIENTS), default="stdlib", help="the clients' HTTP library (default stdlib)"
    )
    args = parser.parse_args(argv)
    if min(args.samples, args.batch, args.concurrency, args.workers, args.nodes) < 1:
        parser.error("every count must be >= 1")
    if args.batch % GPUS_PER_NODE:
        parser.error(f"--batch must be a multiple of {GPUS_PER_NODE} (one sample per GPU per instant)")
    return args


def seed(nodes: int) -> list[tuple[str, str]]:
    """``nodes`` 8-GPU nodes with a token each; returns ``(node name, token)`` pairs."""
    from benchmarks._synthetic import build_site
    from monitoring.services import create_node_token
    from scheduler.models import Node

    site = build_site(nodes)
    pairs = []
    for node in Node.objects.filter(cluster_id=site.cluster_id).order_by("name"):
        _, secret = create_node_token(node)
        pairs.append((node.name, secret))
    vacuum_analyze()
    return pairs


def bodies(pairs: list[tuple[str, str]], batches: int, batch: int, start: datetime) -> list[tuple[str, bytes]]:
    """``batches`` request bodies, round-robin over the nodes; each node's batches follow
    on in time, so no sample repeats an earlier ``(gpu, at)``."""
    rng = random.Random(5)
    instants = batch // GPUS_PER_NODE
    made: list[tuple[str, bytes]] = []
    for i in range(batches):
        name, token = pairs[i % len(pairs)]
        first = start + timedelta(seconds=10 * instants * (i // len(pairs)))
        samples: list[dict[str, Any]] = []
        for k in range(instants):
            at = (first + timedelta(seconds=10 * k)).isoformat()
            for index in range(GPUS_PER_NODE):
                util = rng.uniform(0, 100)
                sample: dict[str, Any] = {
                    "index": index,
                    "at": at,
                    "utilization_pct": round(util, 1),
                    "memory_used_mib": rng.randrange(0, 80_000),
                    "memory_total_mib": 81_559,
                    "temperature_c": round(35 + util * 0.4, 1),
                    "power_w": round(70 + util * 6, 1),
                    "power_limit_w": 700.0,
                    "sm_clock_mhz": 1980,
                }
                if util > 95:
                    sample["throttle_reasons"] = ["sw_power_cap"]
                if util > 50:
                    sample["processes"] = [{"pid": 1000 + index, "used_memory_mib": 40_000}]
                samples.append(sample)
        made.append((token, json.dumps({"node": name, "samples": samples}).encode()))
    return made


def post(client: Http, item: tuple[str, bytes]) -> str:
    """One batch: ``""`` if answered 200 with every sample accepted, else what was answered."""
    token, body = item
    answer = client.request("POST", INGEST_URL, body, headers={"Authorization": f"Bearer {token}"})
    ok = answer.status == 200 and not answer.json()["rejected"]
    return "" if ok else f"answer {answer.status}: {answer.text[:500]}"


def probe(client: Http, token: str) -> Answer:
    """An empty batch: answered 200 once gunicorn, the token check and the database work."""
    return client.request("POST", INGEST_URL, {"samples": []}, headers={"Authorization": f"Bearer {token}"})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    batches = -(-args.samples // args.batch)
    warmup = 2 * args.concurrency
    with throwaway_database() as db:
        from monitoring.models import GpuSample

        log(f"seeding {args.nodes} nodes with node tokens")
        pairs = seed(args.nodes)
        # Recent enough to be within the raw retention when the server checks it.
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=40)
        log(f"building {warmup + batches} batches of {args.batch} samples")
        items = bodies(pairs, warmup + batches, args.batch, start)
        port = free_port()
        log(f"starting gunicorn ({args.workers} workers) on 127.0.0.1:{port}")
        proc = start_gunicorn(db, args.workers, port, conn_max_age=60)
        poster = ClientPool(f"http://127.0.0.1:{port}", post, kind=args.client)
        try:
            probe_until_ready(proc, lambda: probe(poster.client(), pairs[0][1]))
            poster.run(items[:warmup], args.concurrency)
            log(f"warmed up with {warmup} batches; timing {batches}")
            latencies, wall_ms = poster.run(items[warmup:], args.concurrency)
        finally:
            poster.close()
            stop_gunicorn(proc)
        stored = GpuSample.objects.count()
        expected = (warmup + batches) * args.batch
        if stored != expected:
            raise SystemExit(f"expected {expected} samples in the database, found {stored}")
        timed = batches * args.batch
        context = {
            "client": args.client,
            "samples": timed,
            "batch": args.batch,
            "concurrency": args.concurrency,
            "workers": args.workers,
            "nodes": args.nodes,
            "vendor": db.vendor,
        }
        emit("ingest_samples_per_s", timed / (wall_ms / 1000), "samples/s", **context)
        emit("ingest_batch_p50_ms", percentile(latencies, 50), "ms", **context)
        emit("ingest_batch_p99_ms", percentile(latencies, 99), "ms", **context)
    log(f"ingest benchmark finished in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
