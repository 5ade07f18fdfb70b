"""What a maintenance window's cost preview takes on a synthetic site (issue 32, part 5).

Usage: ``python benchmarks/window_cost.py [--pending 1000,10000] [--hours 4]``.

On :func:`benchmarks._core_site.build_snapshot` sites (a tenth as many nodes and half as
many running jobs as pending jobs), a maintenance window over the first 8 nodes, 4 h
long, 2 h from now. Prints, per site size:

- ``window_cost_plan_s``: the plan without the window (once per preview);
- ``window_cost_one_s``: one start's cost given that plan (the *Preview cost* button
  without a range), with ``delayed`` and ``gpu_hours`` in the line;
- ``window_cost_search_s``: the search over a range of ``--hours`` from +1 h (every
  quarter hour and the ends of jobs on the window's nodes, fewer on a long queue:
  ``scheduler.core.window_cost.starts_for``), with ``tried``;

then one ``window_cost_core`` line: whether the scheduling core ran compiled.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import emit, log
from benchmarks._core_site import NOW, SiteShape, build_snapshot, site_policy
from scheduler.core import compiled
from scheduler.core.types import Window
from scheduler.core.window_cost import least_costly_start, plan_without, window_cost


def measure(pending: int, hours: float) -> None:
    shape = SiteShape(nodes=max(10, pending // 10), running=pending // 2, pending=pending)
    log(f"building a site of {shape.nodes} nodes, {shape.running} running and {pending} pending jobs")
    snapshot, policy = build_snapshot(shape), site_policy()
    nodes = frozenset(n.name for n in snapshot.nodes[:8])
    window = Window("maint", nodes, NOW + timedelta(hours=2), NOW + timedelta(hours=6), maintenance=True)
    context = {"pending": pending, "nodes": shape.nodes, "running": shape.running}

    started = time.perf_counter()
    baseline = plan_without(snapshot, policy, NOW)
    emit("window_cost_plan_s", time.perf_counter() - started, "s", **context)

    started = time.perf_counter()
    cost = window_cost(snapshot, policy, NOW, window, baseline)
    emit(
        "window_cost_one_s",
        time.perf_counter() - started,
        "s",
        delayed=len(cost.delays),
        gpu_hours=cost.gpu_hours,
        **context,
    )

    earliest = NOW + timedelta(hours=1)
    started = time.perf_counter()
    found = least_costly_start(
        snapshot, policy, NOW, window, earliest, earliest + timedelta(hours=hours), baseline=baseline
    )
    emit("window_cost_search_s", time.perf_counter() - started, "s", tried=len(found.tried), range_h=hours, **context)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", default="1000,10000", help="site sizes, in pending jobs")
    parser.add_argument("--hours", type=float, default=4.0, help="the range searched for a start")
    args = parser.parse_args(argv)
    for pending in (int(p) for p in args.pending.split(",")):
        measure(pending, args.hours)
    emit("window_cost_core", 1, "flag", core=compiled.state)


if __name__ == "__main__":
    main()
