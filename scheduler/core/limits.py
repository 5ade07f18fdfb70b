"""Quota limits on what runs at once, per account (and its subtree) and per user, and
the QOS limits beside them.

An account's limit covers every job charged to it or to any account below it, as
Slurm's ``GrpTRES``/``GrpJobs`` do on an association; a user's limit covers all their
jobs. A QOS's limits cap its users' running jobs and all of them together (see
``scheduler.core.qos``). A job over a limit waits with a reason naming the limit and
does not block the queue: it is not waiting for resources, so it takes no reservation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from scheduler.core.hours import gpu_count
from scheduler.core.qos import QosBook
from scheduler.core.qos import caps_anything as qos_caps_anything
from scheduler.core.types import (
    Allocation,
    Blocker,
    Limits,
    NodeView,
    PendingJob,
    PendingReason,
    QosLimits,
    RunningJob,
    Start,
)


@dataclass(slots=True)
class _Usage:
    gpus: float = 0.0  # a fractional job counts its share
    jobs: int = 0
    by_model: dict[str, float] = field(default_factory=lambda: defaultdict(float))


#: One limit check: the limits, the usage they cap, ``"account"`` or ``"user"``, and its name.
_Check = tuple[Limits, _Usage, str, str]


def caps_anything(limits: Mapping[str, Limits]) -> bool:
    """Whether any of ``limits`` caps what runs (GPUs, GPUs of a model, jobs, walltime).

    Guarantees and borrowing limits are not caps here (see ``scheduler.core.borrowing``):
    a cycle whose limits hold only those needs no :class:`LimitBook`, which would find
    nothing to report and still charge every running job.
    """
    return any(
        lim.max_gpus is not None
        or lim.max_gpus_per_model
        or lim.max_running_jobs is not None
        or lim.max_walltime_seconds is not None
        for lim in limits.values()
    )


class LimitBook:
    """Running usage against limits, updated as a cycle commits starts: the quotas', and
    the QOS limits' (:class:`scheduler.core.qos.QosBook`, when a QOS caps anything)."""

    def __init__(
        self,
        nodes: tuple[NodeView, ...],
        running: tuple[RunningJob, ...],
        account_limits: Mapping[str, Limits],
        user_limits: Mapping[str, Limits],
        account_parents: Mapping[str, str | None],
        qos_limits: Mapping[str, QosLimits] | None = None,
    ) -> None:
        self.qos = QosBook(running, qos_limits) if qos_limits and qos_caps_anything(qos_limits) else None
        self.account_limits = account_limits
        self.user_limits = user_limits
        self.parents = account_parents
        self.models = {(n.name, g.index): g.model for n in nodes for g in n.gpus}
        #: Usage of the accounts and users that have limits (nothing reads the others').
        self.accounts: dict[str, _Usage] = defaultdict(_Usage)
        self.users: dict[str, _Usage] = defaultdict(_Usage)
        self._lineages: dict[str, list[str]] = {}
        #: Per ``(account, user)``: the limits that apply, nearest account first and the
        #: user last, each as ``(limits, usage, scope, name)``; most pairs have none.
        self._checks: dict[tuple[str, str], tuple[_Check, ...]] = {}
        #: :meth:`usage_blockers` answers, valid until the next charge.
        self._answers: dict[tuple[str, str, float, str], tuple[Blocker, ...]] = {}
        self._entity_answers: dict[tuple[str, str, float, str], tuple[Blocker, ...]] = {}
        for job in running:
            self._charge(job.account, job.user, job.allocations)

    def _models_of(self, allocations: tuple[Allocation, ...]) -> list[tuple[str, float]]:
        """``(model, amount)`` per GPU held: 1 for a whole GPU, the share for a shared one."""
        return [(self.models.get((a.node, i), ""), a.gpu_share or 1.0) for a in allocations for i in a.gpu_indices]

    def lineage(self, account: str) -> list[str]:
        """The account and its ancestors, nearest first (cycles in bad data are cut).

        Computed once per account: the tree does not change during a cycle.
        """
        cached = self._lineages.get(account)
        if cached is not None:
            return cached
        chain: list[str] = []
        current: str | None = account
        while current and current not in chain:
            chain.append(current)
            current = self.parents.get(current)
        self._lineages[account] = chain
        return chain

    def _checks_for(self, account: str, user: str) -> tuple[_Check, ...]:
        """The limits on ``(account, user)``, nearest account first, the user's last.

        Computed once per pair: neither the tree nor the limits change during a cycle.
        """
        key = (account, user)
        checks = self._checks.get(key)
        if checks is None:
            found = [
                (self.account_limits[a], self.accounts[a], "account", a)
                for a in self.lineage(account)
                if a in self.account_limits
            ]
            if user in self.user_limits:
                found.append((self.user_limits[user], self.users[user], "user", user))
            checks = self._checks[key] = tuple(found)
        return checks

    def _charge(self, account: str, user: str, allocations: tuple[Allocation, ...], sign: int = 1) -> None:
        checks = self._checks_for(account, user)
        if not checks:
            return
        models = self._models_of(allocations)
        if self._answers:
            self._answers.clear()
            self._entity_answers.clear()
        for _, usage, _, _ in checks:
            usage.jobs += sign
            by_model = usage.by_model
            for model, amount in models:
                usage.gpus += sign * amount
                by_model[model] += sign * amount

    def blocker(self, job: PendingJob) -> PendingReason | None:
        """The first limit this job would break by starting, on its request alone: the
        code of the first of :meth:`blockers`, without building its words (the quotas
        first, then its QOS's)."""
        for limits, usage, scope, _ in self._checks_for(job.account, job.user):
            for code, _, _, _ in _broken(limits, usage, job, scope == "account"):
                return code
        qos = self.qos
        return qos.blocker(job) if qos is not None else None

    def blockers(self, job: PendingJob) -> list[Blocker]:
        """Every limit this job would break by starting, each with its figures."""
        found = list(self._violations(job))
        if self.qos is not None:
            found.extend(self.qos.blockers(job))
        return found

    def usage_blockers(self, job: PendingJob) -> tuple[Blocker, ...]:
        """:meth:`blockers` less walltime limits: the caps on what runs at once.

        They depend on the job only through its account, user, GPU amount and model
        (and for its QOS's, its QOS and CPUs), so the answers are kept (shared between
        jobs) until the next charge: the waiting jobs of a cycle that ended ask about a
        few hundred distinct requests.
        """
        found = self._quota_usage_blockers(job)
        qos = self.qos
        if qos is None:
            return found
        more = qos.blockers(job)
        return (*found, *more) if more else found

    def _quota_usage_blockers(self, job: PendingJob) -> tuple[Blocker, ...]:
        amount = job.gpu_amount
        key = (job.account, job.user, amount, job.gpu_model)
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        found: list[Blocker] = []
        for limits, usage, scope, name in self._checks_for(job.account, job.user):
            entity_key = (scope, name, amount, job.gpu_model)
            mine = self._entity_answers.get(entity_key)
            if mine is None:
                everything = _violations(limits, usage, job, scope, name)
                mine = tuple(b for b in everything if b.code is not PendingReason.WALLTIME_LIMIT)
                self._entity_answers[entity_key] = mine
            found.extend(mine)
        answer = self._answers[key] = tuple(found)
        return answer

    def _violations(self, job: PendingJob) -> Iterator[Blocker]:
        for limits, usage, scope, name in self._checks_for(job.account, job.user):
            yield from _violations(limits, usage, job, scope, name)

    def blocker_after_placement(self, job: PendingJob, start: Start) -> PendingReason | None:
        """Per-model limits, once the placement says which models the job would use."""
        wanted: dict[str, float] = defaultdict(float)
        for model, amount in self._models_of(start.allocations):
            wanted[model] += amount
        for limits, usage, scope, _ in self._checks_for(job.account, job.user):
            reason = PendingReason.ACCOUNT_GPU_LIMIT if scope == "account" else PendingReason.USER_GPU_LIMIT
            for model, count in wanted.items():
                cap = limits.max_gpus_per_model.get(model)
                if cap is not None and usage.by_model[model] + count > cap + _EPSILON:
                    return reason
        return None

    def commit(self, job: PendingJob, start: Start) -> None:
        self._charge(job.account, job.user, start.allocations)
        if self.qos is not None:
            self.qos.charge(job.qos, job.user, start.allocations)

    def release(self, job: RunningJob) -> None:
        """Uncharge a running job that this cycle evicts."""
        self._charge(job.account, job.user, job.allocations, sign=-1)
        if self.qos is not None:
            self.qos.charge(job.qos, job.user, job.allocations, sign=-1)


