"""How fast the portal dispatches jobs to a real Slurm, against a bare ``sbatch`` loop.

Usage: ``DEBUG=1 python benchmarks/dispatch.py [--n 200] [--seconds 1]`` with the Slurm dev
cluster running (``sudo bash scripts/slurm-dev-cluster.sh start``; ``SLURM_CONF`` or its
default place). Runs on a throwaway database (see ``benchmarks/_common.py``).

Steps:
1. Create and migrate the throwaway database; add a ``slurm`` cluster for the dev
   cluster and sync its nodes (4 nodes x 8 GPUs), an account and a user.
2. Submit ``--n`` one-GPU jobs of ``sleep --seconds`` through ``submit_job``.
3. Run the scheduler as its loop does: ``run_tick()`` (which dispatches inline: the real
   ``SlurmBackend.submit``, lookup by key then ``sbatch``), then ``poll_backends()`` to
   free the GPUs of jobs that ended, until every job was dispatched. A watcher process
   (not a thread: it must not hold the dispatching process's GIL) polls the dispatched
   jobs with ``squeue -j`` every 50 ms and notes when each is first seen RUNNING (or
   already finished).
4. Print ``dispatch_jobs_per_s`` (jobs / time spent in ticks that dispatched) and
   ``dispatch_to_running_p50_s``/``_p90_s`` (from the start of the tick that found the
   job schedulable to Slurm running it).
5. Then the same ``--n`` jobs (the adapter's own sbatch options, environment and script)
   submitted by a plain loop of ``sbatch --parsable`` calls: ``sbatch_raw_jobs_per_s``, and
   ``dispatch_overhead_ratio`` = raw rate / dispatch rate. Those jobs are cancelled after.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log, percentile, throwaway_database

DEFAULT_CONF = Path(os.environ.get("SLURM_DEV_DIR", "/tmp/qm-slurm-dev")) / "etc/slurm.conf"
POLL_INTERVAL_S = 0.05


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="jobs (default 200)")
    parser.add_argument("--seconds", type=float, default=1.0, help="how long each job sleeps (default 1)")
    args = parser.parse_args(argv)
    if args.n < 1 or args.seconds <= 0:
        parser.error("--n must be >= 1 and --seconds > 0")
    return args


def slurm_conf() -> str:
    conf = os.environ.get("SLURM_CONF") or (str(DEFAULT_CONF) if DEFAULT_CONF.is_file() else "")
    if not conf:
        raise SystemExit("no Slurm: set SLURM_CONF or run `sudo bash scripts/slurm-dev-cluster.sh start`")
    return conf


def watch_running(conf: str, inbox: Any, outbox: Any) -> None:
    """The watcher (its own process, so that it never holds the dispatching process's
    GIL): takes ``(Slurm job id, schedulable at)`` pairs from ``inbox`` (``None``: stop
    once every job was seen, or a minute later), polls the pending ones with
    ``squeue -j`` every 50 ms, and sends back, per job, the seconds from schedulable to
    first seen not PENDING (running, or already ended).
    Times are ``time.monotonic()``, one clock for both processes."""
    watched: dict[str, float] = {}
    running_after: dict[str, float] = {}
    stop_by: float | None = None
    while stop_by is None or (len(running_after) < len(watched) and time.monotonic() < stop_by):
        while not inbox.empty():
            item = inbox.get()
            if item is None:
                stop_by = time.monotonic() + 60
            else:
                watched[item[0]] = item[1]
        pending = [i for i in watched if i not in running_after]
        if pending:
            out = subprocess.run(
                ["squeue", "-h", "-a", "-t", "all", "-j", ",".join(pending), "-o", "%i|%T"],
                env={**os.environ, "SLURM_CONF": conf},
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            seen = time.monotonic()
            for line in out.splitlines():
                job_id, _, state = line.strip().partition("|")
                if job_id in watched and job_id not in running_after and state and state != "PENDING":
                    running_after[job_id] = seen - watched[job_id]
        time.sleep(POLL_INTERVAL_S)
    outbox.put(list(running_after.values()))


def dispatch_through_portal(n: int, seconds: float, conf: str, log_dir: Path) -> tuple[float, list[float]]:
    """Steps 1-3: returns (jobs per second in dispatching ticks, schedulable->RUNNING list)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from people.models import Account, Membership
    from scheduler.choices import JobState
    from scheduler.clusters.poll import poll_backends, poll_cluster
    from scheduler.jobs.submit import submit_job
    from scheduler.models import Cluster, Job
    from scheduler.tick.run import run_tick

    settings.SCHEDULER_DISPATCH = "inline"
    cluster = Cluster.objects.create(
        name="devcluster", kind="slurm", config={"slurm_conf": conf, "log_dir": str(log_dir), "run_as_owner": False}
    )
    poll_cluster(cluster)
    gpus = sum(n.gpus.count() for n in cluster.nodes.all())
    log(f"synced {cluster.nodes.count()} Slurm nodes with {gpus} GPUs")
    account = Account.objects.create(name="lab")
    user = get_user_model().objects.create_user("alice", "alice@example.org", "pw")
    Membership.objects.create(user=user, account=account)
    for i in range(n):
        submit_job(
            owner=user,
            account=account,
            qos=None,
            name=f"bench-{i}",
            command=f"sleep {seconds:g}",
            gpus_per_node=1,
            walltime_seconds=600,
        )
    log(f"submitted {n} jobs")

    spawn = multiprocessing.get_context("spawn")
    inbox, outbox = spawn.Queue(), spawn.Queue()
    watcher = spawn.Process(target=watch_running, args=(conf, inbox, outbox), daemon=True)
    watcher.start()
    busy = 0.0
    dispatched = 0
    deadline = time.monotonic() + 60 + n * seconds
    while dispatched < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {dispatched} of {n} jobs dispatched before the deadline")
        began = time.monotonic()
        result = run_tick()
        took = time.monotonic() - began
        if result.started:
            busy += took
            dispatched += len(result.started)
            for external_id in Job.objects.filter(pk__in=result.started).values_list("external_id", flat=True):
                inbox.put((external_id, began))
        poll_backends()
        time.sleep(0.05)
    inbox.put(None)
    to_running: list[float] = outbox.get(timeout=120)
    watcher.join()
    states = set(Job.objects.values_list("state", flat=True))
    log(f"dispatched {dispatched} jobs in {busy:.2f}s of ticks; portal states now {sorted(states)}")
    assert JobState.FAILED not in states, "a job failed: see the Slurm logs"
    return dispatched / busy, to_running


