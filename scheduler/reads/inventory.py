"""What the clusters could ever offer, used to reject impossible requests at submit.

A job that no node could hold even when idle would wait forever; telling the user at
submit time (with the models and sizes that do exist) is kinder than a silent queue.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from django.db.models import Count, Max, Sum

from scheduler.core.types import GpuView, PendingJob
from scheduler.models import Gpu, Node
from scheduler.tick.snapshot import load_hardware


@dataclass(frozen=True, slots=True)
class Inventory:
    node_gpus: list[tuple[str, int, int, tuple[GpuView, ...], str]]  # (cluster, cpus, memory_mib, gpus, name)

    @property
    def models(self) -> list[str]:
        return sorted({g.model for _, _, _, gpus, _ in self.node_gpus for g in gpus})

    def matching_gpus(self, job: PendingJob, gpus: tuple[GpuView, ...]) -> int:
        return sum(1 for g in gpus if job.accepts(g))

    def check(self, job: PendingJob) -> dict[str, str]:
        """Field -> message for every part of ``job`` that no node can satisfy."""
        errors: dict[str, str] = {}
        if not self.node_gpus:
            return {"nodes": "No cluster has any nodes yet; ask an admin to add or sync a cluster."}
        if job.node_labels:
            narrowed = self._with_labels(job)
            if not narrowed.node_gpus:
                wanted = ", ".join(f"{key}={value}" for key, value in job.node_labels)
                return {"node_labels": f"No node has the labels {wanted}."}
            return narrowed.check(replace(job, node_labels=()))
        if job.gpu_model and job.gpu_model not in self.models:
            errors["gpu_model"] = f"Unknown GPU model {job.gpu_model!r}; known models: {', '.join(self.models)}."
            return errors
        best = max(self.matching_gpus(job, gpus) for _, _, _, gpus, _ in self.node_gpus)
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
        max_cpus = max(cpus for _, cpus, _, _, _ in self.node_gpus)
        if job.cpus_per_node > max_cpus:
            errors["cpus_per_node"] = f"No node has {job.cpus_per_node} CPUs; the largest has {max_cpus}."
        max_mem = max(mem for _, _, mem, _, _ in self.node_gpus)
        if job.memory_mib_per_node > max_mem:
            errors["memory_mib_per_node"] = f"No node has {job.memory_mib_per_node} MiB; the largest has {max_mem}."
        if not errors:
            # A gang job runs inside one cluster, so count fitting nodes per cluster.
            per_cluster: dict[str, int] = defaultdict(int)
            for cluster, cpus, mem, gpus, _ in self.node_gpus:
                if (
                    self.matching_gpus(job, gpus) >= job.gpus_per_node
                    and cpus >= job.cpus_per_node
                    and mem >= job.memory_mib_per_node
                ):
                    per_cluster[cluster] += 1
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


_cache: tuple[tuple[object, ...], Inventory] | None = None


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

    Every job submission validates against the inventory, and reading every GPU row
    per request dominated submit latency on a 1,000-node cluster; the inventory is
    kept per process and rebuilt only when its fingerprint changes.
    """
    global _cache
    key = _fingerprint()
    if _cache is None or _cache[0] != key:
        _cache = (key, Inventory([(n.cluster, n.cpus, n.memory_mib, n.gpus, n.name) for n in load_hardware()]))
    return _cache[1]