def _broken(
    limits: Limits, usage: _Usage, job: PendingJob, account: bool
) -> Iterator[tuple[PendingReason, str, float, int]]:
    """The limits of one account or user that ``job`` would break, most basic first, as
    ``(code, limit, used, cap)``: the one walk of the rules behind both a waiting
    job's reason and its blockers' words (``used`` is the walltime asked for under
    ``max_walltime_seconds``)."""
    if limits.max_walltime_seconds is not None and job.walltime_seconds > limits.max_walltime_seconds:
        yield PendingReason.WALLTIME_LIMIT, "max_walltime_seconds", job.walltime_seconds, limits.max_walltime_seconds
    if limits.max_running_jobs is not None and usage.jobs + 1 > limits.max_running_jobs:
        code = PendingReason.ACCOUNT_JOB_LIMIT if account else PendingReason.USER_JOB_LIMIT
        yield code, "max_running_jobs", usage.jobs, limits.max_running_jobs
    gpu_code = PendingReason.ACCOUNT_GPU_LIMIT if account else PendingReason.USER_GPU_LIMIT
    if limits.max_gpus is not None and usage.gpus + job.gpu_amount > limits.max_gpus + _EPSILON:
        yield gpu_code, "max_gpus", usage.gpus, limits.max_gpus
    if job.gpu_model:
        cap = limits.max_gpus_per_model.get(job.gpu_model)
        used = usage.by_model.get(job.gpu_model, 0.0)
        if cap is not None and used + job.gpu_amount > cap + _EPSILON:
            yield gpu_code, f"max_gpus_per_model[{job.gpu_model}]", used, cap


