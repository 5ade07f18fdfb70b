"""Pure translations between our types and Kubernetes objects (plain JSON dicts).

No I/O here: :mod:`scheduler.backends.kubernetes` fetches and sends, this module decides
what a Job manifest looks like, what a Node means as inventory, and what a Job with its
Pods means as a :class:`PollResult`.

Naming. A Job is named from the spec key: ``<uuid>.<attempt>`` becomes
``qm-<uuid>-<attempt>`` (reversible, readable in ``kubectl get jobs``); any other key
becomes ``qm-<sanitised prefix>-<10 hex of its sha256>``. Either way the name is a
DNS-1123 label of at most 50 characters, so the pods of an Indexed Job
(``<job>-<index>-<5 random>``) and their hostnames (``<job>-<index>``) stay valid too.

GPU numbering follows the local backend: whole GPUs are ``0..n-1``, MIG slices follow with
``parent_index`` set. Kubernetes only counts devices (``nvidia.com/gpu: 4``,
``nvidia.com/mig-3g.20gb: 4``), so our indices are bookkeeping: a placement on GPUs
``(1, 3)`` asks for two ``nvidia.com/gpu`` on that node and the device plugin picks which.
Kubernetes does not say which GPU a MIG slice lives on either; slices are dealt round-robin
to the GPUs that are not whole (``nvidia.com/gpu.count`` minus ``nvidia.com/gpu``).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from scheduler.backends.base import SHARING_MODES, GpuInfo, JobSpec, NodeInfo, PollResult, RemoteState, RunAs
from scheduler.backends.job_env import DEFAULT_MASTER_PORT, job_env, master_env, rank_env
from scheduler.backends.job_env import SESSION_SECRET_ENV as SECRET_ENV
from scheduler.backends.job_files import prelude
from scheduler.backends.job_output import copying_output

Obj = dict[str, Any]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "quartermaster"
CLUSTER_LABEL = "quartermaster.io/cluster"
KEY_LABEL = "quartermaster.io/key"
#: Which portal made the Job (its Cluster row's id): the orphan sweep lists only its own.
INSTANCE_LABEL = "quartermaster.io/instance"
#: Set on a Job by ``cancel`` before deleting it: the Job then reads as CANCELLED.
CANCELLED_ANNOTATION = "quartermaster.io/cancelled-at"
#: Keeps a cancelled Job readable (as a record) after its pods are gone; see the adapter.
RECORD_FINALIZER = "quartermaster.io/cancel-record"
GPU_RESOURCE = "nvidia.com/gpu"
#: What the NVIDIA device plugin calls a shared GPU's replicas when its sharing config
#: renames them (``renameByDefault: true``, time-slicing or MPS): a job asks for one.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MEMORY_LABEL = "nvidia.com/gpu.memory"
CONTAINER = "job"
#: The pod annotation an Indexed Job's controller sets to the pod's completion index.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_CANONICAL_KEY = re.compile(
    r"(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.(?P<n>[0-9]{1,9})"
)
_MIG_PROFILE = re.compile(r"[1-7]g\.(?P<gb>[1-9][0-9]*)gb(?:\+me)?")
_MAX_NAME = 50
_UUID_NAMESPACE = uuid.UUID("0b5ad1f0-8f43-5c7e-9d1c-2a6f4e8b7c31")
#: Pod disruption reasons (the DisruptionTarget condition) and what they mean for us.
_DISRUPTIONS = {
    "PreemptionByScheduler": RemoteState.PREEMPTED,
    "DeletionByTaintManager": RemoteState.NODE_FAIL,
    "EvictionByEvictionAPI": RemoteState.NODE_FAIL,
    "DeletionByPodGC": RemoteState.NODE_FAIL,
    "TerminationByKubelet": RemoteState.NODE_FAIL,
}


def is_dns_label(value: str, max_length: int = 63) -> bool:
    return len(value) <= max_length and _DNS_LABEL.fullmatch(value) is not None


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def job_name(key: str) -> str:
    """The Job name for a spec key: a DNS-1123 label, the same for the same key."""
    canonical = _CANONICAL_KEY.fullmatch(key)
    if canonical:
        return f"qm-{canonical['uuid']}-{canonical['n']}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    prefix = re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")[: _MAX_NAME - len("qm--") - len(digest)]
    return "-".join(part for part in ("qm", prefix.strip("-"), digest) if part)


def selector(cluster: str, key: str | None = None, *, instance: str = "") -> str:
    """The label selector for this cluster's objects (one job's, with ``key``; only this
    portal's, with ``instance``)."""
    terms = [f"{MANAGED_BY}={MANAGER}", f"{CLUSTER_LABEL}={cluster}"]
    if key is not None:
        terms.append(f"{KEY_LABEL}={key}")
    if instance:
        terms.append(f"{INSTANCE_LABEL}={instance}")
    return ",".join(terms)


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the API writes it ('2026-01-01T10:00:00Z'), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantity(value: Any) -> Decimal:
    try:
        return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]
    except (ValueError, TypeError):
        return Decimal(0)


