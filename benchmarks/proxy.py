"""What the interactive sessions' proxy costs: a small GET and a WebSocket echo through
``/sessions/<id>/`` against the same requests sent straight to the session's server, on
a throwaway database (see ``benchmarks/_common.py``).

Usage: ``python benchmarks/proxy.py [--requests 2000] [--messages 2000]``
(``DATABASE_URL=postgres://...`` to measure on PostgreSQL).

Steps:
1. Create and migrate the throwaway database; seed a lab, its member with a running
   session of a ``header`` app (the secret is added to every request) and a portal login.
2. Start the session's server (``benchmarks/_session_app.py``, aiohttp, a process of its
   own) on a free port of ``SESSION_PORTS``, and the portal as ``make demo`` starts it
   (uvicorn serving ``quartermaster.asgi``, one process, ``DEBUG=0``, access log off).
3. HTTP: one keep-alive client each way (httpx); untimed warm-up, then ``--requests``
   GETs of 2 bytes, alternating direct and proxied so both see the same machine load.
   Every proxied request passes the whole check (the cached decision is renewed every
   5 s from the database, as in use).
4. WebSocket: one connection each way (websockets' sync client), ``--messages`` round
   trips of a 64-byte text message each, alternating.
5. Print ``proxy_overhead_ms`` (p50 proxied - p50 direct, with both p50s and p90s) and
   ``proxy_ws_rtt_ratio`` (p50 proxied / p50 direct, with both in ms), each with the
   1-minute load average and ``portal_cpu_ms`` (the CPU the portal's process spent per
   proxied request or message, from ``/proc``: what the proxy costs whatever else the
   machine runs; on a loaded machine the latencies also wait for a CPU at each of the
   two extra hops). Targets: overhead <= 2 ms; ratio <= 2.
6. Stop both servers, always, then drop the database.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from benchmarks._common import REPO_ROOT, Database, emit, log, percentile, throwaway_database
from benchmarks._http import free_port

MESSAGE = "x" * 64


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=2000)
    return parser.parse_args(argv)


def seed_session(app_port: int) -> tuple[int, str]:
    """A running JupyterLab-like session of a lab member's on ``app_port``, and a
    ``Cookie`` header of that member's portal login."""
    import secrets

    from django.conf import settings
    from django.test import Client
    from django.utils import timezone

    from benchmarks._synthetic import build_site
    from scheduler.models import InteractiveApp, InteractiveSession, Job

    site = build_site(1)
    app = InteractiveApp.objects.get(slug="jupyterlab")  # built in (migration scheduler 0038): the token header
    job = Job.objects.create(
        owner=site.user,
        account=site.account,
        name="session",
        walltime_seconds=3600,
        state="RUNNING",
        submitted_at=timezone.now(),
    )
    InteractiveSession.objects.create(
        job=job, app=app, secret=secrets.token_urlsafe(32), host="127.0.0.1", port=app_port, ready_at=timezone.now()
    )
    client = Client()
    client.force_login(site.user)
    return job.pk, f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def session_port() -> int:
    """A free port within the default ``SESSION_PORTS`` (20000-29999)."""
    import socket

    for port in range(20000 + os.getpid() % 5000, 30000):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit("no free port in 20000-29999")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def servers(db: Database, app_port: int, portal_port: int) -> Iterator[int]:
    """The session's server and the portal (whose pid is yielded), stopped on the way out
    (also on an error)."""
    from quartermaster.management.commands.run_demo import web_server_command

    env = {
        **os.environ,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": db.url,
        "QM_VAR_DIR": str(db.var_dir),
        "SESSION_PORTS": f"{app_port}-{app_port}",
    }
    app = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "_session_app.py"), str(app_port)],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
    )
    portal = subprocess.Popen(
        [*web_server_command(f"127.0.0.1:{portal_port}"), "--log-level", "warning"],
        cwd=REPO_ROOT,
        env=env,
        stdout=sys.stderr,
        stderr=sys.stderr,
    )
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == b"ready"
        wait_until_answers(f"http://127.0.0.1:{portal_port}/login/")
        yield portal.pid
    finally:
        for proc in (portal, app):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_until_answers(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer in {timeout:.0f} s")


def timed(call: Callable[[], None]) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


@dataclass
class Timings:
    straight: list[float]  # ms, direct
    through: list[float]  # ms, through the proxy
    portal_cpu_ms: float  # the portal's CPU per proxied call


def alternate(n: int, direct: Callable[[], None], proxied: Callable[[], None], portal_pid: int) -> Timings:
    """``n`` timings of each, interleaved, after ``n // 10`` untimed of each."""
    for _ in range(max(10, n // 10)):
        direct()
        proxied()
    timings, cpu = Timings([], [], 0.0), cpu_seconds(portal_pid)
    for _ in range(n):
        timings.straight.append(timed(direct))
        timings.through.append(timed(proxied))
    timings.portal_cpu_ms = (cpu_seconds(portal_pid) - cpu) * 1000 / n
    return timings


def measure_http(n: int, direct_url: str, proxied_url: str, cookie: str, portal_pid: int) -> Timings:
    with httpx.Client(timeout=30) as direct, httpx.Client(timeout=30, headers={"Cookie": cookie}) as proxied:

        def get(client: httpx.Client, url: str) -> Callable[[], None]:
            def once() -> None:
                response = client.get(url)
                if response.status_code != 200 or response.content != b"ok":
                    raise SystemExit(f"GET {url}: {response.status_code} {response.content[:200]!r}")

            return once

        return alternate(n, get(direct, direct_url), get(proxied, proxied_url), portal_pid)


def measure_websocket(n: int, direct_url: str, proxied_url: str, cookie: str, origin: str, portal_pid: int) -> Timings:
    with (
        connect(direct_url, open_timeout=30) as direct,
        connect(proxied_url, origin=Origin(origin), additional_headers={"Cookie": cookie}, open_timeout=30) as proxied,
    ):

        def echo(ws: ClientConnection) -> Callable[[], None]:
            def once() -> None:
                ws.send(MESSAGE)
                if ws.recv(timeout=30) != MESSAGE:
                    raise SystemExit("the WebSocket echo answered something else")

            return once

        return alternate(n, echo(direct), echo(proxied), portal_pid)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with throwaway_database() as db:
        app_port, portal_port = session_port(), free_port()
        job_id, cookie = seed_session(app_port)
        with servers(db, app_port, portal_port) as portal_pid:
            path = f"/sessions/{job_id}/"
            log(f"{args.requests} GETs each way")
            http = measure_http(
                args.requests,
                f"http://127.0.0.1:{app_port}{path}small",
                f"http://127.0.0.1:{portal_port}{path}small",
                cookie,
                portal_pid,
            )
            straight, through = http.straight, http.through
            load = os.getloadavg()[0]
            emit(
                "proxy_overhead_ms",
                percentile(through, 50) - percentile(straight, 50),
                "ms",
                direct_p50_ms=percentile(straight, 50),
                direct_p90_ms=percentile(straight, 90),
                proxied_p50_ms=percentile(through, 50),
                proxied_p90_ms=percentile(through, 90),
                requests=args.requests,
                portal_cpu_ms=http.portal_cpu_ms,
                server="uvicorn, 1 process (make demo's)",
                vendor=db.vendor,
                load_1min=load,
            )
            log(f"{args.messages} WebSocket round trips each way")
            ws = measure_websocket(
                args.messages,
                f"ws://127.0.0.1:{app_port}{path}ws",
                f"ws://127.0.0.1:{portal_port}{path}ws",
                cookie,
                f"http://127.0.0.1:{portal_port}",
                portal_pid,
            )
            straight, through = ws.straight, ws.through
            emit(
                "proxy_ws_rtt_ratio",
                percentile(through, 50) / percentile(straight, 50),
                "ratio",
                direct_p50_ms=percentile(straight, 50),
                proxied_p50_ms=percentile(through, 50),
                direct_p90_ms=percentile(straight, 90),
                proxied_p90_ms=percentile(through, 90),
                messages=args.messages,
                portal_cpu_ms=ws.portal_cpu_ms,
                load_1min=os.getloadavg()[0],
            )


if __name__ == "__main__":
    main()
