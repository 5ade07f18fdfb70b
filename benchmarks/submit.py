"""How fast the API accepts jobs: ``POST /api/v1/jobs/`` over HTTP against gunicorn, on a
throwaway database (see ``benchmarks/_common.py``).

Usage: ``DEBUG=1 python benchmarks/submit.py [--n 1000] [--concurrency 8] [--workers 2]``
(``DATABASE_URL=postgres://...`` to measure on PostgreSQL).

Steps:
1. Create and migrate the throwaway database; seed a lab account, a member with an API
   token, a ``normal`` QOS, an account quota (so submission counts the queue, as it does
   on a site with quotas) and one cluster of ``--nodes`` 8-GPU nodes as bulk rows
   (submission validates every request against the GPU inventory).
2. Start ``gunicorn portal.wsgi`` with ``--workers`` sync workers on a free port, with
   ``DEBUG=0`` and that database, and wait until it answers.
3. Send a few untimed warm-up submissions, then ``--n`` submissions from
   ``--concurrency`` threads (one ``httpx.Client`` each) and check every answer is 201
   and every job is in the database.
4. Print ``submit_jobs_per_s`` (n / wall time of the timed phase), ``submit_p50_ms`` and
   ``submit_p99_ms`` (per-request latency seen by the client).
5. Stop gunicorn, always (also on an error or Ctrl-C), then drop the database.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from benchmarks._common import REPO_ROOT, Database, emit, log, percentile, throwaway_database, vacuum_analyze
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
        "--conn-max-age", type=int, default=0, help="DATABASE_CONN_MAX_AGE for gunicorn (default 0, the app's default)"
    )
    args = parser.parse_args(argv)
    if min(args.n, args.concurrency, args.workers) < 1:
        parser.error("--n, --concurrency and --workers must be >= 1")
    if args.nodes < 20:
        parser.error("--nodes must be >= 20, so that every request of the mix fits (4 x 8 L4 GPUs)")
    return args


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_command(workers: int, port: int) -> list[str]:
    """The venv's ``gunicorn`` script next to this interpreter, else ``python -m gunicorn``."""
    script = Path(sys.executable).parent / "gunicorn"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "gunicorn"]
    return [*head, "portal.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}", "--log-level", "warning"]


def start_gunicorn(db: Database, workers: int, port: int, conn_max_age: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "bench",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": db.url,
        "DATABASE_CONN_MAX_AGE": str(conn_max_age),
        "QM_VAR_DIR": str(db.var_dir),
        "LOG_LEVEL": "WARNING",
    }
    # Its own process group, so stopping it also reaches workers the master left behind.
    return subprocess.Popen(
        gunicorn_command(workers, port),
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr,
        stderr=sys.stderr,
        start_new_session=True,
    )


def stop_gunicorn(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (graceful: the master stops its workers); SIGKILL to its group after 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log("gunicorn did not stop in 10 s; killing its process group")
        # The master is not reaped yet, so the group id is still the one we created.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_until_ready(proc: subprocess.Popen[bytes], base_url: str, token: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with code {proc.returncode} before answering")
        try:
            response = httpx.get(f"{base_url}/api/v1/me/", headers={"Authorization": f"Bearer {token}"}, timeout=5)
            if response.status_code == 200:
                return
            raise SystemExit(f"GET /api/v1/me/ answered {response.status_code}: {response.text[:500]}")
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"gunicorn did not answer within {timeout:.0f} s")


class Submitter:
    """Submits payloads from many threads, one HTTP client per thread."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.local = threading.local()
        self.clients: list[httpx.Client] = []
        self.lock = threading.Lock()

    def client(self) -> httpx.Client:
        client = getattr(self.local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=60)
            self.local.client = client
            with self.lock:
                self.clients.append(client)
        return client

    def submit(self, payload: dict[str, Any]) -> tuple[float, int, str]:
        """``(latency_ms, status, body if not 201)`` of one submission."""
        t0 = time.perf_counter()
        response = self.client().post(JOBS_URL, json=payload)
        latency = (time.perf_counter() - t0) * 1000
        return latency, response.status_code, "" if response.status_code == 201 else response.text[:500]

    def run(self, payloads: list[dict[str, Any]], concurrency: int) -> tuple[list[float], float]:
        """Submit all payloads; return per-request latencies and the wall time (ms).

        Raises ``SystemExit`` naming the failures if any answer is not 201.
        """
        t0 = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=concurrency)
        try:
            results = list(pool.map(self.submit, payloads))
        finally:
            # On an error or a signal, drop the queued submissions instead of sending them.
            pool.shutdown(wait=True, cancel_futures=True)
        wall = (time.perf_counter() - t0) * 1000
        failures = [(status, body) for _, status, body in results if status != 201]
        if failures:
            for status, body in failures[:5]:
                log(f"answer {status}: {body}")
            raise SystemExit(f"{len(failures)} of {len(payloads)} submissions were not answered 201")
        return [latency for latency, _, _ in results], wall

    def close(self) -> None:
        for client in self.clients:
            client.close()


def seed(nodes: int, quota_pending: int) -> tuple[Any, str]:
    """Seed the site (see step 1); return it with the member's API token."""
    from portal.models import Quota
    from portal.services import create_api_token

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
        site, token = seed(args.nodes, quota_pending=10 * (args.n + warmup))
        rng = random.Random(3)
        payloads = [job_request(rng, i, feasible_only=True) for i in range(warmup + args.n)]
        port = free_port()
        log(f"starting gunicorn ({args.workers} workers) on 127.0.0.1:{port}")
        proc = start_gunicorn(db, args.workers, port, args.conn_max_age)
        submitter = Submitter(f"http://127.0.0.1:{port}", token)
        try:
            wait_until_ready(proc, submitter.base_url, token)
            submitter.run(payloads[:warmup], args.concurrency)
            log(f"warmed up with {warmup} submissions; timing {args.n}")
            latencies, wall_ms = submitter.run(payloads[warmup:], args.concurrency)
        finally:
            submitter.close()
            stop_gunicorn(proc)
        stored = Job.objects.filter(owner=site.user, state="PENDING").count()
        if stored != warmup + args.n:
            raise SystemExit(f"expected {warmup + args.n} pending jobs in the database, found {stored}")
        context = {
            "n": args.n,
            "concurrency": args.concurrency,
            "workers": args.workers,
            "vendor": db.vendor,
            "nodes": site.nodes,
            "gpus": site.gpus,
            "conn_max_age": args.conn_max_age,
            "warmup": warmup,
        }
        emit("submit_jobs_per_s", args.n / (wall_ms / 1000), "jobs/s", **context)
        emit("submit_p50_ms", percentile(latencies, 50), "ms", **context)
        emit("submit_p99_ms", percentile(latencies, 99), "ms", **context)
    log(f"submit benchmark finished in {time.perf_counter() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
