"""GPU packing on the openb trace (the FGD paper's "inflation" method) and placement speed.

Usage: ``python benchmarks/placement.py OPENB_DIR [--pods FILE --orders DIR]
[--placement fragmentation,pack] [--seeds 42,43,44,45,46] [--no-speed]``, where
``OPENB_DIR`` holds ``openb_node_list_gpu_node.csv`` and, unless ``--pods`` and
``--orders`` name others, ``openb_pod_list_default.csv`` and ``order/seed<N>.txt`` (the
paper simulator's pod order per seed). A variant of the workload (the paper's
``gpuspec10``, ``multigpu20``, ...) is its pod list and its order folder; the figures
name it as ``workload`` (from ``openb_pod_list_<workload>.csv``, or ``--workload``).

Prints, per placement:

- ``sim_unallocated_gpu_pct`` at 90, 95, 100 and 130 % arrived, per seed (``seed``) and
  the median over the seeds (``seed: "median"``), as the paper reports them, with
  ``workload``, ``policy`` (the placement) and ``arrived_pct``;
- ``sim_whole_node_failed`` per seed: whole-node pods (as many GPUs as the largest
  node) dropped before 100 % arrived that some node could have held idle (starved), and
  ``sim_whole_node_never_fit``: those no node could ever hold (asking more CPUs than
  the nodes of the model they name have);
- ``placement_wall_s`` per seed (one inflation run);
- ``schedule_openb_ms``: one ``schedule()`` of the next 100 pods of the first seed's
  order, pending on the openb cluster holding what was placed when ``fill_pct`` (90 and
  100) % of the demand had arrived (~7,500 and ~8,000 pods: at 90 % all 100 start, at
  100 % almost none fits), no carry (as the live tick calls it), median of 7 calls after
  one warm-up; with ``running``, ``pending`` and ``started`` in the line;

(not with ``--no-speed``); then one ``placement_core`` line: whether the scheduling core ran compiled.
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
from scheduler.replay.openb import EPOCH, Pod, load_nodes, load_order, load_pods

#: What every figure of one placement on one workload carries.
Context = dict[str, str]

NODES_FILE = "openb_node_list_gpu_node.csv"
PODS_FILE = "openb_pod_list_default.csv"
PODS_PREFIX = "openb_pod_list_"


def workload_name(pods: Path) -> str:
    """The variant a pod list holds, by the trace's naming: ``openb_pod_list_gpuspec10.csv``
    -> ``gpuspec10``; any other file name -> its stem."""
    stem = pods.stem
    return stem[len(PODS_PREFIX) :] if stem.startswith(PODS_PREFIX) else stem


def speed(nodes_file: Path, pods: dict[str, Pod], orders: Path, seed: int, policy: Policy, context: Context) -> None:
    """Time one cycle of 100 pending pods against the cluster 90 % and 100 % full."""
    permutation, order = load_order(orders / f"seed{seed}.txt", pods)
    nodes = load_nodes(nodes_file, permutation)
    capacity = sum(len(n.gpus) for n in nodes) * 1000
    carry, arrived, position = Carry(), 0, 0
    running: list[RunningJob] = []
    for fill in (90, 100):
        while arrived * 100 < fill * capacity:
            pod = order[position]
            position += 1
            job = pod.request(position)
            decisions = schedule(Snapshot(nodes, tuple(running), (job,), carry=carry), policy, EPOCH)
            running += [
                RunningJob(s.job_id, s.allocations, EPOCH, 1, gpu_model=job.gpu_model) for s in decisions.starts
            ]
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
        figures = {"running": len(running), "pending": len(pending), "started": started, "fill_pct": fill}
        emit("schedule_openb_ms", statistics.median(times), "ms", **context, **figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("openb", type=Path, help="directory of the openb trace (node list; pod list and order/)")
    parser.add_argument("--pods", type=Path, help="pod list CSV (default: OPENB_DIR/openb_pod_list_default.csv)")
    parser.add_argument("--orders", type=Path, help="folder of seed<N>.txt pod orders (default: OPENB_DIR/order)")
    parser.add_argument("--workload", help="name of the workload in the figures (default: from the pod list's name)")
    parser.add_argument("--placement", default="fragmentation,pack", help="comma-separated placements")
    parser.add_argument("--seeds", default="42,43,44,45,46", help="comma-separated seeds with an order file")
    parser.add_argument("--no-speed", action="store_true", help="skip schedule_openb_ms")
    options = parser.parse_args(argv)
    seeds = [int(s) for s in options.seeds.split(",")]
    pods_file: Path = options.pods or options.openb / PODS_FILE
    orders: Path = options.orders or options.openb / "order"
    nodes_file: Path = options.openb / NODES_FILE
    workload = options.workload or workload_name(pods_file)
    pods = load_pods(pods_file)
    for name in options.placement.split(","):
        policy = Policy(explain=False, placement=PlacementStrategy(name.strip()))
        context: Context = {"workload": workload, "policy": policy.placement.value}
        unallocated: dict[int, list[float]] = {point: [] for point in POINTS}
        for seed in seeds:
            permutation, order = load_order(orders / f"seed{seed}.txt", pods)
            nodes = load_nodes(nodes_file, permutation)
            log(f"{workload} {policy.placement.value}: seed {seed}, {len(order)} pods on {len(nodes)} nodes")
            began = time.perf_counter()
            curve = inflate(nodes, order, policy)
            emit("placement_wall_s", time.perf_counter() - began, "s", **context, seed=seed)
            for point in POINTS:
                value = curve.unallocated_pct(point)
                if value is not None:
                    unallocated[point].append(value)
                    emit("sim_unallocated_gpu_pct", value, "%", **context, seed=seed, arrived_pct=point)
            emit("sim_whole_node_failed", curve.whole_node_failed, "pods", **context, seed=seed, before_arrived_pct=100)
            emit(
                "sim_whole_node_never_fit",
                curve.whole_node_never_fit,
                "pods",
                **context,
                seed=seed,
                before_arrived_pct=100,
            )
        for point, values in unallocated.items():
            if values:
                median = statistics.median(values)
                emit(
                    "sim_unallocated_gpu_pct",
                    median,
                    "%",
                    **context,
                    seed="median",
                    arrived_pct=point,
                    seeds=len(values),
                )
        if not options.no_speed:
            speed(nodes_file, pods, orders, seeds[0], policy, context)
    emit("placement_core", compiled.state == "compiled", "bool", core=compiled.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
