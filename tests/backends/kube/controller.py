"""The fake cluster's control loop: Job controller, scheduler, kubelet and garbage collector.

Every ``tick_seconds`` it does, under the store's lock, what those components do in
Kubernetes (simplified, deterministic, no containers run; see :mod:`program` for what a
container's command means here):

1. Job controller: a new Job gets ``status.startTime`` and its pods (one per completion;
   ``<job>-<index>-<random>`` with the completion index annotation and label for an
   Indexed Job). It counts ``active``/``succeeded``/``failed``; when ``failed`` exceeds
   ``backoffLimit``, or the Job has been active ``activeDeadlineSeconds``, it adds the
   ``FailureTarget`` condition (reason ``BackoffLimitExceeded`` or ``DeadlineExceeded``),
   deletes the active pods, and once none is left adds ``Failed`` with the same reason;
   when every completion succeeded it adds ``Complete`` and ``completionTime``.
2. Scheduler: a pending pod goes to the first Ready, schedulable node that satisfies its
   required node affinity (``matchFields`` on ``metadata.name``, ``matchExpressions`` on
   labels), tolerates the node's NoSchedule taints, has room for its extended resources
   (``nvidia.com/...`` limits against allocatable) and no pod its required anti-affinity
   excludes; else ``PodScheduled=False``, reason ``Unschedulable``.
3. Kubelet: a scheduled pod starts on the next tick (phase Running, container running),
   runs for the program's duration and ends Succeeded or Failed with its exit code; a
   pod being deleted ends with 143 and disappears.
4. Garbage collector: a Job deleted with ``foregroundDeletion`` has its pods deleted and
   loses that finalizer when they are gone (then disappears unless other finalizers
   remain); ``orphan`` strips the pods' owner references; pods whose owner is gone
   (background deletion) are deleted.

Times in objects have whole seconds, as the API server writes them; durations are
measured with the controller's own precise clock.
"""

from __future__ import annotations

import copy
import random
import string
import threading
import time
from datetime import UTC, datetime
from typing import Any

from tests.backends.kube.apiserver import Obj, Store
from tests.backends.kube.program import Program, interpret


def _stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, reason: str, message: str, moment: float) -> Obj:
    stamp = _stamp(moment)
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def _has(obj: Obj, kind: str) -> Obj | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)


def _quantity(value: Any) -> int:
    return int(str(value))


