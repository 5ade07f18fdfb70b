"""A Kubernetes API server for tests: real HTTP, the endpoints our adapter uses, and
Kubernetes' semantics for them.

Endpoints::

    GET    /api/v1/nodes, /api/v1/nodes/{name}
    GET    /api/v1/namespaces/{ns}/pods?labelSelector=       DELETE (collection) with
           gracePeriodSeconds; GET /api/v1/namespaces/{ns}/pods/{name}/log
    GET    /apis/batch/v1/namespaces/{ns}/jobs?labelSelector=  POST (create)
    GET    /apis/batch/v1/namespaces/{ns}/jobs/{name}          PATCH (merge patch), DELETE

Semantics kept: every write bumps a global ``resourceVersion``; a merge patch carrying a
stale ``metadata.resourceVersion`` is a 409 Conflict, as is creating a name that exists;
missing objects and namespaces are 404; a Job is checked against the batch/v1 schema in
``job-batch-v1.schema.json`` (strict: unknown fields too) and a few server-side rules
(name, label values, restartPolicy, namespace) and rejected with 422 Invalid; errors are
``Status`` objects with ``reason``, ``message`` and ``code``; label selectors use the full
syntax (:mod:`selectors`); deletion honours ``propagationPolicy`` (Jobs default to Orphan,
as in Kubernetes) and finalizers (an object with finalizers gets a ``deletionTimestamp``
and stays until they are removed; none may be added then). With a token set, requests
without ``Authorization: Bearer <token>`` get 401.

Test hooks: :attr:`FakeKube.requests` records each request; :meth:`FakeKube.fail` makes
matching requests answer an error status (or hang, to provoke a client timeout). The
controller (:mod:`controller`) runs Jobs; see its docstring.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import jsonschema

from tests.backends.kube import selectors

Obj = dict[str, Any]
SCHEMA_PATH = Path(__file__).with_name("job-batch-v1.schema.json")
JOB_SCHEMA = json.loads(SCHEMA_PATH.read_text())
_VALIDATOR = jsonschema.Draft202012Validator(JOB_SCHEMA)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_violations(job: Obj) -> list[str]:
    """Why the API server would reject this Job ('' each), schema first."""
    problems = [
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message}"
        for error in sorted(_VALIDATOR.iter_errors(job), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if problems:
        return problems
    metadata, spec = job.get("metadata") or {}, job.get("spec") or {}
    name = metadata.get("name") or ""
    if not (len(name) <= 63 and _DNS_LABEL.fullmatch(name)):
        problems.append(f"metadata.name: Invalid value: {name!r}: must be a DNS-1123 label")
    template = spec.get("template") or {}
    for where, labels in (
        ("metadata.labels", metadata.get("labels")),
        ("spec.template.metadata.labels", (template.get("metadata") or {}).get("labels")),
    ):
        for key, value in (labels or {}).items():
            if not (len(value) <= 63 and _LABEL_VALUE.fullmatch(value)):
                problems.append(f"{where}: Invalid value: {value!r}: a valid label value (key {key})")
    pod = template.get("spec") or {}
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        problems.append(f"spec.template.spec.restartPolicy: Unsupported value: {pod.get('restartPolicy')!r}")
    if not pod.get("containers"):
        problems.append("spec.template.spec.containers: Required value")
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        problems.append("spec.completions: Required value: when completion mode is Indexed")
    return problems


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


@dataclass
class _Fault:
    method: str
    path_part: str
    status: int
    times: int
    message: str
    hang_seconds: float


class Store:
    """Objects by (resource, namespace, name), with Kubernetes' write rules. Callers hold ``lock``."""

    def __init__(self, namespaces: Iterator[str] | tuple[str, ...]) -> None:
        self.lock = threading.RLock()
        self.namespaces = set(namespaces)
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.revision = 0

    def _bump(self, obj: Obj) -> Obj:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        return obj

    def add(self, resource: str, namespace: str, obj: Obj) -> Obj:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", now_rfc3339())
        if namespace:
            metadata["namespace"] = namespace
        self.objects[(resource, namespace, metadata["name"])] = obj
        return self._bump(obj)

    def require_namespace(self, namespace: str) -> None:
        if namespace not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')

    def get(self, resource: str, namespace: str, name: str) -> Obj:
        if namespace:
            self.require_namespace(namespace)
        try:
            return self.objects[(resource, namespace, name)]
        except KeyError:
            raise ApiError(404, "NotFound", f'{resource} "{name}" not found') from None

    def select(self, resource: str, namespace: str, selector: str = "") -> list[Obj]:
        try:
            matches = selectors.parse(selector)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        return [
            obj
            for (kind, ns, _), obj in sorted(self.objects.items())
            if kind == resource and ns == namespace and matches(obj["metadata"].get("labels") or {})
        ]

    def create(self, resource: str, namespace: str, obj: Obj) -> Obj:
        self.require_namespace(namespace)
        name = obj["metadata"]["name"]
        if (resource, namespace, name) in self.objects:
            raise ApiError(409, "AlreadyExists", f'{resource} "{name}" already exists')
        return self.add(resource, namespace, obj)

    def update(self, obj: Obj) -> Obj:
        """A controller's write: bump, and remove an object being deleted with no finalizers left."""
        metadata = obj["metadata"]
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            self.remove(obj)
            return obj
        return self._bump(obj)

    def remove(self, obj: Obj) -> None:
        metadata = obj["metadata"]
        for key, found in list(self.objects.items()):
            if found is obj or (
                key[1] == metadata.get("namespace", "") and found["metadata"]["uid"] == metadata["uid"]
            ):
                del self.objects[key]
        self.revision += 1

    def patch(self, resource: str, namespace: str, name: str, patch: Obj) -> Obj:
        obj = self.get(resource, namespace, name)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        merged = _merge(obj, patch)
        if obj["metadata"].get("deletionTimestamp"):
            added = set(merged["metadata"].get("finalizers") or []) - set(obj["metadata"].get("finalizers") or [])
            if added:
                raise ApiError(
                    422,
                    "Invalid",
                    f'{resource} "{name}" is invalid: metadata.finalizers: Forbidden: no new '
                    "finalizers can be added if the object is being deleted",
                )
        for key in ("uid", "name", "namespace", "creationTimestamp", "deletionTimestamp"):
            if key in obj["metadata"]:
                merged["metadata"][key] = obj["metadata"][key]
        obj.clear()
        obj.update(merged)
        return self.update(obj)

    def delete(self, obj: Obj, *, propagation: str, grace_seconds: int | None = None) -> Obj:
        """Delete ``obj``: at once if nothing holds it, else mark it and let finalizers work."""
        metadata = obj["metadata"]
        if metadata.get("deletionTimestamp"):
            if grace_seconds is not None and grace_seconds < metadata.get("deletionGracePeriodSeconds", 1 << 30):
                metadata["deletionGracePeriodSeconds"] = grace_seconds  # may only be shortened
                self._bump(obj)
            return obj
        finalizers = list(metadata.get("finalizers") or [])
        if propagation == "Foreground":
            finalizers.append("foregroundDeletion")
        elif propagation == "Orphan":
            finalizers.append("orphan")
        metadata["finalizers"] = finalizers
        metadata["deletionTimestamp"] = now_rfc3339()
        if grace_seconds is not None:
            metadata["deletionGracePeriodSeconds"] = grace_seconds
        if not finalizers and not self.graceful(obj):
            self.remove(obj)
            return obj
        return self._bump(obj)

    @staticmethod
    def graceful(obj: Obj) -> bool:
        """Pods that were running terminate before they disappear; other objects do not wait."""
        return obj.get("kind") == "Pod" and (obj.get("status") or {}).get("phase") in ("Running", "Pending")

    def owned_by(self, owner: Obj, resource: str = "pods") -> list[Obj]:
        uid = owner["metadata"]["uid"]
        return [
            obj
            for (kind, _, _), obj in self.objects.items()
            if kind == resource and any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
        ]


