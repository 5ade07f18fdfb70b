"""GPU packing on the openb trace (the FGD paper's "inflation" method) and placement speed.

Usage: ``python benchmarks/placement.py OPENB_DIR [--placement fragmentation,pack]
[--seeds 42,43,44,45,46]``, where ``OPENB_DIR`` holds ``openb_node_list_gpu_node.csv``,
``openb_pod_list_default.csv`` and ``order/seed<N>.txt`` (the paper simulator's pod order
per seed).

Prints, per placement:

- ``sim_unallocated_gpu_pct`` at 90, 95, 100 and 130 % arrived, per seed (``seed``) and
  the median over the seeds (``seed: "median"``), as the paper reports them;
- ``placement_wall_s`` per seed (one inflation run);
- ``schedule_openb_ms``: one ``schedule()`` of the next 100 pods of the first seed's
  order, pending on the openb cluster holding what was placed when ``fill_pct`` (90 and
  100) % of the demand had arrived (~7,500 and ~8,000 pods: at 90 % all 100 start, at
  100 % almost none fits), no carry (as the live tick calls it), median of 7 calls after
  one warm-up; with ``running``, ``pending`` and ``started`` in the line;

then one ``placement_core`` line: whether the scheduling core ran compiled.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log
from scheduler.core import compiled
from scheduler.core.carry import Carry
from scheduler.core.cycle import schedule
from scheduler.core.types import PlacementStrategy, Policy, RunningJob, Snapshot
from scheduler.replay.inflation import POINTS, inflate
from scheduler.replay.openb import EPOCH, load_nodes, load_order, load_pods

NODES_FILE = "openb_node_list_gpu_node.csv"
PODS_FILE = "openb_pod_list_default.csv"


def speed(directory: Path, seed: int, policy: Policy, placement: str) -> None:
    """Time one cycle of 100 pending pods against the cluster 90 % and 100 % full."""
    pods = load_pods(directory / PODS_FILE)
    permutation, order = load_order(directory / "order" / f"seed{seed}.txt", pods)
    nodes = load_nodes(directory / NODES_FILE, permutation)
    capacity = sum(len(n.gpus) for n in nodes) * 1000
    carry, arrived, position = Carry(), 0, 0
    running: list[RunningJob] = []
    for fill in (90, 100):
        while arrived * 100 < fill * capacity:
            pod = order[position]
            position += 1
            job = pod.request(position)
            decisions = schedule(Snapshot(nodes, tuple(running), (job,), carry=carry), policy, EPOCH)
            running += [RunningJob(s.job_id, s.allocations, EPOCH, 1) for s in decisions.starts]
            arrived += pod.gpu_demand_milli
        later = order[position : position + 100]
        pending = tuple(pod.request(position + i + 1) for i, pod in enumerate(later))
        snapshot = Snapshot(nodes, tuple(running), pending)
        started = len(schedule(snapshot, policy, EPOCH).starts)  # warm-up: the scorer's memo, as a live tick keeps it
        times = []
        for _ in range(7):
            began = time.perf_counter()
            schedule(snapshot, policy, EPOCH)
            times.append((time.perf_counter() - began) * 1000)
        context = {"running": len(running), "pending": len(pending), "started": started, "fill_pct": fill}
        emit("schedule_openb_ms", statistics.median(times), "ms", placement=placement, **context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("openb", type=Path, help="directory of the openb trace (node list, pod list, order/)")
    parser.add_argument("--placement", default="fragmentation,pack", help="comma-separated placements")
    parser.add_argument("--seeds", default="42,43,44,45,46", help="comma-separated seeds with an order file")
    options = parser.parse_args(argv)
    seeds = [int(s) for s in options.seeds.split(",")]
    pods = load_pods(options.openb / PODS_FILE)
    for name in options.placement.split(","):
        policy = Policy(explain=False, placement=PlacementStrategy(name.strip()))
        unallocated: dict[int, list[float]] = {point: [] for point in POINTS}
        for seed in seeds:
            permutation, order = load_order(options.openb / "order" / f"seed{seed}.txt", pods)
            nodes = load_nodes(options.openb / NODES_FILE, permutation)
            log(f"{policy.placement.value}: seed {seed}, {len(order)} pods on {len(nodes)} nodes")
            began = time.perf_counter()
            curve = inflate(nodes, order, policy)
            emit("placement_wall_s", time.perf_counter() - began, "s", placement=policy.placement.value, seed=seed)
            for point in POINTS:
                value = curve.unallocated_pct(point)
                if value is not None:
                    unallocated[point].append(value)
                    context = {"placement": policy.placement.value, "seed": seed, "arrived_pct": point}
                    emit("sim_unallocated_gpu_pct", value, "%", **context)
        for point, values in unallocated.items():
            if values:
                context = {"placement": policy.placement.value, "seed": "median", "arrived_pct": point}
                emit("sim_unallocated_gpu_pct", statistics.median(values), "%", **context, seeds=len(values))
        speed(options.openb, seeds[0], policy, policy.placement.value)
    emit("placement_core", compiled.state == "compiled", "bool", core=compiled.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
