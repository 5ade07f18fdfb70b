"""Multi-resource traces in the openb format (Alibaba's GPU-sharing trace).

A cluster is a node list (``sn, cpu_milli, memory_mib, gpu, model``) and the workload a
pod list (``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, ...``): each pod
asks for CPUs in millicores, memory, and either ``num_gpu`` whole GPUs, a fraction
``gpu_milli / 1000`` of one GPU (``num_gpu`` 1, ``gpu_milli`` < 1000), or no GPU;
``gpu_spec`` optionally names the acceptable GPU models (``V100M16|V100M32``).

Modelling: CPUs are in millicores as the core counts them (``CPU_MILLIS``), every
GPU may be shared (the trace's cluster runs GPU sharing everywhere), and the models'
GPU memory and compute capability, which no pod asks for, come from
:data:`GPU_PROPERTIES`. An order file (the FGD paper's simulator order for one seed:
line 1 ``NODEPERM`` and a permutation of the node list whose ``%04d-`` prefixes decide
name-order ties, then one pod name per line) fixes both the node names and the arrival
order.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from scheduler.core.types import GpuView, NodeView, PendingJob
from scheduler.replay.trace import SimulationError

#: GPU memory (MiB) and compute capability by openb model; G1-G3 are undisclosed.
GPU_PROPERTIES: dict[str, tuple[int, tuple[int, int]]] = {
    "V100M16": (16 * 1024, (7, 0)),
    "V100M32": (32 * 1024, (7, 0)),
    "P100": (16 * 1024, (6, 0)),
    "T4": (16 * 1024, (7, 5)),
    "A10": (24 * 1024, (8, 6)),
}
DEFAULT_GPU_PROPERTIES = (16 * 1024, (7, 0))
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Pod:
    """One pod of the trace: what it asks of one node."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: str = ""

    @property
    def gpu_demand_milli(self) -> int:
        """GPU capacity asked, in milli-GPUs (a whole GPU is 1000)."""
        return self.gpu_milli if self.num_gpu == 1 and self.gpu_milli < 1000 else 1000 * self.num_gpu

    def request(self, job_id: int) -> PendingJob:
        """The pending job that asks for this pod's resources on one node."""
        share = self.gpu_milli / 1000 if self.num_gpu == 1 and 0 < self.gpu_milli < 1000 else 0.0
        return PendingJob(
            id=job_id,
            submitted_at=EPOCH,
            gpus_per_node=self.num_gpu,
            cpu_millis_per_node=self.cpu_milli,
            memory_mib_per_node=self.memory_mib,
            gpu_model=self.gpu_spec,
            gpu_share=share,
            walltime_seconds=1,
        )


def _rows(path: str | Path, needed: Sequence[str]) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [column for column in needed if column not in (reader.fieldnames or ())]
            if missing:
                raise SimulationError(f"{path}: missing column(s) {', '.join(missing)}")
            return list(reader)
    except OSError as error:
        raise SimulationError(f"cannot read {str(path)!r}: {error}") from None


def _whole(row: dict[str, str], column: str, where: str) -> int:
    try:
        value = int(row[column])
    except (TypeError, ValueError):
        raise SimulationError(f"{where}: {column} must be a whole number, got {row[column]!r}") from None
    if value < 0:
        raise SimulationError(f"{where}: {column} must be >= 0, got {value}")
    return value


def load_nodes(path: str | Path, permutation: Sequence[int] | None = None) -> tuple[NodeView, ...]:
    """The node list as nodes of one cluster; with ``permutation`` (from an order file)
    node ``i`` is named ``f"{permutation[i]:04d}-{sn}"``, so name order is the order's."""
    rows = _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
    if permutation is not None and len(permutation) != len(rows):
        raise SimulationError(f"the order's NODEPERM has {len(permutation)} entries for {len(rows)} nodes")
    nodes = []
    for position, row in enumerate(rows):
        where = f"{path}: row {position + 2}"
        memory, capability = GPU_PROPERTIES.get(row["model"], DEFAULT_GPU_PROPERTIES)
        gpus = tuple(
            GpuView(i, row["model"], memory, capability, sharing="time-slicing")
            for i in range(_whole(row, "gpu", where))
        )
        name = row["sn"] if permutation is None else f"{permutation[position]:04d}-{row['sn']}"
        nodes.append(NodeView(name, "openb", _whole(row, "cpu_milli", where), _whole(row, "memory_mib", where), gpus))
    return tuple(nodes)


def load_pods(path: str | Path) -> dict[str, Pod]:
    """The pod list by name. Raises :class:`SimulationError` naming the row of a bad value."""
    pods = {}
    for position, row in enumerate(_rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"))):
        where = f"{path}: row {position + 2}"
        pod = Pod(
            row["name"],
            _whole(row, "cpu_milli", where),
            _whole(row, "memory_mib", where),
            _whole(row, "num_gpu", where),
            _whole(row, "gpu_milli", where),
            (row.get("gpu_spec") or "").strip(),
        )
        if pod.gpu_milli > 1000 or (pod.num_gpu != 1 and pod.gpu_milli not in (0, 1000)):
            raise SimulationError(f"{where}: gpu_milli {pod.gpu_milli} with num_gpu {pod.num_gpu}")
        pods[pod.name] = pod
    return pods


def load_order(path: str | Path, pods: dict[str, Pod]) -> tuple[list[int], list[Pod]]:
    """An order file: the node permutation and the pods in arrival order."""
    try:
        lines = Path(path).read_text().split("\n")
    except OSError as error:
        raise SimulationError(f"cannot read {str(path)!r}: {error}") from None
    head = lines[0].split()
    if not head or head[0] != "NODEPERM":
        raise SimulationError(f"{path}: line 1 must start with NODEPERM")
    permutation = [int(word) for word in head[1:]]
    order = []
    for number, line in enumerate(lines[1:], start=2):
        name = line.split(maxsplit=1)[0] if line.strip() else ""
        if not name:
            continue
        pod = pods.get(name)
        if pod is None:
            raise SimulationError(f"{path}: line {number} names pod {name!r}, which the pod list lacks")
        order.append(pod)
    return permutation, order


def inflated_order(pods: Sequence[Pod], total_gpus: int, seed: int, *, until_pct: int = 130) -> list[Pod]:
    """The paper's arrival order from a seed: the pods shuffled, then random copies
    appended until the GPU demand reaches ``until_pct`` % of the cluster's GPUs."""
    rng = random.Random(seed)
    order = list(pods)
    rng.shuffle(order)
    demand = sum(p.gpu_demand_milli for p in order)
    target = total_gpus * 10 * until_pct
    while demand < target:
        pod = rng.choice(pods)
        order.append(pod)
        demand += pod.gpu_demand_milli
    return order