def cpu_quantity(cpus: Decimal) -> str:
    """A CPU request as Kubernetes writes it: ``"8"`` for whole CPUs, ``"500m"`` (its
    millicores, thousandths) for part of one."""
    return str(int(cpus)) if cpus == cpus.to_integral_value() else f"{int(cpus * 1000)}m"


# --- Nodes -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KubeNode:
    """A Node as inventory, plus what each of our GPU indices is in Kubernetes' terms."""

    info: NodeInfo
    #: GPU index -> the extended resource that stands for it.
    resources: Mapping[int, str]

    def request_for(self, indices: Sequence[int]) -> dict[str, int]:
        """The extended resources a placement on ``indices`` asks for.

        Raises ValueError naming the index that is missing or a MIG-split GPU.
        """
        split = {gpu.parent_index for gpu in self.info.gpus if gpu.parent_index is not None}
        counts: Counter[str] = Counter()
        for index in indices:
            if index in split:
                raise ValueError(
                    f"GPU {index} on {self.info.name} is split into MIG slices; place the job on its slices"
                )
            if index not in self.resources:
                raise ValueError(f"node {self.info.name} has no GPU {index!r} (has {sorted(self.resources)})")
            counts[self.resources[index]] += 1
        return dict(sorted(counts.items()))


def _gpu_uuid(prefix: str, cluster: str, node: str, index: int) -> str:
    return f"{prefix}-{uuid.uuid5(_UUID_NAMESPACE, f'{cluster}/{node}/{index}')}"


def _int_label(labels: Mapping[str, str], key: str, default: int = 0) -> int:
    try:
        return int(labels.get(key, default))
    except ValueError:
        return default


