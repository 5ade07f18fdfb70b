"""How fast the Files API lists and downloads, over HTTP against gunicorn on loopback,
through the whole path a request takes: the view, the files agent run as the user
(``scheduler.files``), its pipe, and the streamed answer.

Usage: ``DEBUG=1 python benchmarks/files.py [--files 10000] [--mib 1024] [--n 15]``

Steps:
1. Create and migrate the throwaway database; a user ``alice`` with an API token and a
   cluster identity: uid 20001 when run as root (the agent then really drops to it), else
   this process's own uid (the agent runs directly).
2. Make her home in a temporary folder every user may pass, holding a folder of
   ``--files`` small files and one file of ``--mib`` MiB (written, not sparse), owned by
   her; ``JOB_WORKDIR_ROOTS`` points there.
3. Start ``gunicorn quartermaster.wsgi`` with one sync worker on a free port.
4. Download the big file once through ``GET /api/v1/files/download/`` (``http.client``,
   read in 1 MiB pieces and counted, never kept), timed; the worker's peak resident memory
   (``VmHWM``, reset first through ``/proc/<pid>/clear_refs`` where allowed) before and
   after says how much the download grew it.
5. List the folder ``--n`` times through ``GET /api/v1/files/`` (after two untimed), and
   check every answer holds every file.
6. Print ``files_download_mb_s`` (10^6 bytes per second, with ``rss_growth_mib``) and
   ``files_list_ms`` (the median; as context its p95, the agent alone, and a bare
   interpreter's start, the floor of every agent's run).
7. Stop gunicorn and remove the folder, always.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, percentile, throwaway_database
from benchmarks._http import free_port, probe_until_ready, start_gunicorn, stop_gunicorn

AS_ROOT = os.geteuid() == 0
UID = 20001 if AS_ROOT else os.geteuid()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the listed folder")
    parser.add_argument("--mib", type=int, default=1024, help="size of the downloaded file, MiB")
    parser.add_argument("--n", type=int, default=15, help="timed listings")
    return parser.parse_args(argv)


def make_home(base: Path, files: int, mib: int) -> Path:
    """alice's home under ``base``: ``many/`` with ``files`` files, ``big.bin`` of ``mib`` MiB."""
    home = base / "home" / "alice"
    (home / "many").mkdir(parents=True)
    for i in range(files):
        (home / "many" / f"file-{i:05d}.txt").write_bytes(b"x" * (i % 100))
    block = os.urandom(1 << 20)
    with open(home / "big.bin", "wb") as big:
        for _ in range(mib):
            big.write(block)
    for path in (home, home / "many", home / "big.bin", *(home / "many").iterdir()):
        os.chown(path, UID, UID)
    base.chmod(0o711)
    (base / "home").chmod(0o711)
    return home


def seed() -> str:
    from django.contrib.auth import get_user_model

    from people.models import ClusterIdentity
    from people.services import create_api_token

    alice = get_user_model().objects.create_user("alice", "alice@example.org", "pw-alice")
    ClusterIdentity.objects.create(user=alice, username="alice", uid=UID, gid=UID)
    return create_api_token(alice, "bench")[1]


def worker_pid(master: int) -> int:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(master)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc: this benchmark needs Linux")


def reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def download(port: int, token: str, path: str) -> tuple[int, float]:
    """Bytes received and seconds taken, reading in 1 MiB pieces."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    began = time.perf_counter()
    url = f"/api/v1/files/download/?path={quote(path)}"
    connection.request("GET", url, headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    if response.status != 200:
        raise SystemExit(f"download answered {response.status}: {response.read()[:300]!r}")
    received = 0
    while piece := response.read(1 << 20):
        received += len(piece)
    seconds = time.perf_counter() - began
    connection.close()
    return received, seconds


def list_once(port: int, token: str, path: str) -> tuple[float, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    began = time.perf_counter()
    connection.request("GET", f"/api/v1/files/?path={quote(path)}", headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    body = response.read()
    ms = (time.perf_counter() - began) * 1000
    connection.close()
    if response.status != 200:
        raise SystemExit(f"listing answered {response.status}: {body[:300]!r}")
    return ms, json.loads(body)


def agent_alone_ms(path: str, roots: list[str], *, bare: bool = False) -> float:
    """The files agent by itself on the folder (its start, the listing, its pipe); with
    ``bare``, an interpreter that does nothing (the floor of any agent's run)."""
    from scheduler.files.acting import AGENT_PATH

    request = {"op": "list", "path": path, "roots": roots, "refused": [], "uid": UID, "gid": UID}
    command = [sys.executable, "-I", "-S", *(["-c", "pass"] if bare else [AGENT_PATH])]
    samples = []
    for _ in range(7):
        began = time.perf_counter()
        subprocess.run(command, input=json.dumps(request).encode() + b"\n", capture_output=True, check=True)
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="qm_bench_files_"))
    try:
        log(f"writing {args.files} files and {args.mib} MiB under {base}")
        home = make_home(base, args.files, args.mib)
        os.environ["JOB_WORKDIR_ROOTS"] = f"{base}/home/{{user}}"
        with throwaway_database() as db:
            token = seed()
            port = free_port()
            proc = start_gunicorn(db, 1, port, 60)
            try:
                probe_until_ready(proc, lambda: _probe(port, token))
                worker = worker_pid(proc.pid)
                exact = reset_peak(worker)
                before = peak_rss_kib(worker)
                size, seconds = download(port, token, str(home / "big.bin"))
                growth_mib = (peak_rss_kib(worker) - before) / 1024
                if size != args.mib << 20:
                    raise SystemExit(f"downloaded {size} bytes, expected {args.mib << 20}")
                emit(
                    "files_download_mb_s",
                    size / seconds / 1e6,
                    "MB/s",
                    mib=args.mib,
                    seconds=seconds,
                    rss_growth_mib=growth_mib,
                    peak_reset=exact,
                    as_root=AS_ROOT,
                )
                folder = str(home / "many")
                for _ in range(2):
                    list_once(port, token, folder)
                samples = []
                for _ in range(args.n):
                    ms, listing = list_once(port, token, folder)
                    if len(listing["entries"]) != args.files:
                        raise SystemExit(f"listed {len(listing['entries'])} entries, expected {args.files}")
                    samples.append(ms)
                emit(
                    "files_list_ms",
                    statistics.median(samples),
                    "ms",
                    files=args.files,
                    p95_ms=percentile(samples, 95),
                    agent_alone_ms=agent_alone_ms(folder, [str(home)]),
                    python_start_ms=agent_alone_ms(folder, [str(home)], bare=True),
                    n=args.n,
                    as_root=AS_ROOT,
                )
            finally:
                stop_gunicorn(proc)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _probe(port: int, token: str) -> Any:
    from benchmarks._http import Answer

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/api/v1/files/roots/", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return Answer(response.status, response.read())
    finally:
        connection.close()


if __name__ == "__main__":
    raise SystemExit(main())
