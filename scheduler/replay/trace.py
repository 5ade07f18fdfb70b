"""Traces, clusters and requests for the replay: the trace formats, cluster files and walltime models."""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scheduler.core.types import GpuView, NodeView, PendingJob

#: ``submit_s`` 0 of every trace.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

HOUR = 3600
#: Standard walltime limits in seconds: 1 h, 4 h, 12 h, 1 day, 3 days, 1 week.
STANDARD_LIMITS_S: tuple[int, ...] = (1 * HOUR, 4 * HOUR, 12 * HOUR, 24 * HOUR, 72 * HOUR, 168 * HOUR)

GPU_MODEL = "GPU"
GPU_MEMORY_MIB = 80 * 1024
GPU_COMPUTE_CAPABILITY = (9, 0)


class SimulationError(ValueError):
    """A trace, a cluster or a policy name the simulator cannot work with."""


# --- Trace ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: when it arrived, how long it really ran, what it asked for.

    Times are whole seconds. ``walltime_s`` is the limit the scheduler is told (and
    that kills the job); ``duration_s`` is what the job would run if nothing stopped it.
    """

    id: int
    submit_s: int
    duration_s: int
    gpus: int
    account: str
    walltime_s: int

    def __post_init__(self) -> None:
        if self.submit_s < 0 or self.duration_s < 0:
            raise SimulationError(f"job {self.id}: submit_s and duration_s must be >= 0")
        if self.gpus < 1:
            raise SimulationError(f"job {self.id}: gpus must be >= 1, got {self.gpus}")
        if self.walltime_s < 1:
            raise SimulationError(f"job {self.id}: walltime_s must be >= 1, got {self.walltime_s}")

    @property
    def run_s(self) -> int:
        """How long the job holds its GPUs once started: killed at the walltime."""
        return min(self.duration_s, self.walltime_s)

    @property
    def times_out(self) -> bool:
        return self.duration_s > self.walltime_s


def standard_walltime(duration_s: float) -> int:
    """The walltime a user would have asked for: the next standard limit >= duration.

    Limits are 1, 4, 12, 24, 72 and 168 hours; a duration above 168 h is rounded up to a
    multiple of 168 h. A duration exactly on a limit gets that limit (it is not killed).

    >>> standard_walltime(3600), standard_walltime(3601), standard_walltime(169 * 3600) // 3600
    (3600, 14400, 336)
    """
    for limit in STANDARD_LIMITS_S:
        if duration_s <= limit:
            return limit
    week = STANDARD_LIMITS_S[-1]
    return math.ceil(duration_s / week) * week


def noisy_walltime(duration_s: int, job_id: int, *, noise: float, seed: int) -> int:
    """:func:`standard_walltime` of the duration times ``exp(N(0, noise))``.

    The factor is drawn from a generator seeded by ``(seed, job_id)``: deterministic,
    and independent of which other jobs are in the trace. ``noise == 0`` is the exact
    rule. Underestimates (factor < 1) can land below the duration: a timeout.
    """
    if noise < 0:
        raise SimulationError(f"walltime noise must be >= 0, got {noise}")
    if noise == 0:
        return standard_walltime(duration_s)
    factor = math.exp(random.Random(f"{seed}:{job_id}").gauss(0.0, noise))
    return standard_walltime(duration_s * factor)


PHILLY_COLUMNS = ("job_id", "submit_s", "duration_s", "num_gpus", "vc")


def parse_philly_csv(
    lines: Iterable[str], *, source: str = "<trace>", walltime_noise: float = 0.0, seed: int = 0
) -> list[TraceJob]:
    """Jobs of a Philly-format CSV (``job_id,submit_s,duration_s,num_gpus,vc``), in row order.

    ``vc`` (the virtual cluster, a team) becomes the account. Walltimes come from
    :func:`noisy_walltime` (the trace has none). Raises :class:`SimulationError` naming
    ``source`` and the line on a missing column or a value that is not a whole number.
    """
    reader = csv.DictReader(lines)
    missing = [c for c in PHILLY_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise SimulationError(f"{source}: missing column(s) {', '.join(missing)}; need {', '.join(PHILLY_COLUMNS)}")
    jobs: list[TraceJob] = []
    for row in reader:
        where = f"{source}:{reader.line_num}"
        try:
            job_id, submit_s, duration_s, gpus = (int(row[c]) for c in ("job_id", "submit_s", "duration_s", "num_gpus"))
        except (TypeError, ValueError):
            raise SimulationError(f"{where}: job_id, submit_s, duration_s and num_gpus must be integers") from None
        try:
            walltime = noisy_walltime(duration_s, job_id, noise=walltime_noise, seed=seed)
            jobs.append(TraceJob(job_id, submit_s, duration_s, gpus, row["vc"] or "", walltime))
        except SimulationError as error:
            raise SimulationError(f"{where}: {error}") from None
    return jobs


def load_philly_csv(path: str | Path, *, walltime_noise: float = 0.0, seed: int = 0) -> list[TraceJob]:
    """:func:`parse_philly_csv` of a file. Raises :class:`SimulationError` if unreadable."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return parse_philly_csv(handle, source=str(path), walltime_noise=walltime_noise, seed=seed)
    except OSError as error:
        raise SimulationError(f"cannot read trace {str(path)!r}: {error.strerror or error}") from None


