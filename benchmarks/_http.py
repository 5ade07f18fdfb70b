"""What the HTTP benchmarks share: a gunicorn on a free port, a readiness probe, and a
pool of client threads that times each request.

Used by ``benchmarks/submit.py`` and ``benchmarks/ingest.py``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar
from urllib.parse import urlsplit

import httpx

from benchmarks._common import REPO_ROOT, Database, log

T = TypeVar("T")


# --- The server ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_command(workers: int, port: int) -> list[str]:
    """The venv's ``gunicorn`` script next to this interpreter, else ``python -m gunicorn``."""
    script = Path(sys.executable).parent / "gunicorn"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "gunicorn"]
    return [*head, "quartermaster.wsgi", "-w", str(workers), "-b", f"127.0.0.1:{port}", "--log-level", "warning"]


def start_gunicorn(db: Database, workers: int, port: int, conn_max_age: int) -> subprocess.Popen[bytes]:
    """``gunicorn quartermaster.wsgi`` with ``DEBUG=0`` on ``db``; stop it with :func:`stop_gunicorn`."""
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "bench",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": db.url,
        "DATABASE_CONN_MAX_AGE": str(conn_max_age),
        "QM_VAR_DIR": str(db.var_dir),
        "LOG_LEVEL": "WARNING",
        # One user sends every submission: measure the API, not its per-user limit.
        "JOB_SUBMIT_RATE": "100000000/minute",
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


# --- Where the CPU goes --------------------------------------------------------------------


class CpuSplit:
    """CPU seconds spent while inside, by the benchmark process (the clients), by the
    gunicorn it started (its process group: master and workers) and by PostgreSQL's
    processes on this machine (none when the server is elsewhere), read from ``/proc``
    (Linux; elsewhere ``ms_per`` is empty). On a 2-core machine shared by all three,
    it says which one a figure is waiting for.
    """

    def __init__(self, gunicorn: subprocess.Popen[bytes]) -> None:
        self.group = gunicorn.pid  # started with start_new_session: its own group
        self.spent: dict[str, float] = {}
        self._before: dict[str, dict[str, float]] = {}

    def __enter__(self) -> CpuSplit:
        self._before = self._read()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self._read()
        self.spent = {
            who: sum(cpu - self._before.get(who, {}).get(pid, 0.0) for pid, cpu in pids.items())
            for who, pids in after.items()
        }

    def ms_per(self, requests: int) -> dict[str, float]:
        """Milliseconds of CPU per request, by whom."""
        return {who: round(seconds * 1000 / requests, 2) for who, seconds in self.spent.items()}

    def _read(self) -> dict[str, dict[str, float]]:
        found: dict[str, dict[str, float]] = {"client": {}, "gunicorn": {}, "postgres": {}}
        proc = Path("/proc")
        if not proc.is_dir():
            return {}
        tick = os.sysconf("SC_CLK_TCK")
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # ended meanwhile
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
            # Fields after the name: state, ppid, pgrp, ...; utime and stime are the 12th and 13th.
            cpu = (int(rest[11]) + int(rest[12])) / tick
            if int(entry.name) == os.getpid():
                found["client"][entry.name] = cpu
            elif int(rest[2]) == self.group:
                found["gunicorn"][entry.name] = cpu
            elif name.startswith("postgres"):
                found["postgres"][entry.name] = cpu
        return found


# --- The clients --------------------------------------------------------------------------


class Answer(NamedTuple):
    status: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


class StdlibHttp:
    """One HTTP/1.1 connection, the standard library's ``http.client``, opened again
    when the server closed it (gunicorn's sync workers close it after every answer):
    the default client. The clients share the 2-core machine with the server they
    measure, and httpx costs ~1.0-1.3 ms of CPU a request, ``http.client`` ~0.3-0.5: the
    difference is taken from the server (``--client httpx`` measures with httpx, for
    comparison)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float = 120) -> None:
        url = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=timeout)
        self.headers = headers

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Answer:
        """``body``: bytes as they are, anything else as JSON."""
        sent = {**self.headers, **(headers or {})}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        try:
            self.connection.request(method, path, body=data, headers=sent)
            response = self.connection.getresponse()
            return Answer(response.status, response.read())
        except (OSError, http.client.HTTPException):
            self.connection.close()  # else it stays mid-request and refuses the next one
            raise

    def close(self) -> None:
        self.connection.close()


class HttpxHttp:
    """The same requests through ``httpx`` (what ``qm`` uses)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float = 120) -> None:
        self.client = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Answer:
        if isinstance(body, bytes):
            sent = {"Content-Type": "application/json", **(headers or {})}
            response = self.client.request(method, path, content=body, headers=sent)
        else:
            response = self.client.request(method, path, json=body, headers=headers)
        return Answer(response.status_code, response.content)

    def close(self) -> None:
        self.client.close()


Http = StdlibHttp | HttpxHttp
CLIENTS: dict[str, type[StdlibHttp] | type[HttpxHttp]] = {"stdlib": StdlibHttp, "httpx": HttpxHttp}


def probe_until_ready(proc: subprocess.Popen[bytes], probe: Callable[[], Answer], timeout: float = 60) -> None:
    """Call ``probe`` until the server answers it 200.

    Raises ``SystemExit`` if gunicorn exits, answers anything else (a broken set-up, not
    a slow start), or does not answer within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with code {proc.returncode} before answering")
        try:
            answer = probe()
        except (OSError, http.client.HTTPException, httpx.TransportError):
            time.sleep(0.2)
            continue
        if answer.status == 200:
            return
        raise SystemExit(f"the readiness probe was answered {answer.status}: {answer.text[:500]}")
    raise SystemExit(f"gunicorn did not answer within {timeout:.0f} s")


class ClientPool(Generic[T]):
    """Sends items from many threads, one client (``kind``: ``CLIENTS``) per thread,
    timing each.

    ``send(client, item)`` makes one request and returns ``""`` when the answer is what
    the benchmark expects, else a description of what went wrong.
    """

    def __init__(
        self,
        base_url: str,
        send: Callable[[Http, T], str],
        headers: dict[str, str] | None = None,
        kind: str = "stdlib",
    ) -> None:
        self.base_url = base_url
        self.send = send
        self.headers = headers or {}
        self.kind = CLIENTS[kind]
        self.local = threading.local()
        self.clients: list[Http] = []
        self.lock = threading.Lock()

    def client(self) -> Http:
        """This thread's client (made on first use)."""
        client = getattr(self.local, "client", None)
        if client is None:
            client = self.kind(self.base_url, self.headers)
            self.local.client = client
            with self.lock:
                self.clients.append(client)
        return client

    def _timed(self, item: T) -> tuple[float, str]:
        client = self.client()
        t0 = time.perf_counter()
        failure = self.send(client, item)
        return (time.perf_counter() - t0) * 1000, failure

    def run(self, items: Sequence[T], concurrency: int) -> tuple[list[float], float]:
        """Send every item; return the per-request latencies and the wall time (ms).

        Raises ``SystemExit`` naming the first failures if any request failed.
        """
        t0 = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=concurrency)
        try:
            results = list(pool.map(self._timed, items))
        finally:
            # On an error or a signal, drop the queued requests instead of sending them.
            pool.shutdown(wait=True, cancel_futures=True)
        wall = (time.perf_counter() - t0) * 1000
        failures = [failure for _, failure in results if failure]
        if failures:
            for failure in failures[:5]:
                log(failure)
            raise SystemExit(f"{len(failures)} of {len(items)} requests failed")
        return [latency for latency, _ in results], wall

    def close(self) -> None:
        for client in self.clients:
            client.close()
