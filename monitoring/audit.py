"""The GPU process audit over the newest samples, kept as ``ProcessFinding`` rows: what
the periodic task ``monitoring.audit_gpu_processes`` runs, and what the node page reads.

The rules are ``monitoring.process_audit``'s. A finding opens when a GPU's newest sample
shows a process breaking one; it stays open (and the GPU gets no new jobs, see
``monitoring.gpu_health``) while newer samples show it; it clears when a sample of its
GPU read after its last sighting no longer shows that process breaking that rule (the
process is gone, or a job now accounts for it). A GPU without a recent sample is not
judged: its open findings stay, since an agent's silence does not show a process gone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from monitoring.models import GpuSample, ProcessFinding
from monitoring.process_audit import LEFTOVER_LOOKBACK, Finding, Identity, NodeJob, SeenProcess, audit_gpu
from monitoring.readings import recent_window
from people.models import ClusterIdentity
from scheduler.choices import ACTIVE_STATES, TERMINAL_STATES
from scheduler.jobs.allocations import decode
from scheduler.models import Gpu, Job


@dataclass(frozen=True, slots=True)
class NewestSample:
    gpu_id: int
    node: str
    index: int
    at: datetime
    processes: list[dict[str, Any]]


def audit_processes(now: datetime | None = None) -> dict[str, int]:
    """One pass of the audit; returns how many GPUs it judged and findings it opened,
    cleared and leaves open. Safe to run twice: a finding seen again is refreshed.

    1. Read each GPU's newest sample within the recent window.
    2. Where any lists processes, read the jobs on the nodes (dispatching and running,
       and those ended within ``LEFTOVER_LOOKBACK``) with their owners' cluster identities.
    3. Judge every sampled GPU (``process_audit.audit_gpu``).
    4. In one transaction, open, refresh and clear findings.
    """
    now = now or timezone.now()
    samples = newest_samples(now)
    found: dict[int, list[Finding]] = {}
    if any(s.processes for s in samples):
        active, ended = jobs_by_node(now)
        slices = slices_by_gpu()
        grace = timedelta(seconds=settings.MONITORING_PROCESS_GRACE_SECONDS)
        for s in samples:
            processes = [SeenProcess.from_sample(item) for item in s.processes]
            found[s.gpu_id] = audit_gpu(
                s.index, s.at, processes, active[s.node], ended[s.node], grace, slices.get(s.gpu_id, frozenset())
            )
    with transaction.atomic():
        opened, cleared = record_findings([(s.gpu_id, s.at) for s in samples], found)
    return {
        "gpus": len(samples),
        "opened": opened,
        "cleared": cleared,
        "open": ProcessFinding.objects.filter(cleared_at__isnull=True).count(),
    }


def newest_samples(now: datetime) -> list[NewestSample]:
    """Each GPU's newest sample read within the recent window up to ``now``. One query."""
    start = now - recent_window()
    newest = GpuSample.objects.filter(gpu_id=OuterRef("gpu_id"), at__gte=start, at__lte=now).order_by("-at")
    rows = GpuSample.objects.filter(at__gte=start, at__lte=now, at=Subquery(newest.values("at")[:1])).values_list(
        "gpu_id", "gpu__node__name", "gpu__index", "at", "processes"
    )
    return [NewestSample(gpu_id, node, index, at, processes or []) for gpu_id, node, index, at, processes in rows]


