"""The ``kubernetes`` backend: each attempt of a job is a batch/v1 Job.

What it creates (see :mod:`scheduler.backends.kubernetes_objects` for the manifest): one
Job per attempt, named from the spec key, in the namespace of the job's account; one pod
per placement (an Indexed Job when there are several), pinned to the placed nodes,
asking for ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>``, ``backoffLimit: 0`` and
``activeDeadlineSeconds`` = walltime. Every Job and pod carries our labels
(``app.kubernetes.io/managed-by=quartermaster``, ``quartermaster.io/cluster``,
``quartermaster.io/key``), which is how ``poll`` finds them in one list call per
namespace and how :meth:`KubernetesBackend.find_orphans` finds Jobs the portal forgot.

External ids are ``<namespace>/<job name>``, so a poll or cancel needs no config lookup
and still works after an account moves to another namespace.

Cancel, and why a cancelled Job stays readable: ``cancel`` annotates the Job
(``quartermaster.io/cancelled-at``), adds the finalizer ``quartermaster.io/cancel-record``
and deletes it with foreground propagation. Kubernetes deletes the pods, then keeps the
Job object (terminating, no pods) because of our finalizer, so a later poll still says
CANCELLED and a retried submit of the same key still finds it. ``poll`` removes the
finalizer once the record is older than ``record_seconds`` (default a day) and then the
API server removes the Job.

Config (validated at construction; a bad value is a permanent error naming it)::

    api_server: https://10.0.0.1:6443   # exactly one of api_server, kubeconfig, in_cluster
    kubeconfig: /etc/qm/kubeconfig       #   (with optional context: name)
    in_cluster: true                     #   (the portal runs in a pod with a service account)
    token: ... | token_file: /path       # bearer token, with api_server only
    ca_file: /path/ca.crt                # with api_server only; verify_tls: false to skip
    namespace: gpu-jobs                  # default "default"
    namespaces: {physics: phys-gpu}      # account -> namespace, overrides namespace
    image: ubuntu:24.04                  # when the job names none
    kill_grace_seconds: 30               # pods' terminationGracePeriodSeconds
    timeout_seconds: 10                  # per API request
    record_seconds: 86400                # how long a cancelled Job is kept as a record
    cluster_domain: cluster.local        # in sessions' Service names (session_host)

An interactive session's Job (``scheduler.backends.sessions``) also gets a headless
Service, ``<job>-session``, owned by the Job (``build_session_service``): the portal's
proxy reaches the session's server at ``<job>-session.<namespace>.svc.<cluster_domain>``
and the port its ready line reported. Its secret is in a Secret of that name, made before
the Job and then owned by it (``build_session_secret``), never in the Job. Its apps come
with the image (``image``, or the job's own).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from scheduler.backends.base import (
    LOG_CHUNK_BYTES,
    BackendError,
    JobSpec,
    LogSource,
    NodeInfo,
    Placement,
    PollResult,
    RemoteState,
    RunAs,
    submit_one_by_one,
)
from scheduler.backends.job_env import SESSION_SECRET_ENV as SECRET_ENV
from scheduler.backends.kubernetes_api import Conflict, KubeApi, NotFound, Obj
from scheduler.backends.kubernetes_objects import (
    CANCELLED_ANNOTATION,
    CONTAINER,
    KEY_LABEL,
    RECORD_FINALIZER,
    JobTarget,
    KubeNode,
    build_job,
    build_service,
    build_session_secret,
    build_session_service,
    format_time,
    is_dns_label,
    is_label_value,
    job_finished,
    job_name,
    node_from_object,
    owned_by,
    parse_time,
    pod_rank,
    poll_result,
    selector,
    session_host,
    session_object_name,
)
from scheduler.backends.local import _ConfigReader
from scheduler.backends.sessions import is_session
from scheduler.backends.spec_check import spec_problem

log = logging.getLogger(__name__)

#: The phases of a pod whose container has started: it has a log to read.
_STARTED_PHASES = ("Running", "Succeeded", "Failed")

_CONFIG_KEYS = frozenset(
    {
        "api_server",
        "kubeconfig",
        "context",
        "in_cluster",
        "token",
        "token_file",
        "ca_file",
        "verify_tls",
        "namespace",
        "namespaces",
        "image",
        "kill_grace_seconds",
        "timeout_seconds",
        "record_seconds",
        "run_as_owner",
        "min_uid",
        "cluster_domain",
    }
)
DEFAULT_IMAGE = "ubuntu:24.04"
#: How often cancel re-reads a Job that changed under it before giving up (transient).
_PATCH_ATTEMPTS = 3


class _Reader(_ConfigReader):
    """The local backend's config checks, with this backend's name in the messages."""

    def bad(self, message: str) -> BackendError:
        return BackendError(f"kubernetes backend {self.cluster!r}: bad config: {message}", permanent=True)

    def flag(self, config: Mapping[str, Any], key: str, default: bool) -> bool:
        value = config.get(key, default)
        if not isinstance(value, bool):
            raise self.bad(f"config.{key} must be true or false, got {value!r}")
        return value

    def namespace(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not is_dns_label(value):
            raise self.bad(f"{where} must be a namespace name (a DNS-1123 label), got {value!r}")
        return value


class KubernetesBackend:
    """A Kubernetes cluster reached through its API server.

    Construction validates the config and raises ``BackendError(permanent=True)`` naming
    the bad value; it makes no request and reads no file (the kubeconfig or token file is
    read on first use). Every method raises only :class:`BackendError`.
    """

    kind: ClassVar[str] = "kubernetes"

    def __init__(self, *, name: str, config: Mapping[str, Any], work_dir: Path, instance: str = "") -> None:
        reader = _Reader(name)
        if instance and not is_label_value(instance):
            raise reader.bad(f"instance {instance!r} must be a valid label value")
        self.instance = instance
        if not is_label_value(name) or not name:
            raise reader.bad(f"cluster name {name!r} must be a valid label value (63 characters: A-Z a-z 0-9 . _ -)")
        config = reader.mapping(config, "config")
        reader.check_keys(config, _CONFIG_KEYS, "config")
        self.name = name
        sources = [key for key in ("api_server", "kubeconfig") if key in config]
        if reader.flag(config, "in_cluster", False):
            sources.append("in_cluster")
        if len(sources) != 1:
            raise reader.bad("exactly one of 'api_server', 'kubeconfig' or 'in_cluster: true' is required")
        self._source = sources[0]
        for key in ("api_server", "kubeconfig", "context", "token", "token_file", "ca_file", "image"):
            if key in config:
                reader.string(config, key, "config")
        if self._source != "kubeconfig" and "context" in config:
            raise reader.bad("config.context needs config.kubeconfig")
        if self._source != "api_server":
            for key in ("token", "token_file", "ca_file", "verify_tls"):
                if key in config:
                    raise reader.bad(f"config.{key} applies to api_server only (a kubeconfig carries its own)")
        if "token" in config and "token_file" in config:
            raise reader.bad("config.token and config.token_file are exclusive")
        self._config = dict(config)
        self.verify_tls = reader.flag(config, "verify_tls", True)
        self.default_namespace = reader.namespace(config.get("namespace", "default"), "config.namespace")
        accounts = reader.mapping(config.get("namespaces", {}), "config.namespaces")
        self.namespaces = {
            str(account): reader.namespace(ns, f"config.namespaces.{account}") for account, ns in accounts.items()
        }
        self.image = reader.string(config, "image", "config", default=DEFAULT_IMAGE)
        if not self.image.strip():
            raise reader.bad("config.image must not be empty")
        self.kill_grace_seconds = reader.integer(config, "kill_grace_seconds", "config", default=30)
        self.timeout_seconds = reader.number(config.get("timeout_seconds", 10), "config.timeout_seconds")
        if self.timeout_seconds == 0:
            raise reader.bad("config.timeout_seconds must be positive")
        self.record_seconds = reader.number(config.get("record_seconds", 86400), "config.record_seconds")
        #: Pods run as their owner's uid/gid (``run_as_owner``, default true): a spec whose
        #: owner has no identity with both is refused.
        self.requires_identity = reader.flag(config, "run_as_owner", True)
        self.min_uid = reader.integer(config, "min_uid", "config", default=1000)
        #: The cluster's DNS domain, in the names of sessions' Services (``session_host``).
        self.cluster_domain = reader.string(config, "cluster_domain", "config", default="cluster.local")
        if not all(is_dns_label(part) for part in self.cluster_domain.split(".")):
            raise reader.bad(f"config.cluster_domain must be a DNS name, got {self.cluster_domain!r}")
        self._api: KubeApi | None = None

    # -- connection -------------------------------------------------------------------------

    @property
    def api(self) -> KubeApi:
        """The API client, built on first use (reads the kubeconfig or token file)."""
        if self._api is None:
            self._api = KubeApi(self._configuration(), where=f"kubernetes {self.name!r}", timeout=self.timeout_seconds)
        return self._api

    def _configuration(self) -> k8s.Configuration:
        config = self._config
        configuration = k8s.Configuration()
        try:
            if self._source == "kubeconfig":
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=config["kubeconfig"],
                    context=config.get("context"),
                    client_configuration=configuration,
                    persist_config=False,
                )
            elif self._source == "in_cluster":
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                configuration.host = str(config["api_server"]).rstrip("/")
                token = config.get("token")
                if "token_file" in config:
                    token = Path(config["token_file"]).read_text(encoding="utf-8").strip()
                if token:
                    configuration.api_key = {"BearerToken": f"Bearer {token}"}
                configuration.ssl_ca_cert = config.get("ca_file")
                configuration.verify_ssl = self.verify_tls
        except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"kubernetes {self.name!r}: cannot load credentials: {exc}", permanent=True) from exc
        return configuration

    def namespace_for(self, account: str) -> str:
        return self.namespaces.get(account, self.default_namespace)

    @staticmethod
    def _split(external_id: str) -> tuple[str, str] | None:
        """``<namespace>/<name>`` -> (namespace, name); None for anything malformed."""
        namespace, slash, name = external_id.partition("/")
        if not slash or not is_dns_label(namespace) or not is_dns_label(name):
            return None
        return namespace, name

    # -- Backend protocol ---------------------------------------------------------------------

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str | BackendError]:
        return submit_one_by_one(self, specs)

    def submit(self, spec: JobSpec) -> str:
        """Create the Job for ``spec`` unless it exists; return ``<namespace>/<name>``.

        Steps: 1. check the spec; 2. return the existing Job's id if there is one (it must
        carry this key); 3. read the placed nodes (unknown node or GPU: permanent);
        4. create the Job; a 409 means a concurrent submit won, whose Job is ours too.
        """
        self._check(spec)
        namespace, name = self.namespace_for(spec.account), job_name(spec.key)
        external_id = f"{namespace}/{name}"
        existing = self._existing(spec, namespace, name)
        if existing is not None:
            self._ensure_service(spec, existing)  # a retry after the Job but before its Service
            return external_id
        nodes: dict[str, KubeNode] = {}
        for placement in spec.placements:
            try:
                nodes[placement.node] = node_from_object(self.api.read_node(placement.node), self.name)
            except NotFound:
                raise self._reject(spec, f"placement on unknown node {placement.node!r}") from None
        target = JobTarget(
            self.name, namespace, name, self.image, self.kill_grace_seconds, nodes, self.instance, self._run_as(spec)
        )
        try:
            manifest = build_job(spec, target)
        except ValueError as exc:
            raise self._reject(spec, str(exc)) from exc
        if is_session(spec):
            self._create_session_secret(spec, manifest)
        try:
            created = self.api.create_job(namespace, manifest)
        except Conflict:
            found = self._existing(spec, namespace, name)
            if found is None:
                raise BackendError(
                    f"kubernetes {self.name!r}: {external_id} was created and deleted under us", permanent=False
                ) from None
        except NotFound as exc:
            raise self._reject(spec, f"cannot create Job in namespace {namespace!r}: {exc}") from exc
        else:
            found = created
        self._ensure_service(spec, found)
        return external_id

    def _ensure_service(self, spec: JobSpec, job: Obj) -> None:
        """A multi-node Job's headless Service (``build_service``) and a session's
        (``build_session_service``), made after the Job so that it can be their owner;
        one that exists already is the same. A session's Secret, made before the Job,
        gets the Job as its owner here."""
        namespace = job["metadata"]["namespace"]
        services = [build_service(job)] if len(spec.placements) > 1 else []
        if is_session(spec):
            services.append(build_session_service(job))
            self.api.patch_secret(namespace, session_object_name(job["metadata"]["name"]), owned_by(job))
        for service in services:
            with contextlib.suppress(Conflict):
                self.api.create_service(namespace, service)

    def _create_session_secret(self, spec: JobSpec, manifest: Obj) -> None:
        """The session's Secret (``build_session_secret``), before its Job: one that
        exists already (a retried submit) holds the same secret."""
        namespace = manifest["metadata"]["namespace"]
        try:
            self.api.create_secret(namespace, build_session_secret(manifest, spec.env[SECRET_ENV]))
        except Conflict:
            pass
        except NotFound as exc:
            raise self._reject(spec, f"cannot create its Secret in namespace {namespace!r}: {exc}") from exc

    def cancel(self, external_id: str, *, grace_seconds: float | None = None) -> None:
        """Mark the Job cancelled and delete it with its pods. Idempotent.

        A finished, already cancelled or unknown Job is left as it is. ``grace_seconds``
        is passed to the pods' deletion (otherwise ``kill_grace_seconds`` applies).
        """
        where = self._split(external_id)
        if where is None:
            return
        namespace, name = where
        for _ in range(_PATCH_ATTEMPTS):
            try:
                job = self.api.read_job(namespace, name)
            except NotFound:
                return
            annotations = (job.get("metadata") or {}).get("annotations") or {}
            if job_finished(job) and CANCELLED_ANNOTATION not in annotations:
                return
            if CANCELLED_ANNOTATION in annotations:
                break
            finalizers = list((job.get("metadata") or {}).get("finalizers") or [])
            patch = {
                "metadata": {
                    "resourceVersion": job["metadata"].get("resourceVersion"),
                    "annotations": {CANCELLED_ANNOTATION: format_time(datetime.now(UTC))},
                    "finalizers": [*finalizers, RECORD_FINALIZER],
                }
            }
            try:
                self.api.patch_job(namespace, name, patch)
                break
            except NotFound:
                return
            except Conflict:
                continue  # changed since we read it: read again
        else:
            raise BackendError(
                f"kubernetes {self.name!r}: cancel {external_id}: the Job keeps changing", permanent=False
            )
        key = str(((job.get("metadata") or {}).get("labels") or {}).get(KEY_LABEL, ""))
        if grace_seconds is not None and key:
            grace = max(0, math.ceil(grace_seconds))
            self.api.delete_pods(namespace, selector(self.name, key), grace_seconds=grace)
        with contextlib.suppress(NotFound):  # already gone: nothing to stop
            self.api.delete_job(namespace, name, propagation="Foreground")

    def poll(self, external_ids: Sequence[str]) -> dict[str, PollResult]:
        """States of many Jobs: per namespace, one Job list and one Pod list by label.

        Ids that are malformed or whose Job is gone come back UNKNOWN. Cancel records
        older than ``record_seconds`` are released on the way (see the module docstring).
        """
        results = {i: PollResult(i, RemoteState.UNKNOWN, reason="no such Job") for i in external_ids}
        wanted: dict[str, list[str]] = {}
        for external_id in external_ids:
            where = self._split(external_id)
            if where is not None:
                wanted.setdefault(where[0], []).append(external_id)
        for namespace, ids in wanted.items():
            jobs = {j["metadata"]["name"]: j for j in self.api.list_jobs(namespace, selector(self.name))}
            pods_by_key: dict[str, list[Obj]] = {}
            for pod in self.api.list_pods(namespace, selector(self.name)):
                key = ((pod.get("metadata") or {}).get("labels") or {}).get(KEY_LABEL, "")
                pods_by_key.setdefault(key, []).append(pod)
            for external_id in ids:
                job = jobs.get(external_id.partition("/")[2])
                if job is not None:
                    key = (job["metadata"].get("labels") or {}).get(KEY_LABEL, "")
                    results[external_id] = poll_result(external_id, job, pods_by_key.get(key, []))
            self._release_old_records(namespace, jobs.values(), pods_by_key)
        return results

    def list_nodes(self) -> list[NodeInfo]:
        """Every Node, with GPUs from capacity and GFD labels and health from Ready."""
        return [node_from_object(obj, self.name).info for obj in self.api.list_nodes()]

    def read_log(self, external_id: str, max_bytes: int = 65536) -> str:
        """The tail of the Job's pods' logs ('' for unknown Jobs or pods not started).

        Several pods (a multi-node job) are joined in index order under a header each.
        """
        where = self._split(external_id)
        if where is None or max_bytes <= 0:
            return ""
        namespace, name = where
        pods = [
            p
            for p in self.api.list_pods(namespace, f"batch.kubernetes.io/job-name={name}")
            if (p.get("status") or {}).get("phase") in _STARTED_PHASES
        ]
        pods.sort(
            key=lambda p: (p["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", "")
        )
        parts: list[str] = []
        for pod in pods:
            try:
                # At least one byte per line, so this many lines always cover max_bytes.
                text = self.api.read_pod_log(namespace, pod["metadata"]["name"], tail_lines=max_bytes)
            except NotFound:
                continue
            parts.append(f"==> {pod['metadata']['name']} <==\n{text}" if len(pods) > 1 else text)
        data = "".join(parts).encode("utf-8")
        return data[-max_bytes:].decode("utf-8", errors="replace")

    def session_host(self, external_id: str, placements: tuple[Placement, ...]) -> str:
        """The cluster DNS name of the session's Service (``build_session_service``): the
        portal's proxy reaches the pod through the cluster's DNS and network, so it must
        run in the cluster or route to its pods. Permanent BackendError for an id that
        is not ours."""
        where = self._split(external_id)
        if where is None:
            raise BackendError(f"kubernetes {self.name!r}: session_host: bad id {external_id!r}", permanent=True)
        return session_host(*where, self.cluster_domain)

    def log_sources(self, external_id: str) -> tuple[LogSource, ...]:
        """One log per rank (its pod's container), stdout and stderr combined: the
        kubelet keeps a container's two streams in one log, in the order written."""
        where = self._split(external_id)
        if where is None:
            return ()
        ranks = {pod_rank(pod) for pod in self._job_pods(*where)}
        return tuple(LogSource(rank, "combined") for rank in sorted(ranks))

    def stream_log(self, external_id: str, source: LogSource, offset: int = 0) -> Iterator[bytes]:
        """Rank ``source.rank``'s pod's log through the API server, streamed. The API has
        no byte offset: the first ``offset`` bytes are read and dropped, a chunk at a time
        (the kubelet keeps only a container's latest log file, ``containerLogMaxSize``,
        10 MiB by default, which bounds both that cost and how far back a log goes)."""
        where = self._split(external_id)
        if where is None or source.stream != "combined" or source.rank is None:
            return iter(())
        pods = [
            pod
            for pod in self._job_pods(*where)
            if pod_rank(pod) == source.rank and (pod.get("status") or {}).get("phase") in _STARTED_PHASES
        ]
        if not pods:
            return iter(())
        newest = max(pods, key=lambda pod: str(pod["metadata"].get("creationTimestamp") or ""))
        return _skipped(self._pod_log(where[0], newest["metadata"]["name"]), offset)

    def _job_pods(self, namespace: str, name: str) -> list[Obj]:
        return self.api.list_pods(namespace, f"batch.kubernetes.io/job-name={name}")

    def _pod_log(self, namespace: str, pod: str) -> Iterator[bytes]:
        try:
            yield from self.api.stream_pod_log(namespace, pod, CONTAINER, LOG_CHUNK_BYTES)
        except NotFound:
            return  # deleted since it was listed: no log left to read

    # -- beyond the protocol ------------------------------------------------------------------

    def list_jobs(self) -> dict[str, str]:
        """Key -> external id of our labelled Jobs that still run (in every configured
        namespace), for the portal's orphan sweep (``scheduler.clusters.reconcile``). Jobs being
        deleted (a cancel's record) or finished are not listed, nor, when this portal has
        an ``instance``, Jobs without its instance label (another portal's, or made before
        the label existed: never ours to cancel). Reads only."""
        live: dict[str, str] = {}
        for namespace in sorted({self.default_namespace, *self.namespaces.values()}):
            for job in self.api.list_jobs(namespace, selector(self.name, instance=self.instance)):
                metadata = job["metadata"]
                key = (metadata.get("labels") or {}).get(KEY_LABEL)
                if not key or metadata.get("deletionTimestamp") or job_finished(job):
                    continue
                live[key] = f"{namespace}/{metadata['name']}"
        return live

    # -- helpers --------------------------------------------------------------------------------

    def _reject(self, spec: JobSpec, message: str) -> BackendError:
        return BackendError(f"kubernetes {self.name!r}: job {spec.key!r}: {message}", permanent=True)

    def _run_as(self, spec: JobSpec) -> RunAs | None:
        """The owner's uid/gid the pod runs as (None when pods run as their image says)."""
        if not self.requires_identity:
            return None
        run_as = spec.run_as
        if run_as is None or run_as.uid is None or run_as.gid is None:
            raise self._reject(spec, "its owner has no cluster identity with a uid and gid; pods run as their owner")
        if run_as.uid < self.min_uid or run_as.gid < self.min_uid:
            raise self._reject(spec, f"uid/gid {run_as.uid}/{run_as.gid} is below {self.min_uid}: a system account")
        return run_as

    def _check(self, spec: JobSpec) -> None:
        if not spec.key or not is_label_value(spec.key):
            raise self._reject(spec, "key must be a label value (63 characters: A-Z a-z 0-9 . _ -)")
        problem = spec_problem(spec)
        if problem:
            raise self._reject(spec, problem)
        self._run_as(spec)

    def _existing(self, spec: JobSpec, namespace: str, name: str) -> Obj | None:
        """The Job for ``spec``, if it exists; a same-named Job of another key is an error."""
        try:
            job = self.api.read_job(namespace, name)
        except NotFound:
            return None
        found = (job.get("metadata", {}).get("labels") or {}).get(KEY_LABEL)
        if found != spec.key:
            raise self._reject(spec, f"Job {namespace}/{name} exists but belongs to key {found!r}")
        return job

    def _release_old_records(self, namespace: str, jobs: Collection[Obj], pods_by_key: Mapping[str, list[Obj]]) -> None:
        """Drop our finalizer from cancel records past ``record_seconds`` whose pods are gone."""
        now = datetime.now(UTC)
        for job in jobs:
            metadata = job["metadata"]
            finalizers = list(metadata.get("finalizers") or [])
            cancelled = parse_time((metadata.get("annotations") or {}).get(CANCELLED_ANNOTATION))
            key = (metadata.get("labels") or {}).get(KEY_LABEL, "")
            if (
                RECORD_FINALIZER not in finalizers
                or not metadata.get("deletionTimestamp")
                or cancelled is None
                or (now - cancelled).total_seconds() < self.record_seconds
                or pods_by_key.get(key)
            ):
                continue
            finalizers.remove(RECORD_FINALIZER)
            patch = {"metadata": {"resourceVersion": metadata.get("resourceVersion"), "finalizers": finalizers}}
            with contextlib.suppress(NotFound, Conflict):  # gone, or changed: the next poll looks again
                self.api.patch_job(namespace, metadata["name"], patch)


def _skipped(chunks: Iterator[bytes], offset: int) -> Iterator[bytes]:
    """``chunks`` without their first ``offset`` bytes; closing it closes ``chunks``."""
    try:
        for chunk in chunks:
            if offset >= len(chunk):
                offset -= len(chunk)
                continue
            yield chunk[offset:]
            offset = 0
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
