"""Workload manager adapters, loaded lazily by kind.

The registry maps a cluster's backend kind to a dotted path so that importing the
scheduler never imports a client library the deployment does not use.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scheduler.backends.base import Backend, BackendError

__all__ = ["FRACTIONAL_CPU_KINDS", "REGISTRY", "Backend", "BackendError", "available_kinds", "load_backend"]

#: kind -> "module:Class". Only kinds with a real implementation are listed.
REGISTRY: dict[str, str] = {
    "local": "scheduler.backends.local:LocalBackend",
    "kubernetes": "scheduler.backends.kubernetes:KubernetesBackend",
    "slurm": "scheduler.backends.slurm:SlurmBackend",
}

#: Kinds whose workload manager hands out part of a CPU: Kubernetes' millicores, and the
#: local cluster (which shares its host's CPUs). Slurm allocates whole CPUs
#: (``--cpus-per-task`` is an integer), so a job asking for 0.5 CPUs never goes there.
FRACTIONAL_CPU_KINDS: frozenset[str] = frozenset({"kubernetes", "local"})


def available_kinds() -> list[str]:
    """The backend kinds this installation can drive."""
    return sorted(REGISTRY)


def load_backend(kind: str, name: str, config: Mapping[str, Any], *, work_dir: Path, instance: str = "") -> Backend:
    """Build the adapter for one cluster.

    ``instance`` names this portal's jobs on the cluster (the Cluster row's own id): two
    portals, say staging and production, may share one Slurm or Kubernetes cluster, and
    each must sweep only its own orphans. Backends whose jobs live in the portal's own
    work directory (local) need no name.

    Raises ``BackendError(permanent=True)`` for an unknown kind or a bad config, since
    no retry can fix either.
    """
    try:
        dotted = REGISTRY[kind]
    except KeyError:
        known = ", ".join(available_kinds())
        raise BackendError(f"no backend for kind {kind!r} (available: {known})", permanent=True) from None
    module_name, _, class_name = dotted.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls(name=name, config=config, work_dir=work_dir, instance=instance)
    return backend
