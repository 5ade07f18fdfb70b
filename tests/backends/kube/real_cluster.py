"""The contract suite against a real cluster: opt-in, when ``KUBECONFIG`` is set.

Environment (docs/admin/kubernetes.md says the same)::

    KUBECONFIG=~/.kube/config   # turns the suite on; its current context is used
    QM_K8S_CONTEXT=name         # another context
    QM_K8S_NAMESPACE=qm-test    # where test Jobs go (default "default"); it must exist
    QM_K8S_NODE=gpu-node-1      # a Ready GPU node the jobs are pinned to (required)
    QM_K8S_GPUS=0,1             # our indices of its GPUs to place on (default "0")
    QM_K8S_IMAGE=ubuntu:24.04   # an image with bash

Jobs are labelled ``quartermaster.io/cluster=qm-contract``; after each test every such
Job in the namespace is deleted (with its pods), cancel records included.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.backends import load_backend
from scheduler.backends.base import Backend
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes_api import NotFound
from scheduler.backends.kubernetes_objects import selector

CLUSTER = "qm-contract"


def real_cluster_config() -> dict[str, Any]:
    config: dict[str, Any] = {
        "kubeconfig": os.environ["KUBECONFIG"],
        "namespace": os.environ.get("QM_K8S_NAMESPACE", "default"),
        "image": os.environ.get("QM_K8S_IMAGE", "ubuntu:24.04"),
        "kill_grace_seconds": 1,
        "record_seconds": 0,
    }
    if os.environ.get("QM_K8S_CONTEXT"):
        config["context"] = os.environ["QM_K8S_CONTEXT"]
    return config


@contextlib.contextmanager
def real_cluster_case(tmp_path: Path) -> Iterator[tuple[Callable[[], Backend], str, tuple[int, ...]]]:
    """Yields (build, node, gpu indices) for a Case, and cleans the namespace after."""
    node = os.environ.get("QM_K8S_NODE")
    if not node:
        pytest.fail("KUBECONFIG is set, so the real-cluster contract runs: set QM_K8S_NODE to a GPU node's name")
    gpus = tuple(int(i) for i in os.environ.get("QM_K8S_GPUS", "0").split(","))
    config = real_cluster_config()

    def build() -> Backend:
        return load_backend("kubernetes", CLUSTER, config, work_dir=tmp_path)

    try:
        yield build, node, gpus
    finally:
        _delete_everything(KubernetesBackend(name=CLUSTER, config=config, work_dir=tmp_path))


def _delete_everything(backend: KubernetesBackend) -> None:
    namespace = backend.default_namespace
    for job in backend.api.list_jobs(namespace, selector(CLUSTER)):
        name = job["metadata"]["name"]
        with contextlib.suppress(NotFound):
            backend.api.patch_job(namespace, name, {"metadata": {"finalizers": None}})
            backend.api.delete_job(namespace, name, propagation="Background")