def jobs_by_node(now: datetime) -> tuple[dict[str, list[NodeJob]], dict[str, list[NodeJob]]]:
    """Node name -> its dispatching and running jobs' parts, and -> the parts of jobs
    that ended within ``LEFTOVER_LOOKBACK`` (newest end first). Three queries."""
    active = list(Job.objects.filter(state__in=ACTIVE_STATES).values_list("id", "owner_id", "allocations", "ended_at"))
    ended = list(
        Job.objects.filter(state__in=TERMINAL_STATES, ended_at__gte=now - LEFTOVER_LOOKBACK)
        .order_by("-ended_at", "-id")
        .values_list("id", "owner_id", "allocations", "ended_at")
    )
    identities = {
        user_id: Identity(uid, username)
        for user_id, uid, username in ClusterIdentity.objects.filter(
            user_id__in={owner for _, owner, _, _ in active + ended}
        ).values_list("user_id", "uid", "username")
    }
    return _parts(active, identities, with_end=False), _parts(ended, identities, with_end=True)


def _parts(
    rows: Iterable[tuple[int, int, Any, datetime | None]], identities: dict[int, Identity], *, with_end: bool
) -> dict[str, list[NodeJob]]:
    parts: dict[str, list[NodeJob]] = defaultdict(list)
    for job_id, owner_id, allocations, ended_at in rows:
        for a in decode(allocations):
            parts[a.node].append(
                NodeJob(job_id, identities.get(owner_id), frozenset(a.gpu_indices), ended_at if with_end else None)
            )
    return parts


def slices_by_gpu() -> dict[int, frozenset[int]]:
    """A MIG-enabled GPU's id -> the indices of its slices. One query."""
    slices: dict[int, set[int]] = defaultdict(set)
    for parent, index in Gpu.objects.filter(parent__isnull=False).values_list("parent_id", "index"):
        slices[parent].add(index)
    return {parent: frozenset(indices) for parent, indices in slices.items()}


def record_findings(judged: list[tuple[int, datetime]], found: dict[int, list[Finding]]) -> tuple[int, int]:
    """Open, refresh and clear findings for the GPUs ``judged`` (id, when its sample was
    read) from what was ``found`` on each; returns (opened, cleared)."""
    read_at = dict(judged)
    # Every open finding (few), rather than an IN of every GPU judged (thousands).
    open_rows = {
        (f.gpu_id, f.pid, f.rule): f
        for f in ProcessFinding.objects.filter(cleared_at__isnull=True)
        if f.gpu_id in read_at
    }
    new: list[ProcessFinding] = []
    seen: list[ProcessFinding] = []
    for gpu_id, findings in found.items():
        at = read_at[gpu_id]
        for finding in findings:
            p = finding.process
            row = open_rows.pop((gpu_id, p.pid, finding.rule), None)
            if row is None:
                row = ProcessFinding(gpu_id=gpu_id, rule=finding.rule, pid=p.pid, first_seen_at=at)
                new.append(row)
            elif at > row.last_seen_at:
                seen.append(row)
            else:
                continue  # not newer than what is recorded
            row.uid, row.user, row.command = p.uid, p.user[:32], p.command[:64]
            row.used_memory_mib, row.job_id = p.used_memory_mib, finding.job_id
            row.reason, row.last_seen_at = finding.reason[:300], at
    gone = [row for row in open_rows.values() if read_at[row.gpu_id] > row.last_seen_at]
    for row in gone:
        row.cleared_at = read_at[row.gpu_id]
    ProcessFinding.objects.bulk_create(new, ignore_conflicts=True)  # a pass run alongside opened it first
    fields = ["uid", "user", "command", "used_memory_mib", "job_id", "reason", "last_seen_at"]
    ProcessFinding.objects.bulk_update(seen, fields)
    ProcessFinding.objects.bulk_update(gone, ["cleared_at"])
    return len(new), len(gone)


def open_findings_by_node() -> dict[str, list[ProcessFinding]]:
    """Node name -> its open findings, by GPU index and pid, for the node page. One query."""
    by_node: dict[str, list[ProcessFinding]] = defaultdict(list)
    for finding in (
        ProcessFinding.objects.filter(cleared_at__isnull=True)
        .select_related("gpu__node")
        .order_by("gpu__node__name", "gpu__index", "pid")
    ):
        by_node[finding.gpu.node.name].append(finding)
    return dict(by_node)
