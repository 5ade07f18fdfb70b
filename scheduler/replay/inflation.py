"""Packing measured the FGD paper's way ("inflation"): jobs arrive and never end.

Each job of an arrival order is offered once to the real ``schedule()`` (one pending
job, everything placed so far running); one that does not fit is dropped and the next
comes. After every job: the GPU capacity allocated (the placed jobs' GPU demand) and
arrived (every job offered so far), as percentages of the cluster's GPUs. The curve is
the mean allocated % per integer arrived % (arrived % rounded to a whole number,
allocated % to two decimals, as the paper's simulator does); the figure is the
unallocated GPU % = 100 - allocated % at 90, 95, 100 and 130 % arrived.

Usage::

    python -m scheduler.replay.inflation NODES.csv PODS.csv (--order FILE | --seed N) \\
        [--placement fragmentation,pack ...]

prints one JSON line per placement and point: ``{"metric": "sim_unallocated_gpu_pct",
"value", "unit": "%", "arrived_pct", "placement", "order"}``, then ``sim_wall_s``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.core.carry import Carry
from scheduler.core.cycle import schedule
from scheduler.core.placement import IdleCluster
from scheduler.core.types import NodeView, PlacementStrategy, Policy, RunningJob, Snapshot
from scheduler.replay.cli import Writer
from scheduler.replay.openb import EPOCH, Pod, inflated_order, load_nodes, load_order, load_pods
from scheduler.replay.trace import SimulationError

#: The arrived percentages the figures are printed at.
POINTS = (90, 95, 100, 130)


@dataclass(frozen=True, slots=True)
class Curve:
    """Mean allocated GPU % per integer arrived %, how many jobs were placed, and how
    many whole-node jobs (as many GPUs as the largest node holds) were dropped before
    100 % arrived: those some node could have held idle (what packing must not starve),
    and apart from them those no node could ever hold (no placement starts them)."""

    allocated_pct: dict[int, float]
    placed: int
    offered: int
    whole_node_failed: int = 0
    whole_node_never_fit: int = 0

    def unallocated_pct(self, arrived_pct: int) -> float | None:
        """100 - allocated % at ``arrived_pct`` (``None`` if the order never got there)."""
        allocated = self.allocated_pct.get(arrived_pct)
        return None if allocated is None else round(100 - allocated, 2)


def inflate(nodes: tuple[NodeView, ...], order: Sequence[Pod], policy: Policy) -> Curve:
    """Offer ``order`` to ``schedule()`` one job at a time; jobs never end."""
    capacity_milli = sum(len(node.gpus) for node in nodes) * 1000
    carry = Carry()
    running: list[RunningJob] = []
    arrived = allocated = 0
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    whole_node = max((len(node.gpus) for node in nodes), default=0)
    whole_node_failed = never_fit = 0
    idle = IdleCluster.shared(nodes)
    for position, pod in enumerate(order, start=1):
        job = pod.request(position)
        decisions = schedule(Snapshot(nodes, tuple(running), (job,), carry=carry), policy, EPOCH)
        demand = pod.gpu_demand_milli
        arrived += demand
        for start in decisions.starts:
            running.append(RunningJob(start.job_id, start.allocations, EPOCH, 1, gpu_model=job.gpu_model))
            allocated += demand
        if not decisions.starts and pod.num_gpu == whole_node and arrived < capacity_milli:
            if idle.fits(job):
                whole_node_failed += 1
            else:
                never_fit += 1
        arrived_pct = round(arrived * 100 / capacity_milli)
        sums[arrived_pct] = sums.get(arrived_pct, 0.0) + round(allocated * 100 / capacity_milli, 2)
        counts[arrived_pct] = counts.get(arrived_pct, 0) + 1
    return Curve({pct: sums[pct] / counts[pct] for pct in sums}, len(running), len(order), whole_node_failed, never_fit)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.replay.inflation",
        description="Measure GPU packing (unallocated GPU %% as arrived demand grows) on an openb-format trace.",
    )
    parser.add_argument("nodes", help="node list CSV: sn,cpu_milli,memory_mib,gpu,model")
    parser.add_argument("pods", help="pod list CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--order", help="an order file (NODEPERM line, then pod names)")
    source.add_argument("--seed", type=int, help="shuffle the pods with this seed and inflate to 130%%")
    parser.add_argument(
        "--placement",
        action="extend",
        type=lambda text: [PlacementStrategy(word.strip()) for word in text.split(",") if word.strip()],
        default=None,
        help="placement(s) to measure (default: fragmentation and pack)",
    )
    return parser


def run(options: argparse.Namespace, out: Writer) -> None:
    pods = load_pods(options.pods)
    if options.order:
        permutation, order = load_order(options.order, pods)
        nodes = load_nodes(options.nodes, permutation)
        label = options.order
    else:
        nodes = load_nodes(options.nodes)
        order = inflated_order(list(pods.values()), sum(len(n.gpus) for n in nodes), options.seed)
        label = f"seed {options.seed}"
    write = out.write
    for placement in options.placement or [PlacementStrategy.FRAGMENTATION, PlacementStrategy.PACK]:
        began = time.perf_counter()
        curve = inflate(nodes, order, Policy(explain=False, placement=placement))
        wall = time.perf_counter() - began
        context = {"placement": placement.value, "order": label, "nodes": len(nodes)}
        for point in POINTS:
            value = curve.unallocated_pct(point)
            if value is not None:
                line = {"metric": "sim_unallocated_gpu_pct", "value": value, "unit": "%", "arrived_pct": point}
                write(json.dumps({**line, **context}) + "\n")
        write(json.dumps({"metric": "sim_wall_s", "value": round(wall, 2), "unit": "s", **context}) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        run(options, sys.stdout)
    except (SimulationError, ValueError) as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