def node_from_object(obj: Obj, cluster: str) -> KubeNode:
    """Read one Node: allocatable CPU and memory, GPUs from capacity and GFD labels, health.

    State: ``down`` unless the Ready condition is True (its message is the reason);
    ``drain`` when cordoned (``spec.unschedulable``); else ``up``. When fewer GPUs are
    allocatable than installed, the node stays up and the reason says so.
    """
    metadata, status = obj.get("metadata") or {}, obj.get("status") or {}
    name = str(metadata.get("name", ""))
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}

    gpu_resource = GPU_RESOURCE
    whole = int(_quantity(capacity.get(GPU_RESOURCE, 0)))
    if not whole and capacity.get(SHARED_GPU_RESOURCE):
        gpu_resource = SHARED_GPU_RESOURCE
        whole = int(_quantity(capacity[SHARED_GPU_RESOURCE]))
    replicas = max(1, _int_label(labels, "nvidia.com/gpu.replicas", 1))
    strategy = labels.get("nvidia.com/gpu.sharing-strategy", "none")
    sharing = strategy if strategy in SHARING_MODES else ("time-slicing" if replicas > 1 else "")
    whole //= replicas
    physical = max(whole, _int_label(labels, "nvidia.com/gpu.count"))
    model = labels.get(PRODUCT_LABEL, "unknown")
    memory = _int_label(labels, MEMORY_LABEL)
    major, minor = labels.get("nvidia.com/gpu.compute.major"), labels.get("nvidia.com/gpu.compute.minor")
    capability = f"{major}.{minor}" if major and minor else ""

    slices: list[tuple[str, int]] = []
    for resource in sorted(capacity):
        profile = resource[len(MIG_RESOURCE_PREFIX) :] if resource.startswith(MIG_RESOURCE_PREFIX) else ""
        match = _MIG_PROFILE.fullmatch(profile)
        if match:
            slice_memory = _int_label(labels, f"{MIG_RESOURCE_PREFIX}{profile}.memory", int(match["gb"]) * 1024)
            slices += [(profile, slice_memory)] * int(_quantity(capacity[resource]))
    parents = list(range(whole, physical)) or ([physical] if slices else [])
    physical = max(physical, parents[-1] + 1) if parents else physical

    gpus = [
        GpuInfo(
            i,
            model,
            memory,
            capability,
            uuid=_gpu_uuid("GPU", cluster, name, i),
            sharing=sharing if i < whole else "",
            # A pod asking nvidia.com/gpu on a time-sliced node gets one replica, of a GPU
            # the device plugin picks and others may share: never a GPU of its own.
            exclusive=not (i < whole and sharing and replicas > 1),
        )
        for i in range(physical)
    ]
    resources = {i: gpu_resource for i in range(whole)}
    for j, (profile, slice_memory) in enumerate(slices):
        index = physical + j
        gpus.append(
            GpuInfo(
                index,
                model,
                slice_memory,
                capability,
                uuid=_gpu_uuid("MIG", cluster, name, index),
                mig_profile=profile,
                parent_index=parents[j % len(parents)],
            )
        )
        resources[index] = MIG_RESOURCE_PREFIX + profile

    state, reason = "up", ""
    if allocatable.get(gpu_resource) is not None and int(_quantity(allocatable[gpu_resource])) < whole * replicas:
        reason = f"{allocatable[gpu_resource]} of {whole * replicas} {gpu_resource} allocatable"
    if (obj.get("spec") or {}).get("unschedulable"):
        state, reason = "drain", "cordoned (spec.unschedulable)"
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        state = "down"
        reason = str((ready or {}).get("message") or "node is not Ready")
    return KubeNode(
        info=NodeInfo(
            name=name,
            cpus=int(_quantity(allocatable.get("cpu", 0))),
            memory_mib=int(_quantity(allocatable.get("memory", 0)) // (1024 * 1024)),
            gpus=tuple(gpus),
            state=state,
            reason=reason,
            labels=labels,
        ),
        resources=resources,
    )


# --- Job manifests -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobTarget:
    """Where and how a spec becomes a Job: everything the manifest needs besides the spec."""

    cluster: str
    namespace: str
    name: str
    image: str
    kill_grace_seconds: int
    nodes: Mapping[str, KubeNode]
    instance: str = ""
    #: The owner's uid/gid the pod runs as; None: as the image says (a site whose
    #: cluster runs every job as the portal, ``run_as_owner: false``).
    run_as: RunAs | None = None


def _same_label(nodes: Sequence[KubeNode], label: str) -> list[str] | None:
    """The values of a GFD label over ``nodes``, or None if some node lacks it."""
    values = [node.info.labels.get(label) for node in nodes]
    if any(v is None for v in values):
        return None
    return sorted({str(v) for v in values})


def pod_security(run_as: RunAs | None) -> Obj:
    """The pod's security context: the owner's uid and gid (and ``fsGroup``, so volumes
    are theirs), never root, the runtime's default seccomp profile. Every container also
    drops all capabilities and may not escalate (see :func:`build_job`)."""
    context: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    if run_as is not None and run_as.uid is not None and run_as.gid is not None:
        context.update({"runAsUser": run_as.uid, "runAsGroup": run_as.gid, "fsGroup": run_as.gid, "runAsNonRoot": True})
    return context


def build_job(spec: JobSpec, target: JobTarget) -> Obj:
    """The batch/v1 Job for one attempt.

    One pod per placement (an Indexed Job when there are several), each pinned to the
    placement's nodes by a ``metadata.name`` node affinity, kept on GPU nodes of the
    placed product and memory by GFD labels, one per node by pod anti-affinity. Raises
    ValueError when the placements cannot be expressed (unknown node or GPU, or nodes that
    would need different requests, since all pods of a Job share one template).
    """
    nodes = [target.nodes[p.node] for p in spec.placements]
    requests = [node.request_for(p.gpu_indices) for node, p in zip(nodes, spec.placements, strict=True)]
    if any(r != requests[0] for r in requests):
        raise ValueError(f"a multi-node job needs the same GPUs on every node, got {requests}")
    labels = {MANAGED_BY: MANAGER, CLUSTER_LABEL: target.cluster, KEY_LABEL: spec.key}
    if target.instance:
        labels[INSTANCE_LABEL] = target.instance
    annotations = {
        "quartermaster.io/name": spec.name,
        "quartermaster.io/owner": spec.owner,
        "quartermaster.io/account": spec.account,
    }
    count = len(spec.placements)
    # Rank 0's pod is <name>-0 under the headless Service <name> (build_service); one
    # pod alone talks to itself.
    master = f"{target.name}-0.{target.name}" if count > 1 else "127.0.0.1"
    env = {**spec.env, **job_env(spec), **master_env(master, str(DEFAULT_MASTER_PORT))}
    env_vars: list[Obj] = [{"name": k, "value": v} for k, v in env.items() if k != SECRET_ENV]
    if SECRET_ENV in env:  # a session's secret: from its Secret, never in the Job (build_session_secret)
        reference = {"name": session_object_name(target.name), "key": SESSION_SECRET_KEY}
        env_vars.append({"name": SECRET_ENV, "valueFrom": {"secretKeyRef": reference}})
    if count > 1:  # the completion index is the rank
        index: Obj = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
        env_vars += [{"name": k, "valueFrom": index} for k in rank_env("")]
    else:
        env_vars += [{"name": k, "value": v} for k, v in rank_env("0").items()]
    resources: Obj = {"requests": {"cpu": cpu_quantity(spec.cpus_per_node)}}
    if spec.memory_mib_per_node:
        resources["requests"]["memory"] = f"{spec.memory_mib_per_node}Mi"
    if requests[0]:
        resources["limits"] = {name: str(count) for name, count in requests[0].items()}

    term: Obj = {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": sorted({n.info.name for n in nodes})}]
    }
    expressions = [
        {"key": label, "operator": "In", "values": values}
        for label in (PRODUCT_LABEL, MEMORY_LABEL)
        if requests[0] and (values := _same_label(nodes, label))
    ]
    if expressions:
        term["matchExpressions"] = expressions
    affinity: Obj = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    if count > 1:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {KEY_LABEL: spec.key}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    job_spec: Obj = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": spec.walltime_seconds,
        "completions": count,
        "parallelism": count,
        "template": {
            "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": target.kill_grace_seconds,
                "securityContext": pod_security(target.run_as),
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": spec.image or target.image,
                        "command": ["/bin/bash", "-c", _command(spec)],
                        "env": env_vars,
                        **({"workingDir": spec.workdir} if spec.workdir else {}),
                        "resources": resources,
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
                "affinity": affinity,
                "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    }
    if count > 1:
        job_spec["completionMode"] = "Indexed"
        job_spec["template"]["spec"]["subdomain"] = target.name
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": target.name, "namespace": target.namespace, "labels": labels, "annotations": annotations},
        "spec": job_spec,
    }


#: Where a pod without a workdir puts the files its job brings (the image's own
#: working directory may not be writable by the job's user).
FILES_DIR = "/tmp/qm-job"


#: The most one argument of a container's command may hold (Linux's MAX_ARG_STRLEN).
MAX_COMMAND_BYTES = 128 * 1024 - 1


#: How the container's command runs itself again (``job_output.copying_output``).
_RUN_AGAIN = '"$BASH" -c "$BASH_EXECUTION_STRING" "$0"'


def _command(spec: JobSpec) -> str:
    """What the container's bash runs: with output files of its own (sbatch -o/-e), the
    command first runs itself again with its output copied into them (rank 0's, where
    the job has several pods: the others' are in their pods' logs); the files the job
    brought; then the job. Raises ValueError when that is longer than one argument may
    be (large files belong on a volume)."""
    only_rank_0 = '[ "${QM_NODE_RANK:-0}" = 0 ]' if len(spec.placements) > 1 else ""
    command = copying_output(spec.output, _RUN_AGAIN, only_if=only_rank_0)
    command += prelude(spec.files, fresh_dir=FILES_DIR if spec.files and not spec.workdir else "")
    command += spec.script or spec.command
    if len(command.encode("utf-8")) > MAX_COMMAND_BYTES:
        raise ValueError(
            f"its script and files take {len(command.encode('utf-8'))} bytes as a container command, over the "
            f"{MAX_COMMAND_BYTES} one argument may hold: put large files on the cluster's storage (workdir)"
        )
    return command


def build_service(job: Obj) -> Obj:
    """The headless Service that gives a multi-node Job's pods DNS names (``<job>-<index>.
    <job>``, with the pod template's ``subdomain``), so every rank finds rank 0. Owned by
    the Job: Kubernetes deletes it with the Job, whoever deletes that."""
    metadata = job["metadata"]
    # Ranks look rank 0 up while it starts, before any readiness.
    service = _headless_service(job, metadata["name"], {KEY_LABEL: metadata["labels"][KEY_LABEL]})
    service["spec"]["ports"] = [{"name": "rendezvous", "port": DEFAULT_MASTER_PORT}]
    return service


#: The key of a session's secret in its Secret.
SESSION_SECRET_KEY = "token"


def session_object_name(job: str) -> str:
    """The name of a session's Service and of its Secret: its Job's, marked (at most 58
    characters, a DNS-1123 label: Job names are at most 50)."""
    return f"{job}-session"


def session_host(namespace: str, job: str, cluster_domain: str) -> str:
    """The cluster DNS name of a session's Service (:func:`build_session_service`)."""
    return f"{session_object_name(job)}.{namespace}.svc.{cluster_domain}"


def build_session_secret(job: Obj, secret: str) -> Obj:
    """The Secret that holds a session's ``secret``, which the pod of ``job`` (its
    manifest) reads as ``QM_SESSION_SECRET`` (``secretKeyRef``): never in the Job itself,
    which everyone who may read Jobs or pods in the namespace (the account's other
    users, perhaps) can read, while a site's RBAC keeps Secrets to the portal. Made just
    before its Job (the pod needs it to start), with the Job's labels; the Job becomes
    its owner once it exists (:func:`owned_by`), so Kubernetes deletes it with the Job."""
    metadata = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": session_object_name(metadata["name"]),
            "namespace": metadata["namespace"],
            "labels": dict(metadata.get("labels") or {}),
        },
        "type": "Opaque",
        "stringData": {SESSION_SECRET_KEY: secret},
    }


