"""What the clusters could ever offer, used to reject impossible requests at submit.

A job that no node could hold even when idle would wait forever; telling the user at
submit time (with the models and sizes that do exist) is kinder than a silent queue.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import Count, Max, Sum

from scheduler.core.placement import request_shape
from scheduler.core.types import GpuView, PendingJob, cpu_text, gpu_model_choices
from scheduler.models import Gpu, Node
from scheduler.tick.snapshot import load_hardware

#: What one node offers: (cluster, cpu_millis, memory_mib, gpus, name, fractional_cpus).
NodeEntry = tuple[str, int, int, tuple[GpuView, ...], str, bool]


@dataclass(frozen=True, slots=True)
class NodeKind:
    """Nodes alike in all a request can ask of them (cluster, CPUs, memory, GPUs), counted:
    a 1,000-node site has a handful of kinds, so a check looks at a handful of rows."""

    cluster: str
    cpu_millis: int
    memory_mib: int
    gpus: tuple[GpuView, ...]
    count: int


#: Distinct request shapes whose answers an inventory keeps (requests repeat: a site's
#: submissions come in a few hundred shapes).
MAX_REMEMBERED_SHAPES = 4096


class Inventory:
    """The enabled clusters' nodes as kinds, and the answers already given per request shape."""

    __slots__ = ("_answers", "kinds", "models", "node_gpus")

    def __init__(self, node_gpus: list[NodeEntry]) -> None:
        self.node_gpus = node_gpus
        counts = Counter((cluster, cpus, mem, gpus) for cluster, cpus, mem, gpus, _, _ in node_gpus)
        self.kinds = [NodeKind(c, cpus, mem, gpus, n) for (c, cpus, mem, gpus), n in counts.items()]
        self.models: list[str] = sorted({g.model for kind in self.kinds for g in kind.gpus})
        self._answers: dict[tuple[object, ...], dict[str, str]] = {}

    def matching_gpus(self, job: PendingJob, gpus: tuple[GpuView, ...]) -> int:
        return sum(1 for g in gpus if job.accepts(g))

    def check(self, job: PendingJob) -> dict[str, str]:
        """Field -> message for every part of ``job`` that no node can satisfy."""
        if not self.node_gpus:
            return {"nodes": "No cluster has any nodes yet; ask an admin to add or sync a cluster."}
        if job.node_labels:
            narrowed = self._with_labels(job)
            if not narrowed.node_gpus:
                wanted = ", ".join(f"{key}={value}" for key, value in job.node_labels)
                return {"node_labels": f"No node has the labels {wanted}."}
            return narrowed.check(replace(job, node_labels=()))
        if job.part_of_a_cpu and not all(entry[5] for entry in self.node_gpus):
            narrowed = Inventory([entry for entry in self.node_gpus if entry[5]])
            if not narrowed.node_gpus:
                cpus = cpu_text(job.cpu_millis_per_node)
                return {
                    "cpus_per_node": f"{cpus} CPUs: part of a CPU needs a Kubernetes or local cluster; "
                    "this site's clusters allocate whole CPUs (Slurm)."
                }
            return narrowed.check(job)
        key = request_shape(job)  # the labels are () here: handled above
        answer = self._answers.get(key)
        if answer is None:
            answer = self._check(job)
            if len(self._answers) < MAX_REMEMBERED_SHAPES:
                self._answers[key] = answer
        return dict(answer)

    def _check(self, job: PendingJob) -> dict[str, str]:
        errors: dict[str, str] = {}
        unknown = [model for model in gpu_model_choices(job.gpu_model) if model not in self.models]
        if unknown:
            names = ", ".join(repr(model) for model in unknown)
            errors["gpu_model"] = f"Unknown GPU model {names}; known models: {', '.join(self.models)}."
            return errors
        best = max(self.matching_gpus(job, kind.gpus) for kind in self.kinds)
        if job.gpu_share and not best:
            memory = f" with {job.gpu_memory_mib_share} MiB of memory" if job.gpu_memory_mib_share else ""
            errors["gpu_share"] = f"No node has a shared GPU (time-slicing or MPS){memory} matching this request."
            return errors
        if job.gpus_per_node > best:
            what = []
            if job.gpu_model:
                what.append(f"model {job.gpu_model}")
            if job.min_gpu_memory_mib:
                what.append(f">= {job.min_gpu_memory_mib} MiB")
            if job.min_compute_capability:
                major, minor = job.min_compute_capability
                what.append(f"compute capability >= {major}.{minor}")
            suffix = f" matching {', '.join(what)}" if what else ""
            errors["gpus_per_node"] = f"No node has {job.gpus_per_node} GPUs{suffix}; the most on one node is {best}."
        max_cpus = max(kind.cpu_millis for kind in self.kinds)
        if job.cpu_millis_per_node > max_cpus:
            errors["cpus_per_node"] = (
                f"No node has {cpu_text(job.cpu_millis_per_node)} CPUs; the largest has {cpu_text(max_cpus)}."
            )
        max_mem = max(kind.memory_mib for kind in self.kinds)
        if job.memory_mib_per_node > max_mem:
            errors["memory_mib_per_node"] = f"No node has {job.memory_mib_per_node} MiB; the largest has {max_mem}."
        if not errors:
            # A gang job runs inside one cluster, so count fitting nodes per cluster.
            per_cluster: dict[str, int] = defaultdict(int)
            for kind in self.kinds:
                if (
                    self.matching_gpus(job, kind.gpus) >= job.gpus_per_node
                    and kind.cpu_millis >= job.cpu_millis_per_node
                    and kind.memory_mib >= job.memory_mib_per_node
                ):
                    per_cluster[kind.cluster] += kind.count
            fitting = max(per_cluster.values(), default=0)
            if job.nodes > fitting:
                errors["nodes"] = (
                    f"At most {fitting} nodes of one cluster can hold this per-node request; {job.nodes} were asked."
                )
        return errors

    def _with_labels(self, job: PendingJob) -> Inventory:
        """The nodes carrying the job's labels. Labels are read fresh (one small query):
        the cached inventory's fingerprint does not see label edits."""
        labels = dict(Node.objects.filter(cluster__enabled=True).values_list("name", "labels"))
        kept = [
            entry
            for entry in self.node_gpus
            if all((labels.get(entry[4]) or {}).get(key) == value for key, value in job.node_labels)
        ]
        return Inventory(kept)


