"""How long an interactive session takes to answer: ``session_ready_s``, from the backend's
submit of a JupyterLab session's job to the first 200 from its server with the token.

Usage: ``python benchmarks/sessions.py [--runs 5] [--apps-env var/apps-env]``. It measures
the local cluster (in its bubblewrap sandbox where Debian's bubblewrap is installed, as the
demo runs) and, when ``SLURM_CONF`` names a cluster (the dev cluster:
``sudo bash scripts/slurm-dev-cluster.sh start``), Slurm too, with jobs run as ``alice``
through sudo as the portal runs them. Needs the apps' environment (``make apps``); no
database, no Django.

What is timed, per run (the launch service's own steps, a database row and a tick's
dispatch, are not in it: they are the launch's, measured there):
1. ``backend.submit`` of the session's JobSpec: ``session_script`` of a JupyterLab app
   (the secret in its env as ``QM_SESSION_SECRET``, exported to ``JUPYTER_TOKEN``).
2. ``backend.read_log`` every 50 ms until the ready line (``reported_port``).
3. The host: ``session_host`` (Slurm: the batch node's NodeAddr; the local cluster:
   127.0.0.1).
4. ``GET <base_url>api/status`` at host:port with ``Authorization: token <secret>``, every
   50 ms until it answers 200. ``session_ready_s`` ends here.
Each cluster prints its median over ``--runs`` (every run in ``runs_s``; the first starts
with a cold cache), with ``uptime``'s load average at the start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import REPO_ROOT, emit, log
from scheduler.backends.base import Backend, JobSpec, Placement, RunAs
from scheduler.backends.local import LocalBackend
from scheduler.backends.slurm import SlurmBackend
from scheduler.sessions.script import SECRET_ENV, reported_port, session_script

PORTS = (20000, 29999)
POLL_S = 0.05
TIMEOUT_S = 120.0
#: The JupyterLab app as a site would define it (``InteractiveApp.command``).
JUPYTERLAB = (
    'export JUPYTER_TOKEN="$QM_SESSION_SECRET"; exec jupyter lab --no-browser --ip=0.0.0.0 --port={port} '
    '--ServerApp.base_url={base_url} --ServerApp.root_dir="$HOME"'
)
READY_PATH = "api/status"
MEASURED = (
    "from the backend's submit of the session's JobSpec to the first 200 from JupyterLab's "
    "api/status at the session's host:port with the token (the launch service's own steps not included)"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="sessions per cluster (default 5)")
    parser.add_argument("--apps-env", default=str(REPO_ROOT / "var" / "apps-env"), help="the apps' environment")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    if not (Path(args.apps_env) / "bin" / "jupyter-lab").exists():
        parser.error(f"{args.apps_env} has no JupyterLab: build it with make apps")
    args.apps_env = os.path.abspath(args.apps_env)
    return args


def answers(url: str, secret: str) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"token {secret}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def one_session(backend: Backend, node: str, run_as: RunAs, number: int) -> float:
    """Steps 1-4 for one session; its seconds from submit to the first 200."""
    secret, base_url = uuid.uuid4().hex, f"/sessions/{number}/"
    script = session_script(command=JUPYTERLAB, values={}, base_url=base_url, ready_path=READY_PATH, ports=PORTS)
    spec = JobSpec(
        key=f"{uuid.uuid4()}.1",
        name="bench-session",
        owner=run_as.user,
        account="lab",
        command="",
        script=script,
        walltime_seconds=600,
        placements=(Placement(node, (0,)),),
        run_as=run_as,
        env={SECRET_ENV: secret},
    )
    started = time.monotonic()
    external_id = backend.submit(spec)
    try:
        while (port := reported_port(backend.read_log(external_id), PORTS)) is None:
            if backend.poll([external_id])[external_id].state.is_terminal or time.monotonic() - started > TIMEOUT_S:
                raise SystemExit(f"session {external_id} never got ready:\n{backend.read_log(external_id)[-3000:]}")
            time.sleep(POLL_S)
        host = backend.session_host(external_id, spec.placements) if isinstance(backend, SlurmBackend) else "127.0.0.1"
        while not answers(f"http://{host}:{port}{base_url}{READY_PATH}", secret):
            if time.monotonic() - started > TIMEOUT_S:
                raise SystemExit(f"session {external_id} reported port {port} but {host} never answered")
            time.sleep(POLL_S)
        return time.monotonic() - started
    finally:
        backend.cancel(external_id)


def measure(name: str, backend: Backend, node: str, run_as: RunAs, runs: int, **context: Any) -> None:
    load = os.getloadavg()
    times = []
    for number in range(1, runs + 1):
        times.append(one_session(backend, node, run_as, number))
        log(f"{name}: session {number} answered after {times[-1]:.2f} s")
    emit(
        "session_ready_s",
        statistics.median(times),
        "s",
        cluster=name,
        statistic="median",
        runs_s=[round(t, 2) for t in times],
        load_avg_1_5_15=[round(x, 2) for x in load],
        cpus=os.cpu_count(),
        measured=MEASURED,
        **context,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    nodes = [{"name": "n-01", "cpus": 8, "memory_mib": 8000, "gpus": {"count": 2, "model": "L4", "memory_mib": 24576}}]
    with tempfile.TemporaryDirectory(prefix="qm-bench-sessions-") as work:
        sandbox = "bwrap" if shutil.which("bwrap") else "none"
        local = LocalBackend(
            name="bench",
            config={"nodes": nodes, "sandbox": sandbox, "apps_env": args.apps_env},
            work_dir=Path(work),
        )
        measure("local", local, "n-01", RunAs("alice", 20001, 20001), args.runs, sandbox=sandbox, target_s=10)
        conf = os.environ.get("SLURM_CONF", "")
        if not conf:
            log("SLURM_CONF is unset: no Slurm figure (start the dev cluster: scripts/slurm-dev-cluster.sh)")
            return
        slurm = SlurmBackend(
            name="devcluster", config={"slurm_conf": conf, "apps_env": args.apps_env}, work_dir=Path(work)
        )
        node = slurm.list_nodes()[0].name
        measure("slurm", slurm, node, RunAs("alice"), args.runs, slurm_conf=conf, target_s=20)


if __name__ == "__main__":
    main()