def owned_by(job: Obj) -> Obj:
    """The merge patch that makes ``job`` the owner of an object made before it."""
    return {"metadata": {"ownerReferences": [_owner_reference(job)]}}


def _owner_reference(job: Obj) -> Obj:
    """``job`` as the owner of another object: Kubernetes deletes that with the Job."""
    metadata = job["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "name": metadata["name"], "uid": metadata["uid"]}


def build_session_service(job: Obj) -> Obj:
    """The Service through which the portal's proxy reaches an interactive session's
    server: headless, so its DNS name (:func:`session_host`) is the pod's own address and
    the port the session's script picked and reported (within ``SESSION_PORTS``) is
    reached as it is, with no port list to know before the pod starts; the pod has a
    network namespace of its own, so no other session shares its ports. It selects the
    Job's pod, rank 0's where there are several (the server runs there), carries the
    Job's labels and is owned by the Job: Kubernetes deletes it with the Job."""
    metadata = job["metadata"]
    selector = {KEY_LABEL: metadata["labels"][KEY_LABEL]}
    if job["spec"].get("completionMode") == "Indexed":
        selector[COMPLETION_INDEX] = "0"
    # The portal asks for the address once the server said it answers, whatever
    # Kubernetes thinks of the pod's readiness (it has no probe).
    return _headless_service(job, session_object_name(metadata["name"]), selector)


def _headless_service(job: Obj, name: str, selector: dict[str, str]) -> Obj:
    """A headless Service ``name`` for ``job``'s pods that ``selector`` picks, in its
    namespace, with its labels and owned by it. It publishes the pods' addresses whether
    Kubernetes thinks them ready or not (each caller says why it must)."""
    metadata = job["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": dict(metadata.get("labels") or {}),
            "ownerReferences": [_owner_reference(job)],
        },
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector},
    }


