"""The few Kubernetes API calls the ``kubernetes`` backend makes, as plain dicts.

The official client (``kubernetes`` 37) does the HTTP, authentication and TLS; this module
asks it for the raw JSON (``_preload_content=False``) so that the adapter reads objects
exactly as the API server wrote them, and it turns every failure into one of:

* :class:`NotFound` (404) and :class:`Conflict` (409), which the adapter handles itself
  (a Job already exists, a Job is already gone, an optimistic-concurrency race);
* ``BackendError(permanent=True)`` for requests the server rejected and will always
  reject (400 BadRequest, 401, 403 Forbidden, 422 Invalid, ...), with the API's message;
* ``BackendError(permanent=False)`` for 429, 5xx, timeouts and refused connections.

The client's own retries are switched off: the portal retries transient errors with its
own backoff, and a retry hidden here would make one ``poll`` cost several round trips.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduler.backends.base import BackendError

Obj = dict[str, Any]
_T = TypeVar("_T")

#: Seconds for connecting and for reading one response.
DEFAULT_TIMEOUT_SECONDS = 10.0


class NotFound(Exception):
    """The API answered 404 for the object or namespace."""


class Conflict(Exception):
    """The API answered 409: the name is taken, or the object changed since it was read."""


def _status_message(exc: ApiException) -> str:
    """The ``message`` of the Status object the API server sends with an error."""
    try:
        status = json.loads(exc.body or "")
    except ValueError:
        status = None
    if isinstance(status, Mapping) and status.get("message"):
        return str(status["message"])
    return f"{exc.status} {exc.reason}".strip()


class KubeApi:
    """One API server. Every method raises only NotFound, Conflict or BackendError."""

    def __init__(self, configuration: k8s.Configuration, *, where: str, timeout: float = DEFAULT_TIMEOUT_SECONDS):
        configuration.retries = False
        self._client = k8s.ApiClient(configuration)
        self._batch = k8s.BatchV1Api(self._client)
        self._core = k8s.CoreV1Api(self._client)
        self._where = where
        self._timeout = timeout

    def _call(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
        response = self._open(what, call, *args, **kwargs)
        try:
            return cast(bytes, response.data)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BackendError(f"{self._where}: {what}: {exc}", permanent=False) from exc

    def _open(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> urllib3.BaseHTTPResponse:
        """The response to one call, its body not read yet; errors as the module says."""
        try:
            return cast(
                urllib3.BaseHTTPResponse,
                call(*args, _preload_content=False, _request_timeout=self._timeout, **kwargs),
            )
        except ApiException as exc:
            if exc.status == 404:
                raise NotFound(_status_message(exc)) from exc
            if exc.status == 409:
                raise Conflict(_status_message(exc)) from exc
            # 401 (an expired or rotated token) and a ResourceQuota's 403 ("exceeded
            # quota") are fixed by an admin or by time, not by the user: retry them.
            quota = exc.status == 403 and "exceeded quota" in _status_message(exc)
            transient = exc.status is None or exc.status in (401, 408, 429) or exc.status >= 500 or quota
            message = f"{self._where}: {what}: {_status_message(exc)}"
            raise BackendError(message, permanent=not transient) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BackendError(f"{self._where}: {what}: {exc}", permanent=False) from exc
        except ValueError as exc:  # the client refused to send it (client-side validation)
            raise BackendError(f"{self._where}: {what}: {exc}", permanent=True) from exc

    def _json(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        raw = self._call(what, call, *args, **kwargs)
        try:
            return cast(Obj, json.loads(raw))
        except ValueError as exc:
            raise BackendError(f"{self._where}: {what}: the API answered with invalid JSON", permanent=False) from exc

    # -- Jobs -----------------------------------------------------------------------------

    def create_job(self, namespace: str, manifest: Obj) -> Obj:
        body = k8s.V1Job.from_dict(manifest)
        return self._json(
            f"create Job {namespace}/{manifest['metadata']['name']}", self._batch.create_namespaced_job, namespace, body
        )

    def read_job(self, namespace: str, name: str) -> Obj:
        return self._json(f"read Job {namespace}/{name}", self._batch.read_namespaced_job, name, namespace)

    def list_jobs(self, namespace: str, selector: str) -> list[Obj]:
        found = self._json(
            f"list Jobs in {namespace}", self._batch.list_namespaced_job, namespace, label_selector=selector
        )
        return list(found.get("items") or [])

    def patch_job(self, namespace: str, name: str, patch: Obj) -> Obj:
        """A JSON merge patch; include ``metadata.resourceVersion`` to fail on a race (409)."""
        return self._json(
            f"patch Job {namespace}/{name}",
            self._batch.patch_namespaced_job,
            name,
            namespace,
            patch,
            _content_type="application/merge-patch+json",
        )

    def delete_job(self, namespace: str, name: str, *, propagation: str) -> None:
        self._call(
            f"delete Job {namespace}/{name}",
            self._batch.delete_namespaced_job,
            name,
            namespace,
            propagation_policy=propagation,
        )

    def create_service(self, namespace: str, manifest: Obj) -> Obj:
        body = k8s.V1Service.from_dict(manifest)
        name = manifest["metadata"]["name"]
        return self._json(f"create Service {namespace}/{name}", self._core.create_namespaced_service, namespace, body)

    def create_secret(self, namespace: str, manifest: Obj) -> Obj:
        body = k8s.V1Secret.from_dict(manifest)
        name = manifest["metadata"]["name"]
        return self._json(f"create Secret {namespace}/{name}", self._core.create_namespaced_secret, namespace, body)

    def patch_secret(self, namespace: str, name: str, patch: Obj) -> Obj:
        """A JSON merge patch of a Secret (its owner, once its Job exists)."""
        return self._json(
            f"patch Secret {namespace}/{name}",
            self._core.patch_namespaced_secret,
            name,
            namespace,
            patch,
            _content_type="application/merge-patch+json",
        )

    # -- Pods and Nodes -------------------------------------------------------------------

    def list_pods(self, namespace: str, selector: str) -> list[Obj]:
        found = self._json(
            f"list Pods in {namespace}", self._core.list_namespaced_pod, namespace, label_selector=selector
        )
        return list(found.get("items") or [])

    def delete_pods(self, namespace: str, selector: str, *, grace_seconds: int) -> None:
        self._call(
            f"delete Pods in {namespace}",
            self._core.delete_collection_namespaced_pod,
            namespace,
            label_selector=selector,
            grace_period_seconds=grace_seconds,
        )

    def read_pod_log(self, namespace: str, name: str, tail_lines: int | None = None) -> str:
        """A pod's log; ``tail_lines`` asks the API server for only the last lines, so a
        job with gigabytes of output is never downloaded whole for a log tail."""
        extra = {"tail_lines": tail_lines} if tail_lines else {}
        raw = self._call(
            f"read log of Pod {namespace}/{name}", self._core.read_namespaced_pod_log, name, namespace, **extra
        )
        return raw.decode("utf-8", errors="replace")

    def stream_pod_log(self, namespace: str, name: str, container: str, chunk_bytes: int) -> Iterator[bytes]:
        """A pod's container's whole log as the kubelet keeps it, streamed from the API
        server in chunks of at most ``chunk_bytes`` (``_preload_content=False``: the
        response is read as it comes, never whole). The connection is let go when the
        iterator ends or is closed. NotFound for a pod that is gone."""
        what = f"stream log of Pod {namespace}/{name}"
        response = self._open(what, self._core.read_namespaced_pod_log, name, namespace, container=container)
        try:
            for chunk in response.stream(chunk_bytes, decode_content=True):
                if chunk:
                    yield chunk
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BackendError(f"{self._where}: {what}: {exc}", permanent=False) from exc
        finally:
            response.release_conn()

    def list_nodes(self) -> list[Obj]:
        return list(self._json("list Nodes", self._core.list_node).get("items") or [])

    def read_node(self, name: str) -> Obj:
        return self._json(f"read Node {name}", self._core.read_node, name)