class Controller:
    def __init__(self, store: Store, *, tick_seconds: float) -> None:
        self.store = store
        self.tick_seconds = tick_seconds
        self._started: dict[str, float] = {}  # job uid -> precise start
        self._runs: dict[str, tuple[float, Program]] = {}  # pod uid -> (start, program)
        self._logs: dict[str, str] = {}  # pod uid -> final log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-kube-controller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_seconds):
            with self.store.lock:
                self.tick(time.time())

    def log_of(self, pod: Obj) -> str:
        uid = pod["metadata"]["uid"]
        if uid in self._logs:
            return self._logs[uid]
        if uid in self._runs:
            start, program = self._runs[uid]
            return program.log_at(time.time() - start)
        return ""

    def set_log(self, pod: Obj, text: str) -> None:
        self._logs[pod["metadata"]["uid"]] = text

    def tick(self, now: float) -> None:
        for job in self._all("jobs"):
            self._sync_job(job, now)
        for pod in self._all("pods"):
            self._sync_pod(pod, now)
        live = {job["metadata"]["uid"] for job in self._all("jobs")}
        for owned in [*self._all("pods"), *self._all("services")]:  # the garbage collector
            owners = owned["metadata"].get("ownerReferences") or []
            if owners and not any(ref["uid"] in live for ref in owners):
                self.store.delete(owned, propagation="Background")

    def _all(self, resource: str) -> list[Obj]:
        return [obj for (kind, _, _), obj in list(self.store.objects.items()) if kind == resource]

    # -- Job controller and garbage collector -------------------------------------------------

    def _sync_job(self, job: Obj, now: float) -> None:
        metadata, spec = job["metadata"], job["spec"]
        status = job.setdefault("status", {})
        pods = self.store.owned_by(job)
        if metadata.get("deletionTimestamp"):
            finalizers = metadata.get("finalizers") or []
            if "orphan" in finalizers:
                for pod in pods:
                    pod["metadata"]["ownerReferences"] = []
                    self.store.update(pod)
                finalizers.remove("orphan")
                self.store.update(job)
            elif "foregroundDeletion" in finalizers:
                for pod in pods:
                    self.store.delete(pod, propagation="Background")
                if not self.store.owned_by(job):
                    finalizers.remove("foregroundDeletion")
                    self.store.update(job)
            return
        if _has(job, "Complete") or _has(job, "Failed"):
            return
        if not status.get("startTime"):
            status["startTime"] = _stamp(now)
            self._started[metadata["uid"]] = now
            for index in range(spec["completions"]):
                self._create_pod(job, index)
            status["active"] = spec["completions"]
            self.store.update(job)
            return
        running = [p for p in pods if p["status"]["phase"] in ("Pending", "Running")]
        target = _has(job, "FailureTarget")
        if target:
            if not running:
                status["conditions"].append(_condition("Failed", target["reason"], target["message"], now))
                status["active"] = 0
                self.store.update(job)
            return
        failed = sum(p["status"]["phase"] == "Failed" for p in pods)
        succeeded = sum(p["status"]["phase"] == "Succeeded" for p in pods)
        counts = {
            "active": len([p for p in running if not p["metadata"].get("deletionTimestamp")]),
            "failed": failed,
            "succeeded": succeeded,
        }
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None and now - self._started.get(metadata["uid"], now) >= deadline:
            self._fail(job, running, "DeadlineExceeded", "Job was active longer than specified deadline", now)
        elif failed > spec["backoffLimit"]:
            self._fail(job, running, "BackoffLimitExceeded", "Job has reached the specified backoff limit", now)
        elif succeeded >= spec["completions"]:
            status.setdefault("conditions", []).append(_condition("Complete", "", "", now))
            status["completionTime"] = _stamp(now)
            status.update(counts, active=0)
            self.store.update(job)
        elif any(status.get(k, 0) != v for k, v in counts.items()):
            status.update(counts)
            self.store.update(job)

    def _fail(self, job: Obj, running: list[Obj], reason: str, message: str, now: float) -> None:
        job["status"].setdefault("conditions", []).append(_condition("FailureTarget", reason, message, now))
        for pod in running:
            self.store.delete(pod, propagation="Background")
        self.store.update(job)

    def _create_pod(self, job: Obj, index: int) -> None:
        metadata, spec = job["metadata"], job["spec"]
        template = copy.deepcopy(spec["template"])
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
        indexed = spec.get("completionMode") == "Indexed"
        labels = dict(template["metadata"].get("labels") or {})
        annotations = dict(template["metadata"].get("annotations") or {})
        pod_spec = template["spec"]
        if indexed:
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
            annotations["batch.kubernetes.io/job-completion-index"] = str(index)
            pod_spec["hostname"] = f"{metadata['name']}-{index}"
            for container in pod_spec["containers"]:
                container.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        name = f"{metadata['name']}-{index}-{suffix}" if indexed else f"{metadata['name']}-{suffix}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": pod_spec,
            "status": {"phase": "Pending", "conditions": []},
        }
        self.store.add("pods", metadata["namespace"], pod)

    # -- scheduler and kubelet -------------------------------------------------------------------

    def _sync_pod(self, pod: Obj, now: float) -> None:
        status, spec = pod["status"], pod["spec"]
        if pod["metadata"].get("deletionTimestamp"):
            if status["phase"] == "Running":
                self._terminate(pod, 143, now)
            self.store.remove(pod)
            return
        if status["phase"] == "Pending" and not spec.get("nodeName"):
            self._schedule(pod)
        elif status["phase"] == "Pending":
            command = spec["containers"][0].get("command") or []
            self._runs[pod["metadata"]["uid"]] = (now, interpret(command[-1] if command else ""))
            status.update(
                phase="Running",
                startTime=_stamp(now),
                containerStatuses=[
                    {
                        "name": spec["containers"][0]["name"],
                        "ready": True,
                        "restartCount": 0,
                        "image": spec["containers"][0]["image"],
                        "state": {"running": {"startedAt": _stamp(now)}},
                    }
                ],
            )
            self.store.update(pod)
        elif status["phase"] == "Running":
            start, program = self._runs[pod["metadata"]["uid"]]
            if now - start >= program.duration:
                self._terminate(pod, program.exit_code, now)

    def _terminate(self, pod: Obj, exit_code: int, now: float) -> None:
        uid = pod["metadata"]["uid"]
        start, program = self._runs.get(uid, (now, Program()))
        self._logs[uid] = program.log_at(now - start)
        pod["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        pod["status"]["containerStatuses"][0]["ready"] = False
        pod["status"]["containerStatuses"][0]["state"] = {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": _stamp(start),
                "finishedAt": _stamp(now),
            }
        }
        self.store.update(pod)

    def _schedule(self, pod: Obj) -> None:
        nodes = self._all("nodes")
        reasons: list[str] = []
        for node in nodes:
            why = self._unfit(pod, node)
            if why is None:
                pod["spec"]["nodeName"] = node["metadata"]["name"]
                pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
                self.store.update(pod)
                return
            reasons.append(f"{node['metadata']['name']}: {why}")
        message = f"0/{len(nodes)} nodes are available: {'; '.join(reasons)}"
        scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        if pod["status"]["conditions"] != [scheduled]:
            pod["status"]["conditions"] = [scheduled]
            self.store.update(pod)

    def _unfit(self, pod: Obj, node: Obj) -> str | None:
        """Why ``pod`` cannot go to ``node`` (None: it can)."""
        spec, node_meta = pod["spec"], node["metadata"]
        ready = next((c for c in node["status"].get("conditions") or [] if c["type"] == "Ready"), None)
        if not ready or ready["status"] != "True":
            return "node is not ready"
        if (node.get("spec") or {}).get("unschedulable"):
            return "node is unschedulable"
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                t.get("key") == taint["key"]
                and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
                and t.get("effect") in (None, "", taint["effect"])
                for t in spec.get("tolerations") or []
            ):
                return f"untolerated taint {taint['key']}"
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        if required and not any(_term_matches(term, node) for term in required["nodeSelectorTerms"]):
            return "didn't match Pod's node affinity/selector"
        on_node = [
            p
            for p in self._all("pods")
            if p["spec"].get("nodeName") == node_meta["name"] and p["status"]["phase"] in ("Pending", "Running")
        ]
        anti = ((spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in anti:
            match = term["labelSelector"].get("matchLabels") or {}
            if any(all((p["metadata"].get("labels") or {}).get(k) == v for k, v in match.items()) for p in on_node):
                return "didn't match pod anti-affinity rules"
        allocatable = node["status"].get("allocatable") or {}
        for resource, wanted in (spec["containers"][0].get("resources", {}).get("limits") or {}).items():
            if "/" not in resource:
                continue
            used = sum(
                _quantity((p["spec"]["containers"][0].get("resources", {}).get("limits") or {}).get(resource, 0))
                for p in on_node
            )
            if used + _quantity(wanted) > _quantity(allocatable.get(resource, 0)):
                return f"Insufficient {resource}"
        return None


def _term_matches(term: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    for field in term.get("matchFields") or []:
        value = node["metadata"]["name"] if field["key"] == "metadata.name" else None
        if (value in field["values"]) != (field["operator"] == "In"):
            return False
    return all(
        _holds(labels, e["key"], e["operator"], e.get("values") or []) for e in term.get("matchExpressions") or []
    )


def _holds(labels: dict[str, str], key: str, op: str, values: list[str]) -> bool:
    if op in ("In", "NotIn"):
        return (labels.get(key) in values) == (op == "In")
    if op in ("Exists", "DoesNotExist"):
        return (key in labels) == (op == "Exists")
    if key not in labels:
        return False
    return int(labels[key]) > int(values[0]) if op == "Gt" else int(labels[key]) < int(values[0])