# --- Poll ------------------------------------------------------------------------------------


def _true_condition(obj: Obj, kind: str) -> Obj | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def job_finished(job: Obj) -> bool:
    """Whether a Job has ended (``Complete`` or ``Failed`` is true)."""
    return _true_condition(job, "Complete") is not None or _true_condition(job, "Failed") is not None


def _terminated(pod: Obj) -> Obj | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return dict(terminated)
    return None


def pod_rank(pod: Obj) -> int:
    """The pod's rank: its completion index in an Indexed Job (0 for a single pod)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get("batch.kubernetes.io/job-completion-index", 0))
    except ValueError:
        return 0


def _failure(pods: Sequence[Obj]) -> tuple[RemoteState, int | None, str]:
    """Why a Job's pods failed: a disruption (preempted, node trouble) or an exit code."""
    for pod in sorted(pods, key=pod_rank):
        disruption = _true_condition(pod, "DisruptionTarget")
        if disruption and disruption.get("reason") in _DISRUPTIONS:
            return _DISRUPTIONS[disruption["reason"]], None, str(disruption.get("message") or disruption["reason"])
        if (pod.get("status") or {}).get("reason") in ("Evicted", "NodeLost", "UnexpectedAdmissionError"):
            return RemoteState.NODE_FAIL, None, str(pod["status"].get("message") or pod["status"]["reason"])
    for pod in sorted(pods, key=pod_rank):
        terminated = _terminated(pod)
        if terminated and terminated.get("exitCode", 0) != 0:
            reason = f"pod {pod['metadata']['name']}: {terminated.get('reason', 'Error')}"
            return RemoteState.FAILED, int(terminated["exitCode"]), reason
    return RemoteState.FAILED, None, ""


