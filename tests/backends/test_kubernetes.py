"""The Kubernetes backend beyond the shared contract: manifests, config, errors, inventory.

Manifests are checked against the official batch/v1 Job schema (tests/backends/kube/
job-batch-v1.schema.json, from kubernetes-validate 1.37). Everything that talks to an API
server talks real HTTP to the fake one in tests/backends/kube. No Django here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from scheduler.backends.base import (
    LOG_CHUNK_BYTES,
    ArrayTask,
    BackendError,
    JobOutput,
    JobSpec,
    LogSource,
    Placement,
    PollResult,
    RemoteState,
    RunAs,
)
from scheduler.backends.kubernetes import KubernetesBackend
from scheduler.backends.kubernetes_objects import (
    RECORD_FINALIZER,
    JobTarget,
    build_job,
    is_dns_label,
    job_name,
    node_from_object,
    poll_result,
)
from tests.backends.kube.apiserver import JOB_SCHEMA, FakeKube, job_violations
from tests.backends.kube.builders import A100_40, contract_nodes, gpu_node


@pytest.fixture(autouse=True)
def _isolated_scheduler_settings() -> None:
    """Replaces the Django-side autouse fixture of tests/conftest.py: no Django here."""


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with FakeKube(nodes=contract_nodes(), namespaces=("default", "physics-gpu")) as server:
        yield server


def backend_for(kube: FakeKube, tmp_path: Path, **config: Any) -> KubernetesBackend:
    return KubernetesBackend(name="k8s", config={"api_server": kube.url, **config}, work_dir=tmp_path)


@pytest.fixture
def backend(kube: FakeKube, tmp_path: Path) -> KubernetesBackend:
    return backend_for(kube, tmp_path)


#: The owner's cluster identity: pods run as it.
ALICE = RunAs("alice", 20001, 20001)


def spec(command: str = "true", *placements: Placement, **fields: Any) -> JobSpec:
    values: dict[str, Any] = {
        "key": f"{uuid.uuid4()}.1",
        "name": "train",
        "owner": "alice",
        "run_as": ALICE,
        "account": "lab",
        "command": command,
        "script": "",
        "walltime_seconds": 3600,
        "placements": placements or (Placement("gpu-01", (0, 1)),),
        "cpus_per_node": Decimal(8),
        "memory_mib_per_node": 32768,
    }
    values.update(fields)
    return JobSpec(**values)


def manifest(job: JobSpec, image: str = "ubuntu:24.04") -> dict[str, Any]:
    nodes = {n["metadata"]["name"]: node_from_object(n, "k8s") for n in contract_nodes()}
    return build_job(job, JobTarget("k8s", "default", job_name(job.key), image, 30, nodes, run_as=job.run_as))


def wait(backend: KubernetesBackend, external_id: str, state: RemoteState | None = None) -> PollResult:
    deadline = time.monotonic() + 10
    while True:
        result = backend.poll([external_id])[external_id]
        if (state is None and result.state.is_terminal) or result.state is state:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{external_id} still {result}")
        time.sleep(0.05)


# --- Manifests -----------------------------------------------------------------------------

MANIFEST_CASES = {
    "two whole GPUs": spec(),
    "MIG slices": spec("true", Placement("mig-01", (2, 3))),
    "two nodes": spec("true", Placement("gpu-01", (0, 1)), Placement("gpu-02", (2, 3))),
    "CPU only": spec("true", Placement("gpu-01", ()), memory_mib_per_node=0),
    "files and a workdir": spec("python3 train.py", files={"train.py": "print(1)\n"}, workdir="/home/alice/p"),
    "script, image and env": spec(
        command="", script="#!/bin/bash\necho hi\n", image="nvcr.io/nvidia/pytorch:25.01", env={"WANDB_MODE": "offline"}
    ),
    "a task of a job array": spec("python3 sweep.py", array=ArrayTask(42, 7, 1000)),
    "part of a CPU": spec("true", Placement("gpu-01", ()), cpus_per_node=Decimal("0.25")),
}


@pytest.mark.parametrize("job", MANIFEST_CASES.values(), ids=MANIFEST_CASES.keys())
def test_every_manifest_is_a_valid_batch_v1_job(job: JobSpec) -> None:
    built = manifest(job)

    jsonschema.Draft202012Validator(JOB_SCHEMA).validate(built)
    assert job_violations(built) == []


@pytest.mark.parametrize(
    "cpus,quantity", [("8", "8"), ("8.000", "8"), ("0.5", "500m"), ("2.25", "2250m"), ("0.001", "1m")]
)
def test_cpus_are_asked_in_kubernetes_quantities_whole_or_in_millicores(cpus: str, quantity: str) -> None:
    container = manifest(spec(cpus_per_node=Decimal(cpus)))["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"] == quantity


def test_manifest_pins_the_node_asks_for_gpus_and_limits_walltime() -> None:
    job = spec(walltime_seconds=7200)

    built = manifest(job)

    pod = built["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert built["spec"]["backoffLimit"] == 0 and built["spec"]["activeDeadlineSeconds"] == 7200
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32768Mi"}, "limits": {"nvidia.com/gpu": "2"}}
    assert container["command"] == ["/bin/bash", "-c", "true"]
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["gpu-01"]}]
    assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {
        "nvidia.com/gpu.product": ["NVIDIA-H100-80GB-HBM3"],
        "nvidia.com/gpu.memory": ["81559"],
    }
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    labels = {
        "app.kubernetes.io/managed-by": "quartermaster",
        "quartermaster.io/cluster": "k8s",
        "quartermaster.io/key": job.key,
    }
    assert built["metadata"]["labels"] == labels == built["spec"]["template"]["metadata"]["labels"]
    assert {e["name"]: e["value"] for e in container["env"]}["QM_GPUS"] == "gpu-01:0,1"


def test_a_pod_starts_in_the_workdir_and_writes_its_files_first() -> None:
    container = manifest(spec("python3 train.py", files={"train.py": "print(1)\n"}, workdir="/home/alice/p"))["spec"][
        "template"
    ]["spec"]["containers"][0]
    assert container["workingDir"] == "/home/alice/p"
    command = container["command"][2]
    assert command.index("base64 -d > train.py") < command.index("python3 train.py")
    without = manifest(spec("python3 train.py", files={"train.py": "print(1)\n"}))
    assert "workingDir" not in without["spec"]["template"]["spec"]["containers"][0]
    assert (
        "mkdir -p /tmp/qm-job && cd /tmp/qm-job" in without["spec"]["template"]["spec"]["containers"][0]["command"][2]
    )


def run_container(built: dict[str, Any], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The container's command run here, as its runtime runs it (``/bin/bash -c``), in
    ``cwd``, its env the manifest's values (and ``env``): the pod's log is its output."""
    values = {k: v for k, v in env_of(built).items() if isinstance(v, str)}
    command = container_of(built)["command"]
    return subprocess.run(
        command, cwd=cwd, env={"PATH": os.environ["PATH"], **values, **env}, capture_output=True, text=True, timeout=60
    )