class FakeKube:
    """The server: ``with FakeKube(nodes=[...]) as kube: KubernetesBackend(config={"api_server": kube.url})``."""

    def __init__(
        self,
        *,
        nodes: list[Obj],
        namespaces: tuple[str, ...] = ("default",),
        token: str | None = None,
        tick_seconds: float = 0.02,
    ) -> None:
        from tests.backends.kube.controller import Controller

        self.store = Store(namespaces)
        for node in nodes:
            self.store.add("nodes", "", copy.deepcopy(node))
        self.token = token
        self.requests: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []
        self.controller = Controller(self.store, tick_seconds=tick_seconds)
        handler = type("Handler", (_Handler,), {"kube": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-kube", daemon=True)

    def __enter__(self) -> FakeKube:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()
        self._server.shutdown()
        self._server.server_close()

    def fail(
        self, method: str, path_part: str, status: int, *, times: int = 1, message: str = "", hang_seconds: float = 0.0
    ) -> None:
        """Answer the next ``times`` requests of ``method`` whose path contains ``path_part``
        with ``status`` (after ``hang_seconds``)."""
        with self.store.lock:
            self._faults.append(_Fault(method, path_part, status, times, message or f"injected {status}", hang_seconds))

    def take_fault(self, method: str, path: str) -> _Fault | None:
        with self.store.lock:
            for fault in self._faults:
                if fault.method == method and fault.path_part in path and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    # -- helpers for tests -------------------------------------------------------------

    def jobs(self, namespace: str = "default") -> list[Obj]:
        with self.store.lock:
            return copy.deepcopy(self.store.select("jobs", namespace))

    def services(self, namespace: str = "default") -> list[Obj]:
        with self.store.lock:
            return copy.deepcopy(self.store.select("services", namespace))

    def secrets(self, namespace: str = "default") -> list[Obj]:
        with self.store.lock:
            return copy.deepcopy(self.store.select("secrets", namespace))

    def pods(self, namespace: str = "default", selector: str = "") -> list[Obj]:
        with self.store.lock:
            return copy.deepcopy(self.store.select("pods", namespace, selector))

    def create_job(self, manifest: Obj, namespace: str = "default") -> None:
        """Create a Job behind the adapter's back (an orphan, or a colliding name)."""
        with self.store.lock:
            _create_job(self.store, namespace, copy.deepcopy(manifest))

    def set_log(self, pod_name: str, text: str, namespace: str = "default") -> None:
        """Make an ended pod's log ``text`` (a log bigger than an ``echo`` makes)."""
        with self.store.lock:
            self.controller.set_log(self.store.get("pods", namespace, pod_name), text)

    def wait(self, condition: Any, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError("condition never held on the fake API server")
            time.sleep(0.02)


def _create_job(store: Store, namespace: str, job: Obj) -> Obj:
    metadata = job.setdefault("metadata", {})
    if metadata.get("namespace", namespace) != namespace:
        raise ApiError(
            400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request"
        )
    name = metadata.get("name", "")
    problems = job_violations(job)
    if problems:
        raise ApiError(422, "Invalid", f'Job.batch "{name}" is invalid: ' + "; ".join(problems))
    job.setdefault("apiVersion", "batch/v1")
    job.setdefault("kind", "Job")
    job["status"] = {}
    metadata["generation"] = 1
    uid = str(uuid.uuid4())
    metadata["uid"] = uid
    spec = job["spec"]
    spec.setdefault("completions", 1)
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template_labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
    template_labels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )
    return store.create("jobs", namespace, job)


_ROUTES = [
    (re.compile(r"^/api/v1/nodes$"), "nodes"),
    (re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$"), "node"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$"), "pods"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log$"), "log"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services$"), "services"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?P<name>[^/]+)$"), "service"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets$"), "secrets"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets/(?P<name>[^/]+)$"), "secret"),
    (re.compile(r"^/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs$"), "jobs"),
    (re.compile(r"^/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs/(?P<name>[^/]+)$"), "job"),
]