def _pending_reason(pods: Sequence[Obj]) -> str:
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting")
            if waiting:
                return f"{waiting.get('reason', 'Waiting')}: {waiting.get('message', '')}".rstrip(": ")
        scheduled = next(
            (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None
        )
        if scheduled and scheduled.get("status") == "False":
            return f"{scheduled.get('reason', 'Unschedulable')}: {scheduled.get('message', '')}".rstrip(": ")
    return "waiting for pods" if not pods else "pods pending"


def poll_result(external_id: str, job: Obj, pods: Sequence[Obj]) -> PollResult:
    """One Job and its Pods as our state.

    Order matters: our cancel annotation wins (the pods die of it); then the terminal
    conditions (``FailureTarget`` and ``SuccessCriteriaMet`` are not terminal yet: the
    controller is still stopping pods); then a deletion by someone else; then running or
    pending.
    """
    metadata, status = job.get("metadata") or {}, job.get("status") or {}
    started = parse_time(status.get("startTime"))
    cancelled_at = (metadata.get("annotations") or {}).get(CANCELLED_ANNOTATION)
    if cancelled_at is not None:
        ended = parse_time(cancelled_at) or parse_time(metadata.get("deletionTimestamp"))
        return PollResult(external_id, RemoteState.CANCELLED, reason="cancelled", started_at=started, ended_at=ended)
    complete = _true_condition(job, "Complete")
    if complete:
        ended = parse_time(status.get("completionTime")) or parse_time(complete.get("lastTransitionTime"))
        return PollResult(external_id, RemoteState.COMPLETED, exit_code=0, started_at=started, ended_at=ended)
    failed = _true_condition(job, "Failed")
    if failed:
        ended = parse_time(failed.get("lastTransitionTime"))
        message = str(failed.get("message") or failed.get("reason") or "")
        if failed.get("reason") == "DeadlineExceeded":
            return PollResult(external_id, RemoteState.TIMEOUT, reason=message, started_at=started, ended_at=ended)
        state, exit_code, why = _failure(pods)
        reason = f"{message}; {why}" if why else message
        return PollResult(external_id, state, exit_code=exit_code, reason=reason, started_at=started, ended_at=ended)
    if metadata.get("deletionTimestamp"):
        ended = parse_time(metadata["deletionTimestamp"])
        reason = "the Job was deleted outside the portal"
        return PollResult(external_id, RemoteState.CANCELLED, reason=reason, started_at=started, ended_at=ended)
    if any((pod.get("status") or {}).get("phase") == "Running" for pod in pods):
        return PollResult(external_id, RemoteState.RUNNING, started_at=started)
    return PollResult(external_id, RemoteState.PENDING, reason=_pending_reason(pods), started_at=None)
