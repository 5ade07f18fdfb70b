"""Interactive sessions on Kubernetes: a session's Job gets a headless Service owned by
the Job, selecting its pod (rank 0's of several), schema-checked as the API server would
with kubernetes-validate; the portal's proxy reaches the server at the Service's cluster
DNS name (``session_host``). Real HTTP to the fake API server in tests/backends/kube."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from scheduler.backends.base import BackendError, Placement
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes_objects import build_session_secret, build_session_service, job_name
from scheduler.sessions.script import SECRET_ENV
from tests.backends.kube.apiserver import JOB_SCHEMA, FakeKube
from tests.backends.kube.builders import contract_nodes
from tests.backends.test_kubernetes import backend_for, manifest, spec


@pytest.fixture(autouse=True)
def _isolated_scheduler_settings() -> None:
    """Replaces the Django-side autouse fixture of tests/conftest.py: no Django here."""


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with FakeKube(nodes=contract_nodes(), namespaces=("default", "physics-gpu")) as server:
        yield server


def session(*placements: Placement, **fields: Any) -> Any:
    return spec("", *placements, script="#!/bin/bash\nexec serve\n", env={SECRET_ENV: "s3cret"}, **fields)


def created(job: dict[str, Any]) -> dict[str, Any]:
    """The Job as the API server returns it: with its uid (the Service's owner)."""
    return {**job, "metadata": {**job["metadata"], "uid": "9d2c1e4f-0000-4000-8000-000000000001"}}


@pytest.mark.parametrize(
    "placements",
    [(Placement("gpu-01", (0, 1)),), (Placement("gpu-01", (0,)), Placement("gpu-02", (3,)))],
    ids=["one pod", "rank 0 of two"],
)
def test_a_sessions_service_is_a_valid_v1_service(placements: tuple[Placement, ...]) -> None:
    service = build_session_service(created(manifest(session(*placements))))

    kubernetes_validate.validate(service, "1.37.0", strict=True)


def test_a_sessions_service_selects_rank_0_of_a_multi_node_session_only() -> None:
    one = build_session_service(created(manifest(session())))
    two = build_session_service(created(manifest(session(Placement("gpu-01", (0,)), Placement("gpu-02", (3,))))))

    assert set(one["spec"]["selector"]) == {"quartermaster.io/key"}
    assert two["spec"]["selector"]["batch.kubernetes.io/job-completion-index"] == "0"


def test_a_session_submit_makes_its_service_owned_by_its_job(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path)
    job = session()
    backend.submit(job)
    backend.submit(job)  # a retry: still one Service

    [made], [service] = kube.jobs(), kube.services()
    assert service["metadata"]["name"] == f"{made['metadata']['name']}-session"
    assert service["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]
    assert service["metadata"]["labels"] == made["metadata"]["labels"]  # found and swept as the Job is
    assert service["spec"] == {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {"quartermaster.io/key": job.key},
    }


def test_a_sessions_secret_is_in_a_secret_owned_by_its_job_never_in_the_job(kube: FakeKube, tmp_path: Path) -> None:
    """Whoever may read Jobs and pods in the account's namespace (the account's other
    users, perhaps) finds no secret there to open the session's server with."""
    job = session()
    backend_for(kube, tmp_path).submit(job)
    backend_for(kube, tmp_path).submit(job)  # a retry: still one Secret, the same

    [made], [secret] = kube.jobs(), kube.secrets()
    assert "s3cret" not in json.dumps(made)
    env = {e["name"]: e for e in made["spec"]["template"]["spec"]["containers"][0]["env"]}
    reference = env[SECRET_ENV]["valueFrom"]["secretKeyRef"]
    assert reference == {"name": secret["metadata"]["name"], "key": "token"}
    assert secret["stringData"] == {"token": "s3cret"} and secret["type"] == "Opaque"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]  # deleted with it
    assert secret["metadata"]["labels"] == made["metadata"]["labels"]
    kubernetes_validate.validate(build_session_secret(made, "s3cret"), "1.37.0", strict=True)
    jsonschema.Draft202012Validator(JOB_SCHEMA).validate(manifest(job))


def test_an_ordinary_single_node_job_still_makes_no_service_nor_secret(kube: FakeKube, tmp_path: Path) -> None:
    backend_for(kube, tmp_path).submit(spec())
    assert kube.services() == [] and kube.secrets() == []


def test_session_host_is_the_services_cluster_dns_name(kube: FakeKube, tmp_path: Path) -> None:
    job = session()
    backend = backend_for(kube, tmp_path, cluster_domain="gpu.example.org")
    external_id = backend.submit(job)

    host = backend.session_host(external_id, job.placements)

    assert host == f"{job_name(job.key)}-session.default.svc.gpu.example.org"
    assert backend_for(kube, tmp_path).session_host(external_id, job.placements).endswith(".svc.cluster.local")


def test_session_host_of_an_id_that_is_not_ours_is_a_permanent_error(kube: FakeKube, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="bad id") as caught:
        backend_for(kube, tmp_path).session_host("not an id", ())
    assert caught.value.permanent


def test_cluster_domain_must_be_a_dns_name(kube: FakeKube, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="cluster_domain must be a DNS name"):
        KubernetesBackend(
            name="k8s", config={"api_server": kube.url, "cluster_domain": "bad domain"}, work_dir=tmp_path
        )