def select(
    trace: Sequence[TraceJob],
    *,
    window_start: int | None = None,
    window_end: int | None = None,
    limit: int | None = None,
) -> list[TraceJob]:
    """Jobs submitted in ``[window_start, window_end)`` (seconds), then the first ``limit``."""
    chosen = [
        job
        for job in trace
        if (window_start is None or job.submit_s >= window_start) and (window_end is None or job.submit_s < window_end)
    ]
    return chosen if limit is None else chosen[:limit]


# --- Cluster and requests -----------------------------------------------------------


def load_cluster_file(path: str | Path) -> tuple[NodeView, ...]:
    """A heterogeneous cluster from a JSON file: ``{"nodes": [{"name": "big", "count": 4,
    "gpus": 8}, {"name": "small", "count": 10, "gpus": 4, "model": "L4",
    "gpu_memory_mib": 24576}]}``. Each group of ``count`` nodes is named ``<name>-001``...
    Raises :class:`SimulationError` naming the group and field on anything else."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SimulationError(f"cannot read cluster file {str(path)!r}: {exc}") from None
    groups = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(groups, list) or not groups:
        raise SimulationError(f'cluster file {str(path)!r} needs a non-empty list under "nodes"')
    nodes: list[NodeView] = []
    for position, group in enumerate(groups):
        where = f"{path}: nodes[{position}]"
        if not isinstance(group, dict) or set(group) - {"name", "count", "gpus", "model", "gpu_memory_mib"}:
            raise SimulationError(f"{where} must be an object with name, count, gpus[, model, gpu_memory_mib]")
        name, count, gpus = group.get("name"), group.get("count", 1), group.get("gpus")
        memory = group.get("gpu_memory_mib", GPU_MEMORY_MIB)
        for field_name, value in (("count", count), ("gpus", gpus), ("gpu_memory_mib", memory)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SimulationError(f"{where}.{field_name} must be an integer >= 1, got {value!r}")
        assert isinstance(gpus, int) and isinstance(count, int)  # checked just above
        if not isinstance(name, str) or not name:
            raise SimulationError(f"{where}.name must be a non-empty string")
        model = group.get("model", GPU_MODEL)
        gpu_list = tuple(GpuView(i, str(model), memory, GPU_COMPUTE_CAPABILITY) for i in range(gpus))
        nodes.extend(NodeView(f"{name}-{i:03d}", "sim", 0, 0, gpu_list) for i in range(1, count + 1))
    if len({n.name for n in nodes}) != len(nodes):
        raise SimulationError(f"cluster file {str(path)!r} names a node twice")
    return tuple(nodes)


def homogeneous_cluster(nodes: int, gpus_per_node: int, *, name: str = "sim") -> tuple[NodeView, ...]:
    """``nodes`` identical nodes of ``gpus_per_node`` GPUs, named so name order is number order."""
    if nodes < 1 or gpus_per_node < 1:
        raise SimulationError(f"a cluster needs >= 1 node and >= 1 GPU per node, got {nodes} x {gpus_per_node}")
    gpus = tuple(GpuView(i, GPU_MODEL, GPU_MEMORY_MIB, GPU_COMPUTE_CAPABILITY) for i in range(gpus_per_node))
    width = max(3, len(str(nodes)))
    return tuple(
        NodeView(name=f"n{i:0{width}d}", cluster=name, cpu_millis=0, memory_mib=0, gpus=gpus)
        for i in range(1, nodes + 1)
    )


def request_for(job: TraceJob, gpus_per_node: int, *, sim_id: int) -> PendingJob:
    """The pending job that asks for ``job``'s GPUs (rule 2 of the module docstring)."""
    if job.gpus <= gpus_per_node:
        nodes, per_node = 1, job.gpus
    else:
        nodes, per_node = math.ceil(job.gpus / gpus_per_node), gpus_per_node
    return PendingJob(
        id=sim_id,
        submitted_at=EPOCH + timedelta(seconds=job.submit_s),
        nodes=nodes,
        gpus_per_node=per_node,
        cpu_millis_per_node=0,
        walltime_seconds=job.walltime_s,
        account=job.account,
        user=job.account,  # a trace names teams, not people: each team is one user
    )