_cache: tuple[tuple[object, ...], float, Inventory] | None = None


def _fingerprint() -> tuple[object, ...]:
    """Two cheap aggregates that change whenever nodes or GPUs are added, removed,
    resized or their cluster is enabled or disabled."""
    enabled_gpus = Gpu.objects.filter(node__cluster__enabled=True)
    enabled_nodes = Node.objects.filter(cluster__enabled=True)
    gpus = enabled_gpus.aggregate(n=Count("id"), top=Max("id"), mem=Sum("memory_mib"))
    nodes = enabled_nodes.aggregate(n=Count("id"), top=Max("id"), cpus=Sum("cpus"), mem=Sum("memory_mib"))
    return (*gpus.values(), *nodes.values())


def load_inventory() -> Inventory:
    """All nodes of enabled clusters, whatever their state (a drained node comes back),
    with all their GPUs, whatever their health (an XID hold or a hot GPU passes): the
    question is whether the hardware could ever hold a request, not whether it can now.

    Every job submission validates against the inventory, so it is kept per process as
    node kinds with the answers given per request shape (a repeated shape costs a dict
    lookup), and its fingerprint is read again at most every
    ``SCHEDULER_INVENTORY_RECHECK_SECONDS`` (5): hardware that changes reaches the
    submit-time check within that, while a burst of submissions reads nothing. The tick
    never uses this: it reads the nodes afresh every time.
    """
    global _cache
    now = time.monotonic()
    if _cache is not None and now - _cache[1] < settings.SCHEDULER_INVENTORY_RECHECK_SECONDS:
        return _cache[2]
    key = _fingerprint()
    if _cache is None or _cache[0] != key:
        _cache = (
            key,
            now,
            Inventory(
                [(n.cluster, n.cpu_millis, n.memory_mib, n.gpus, n.name, n.fractional_cpus) for n in load_hardware()]
            ),
        )
    else:
        _cache = (key, now, _cache[2])
    return _cache[2]
