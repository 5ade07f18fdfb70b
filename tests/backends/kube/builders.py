"""Node objects as a GPU cluster with the NVIDIA device plugin and GPU Feature Discovery
shows them, for the fake API server."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

H100 = {"product": "NVIDIA-H100-80GB-HBM3", "memory": 81559, "compute": (9, 0)}
A100_40 = {"product": "NVIDIA-A100-SXM4-40GB", "memory": 40960, "compute": (8, 0)}


def gpu_node(
    name: str,
    *,
    gpus: int = 4,
    gpu: dict[str, Any] = H100,
    mig: dict[str, int] | None = None,
    mig_parents: int = 0,
    replicas: int = 1,
    allocatable_gpus: int | None = None,
    cpus: str = "32",
    memory: str = "263812324Ki",
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A Node with ``gpus`` whole GPUs (times ``replicas`` when time-sliced) and, with
    ``mig``, that many slices of each profile carved from ``mig_parents`` more GPUs."""
    capacity: Obj = {"cpu": cpus, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus * replicas)}
    gfd = {
        "nvidia.com/gpu.product": gpu["product"],
        "nvidia.com/gpu.memory": str(gpu["memory"]),
        "nvidia.com/gpu.count": str(gpus + mig_parents),
        "nvidia.com/gpu.compute.major": str(gpu["compute"][0]),
        "nvidia.com/gpu.compute.minor": str(gpu["compute"][1]),
        "nvidia.com/mig.strategy": "mixed" if mig else "none",
    }
    if replicas > 1:
        gfd.update({"nvidia.com/gpu.replicas": str(replicas), "nvidia.com/gpu.sharing-strategy": "time-slicing"})
    for profile, count in (mig or {}).items():
        capacity[f"nvidia.com/mig-{profile}"] = str(count)
        gfd[f"nvidia.com/mig-{profile}.count"] = str(count)
    allocatable = dict(capacity)
    if allocatable_gpus is not None:
        allocatable["nvidia.com/gpu"] = str(allocatable_gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **gfd, **(labels or {})},
        },
        "spec": {"unschedulable": unschedulable, "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status" if ready else "container runtime is down",
                }
            ],
        },
    }


def contract_nodes() -> list[Obj]:
    """The cluster the contract suite runs on: two 4-GPU H100 nodes and a MIG node."""
    return [
        gpu_node("gpu-01", labels={"rack": "r1"}),
        gpu_node("gpu-02", labels={"rack": "r1"}),
        gpu_node("mig-01", gpus=0, gpu=A100_40, mig={"3g.20gb": 4}, mig_parents=2),
    ]
