"""The replay's command line: one JSON object per figure and line."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Protocol

from scheduler.replay.metrics import Bounds, Metrics, bounds, measure
from scheduler.replay.simulator import (
    CHECKPOINT_INTERVAL_S,
    GUARANTEED,
    POLICIES,
    RESTART_S,
    RestartCost,
    guarantees_for,
    policy_named,
    replay,
)
from scheduler.replay.trace import SimulationError, homogeneous_cluster, load_cluster_file, load_philly_csv, select

# --- Command line ---------------------------------------------------------------------


class Writer(Protocol):
    """Where figure lines go: a text stream or Django's ``OutputWrapper``."""

    def write(self, text: str, /) -> object: ...


def _int_at_least(minimum: int, unit: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number (of ``unit``) no smaller than ``minimum``."""
    what = f"a whole number of {unit}" if unit else "a whole number"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0, "seconds")


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _policy_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one policy")
    for name in names:
        try:
            policy_named(name)
        except SimulationError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m scheduler.replay`` and ``manage.py simulate``."""
    parser.add_argument("trace", help="a Philly-format CSV: job_id,submit_s,duration_s,num_gpus,vc")
    parser.add_argument(
        "--nodes", type=_positive_int, default=88, metavar="N", help="nodes in the cluster (default 88)"
    )
    parser.add_argument(
        "--gpus-per-node",
        dest="gpus_per_node",
        type=_positive_int,
        default=8,
        metavar="G",
        help="GPUs per node (default 8)",
    )
    parser.add_argument(
        "--cluster",
        dest="cluster_file",
        default=None,
        metavar="FILE",
        help="a JSON cluster file (heterogeneous nodes; see load_cluster_file); replaces --nodes/--gpus-per-node",
    )
    parser.add_argument(
        "--policy",
        dest="policy",
        type=_policy_names,
        action="extend",
        default=None,
        metavar="NAME",
        help=f"policy to replay; repeat or comma-separate to compare (known: {', '.join(sorted(POLICIES))}; "
        "default: all)",
    )
    parser.add_argument(
        "--limit", type=_positive_int, default=None, metavar="N", help="replay only the first N selected jobs"
    )
    parser.add_argument(
        "--window-start",
        dest="window_start",
        type=_non_negative_int,
        default=None,
        metavar="S",
        help="keep jobs submitted at or after this submit_s",
    )
    parser.add_argument(
        "--window-end",
        dest="window_end",
        type=_non_negative_int,
        default=None,
        metavar="S",
        help="keep jobs submitted before this",
    )
    parser.add_argument(
        "--walltime-noise",
        dest="walltime_noise",
        type=_non_negative_float,
        default=0.0,
        metavar="SIGMA",
        help="sigma of the log-normal error on walltime estimates (default 0: exact rule)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the walltime noise (default 0)")
    parser.add_argument(
        "--restart-s",
        dest="restart_s",
        type=_non_negative_int,
        default=RESTART_S,
        metavar="S",
        help=f"what each eviction costs its job on top of its unsaved work (default {RESTART_S})",
    )
    parser.add_argument(
        "--checkpoint-interval-s",
        dest="checkpoint_interval_s",
        type=_non_negative_int,
        default=CHECKPOINT_INTERVAL_S,
        metavar="S",
        help=f"how often an evicted job had saved its work (0: never, it starts over; default {CHECKPOINT_INTERVAL_S})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.replay",
        description="Replay a GPU job trace through the scheduler and print quality figures as JSON lines.",
    )
    add_arguments(parser)
    return parser


def run(options: argparse.Namespace, out: Writer) -> None:
    """Replay the trace under each policy and write one JSON line per figure.

    Every line is ``{"metric", "value", "unit", "policy", "trace", "nodes",
    "gpus_per_node"}``. The trace's :class:`Bounds` come first with ``"policy": null``;
    then each policy's :class:`Metrics`, its ``schedule_calls`` and its
    ``replay_wall_s`` (the simulator's own run time, not a property of the policy), and
    the headline ``sim_*`` lines (:data:`SUMMARY`).
    Raises :class:`SimulationError` on an unreadable or empty selection.
    """
    start, end = options.window_start, options.window_end
    if start is not None and end is not None and start >= end:
        raise SimulationError(f"--window-start ({start}) must be before --window-end ({end})")
    names = list(dict.fromkeys(options.policy or list(POLICIES)))
    trace = select(
        load_philly_csv(options.trace, walltime_noise=options.walltime_noise, seed=options.seed),
        window_start=start,
        window_end=end,
        limit=options.limit,
    )
    if not trace:
        raise SimulationError(f"no job of {options.trace!r} is in the selection (window/limit)")
    if options.cluster_file:
        cluster = load_cluster_file(options.cluster_file)
        context: dict[str, object] = {
            "trace": options.trace,
            "cluster": options.cluster_file,
            "nodes": len(cluster),
            "gpus_per_node": max(len(n.gpus) for n in cluster),
        }
    else:
        cluster = homogeneous_cluster(options.nodes, options.gpus_per_node)
        context = {"trace": options.trace, "nodes": options.nodes, "gpus_per_node": options.gpus_per_node}
    capacity = sum(len(n.gpus) for n in cluster)

    def emit(metric: str, value: float, unit: str, policy: str | None) -> None:
        line = {"metric": metric, "value": value, "unit": unit, "policy": policy, **context}
        out.write(json.dumps(line) + "\n")

    trace_bounds = bounds(trace, capacity)
    for f in fields(Bounds):
        emit(f.name, getattr(trace_bounds, f.name), f.metadata["unit"], None)
    for name in names:
        began = time.perf_counter()
        result = replay(
            trace,
            cluster,
            policy_named(name),
            guarantees_for(trace, capacity) if name in GUARANTEED else None,
            restart=RestartCost(options.restart_s, options.checkpoint_interval_s),
        )
        metrics = measure(result)
        wall = time.perf_counter() - began
        for f in fields(Metrics):
            emit(f.name, getattr(metrics, f.name), f.metadata["unit"], name)
        emit("schedule_calls", result.cycles, "calls", name)
        emit("replay_wall_s", round(wall, 3), "s", name)
        emit("sim_wall_s", round(wall, 3), "s", name)
        for metric, value, unit in _summary(metrics):
            emit(metric, value, unit, name)


#: The headline figures under the names the benchmarks and reports compare
#: (``sim_*``), from :class:`Metrics` fields of the same meaning.
SUMMARY = (
    ("sim_avg_jct_s", "avg_jct_s"),
    ("sim_avg_wait_s", "avg_wait_s"),
    ("sim_p99_wait_s", "p99_wait_s"),
    ("sim_utilization", "utilization"),
    ("sim_jain", "jain_fairness"),
    ("sim_worst_account_slowdown_ratio", "worst_account_slowdown_ratio"),
    ("sim_makespan_s", "makespan_s"),
    ("sim_preemptions", "preemptions"),
    ("sim_lost_gpu_s", "lost_gpu_s"),
)


def _summary(metrics: Metrics) -> list[tuple[str, float, str]]:
    """The :data:`SUMMARY` lines. The wall time is not among them: the same replay must
    print the same figures (``benchmarks/replay.py`` adds ``sim_wall_s``)."""
    units = {f.name: f.metadata["unit"] for f in fields(Metrics)}
    return [(metric, float(getattr(metrics, source)), units[source]) for metric, source in SUMMARY]


def main(argv: Sequence[str] | None = None, out: Writer | None = None) -> int:
    """Command-line entry point. Returns 0; bad options or a bad trace exit with status 2."""
    parser = build_parser()
    options = parser.parse_args(argv)
    try:
        run(options, out if out is not None else sys.stdout)
    except SimulationError as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
