"""The GPU process audit's rules, pure: which processes on a GPU no job of the portal
accounts for, and which rule each breaks.

A process on a GPU is *accounted for* when a job that holds the GPU (dispatching or
running) is its owner's. Whose a process is comes from what the node agent read in
``/proc`` (``agent.collectors.owners``): its owner's uid, else its user name, against the
cluster identity the job runs as (``people.ClusterIdentity``). Where either side is
unknown (an agent that sends no owner, a job owner without a cluster identity, as on a
local backend running every job as the portal's user) it cannot be told, and the process
is given the benefit of the doubt on a held GPU. Otherwise it breaks one rule, the first
of:

1. ``leftover``: a job that held this GPU ended (within ``LEFTOVER_LOOKBACK``), is its
   owner's (or its owner is unknown), and the sample was read more than ``grace`` after
   that job ended. Within the grace it is not reported at all: a job's processes take a
   moment to exit.
2. ``escaped``: a job of its owner runs on this node but was not given this GPU (an
   escaped ``CUDA_VISIBLE_DEVICES``, or the workload manager chose other indices).
3. ``foreign``: none of that: no job of the portal on this GPU is its owner's (on a GPU
   the portal believes free, any process is foreign unless 1 or 2 applies).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: How long after a job ended a process on its GPUs is still taken as its leftover; an
#: older one is foreign.
LEFTOVER_LOOKBACK = timedelta(days=1)

FOREIGN, ESCAPED, LEFTOVER = "foreign", "escaped", "leftover"


@dataclass(frozen=True, slots=True)
class Identity:
    """Whom a job runs as on the cluster (its owner's cluster identity)."""

    uid: int | None
    user: str


@dataclass(frozen=True, slots=True)
class NodeJob:
    """A job's part on one node: the GPU indices it holds (or held, when ``ended_at``)."""

    job_id: int
    identity: Identity | None
    gpus: frozenset[int]
    ended_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SeenProcess:
    """A process as a sample lists it."""

    pid: int
    used_memory_mib: int = 0
    uid: int | None = None
    user: str = ""
    command: str = ""

    @classmethod
    def from_sample(cls, item: dict[str, Any]) -> SeenProcess:
        return cls(
            pid=int(item["pid"]),
            used_memory_mib=int(item.get("used_memory_mib") or 0),
            uid=item.get("uid"),
            user=str(item.get("user") or ""),
            command=str(item.get("command") or ""),
        )

    @property
    def owner(self) -> str:
        """Its owner in words: ``alice (uid 1001)``, ``uid 1001``, or ``unknown owner``."""
        if self.user and self.uid is not None:
            return f"{self.user} (uid {self.uid})"
        return self.user or (f"uid {self.uid}" if self.uid is not None else "unknown owner")


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    process: SeenProcess
    job_id: int | None
    reason: str


def owns(identity: Identity | None, process: SeenProcess) -> bool | None:
    """Whether ``process`` runs as ``identity``: by uid where both are known, else by
    user name; ``None`` when it cannot be told."""
    if identity is None:
        return None
    if process.uid is not None and identity.uid is not None:
        return process.uid == identity.uid
    if process.user and identity.user:
        return process.user == identity.user
    return None


def audit_gpu(
    index: int,
    at: datetime,
    processes: Iterable[SeenProcess],
    active: Sequence[NodeJob],
    ended: Sequence[NodeJob],
    grace: timedelta,
    slices: frozenset[int] = frozenset(),
) -> list[Finding]:
    """The findings of GPU ``index`` of a node from its sample read at ``at``: ``active``
    are the node's dispatching and running jobs, ``ended`` the jobs that ended on it within
    ``LEFTOVER_LOOKBACK`` (newest end first). A MIG-enabled GPU's processes are listed on
    the GPU itself: a job holding one of its ``slices`` (their indices) holds it too. One
    finding at most per process."""
    covers = slices | {index}
    holders = [job for job in active if job.gpus & covers]
    findings = []
    judged: set[int] = set()
    for process in processes:
        if process.pid in judged:
            continue  # listed twice (a process with a compute and a graphics context)
        judged.add(process.pid)
        if any(owns(job.identity, process) is not False for job in holders):
            continue
        left_by = _ended_holder(covers, process, ended)
        if left_by is None:
            findings.append(_escaped(index, covers, process, active) or _foreign(process, holders))
        elif left_by.ended_at is not None and at - left_by.ended_at > grace:
            findings.append(_leftover(index, process, left_by, at - left_by.ended_at, grace))
        # else: its job ended moments ago, and its processes may still be exiting.
    return findings


def _ended_holder(covers: frozenset[int], process: SeenProcess, ended: Sequence[NodeJob]) -> NodeJob | None:
    """The newest ended job that held the GPU (``covers``: it and its slices) and may be
    the process's owner's."""
    for job in ended:
        if job.gpus & covers and job.ended_at is not None and owns(job.identity, process) is not False:
            return job
    return None


def _leftover(index: int, process: SeenProcess, job: NodeJob, late: timedelta, grace: timedelta) -> Finding:
    return Finding(
        LEFTOVER,
        process,
        job.job_id,
        f"still on GPU {index} {_span(late)} after job {job.job_id} ended (grace {int(grace.total_seconds())} s)",
    )


def _escaped(index: int, covers: frozenset[int], process: SeenProcess, active: Sequence[NodeJob]) -> Finding | None:
    for job in active:
        if not job.gpus & covers and owns(job.identity, process):
            given = ", ".join(str(i) for i in sorted(job.gpus)) or "none"
            return Finding(
                ESCAPED,
                process,
                job.job_id,
                f"job {job.job_id} of {process.owner} runs on this node with GPUs {given}, not GPU {index}",
            )
    return None


def _foreign(process: SeenProcess, holders: Sequence[NodeJob]) -> Finding:
    if not holders:
        return Finding(FOREIGN, process, None, "no job of the portal holds this GPU")
    held_by = ", ".join(f"job {job.job_id}" for job in holders)
    return Finding(FOREIGN, process, None, f"{process.owner} owns no job on this GPU ({held_by} holds it)")


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"