def test_a_pod_writes_its_own_output_files_and_keeps_its_log(tmp_path: Path) -> None:
    output = JobOutput(stdout=str(tmp_path / "train-42.out"), stderr=str(tmp_path / "train-42.err"))
    built = manifest(spec("echo to-stdout; echo to-stderr >&2; exit 3", output=output))

    ran = run_container(built, tmp_path)

    assert ran.returncode == 3  # the job's status, as the pod's
    assert (ran.stdout, ran.stderr) == ("to-stdout\n", "to-stderr\n")  # the pod's log
    assert (tmp_path / "train-42.out").read_text() == "to-stdout\n"
    assert (tmp_path / "train-42.err").read_text() == "to-stderr\n"


def test_a_pod_that_cannot_write_its_output_file_fails_before_the_job_runs(tmp_path: Path) -> None:
    output = JobOutput(stdout=str(tmp_path / "missing" / "out.txt"), stderr=str(tmp_path / "missing" / "out.txt"))
    built = manifest(spec(f"touch {tmp_path}/ran", output=output))

    ran = run_container(built, tmp_path)

    assert ran.returncode == 1 and f"qm: cannot write the output file {tmp_path}/missing/out.txt" in ran.stderr
    assert not (tmp_path / "ran").exists()


def test_a_stopped_pod_passes_sigterm_on_to_the_job_and_keeps_its_last_words(tmp_path: Path) -> None:
    """Kubernetes signals only the container's first process: the command that copies the
    output passes SIGTERM on to the job, and its ``tee`` outlives it, so a checkpoint's
    last words reach the file."""
    path, ready = tmp_path / "out.txt", tmp_path / "ready"
    job = f"trap 'echo checkpointed; exit 9' TERM; echo started; touch {ready}; sleep 60 & wait"
    built = manifest(spec(job, output=JobOutput(stdout=str(path), stderr=str(path))))
    values = {k: v for k, v in env_of(built).items() if isinstance(v, str)}
    pod = subprocess.Popen(
        container_of(built)["command"], cwd=tmp_path, env={"PATH": os.environ["PATH"], **values}, text=True
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < deadline and pod.poll() is None, "the job never started"
        time.sleep(0.02)

    pod.terminate()

    assert pod.wait(timeout=30) == 9
    assert path.read_text() == "started\ncheckpointed\n"


def test_only_rank_0_of_a_multi_node_job_writes_the_files(tmp_path: Path) -> None:
    path = str(tmp_path / "out.txt")
    placements = (Placement("gpu-01", (0,)), Placement("gpu-02", (3,)))
    built = manifest(spec('echo "rank $QM_NODE_RANK"', *placements, output=JobOutput(stdout=path, stderr=path)))

    rank_1 = run_container(built, tmp_path, QM_NODE_RANK="1")
    assert rank_1.stdout == "rank 1\n" and not Path(path).exists()
    rank_0 = run_container(built, tmp_path, QM_NODE_RANK="0")
    assert rank_0.stdout == "rank 0\n" and Path(path).read_text() == "rank 0\n"


def test_files_too_large_for_a_container_command_are_refused_with_the_reason(
    backend: KubernetesBackend,
) -> None:
    with pytest.raises(BackendError, match="over the 131071 one argument may hold") as caught:
        backend.submit(spec("python3 train.py", files={"data.txt": "x" * 200_000}))
    assert caught.value.permanent


def test_mig_slices_ask_for_their_mig_resource() -> None:
    built = manifest(spec("true", Placement("mig-01", (2, 5))))

    limits = built["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/mig-3g.20gb": "2"}


def test_multi_node_job_is_an_indexed_job_with_one_pod_per_node() -> None:
    built = manifest(spec("true", Placement("gpu-01", (0,)), Placement("gpu-02", (3,))))

    job_spec = built["spec"]
    assert (job_spec["completionMode"], job_spec["completions"], job_spec["parallelism"]) == ("Indexed", 2, 2)
    anti = job_spec["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"


def container_of(built: dict[str, Any]) -> dict[str, Any]:
    return dict(built["spec"]["template"]["spec"]["containers"][0])


def env_of(built: dict[str, Any]) -> dict[str, Any]:
    """The container's env by name: a value, or where it comes from (``valueFrom``)."""
    container = built["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_multi_node_ranks_are_completion_indexes_and_rank_0_has_a_dns_name() -> None:
    job = spec("true", Placement("gpu-01", (0,)), Placement("gpu-02", (3,)))
    built = manifest(job)
    name, env = job_name(job.key), env_of(built)
    index = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env["QM_NODE_RANK"] == env["NODE_RANK"] == index
    assert env["QM_MASTER_ADDR"] == env["MASTER_ADDR"] == f"{name}-0.{name}"
    assert built["spec"]["template"]["spec"]["subdomain"] == name  # pods <name>-<index>.<name>
    assert (env["QM_MASTER_PORT"], env["MASTER_PORT"]) == ("29500", "29500")
    assert (env["QM_NNODES"], env["QM_GPUS_PER_NODE"], env["WORLD_SIZE"]) == ("2", "1", "2")


def test_a_task_of_an_array_knows_its_place() -> None:
    env = env_of(manifest(spec("python3 sweep.py", array=ArrayTask(42, 7, 1000))))

    assert (env["QM_ARRAY_JOB_ID"], env["QM_ARRAY_TASK_ID"], env["QM_ARRAY_TASK_COUNT"]) == ("42", "7", "1000")
    assert "SLURM_ARRAY_TASK_ID" not in env  # Slurm's names only where Slurm runs it


def test_a_single_node_job_is_rank_0_on_loopback() -> None:
    env = env_of(manifest(spec()))
    assert (env["QM_NODE_RANK"], env["QM_MASTER_ADDR"], env["QM_NNODES"], env["WORLD_SIZE"]) == (
        "0",
        "127.0.0.1",
        "1",
        "2",
    )


def test_a_multi_node_submit_makes_one_headless_service_owned_by_its_job(
    backend: KubernetesBackend, kube: FakeKube
) -> None:
    job = spec("true", Placement("gpu-01", (0,)), Placement("gpu-02", (3,)))
    backend.submit(job)
    backend.submit(job)  # a retry: still one Job and one Service

    [created], [service] = kube.jobs(), kube.services()
    assert service["metadata"]["name"] == created["metadata"]["name"]
    assert service["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"quartermaster.io/key": job.key}


def test_a_single_node_submit_makes_no_service(backend: KubernetesBackend, kube: FakeKube) -> None:
    backend.submit(spec())
    assert kube.services() == []


@pytest.mark.parametrize(
    ("placements", "message"),
    [
        ((Placement("gpu-01", (0, 1)), Placement("gpu-02", (0,))), "same GPUs on every node"),
        ((Placement("mig-01", (0,)),), "split into MIG slices"),
        ((Placement("gpu-01", (7,)),), "has no GPU 7"),
    ],
    ids=["uneven multi-node", "whole MIG parent", "missing GPU"],
)
def test_placements_kubernetes_cannot_express_are_rejected(placements: tuple[Placement, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        manifest(spec("true", *placements))


@pytest.mark.parametrize(
    "key",
    ["0b5ad1f0-8f43-4c7e-9d1c-2a6f4e8b7c31.12", "Never-Submitted.1", "x" * 63, "a_b.c", "A.1"],
    ids=["canonical", "capitals", "long", "underscore", "short"],
)
def test_job_names_are_dns_labels_derived_from_the_key(key: str) -> None:
    name = job_name(key)

    assert is_dns_label(name, max_length=50) and name.startswith("qm-")
    assert job_name(key) == name


def test_canonical_keys_name_jobs_readably_and_other_keys_do_not_collide() -> None:
    assert job_name("0b5ad1f0-8f43-4c7e-9d1c-2a6f4e8b7c31.2") == "qm-0b5ad1f0-8f43-4c7e-9d1c-2a6f4e8b7c31-2"
    assert job_name("A.1") != job_name("a.1") != job_name("a-1")


# --- Config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "exactly one of 'api_server', 'kubeconfig' or 'in_cluster: true'"),
        ({"api_server": "https://k", "kubeconfig": "/k"}, "exactly one of"),
        ({"api_server": "https://k", "namespce": "x"}, "unknown key(s) namespce"),
        ({"api_server": 6443}, "config.api_server must be a string"),
        ({"api_server": "https://k", "namespace": "Bad_NS"}, "config.namespace must be a namespace name"),
        ({"api_server": "https://k", "namespaces": ["a"]}, "config.namespaces must be a mapping"),
        ({"api_server": "https://k", "namespaces": {"lab": "-x"}}, "config.namespaces.lab must be a namespace"),
        ({"kubeconfig": "/k", "token": "t"}, "config.token applies to api_server only"),
        ({"api_server": "https://k", "token": "t", "token_file": "/t"}, "exclusive"),
        ({"api_server": "https://k", "context": "c"}, "config.context needs config.kubeconfig"),
        ({"api_server": "https://k", "verify_tls": "no"}, "config.verify_tls must be true or false"),
        ({"api_server": "https://k", "in_cluster": 1}, "config.in_cluster must be true or false"),
        ({"api_server": "https://k", "kill_grace_seconds": -1}, "config.kill_grace_seconds must not be negative"),
        ({"api_server": "https://k", "timeout_seconds": 0}, "config.timeout_seconds must be positive"),
        ({"api_server": "https://k", "image": ""}, "config.image must not be empty"),
    ],
    ids=[
        "no source",
        "two sources",
        "typo",
        "api_server not a string",
        "bad namespace",
        "namespaces not a mapping",
        "bad account namespace",
        "token with kubeconfig",
        "token and token_file",
        "context without kubeconfig",
        "verify_tls not a bool",
        "in_cluster not a bool",
        "negative grace",
        "zero timeout",
        "empty image",
    ],
)
def test_bad_config_is_permanent_error(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    with pytest.raises(BackendError) as caught:
        KubernetesBackend(name="k8s", config=config, work_dir=tmp_path)

    assert caught.value.permanent
    assert message in caught.value.message


def test_cluster_name_must_be_a_label_value(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="must be a valid label value"):
        KubernetesBackend(name="my cluster", config={"api_server": "https://k"}, work_dir=tmp_path)


def test_unreadable_kubeconfig_is_permanent_on_first_use(tmp_path: Path) -> None:
    backend = KubernetesBackend(name="k8s", config={"kubeconfig": str(tmp_path / "nope")}, work_dir=tmp_path)

    with pytest.raises(BackendError) as caught:
        backend.list_nodes()

    assert caught.value.permanent and "cannot load credentials" in caught.value.message


def test_kubeconfig_with_a_token_reaches_the_server(tmp_path: Path) -> None:
    with FakeKube(nodes=contract_nodes(), token="s3cret") as kube:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters: [{{name: fake, cluster: {{server: '{kube.url}'}}}}]\n"
            "users: [{name: ci, user: {token: s3cret}}]\n"
            "contexts: [{name: test, context: {cluster: fake, user: ci}}]\n"
        )
        backend = KubernetesBackend(name="k8s", config={"kubeconfig": str(kubeconfig)}, work_dir=tmp_path)

        assert [n.name for n in backend.list_nodes()] == ["gpu-01", "gpu-02", "mig-01"]


def test_token_file_is_sent_and_a_wrong_token_is_retried_not_fatal(tmp_path: Path) -> None:
    """A rejected token (401) is an admin's to fix, not the user's: jobs wait, not fail."""
    with FakeKube(nodes=contract_nodes(), token="s3cret") as kube:
        (tmp_path / "token").write_text("s3cret\n")
        assert backend_for(kube, tmp_path, token_file=str(tmp_path / "token")).list_nodes()

        with pytest.raises(BackendError) as caught:
            backend_for(kube, tmp_path, token="wrong").list_nodes()

    assert not caught.value.permanent and "Unauthorized" in caught.value.message


def test_each_account_has_its_namespace(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path, namespaces={"physics": "physics-gpu"})

    physics = backend.submit(spec(account="physics"))
    lab = backend.submit(spec(account="lab"))

    assert physics.startswith("physics-gpu/qm-") and lab.startswith("default/qm-")
    assert [j["metadata"]["name"] for j in kube.jobs("physics-gpu")] == [physics.split("/")[1]]
    assert wait(backend, physics).state is RemoteState.COMPLETED


# --- Errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(400, True), (401, False), (403, True), (422, True), (429, False), (500, False), (503, False)],
    ids=[
        "400 bad request",
        "401 expired token",
        "403 forbidden",
        "422 invalid",
        "429 throttled",
        "500 internal",
        "503 unavailable",
    ],
)
def test_api_errors_are_permanent_or_transient(
    kube: FakeKube, backend: KubernetesBackend, status: int, permanent: bool
) -> None:
    kube.fail("POST", "/jobs", status, message=f"admission webhook said no ({status})")

    with pytest.raises(BackendError) as caught:
        backend.submit(spec())

    assert caught.value.permanent is permanent
    assert f"admission webhook said no ({status})" in caught.value.message


def test_a_transient_error_then_a_retry_submits_once(kube: FakeKube, backend: KubernetesBackend) -> None:
    job = spec()
    kube.fail("POST", "/jobs", 503)

    with pytest.raises(BackendError):
        backend.submit(job)
    external_id = backend.submit(job)

    assert backend.submit(job) == external_id and len(kube.jobs()) == 1


def test_refused_connection_is_transient(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nothing listens
    backend = KubernetesBackend(name="k8s", config={"api_server": f"http://127.0.0.1:{port}"}, work_dir=tmp_path)

    with pytest.raises(BackendError) as caught:
        backend.poll([f"default/{job_name('x.1')}"])

    assert not caught.value.permanent


def test_timeout_is_transient(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path, timeout_seconds=0.2)
    kube.fail("GET", "/nodes", 200, hang_seconds=1.0)

    with pytest.raises(BackendError) as caught:
        backend.list_nodes()

    assert not caught.value.permanent


def test_missing_namespace_is_permanent(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path, namespace="nowhere")

    with pytest.raises(BackendError) as caught:
        backend.submit(spec())

    assert caught.value.permanent and 'namespaces "nowhere" not found' in caught.value.message


# --- Poll ------------------------------------------------------------------------------------------------


def test_poll_of_many_jobs_is_one_list_of_jobs_and_one_of_pods(kube: FakeKube, backend: KubernetesBackend) -> None:
    ids = [backend.submit(spec("sleep 5", Placement("gpu-02", ()))) for _ in range(6)]
    before = len(kube.requests)

    results = backend.poll([*ids, "default/qm-unknown-1"])

    assert [method for method, _ in kube.requests[before:]] == ["GET", "GET"]
    assert {r.state for r in results.values()} <= {RemoteState.PENDING, RemoteState.RUNNING, RemoteState.UNKNOWN}
    assert results["default/qm-unknown-1"].state is RemoteState.UNKNOWN


@pytest.mark.parametrize(
    ("command", "state", "exit_code"),
    [
        ("exit 0", RemoteState.COMPLETED, 0),
        ("echo a; exit 3", RemoteState.FAILED, 3),
        ("false", RemoteState.FAILED, 1),
        ("nvidia-smi", RemoteState.FAILED, 127),
    ],
    ids=["exit 0", "exit 3", "false", "a command the fake cannot run"],
)
def test_exit_codes_come_from_the_failed_pod(
    backend: KubernetesBackend, command: str, state: RemoteState, exit_code: int
) -> None:
    result = wait(backend, backend.submit(spec(command)))

    assert (result.state, result.exit_code) == (state, exit_code)


def test_a_job_that_cannot_be_scheduled_is_pending_with_the_schedulers_reason(backend: KubernetesBackend) -> None:
    backend.submit(spec("sleep 30", Placement("gpu-01", (0, 1, 2))))
    second = backend.submit(spec("sleep 30", Placement("gpu-01", (3, 2))))

    time.sleep(0.3)
    result = backend.poll([second])[second]

    assert result.state is RemoteState.PENDING
    assert "Insufficient nvidia.com/gpu" in result.reason


def _job(*conditions: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "qm-x-1", "annotations": annotations or {}},
        "status": {
            "startTime": "2026-01-01T10:00:00Z",
            "conditions": [{"status": "True", "lastTransitionTime": "2026-01-01T10:05:00Z", **c} for c in conditions],
        },
    }


def _pod(phase: str, *, exit_code: int | None = None, disruption: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "job", "state": {"terminated": {"exitCode": exit_code}}}]
    if disruption:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": disruption})
    return {"metadata": {"name": "qm-x-1-abcde"}, "status": status}


@pytest.mark.parametrize(
    ("job", "pods", "state", "exit_code"),
    [
        (_job({"type": "Complete"}), [_pod("Succeeded", exit_code=0)], RemoteState.COMPLETED, 0),
        (_job({"type": "Failed", "reason": "DeadlineExceeded"}), [], RemoteState.TIMEOUT, None),
        (
            _job({"type": "Failed", "reason": "BackoffLimitExceeded"}),
            [_pod("Failed", exit_code=2)],
            RemoteState.FAILED,
            2,
        ),
        (
            _job({"type": "Failed", "reason": "PodFailurePolicy"}),
            [_pod("Failed", exit_code=137, disruption="PreemptionByScheduler")],
            RemoteState.PREEMPTED,
            None,
        ),
        (
            _job({"type": "Failed", "reason": "BackoffLimitExceeded"}),
            [_pod("Failed", exit_code=137, disruption="DeletionByTaintManager")],
            RemoteState.NODE_FAIL,
            None,
        ),
        (
            _job({"type": "FailureTarget", "reason": "BackoffLimitExceeded"}),
            [_pod("Running")],
            RemoteState.RUNNING,
            None,
        ),
        (_job(annotations={"quartermaster.io/cancelled-at": "2026-01-01T10:01:00Z"}), [], RemoteState.CANCELLED, None),
        (_job(), [_pod("Pending")], RemoteState.PENDING, None),
    ],
    ids=[
        "complete",
        "deadline is TIMEOUT",
        "backoff is FAILED with the exit code",
        "preempted pod",
        "node gone",
        "FailureTarget is not final yet",
        "our cancel",
        "pending",
    ],
)
def test_job_conditions_map_to_our_states(
    job: dict[str, Any], pods: list[dict[str, Any]], state: RemoteState, exit_code: int | None
) -> None:
    result = poll_result("default/qm-x-1", job, pods)

    assert (result.state, result.exit_code) == (state, exit_code)
    if state.is_terminal:
        assert result.ended_at is not None and result.ended_at.tzinfo is not None


# --- Cancel and orphans ---------------------------------------------------------------------------------------


def test_cancel_deletes_the_job_with_foreground_propagation_and_keeps_a_record(
    kube: FakeKube, backend: KubernetesBackend
) -> None:
    external_id = backend.submit(spec("sleep 30"))
    wait(backend, external_id, RemoteState.RUNNING)

    backend.cancel(external_id, grace_seconds=7)

    assert any(m == "DELETE" and "propagationPolicy=Foreground" in p for m, p in kube.requests)
    assert any(m == "DELETE" and "/pods?" in p and "gracePeriodSeconds=7" in p for m, p in kube.requests)
    # The garbage collector deletes the pods, then drops its own finalizer on a later pass.
    kube.wait(lambda: not kube.pods() and "foregroundDeletion" not in kube.jobs()[0]["metadata"]["finalizers"])
    (record,) = kube.jobs()
    assert record["metadata"]["deletionTimestamp"] and record["metadata"]["finalizers"] == [RECORD_FINALIZER]
    assert backend.poll([external_id])[external_id].state is RemoteState.CANCELLED


def test_cancel_record_is_released_after_record_seconds(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path, record_seconds=0)
    external_id = backend.submit(spec("sleep 30"))
    wait(backend, external_id, RemoteState.RUNNING)

    backend.cancel(external_id)

    assert wait(backend, external_id, RemoteState.UNKNOWN).state is RemoteState.UNKNOWN
    assert kube.jobs() == []


def test_cancel_reads_again_when_the_job_changed_under_it(kube: FakeKube, backend: KubernetesBackend) -> None:
    external_id = backend.submit(spec("sleep 30"))
    kube.fail("PATCH", "/jobs/", 409)

    backend.cancel(external_id)

    assert wait(backend, external_id).state is RemoteState.CANCELLED


def test_list_jobs_gives_our_live_labelled_jobs_by_key_for_the_orphan_sweep(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path, namespaces={"physics": "physics-gpu"})
    done = backend.submit(spec("true"))
    wait(backend, done)
    mine = spec("sleep 30")
    elsewhere = spec("sleep 30", account="physics")
    first, second = backend.submit(mine), backend.submit(elsewhere)
    foreign = manifest(spec())
    foreign["metadata"]["name"] = "someone-elses"
    foreign["metadata"]["labels"] = {"app": "other"}
    foreign["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    kube.create_job(foreign)
    other_cluster = backend_for(kube, tmp_path).__class__(
        name="other", config={"api_server": kube.url}, work_dir=tmp_path
    )
    other_cluster.submit(spec("sleep 30"))

    assert backend.list_jobs() == {mine.key: first, elsewhere.key: second}
    backend.cancel(first)
    assert backend.list_jobs() == {elsewhere.key: second}


def test_portals_sharing_a_cluster_each_list_only_their_own_jobs(kube: FakeKube, tmp_path: Path) -> None:
    """Staging and production, same cluster name, same namespace: each portal's orphan
    sweep sees only the Jobs it labelled with its instance."""
    production = KubernetesBackend(name="k8s", config={"api_server": kube.url}, work_dir=tmp_path, instance="prod01")
    staging = KubernetesBackend(name="k8s", config={"api_server": kube.url}, work_dir=tmp_path, instance="stage1")
    ours, theirs = spec("sleep 30"), spec("sleep 30")
    mine = production.submit(ours)
    staging.submit(theirs)

    assert production.list_jobs() == {ours.key: mine}
    assert set(staging.list_jobs()) == {theirs.key}
    assert production.poll([mine])[mine].state is not RemoteState.UNKNOWN


# --- Inventory and logs --------------------------------------------------------------------------------------


def test_nodes_come_from_capacity_and_gpu_feature_discovery_labels(backend: KubernetesBackend) -> None:
    nodes = {n.name: n for n in backend.list_nodes()}

    h100 = nodes["gpu-01"]
    assert (h100.cpus, h100.memory_mib, h100.state, h100.labels["rack"]) == (32, 257629, "up", "r1")
    assert {(g.model, g.memory_mib, g.compute_capability) for g in h100.gpus} == {
        ("NVIDIA-H100-80GB-HBM3", 81559, "9.0")
    }
    mig = nodes["mig-01"]
    assert [(g.index, g.parent_index, g.mig_profile, g.memory_mib) for g in mig.gpus] == [
        (0, None, "", 40960),
        (1, None, "", 40960),
        (2, 0, "3g.20gb", 20480),
        (3, 1, "3g.20gb", 20480),
        (4, 0, "3g.20gb", 20480),
        (5, 1, "3g.20gb", 20480),
    ]


@pytest.mark.parametrize(
    ("node", "state", "reason"),
    [
        (gpu_node("n", ready=False), "down", "container runtime is down"),
        (gpu_node("n", unschedulable=True), "drain", "cordoned"),
        (gpu_node("n", allocatable_gpus=3), "up", "3 of 4 nvidia.com/gpu allocatable"),
    ],
    ids=["not Ready is down", "cordoned is drain", "unhealthy GPU is noted"],
)
def test_node_health(node: dict[str, Any], state: str, reason: str) -> None:
    info = node_from_object(node, "k8s").info

    assert info.state == state and reason in info.reason


def test_time_sliced_gpus_are_shared() -> None:
    info = node_from_object(gpu_node("n", gpus=2, gpu=A100_40, replicas=4), "k8s").info

    assert [(g.index, g.sharing) for g in info.gpus] == [(0, "time-slicing"), (1, "time-slicing")]
    # a pod asking nvidia.com/gpu there gets a replica others may share: no GPU is its own
    assert [g.exclusive for g in info.gpus] == [False, False]


def test_renamed_shared_replicas_are_what_a_share_asks_for() -> None:
    """With the device plugin's ``renameByDefault``, a time-sliced node offers
    ``nvidia.com/gpu.shared`` replicas and no ``nvidia.com/gpu``: its GPUs are shared, a
    share asks for one replica, and no GPU there is a whole job's own."""
    node = gpu_node("ts-01", gpus=2, gpu=A100_40, replicas=4)
    for section in ("capacity", "allocatable"):
        node["status"][section]["nvidia.com/gpu.shared"] = node["status"][section].pop("nvidia.com/gpu")
    kube_node = node_from_object(node, "k8s")
    assert [(g.sharing, g.exclusive) for g in kube_node.info.gpus] == [("time-slicing", False)] * 2
    assert kube_node.info.state == "up" and not kube_node.info.reason
    job = spec("true", Placement("ts-01", (1,)))  # a share of GPU 1
    built = build_job(job, JobTarget("k8s", "default", job_name(job.key), "ubuntu:24.04", 30, {"ts-01": kube_node}))
    assert built["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu.shared": "1"}


def test_the_sharing_strategy_label_names_the_mode() -> None:
    """GPU feature discovery labels MPS sharing ``nvidia.com/gpu.sharing-strategy: mps``;
    the overhead charged on a share depends on it."""
    labels = {"nvidia.com/gpu.sharing-strategy": "mps"}
    info = node_from_object(gpu_node("n", gpus=2, gpu=A100_40, labels=labels), "k8s").info

    assert [g.sharing for g in info.gpus] == ["mps", "mps"]
    assert all(g.exclusive for g in info.gpus)  # one replica per GPU: a pod may hold one whole
    assert [g.sharing for g in node_from_object(gpu_node("m", gpus=1), "k8s").info.gpus] == [""]


def test_read_log_joins_the_pods_of_a_multi_node_job(backend: KubernetesBackend) -> None:
    external_id = backend.submit(
        spec("echo hello from $JOB_COMPLETION_INDEX", Placement("gpu-01", (0,)), Placement("gpu-02", (0,)))
    )
    assert wait(backend, external_id).state is RemoteState.COMPLETED

    log = backend.read_log(external_id)

    assert log.count("==> ") == 2 and log.count("hello from") == 2
    assert backend.read_log(external_id, max_bytes=5) == log[-5:]


def test_each_rank_s_whole_log_streams_from_its_pod_in_chunks_and_resumes_at_an_offset(
    kube: FakeKube, backend: KubernetesBackend
) -> None:
    """One log per rank (the pod's container; the kubelet keeps stdout and stderr as
    one), read whole through the official client's streamed response, never at once."""
    external_id = backend.submit(spec("echo started", Placement("gpu-01", (0,)), Placement("gpu-02", (0,))))
    assert wait(backend, external_id).state is RemoteState.COMPLETED
    pods = {int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): p for p in kube.pods()}
    logs = {rank: "".join(f"rank {rank} line {n} é\n" for n in range(60000)) for rank in pods}
    for rank, pod in pods.items():
        kube.set_log(pod["metadata"]["name"], logs[rank])

    assert backend.log_sources(external_id) == (LogSource(0, "combined"), LogSource(1, "combined"))
    for rank in (0, 1):
        chunks = list(backend.stream_log(external_id, LogSource(rank, "combined")))
        assert len(chunks) > 1 and max(map(len, chunks)) <= LOG_CHUNK_BYTES
        assert b"".join(chunks) == logs[rank].encode()
    expected = logs[1].encode()
    assert b"".join(backend.stream_log(external_id, LogSource(1, "combined"), 100_001)) == expected[100_001:]
    assert list(backend.stream_log(external_id, LogSource(1, "combined"), len(expected))) == []
    assert list(backend.stream_log(external_id, LogSource(2, "combined"))) == []  # no such rank
    assert list(backend.stream_log(external_id, LogSource(None, "combined"))) == []
    assert ("GET", f"/api/v1/namespaces/default/pods/{pods[1]['metadata']['name']}/log?container=job") in kube.requests


def test_a_pod_that_has_not_started_has_no_log_yet(kube: FakeKube, backend: KubernetesBackend) -> None:
    backend.submit(spec("sleep 30", Placement("gpu-01", (0, 1, 2))))
    waiting = backend.submit(spec("echo hi", Placement("gpu-01", (3, 2))))  # one GPU too many: Pending
    kube.wait(lambda: "Insufficient" in backend.poll([waiting])[waiting].reason)

    assert backend.log_sources(waiting) == (LogSource(0, "combined"),)
    assert list(backend.stream_log(waiting, LogSource(0, "combined"))) == []


# --- Pods run as their owner ------------------------------------------------------------------


def test_the_pod_runs_as_its_owner_never_root_with_no_capabilities(kube: FakeKube, backend: KubernetesBackend) -> None:
    job = spec()
    backend.submit(job)

    [stored] = kube.jobs()
    pod = stored["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsUser": 20001,
        "runAsGroup": 20001,
        "fsGroup": 20001,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    [container] = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    jsonschema.Draft202012Validator(JOB_SCHEMA).validate(stored)


@pytest.mark.parametrize(
    ("run_as", "message"),
    [
        (None, "no cluster identity with a uid and gid"),
        (RunAs("alice"), "no cluster identity with a uid and gid"),
        (RunAs("root", 0, 0), "below 1000: a system account"),
        (RunAs("daemon", 1, 1), "below 1000: a system account"),
    ],
    ids=["no identity", "no uid", "root", "system account"],
)
def test_a_pod_never_runs_without_its_owners_ids_or_as_a_system_account(
    kube: FakeKube, backend: KubernetesBackend, run_as: RunAs | None, message: str
) -> None:
    with pytest.raises(BackendError) as caught:
        backend.submit(spec(run_as=run_as))

    assert caught.value.permanent and message in caught.value.message
    assert kube.jobs() == []


def test_a_cluster_that_runs_pods_as_their_image_says_still_drops_privileges(kube: FakeKube, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path, run_as_owner=False)
    backend.submit(spec(run_as=None))

    [stored] = kube.jobs()
    pod = stored["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
