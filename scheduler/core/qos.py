"""QOS limits on what runs at once: per user within a QOS, and for the whole QOS.

Slurm's QOS ``MaxTRESPerUser`` (GPUs, CPUs) and ``MaxJobsPerUser`` cap what one user's
running jobs in a QOS hold together, whatever account they are charged to; its
``GrpTRES`` (GPUs) caps what every running job in the QOS holds together. The usual
"debug lane: 2 GPUs per user, 1 hour" is a QOS with ``max_gpus_per_user=2`` and a
walltime ceiling. A job over one of these waits with Slurm's reason word for it
(``QOSMaxGRESPerUser``, ``QOSMaxCpuPerUserLimit``, ``QOSMaxJobsPerUserLimit``,
``QOSGrpGRES``) and, as a job over a quota, does not block the queue.

:class:`QosBook` is consulted and charged by ``scheduler.core.limits.LimitBook``, the
cycle's one limits step, beside the quotas: what no start may break is checked once
for both, before a job is placed, evicts or is backfilled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from scheduler.core.hours import gpu_count
from scheduler.core.types import (
    Allocation,
    Blocker,
    PendingJob,
    PendingReason,
    QosLimits,
    RunningJob,
    cpu_count,
    cpu_text,
)

#: Shares are floats: 0.1 + 0.2 must not exceed a limit of 0.3.
_EPSILON = 1e-9


@dataclass(slots=True)
class _QosUsage:
    gpus: float = 0.0  # a fractional job counts its share
    cpu_millis: int = 0
    jobs: int = 0


def caps_anything(qos_limits: Mapping[str, QosLimits]) -> bool:
    """Whether any QOS caps what runs."""
    return any(limits.caps_anything for limits in qos_limits.values())


def _gpus(allocations: tuple[Allocation, ...]) -> float:
    return sum(a.gpu_amount for a in allocations)


def _cpu_millis(allocations: tuple[Allocation, ...]) -> int:
    return sum(a.cpu_millis for a in allocations)


class QosBook:
    """What the running jobs of each capped QOS hold, per user and in all, updated as a
    cycle commits starts and evictions. QOS without caps are not counted."""

    def __init__(self, running: tuple[RunningJob, ...], qos_limits: Mapping[str, QosLimits]) -> None:
        self.limits = {name: limits for name, limits in qos_limits.items() if limits.caps_anything}
        self.per_user: dict[tuple[str, str], _QosUsage] = {}
        self.groups: dict[str, _QosUsage] = {}
        #: :meth:`blockers` answers, valid until the next charge.
        self._answers: dict[tuple[str, str, float, int], tuple[Blocker, ...]] = {}
        for job in running:
            self.charge(job.qos, job.user, job.allocations)

    def charge(self, qos: str, user: str, allocations: tuple[Allocation, ...], sign: int = 1) -> None:
        """Count (``sign=-1``: uncount) a job of ``user`` in ``qos`` holding ``allocations``."""
        if qos not in self.limits:
            return
        if self._answers:
            self._answers.clear()
        gpus, cpus = _gpus(allocations), _cpu_millis(allocations)
        mine = self.per_user.get((qos, user))
        if mine is None:
            mine = self.per_user[(qos, user)] = _QosUsage()
        group = self.groups.get(qos)
        if group is None:
            group = self.groups[qos] = _QosUsage()
        for usage in (mine, group):
            usage.gpus += sign * gpus
            usage.cpu_millis += sign * cpus
            usage.jobs += sign

    def blocker(self, job: PendingJob) -> PendingReason | None:
        """The first QOS limit ``job`` would break by starting, or ``None``."""
        limits = self.limits.get(job.qos)
        if limits is None:
            return None
        for code, _, _, _ in self._broken(limits, job):
            return code
        return None

    def blockers(self, job: PendingJob) -> tuple[Blocker, ...]:
        """Every QOS limit ``job`` would break by starting, each with what its user (or
        the QOS) holds against the cap; kept per kind of request until the next charge."""
        limits = self.limits.get(job.qos)
        if limits is None:
            return ()
        cpus = job.nodes * job.cpu_millis_per_node
        key = (job.qos, job.user, job.gpu_amount, cpus)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = tuple(self._words(limits, job, cpus))
        return answer

    def _broken(self, limits: QosLimits, job: PendingJob) -> Iterator[tuple[PendingReason, str, float, int]]:
        """The limits of ``job``'s QOS it would break, most basic first, as ``(code,
        limit, held, cap)``: the one walk of the rules behind its reason and its words."""
        mine = self.per_user.get((job.qos, job.user)) or _NOTHING
        if limits.max_running_jobs_per_user is not None and mine.jobs + 1 > limits.max_running_jobs_per_user:
            yield _USER_JOBS, "max_running_jobs_per_user", mine.jobs, limits.max_running_jobs_per_user
        amount = job.gpu_amount
        if limits.max_gpus_per_user is not None and mine.gpus + amount > limits.max_gpus_per_user + _EPSILON:
            yield _USER_GPUS, "max_gpus_per_user", mine.gpus, limits.max_gpus_per_user
        cap = limits.max_cpu_millis_per_user
        if cap is not None and mine.cpu_millis + job.nodes * job.cpu_millis_per_node > cap:
            yield _USER_CPUS, "max_cpus_per_user", mine.cpu_millis, cap
        if limits.max_gpus is not None:
            group = self.groups.get(job.qos) or _NOTHING
            if group.gpus + amount > limits.max_gpus + _EPSILON:
                yield _GROUP_GPUS, "max_gpus", group.gpus, limits.max_gpus

    def _words(self, limits: QosLimits, job: PendingJob, cpus: int) -> Iterator[Blocker]:
        qos, user = job.qos, job.user
        for code, limit, held, cap in self._broken(limits, job):
            evidence: dict[str, object] = {"scope": "qos", "name": qos, "limit": limit}
            if code is _USER_JOBS:
                message = f"QOS {qos} runs {int(held)} of the {cap} jobs it allows {user} at once"
                evidence |= {"user": user, "used": int(held), "cap": cap}
            elif code is _USER_CPUS:
                message = (
                    f"{user} holds {cpu_text(int(held))} of the {cpu_text(cap)} CPUs QOS {qos} allows a user; "
                    f"this job needs {cpu_text(cpus)}"
                )
                used = cpu_count(int(held))
                evidence |= {"user": user, "used": used, "cap": cpu_count(cap), "requested": cpu_count(cpus)}
            else:
                whose = f"{user} holds" if code is _USER_GPUS else f"the running jobs of QOS {qos} hold"
                allows = f"QOS {qos} allows a user" if code is _USER_GPUS else "it allows in all"
                message = (
                    f"{whose} {gpu_count(held)} of the {cap} GPUs {allows}; this job needs {gpu_count(job.gpu_amount)}"
                )
                if code is _USER_GPUS:
                    evidence["user"] = user
                evidence |= {"used": gpu_count(held), "cap": cap, "requested": gpu_count(job.gpu_amount)}
            yield Blocker(code, message, evidence)


#: Read once: an enum member looked up on its class costs a descriptor call, per job.
_USER_JOBS = PendingReason.QOS_USER_JOB_LIMIT
_USER_GPUS = PendingReason.QOS_USER_GPU_LIMIT
_USER_CPUS = PendingReason.QOS_USER_CPU_LIMIT
_GROUP_GPUS = PendingReason.QOS_GROUP_GPU_LIMIT
#: What a user or QOS with no running job holds.
_NOTHING = _QosUsage()