def raw_sbatch_loop(n: int, seconds: float, conf: str, log_dir: Path) -> float:
    """Step 5: the same jobs through a bare ``sbatch`` loop; returns jobs per second."""
    from scheduler.backends.base import JobSpec, Placement
    from scheduler.backends.slurm import SlurmBackend

    backend = SlurmBackend(
        name="devcluster", config={"slurm_conf": conf, "log_dir": str(log_dir), "run_as_owner": False}, work_dir=log_dir
    )
    nodes = [node.name for node in backend.list_nodes()]
    requests = [
        backend.sbatch_request(
            JobSpec(
                key=f"{uuid.uuid4()}.1",
                name=f"raw-{i}",
                owner="alice",
                account="lab",
                command=f"sleep {seconds:g}",
                script="",
                walltime_seconds=600,
                placements=(Placement(nodes[i % len(nodes)], (0,)),),
            )
        )
        for i in range(n)
    ]
    log_dir.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    began = time.perf_counter()
    for argv, env, script in requests:
        done = subprocess.run(
            argv,
            input=script,
            env={**env, "SLURM_CONF": conf},
            capture_output=True,
            text=True,
            check=True,
        )
        ids.append(done.stdout.strip())
    took = time.perf_counter() - began
    subprocess.run(["scancel", *ids], env={**os.environ, "SLURM_CONF": conf}, check=False)
    return n / took


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    conf = slurm_conf()
    with throwaway_database() as db:
        log_dir = db.var_dir / "slurm-logs"
        rate, to_running = dispatch_through_portal(args.n, args.seconds, conf, log_dir)
        context = {"n": args.n, "job_seconds": args.seconds, "database": db.vendor, "slurm": "22.05 dev cluster"}
        emit("dispatch_jobs_per_s", rate, "jobs/s", **context)
        emit("dispatch_to_running_p50_s", percentile(to_running, 50), "s", samples=len(to_running), **context)
        emit("dispatch_to_running_p90_s", percentile(to_running, 90), "s", samples=len(to_running), **context)
        raw = raw_sbatch_loop(args.n, args.seconds, conf, log_dir)
        emit("sbatch_raw_jobs_per_s", raw, "jobs/s", **context)
        emit("dispatch_overhead_ratio", raw / rate, "x", **context)


if __name__ == "__main__":
    main()