def _violations(limits: Limits | None, usage: _Usage, job: PendingJob, scope: str, name: str) -> Iterator[Blocker]:
    """The limits of one account or user that ``job`` would break, most basic first,
    each as a blocker with its sentence and figures."""
    if limits is None:
        return
    who = f"{scope} {name}"
    for code, limit, used, cap in _broken(limits, usage, job, scope == "account"):
        if code is PendingReason.WALLTIME_LIMIT:
            message = (
                f"{who} allows at most {duration_text(cap)} of walltime; "
                f"this job asks for {duration_text(job.walltime_seconds)}"
            )
            evidence = {"scope": scope, "name": name, "limit": limit, "cap": cap, "requested": job.walltime_seconds}
            yield Blocker(code, message, evidence)
            continue
        if limit == "max_running_jobs":
            message = f"{who} runs {usage.jobs} of its {cap} jobs at once"
        else:
            model = f" {job.gpu_model}" if limit != "max_gpus" else ""
            message = (
                f"{who} holds {gpu_count(used)} of its {cap}{model} GPUs; this job needs {gpu_count(job.gpu_amount)}"
            )
        evidence = {
            "scope": scope,
            "name": name,
            "limit": limit,
            "used": gpu_count(used),
            "cap": cap,
            "requested": gpu_count(job.gpu_amount),
        }
        yield Blocker(code, message, evidence)


#: Shares are floats: 0.1 + 0.2 must not exceed a limit of 0.3.
_EPSILON = 1e-9


def duration_text(seconds: int) -> str:
    """``5400`` -> ``"1 h 30 min"``, ``301`` -> ``"5 min 1 s"``: walltimes the way people
    read them in a sentence, exact (a refusal of 1 h 0 min 1 s must not read "1 h")."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts) or "0 s"