class _Handler(BaseHTTPRequestHandler):
    kube: FakeKube
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _send(self, code: int, body: Obj | str) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _serve(self, method: str) -> None:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.kube.requests.append((method, self.path))
        try:
            fault = self.kube.take_fault(method, url.path)
            if fault is not None:
                time.sleep(fault.hang_seconds)
                reason = {
                    400: "BadRequest",
                    403: "Forbidden",
                    422: "Invalid",
                    429: "TooManyRequests",
                    500: "InternalError",
                    503: "ServiceUnavailable",
                }.get(fault.status, "Unknown")
                raise ApiError(fault.status, reason, fault.message)
            if self.kube.token and self.headers.get("Authorization") != f"Bearer {self.kube.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            body = json.loads(raw) if raw else {}
            for pattern, route in _ROUTES:
                match = pattern.match(url.path)
                if match:
                    with self.kube.store.lock:
                        code, answer = self._route(method, route, match.groupdict(), query, body)
                    self._send(code, answer)
                    return
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        except ApiError as exc:
            self._send(exc.code, exc.status())
        except ValueError as exc:
            self._send(400, ApiError(400, "BadRequest", f"malformed request: {exc}").status())

    def _route(
        self, method: str, route: str, args: dict[str, str], query: dict[str, str], body: Obj
    ) -> tuple[int, Obj | str]:
        store = self.kube.store
        ns, name, selector = args.get("ns", ""), args.get("name", ""), query.get("labelSelector", "")
        if (route, method) == ("nodes", "GET"):
            return 200, _listing("NodeList", "v1", store.select("nodes", "", selector), store)
        if (route, method) == ("node", "GET"):
            return 200, store.get("nodes", "", name)
        if (route, method) == ("jobs", "GET"):
            store.require_namespace(ns)
            return 200, _listing("JobList", "batch/v1", store.select("jobs", ns, selector), store)
        if (route, method) == ("jobs", "POST"):
            return 201, _create_job(store, ns, body)
        if (route, method) == ("services", "GET"):
            store.require_namespace(ns)
            return 200, _listing("ServiceList", "v1", store.select("services", ns, selector), store)
        if (route, method) == ("services", "POST"):
            body.setdefault("apiVersion", "v1")
            body.setdefault("kind", "Service")
            return 201, store.create("services", ns, body)
        if (route, method) == ("service", "GET"):
            return 200, store.get("services", ns, name)
        if (route, method) == ("secrets", "POST"):
            body.setdefault("apiVersion", "v1")
            body.setdefault("kind", "Secret")
            return 201, store.create("secrets", ns, body)
        if (route, method) == ("secret", "GET"):
            return 200, store.get("secrets", ns, name)
        if (route, method) == ("secret", "PATCH"):
            return 200, store.patch("secrets", ns, name, body)
        if (route, method) == ("job", "GET"):
            return 200, store.get("jobs", ns, name)
        if (route, method) == ("job", "PATCH"):
            if self.headers.get("Content-Type", "").split(";")[0] != "application/merge-patch+json":
                raise ApiError(
                    415, "UnsupportedMediaType", f"unsupported patch type {self.headers.get('Content-Type')}"
                )
            return 200, store.patch("jobs", ns, name, body)
        if (route, method) == ("job", "DELETE"):
            job = store.get("jobs", ns, name)
            propagation = query.get("propagationPolicy") or body.get("propagationPolicy") or "Orphan"
            store.delete(job, propagation=propagation)
            return 200, job
        if (route, method) == ("pods", "GET"):
            return 200, _listing("PodList", "v1", store.select("pods", ns, selector), store)
        if (route, method) == ("pods", "DELETE"):
            grace = query.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
            pods = store.select("pods", ns, selector)
            for pod in pods:
                store.delete(pod, propagation="Background", grace_seconds=None if grace is None else int(grace))
            return 200, _listing("PodList", "v1", pods, store)
        if (route, method) == ("log", "GET"):
            pod = store.get("pods", ns, name)
            if (pod.get("status") or {}).get("phase") == "Pending":
                raise ApiError(
                    400, "BadRequest", f'container "job" in pod "{name}" is waiting to start: ContainerCreating'
                )
            container = query.get("container", "job")
            if container != "job":
                raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
            return 200, self.kube.controller.log_of(pod)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {route}")


def _listing(kind: str, api_version: str, items: list[Obj], store: Store) -> Obj:
    return {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"resourceVersion": str(store.revision)},
        "items": items,
    }
