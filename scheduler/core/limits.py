"""Quota limits on what runs at once, per account (and its subtree) and per user.

An account's limit covers every job charged to it or to any account below it, as
Slurm's ``GrpTRES``/``GrpJobs`` do on an association; a user's limit covers all their
jobs. A job over a limit waits with a reason naming the limit and does not block the
queue: it is not waiting for resources, so it takes no reservation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from scheduler.core.types import Allocation, Blocker, Limits, NodeView, PendingJob, PendingReason, RunningJob, Start


@dataclass(slots=True)
class _Usage:
    gpus: float = 0.0  # a fractional job counts its share
    jobs: int = 0
    by_model: dict[str, float] = field(default_factory=lambda: defaultdict(float))


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
    """Running usage against limits, updated as a cycle commits starts."""

    def __init__(
        self,
        nodes: tuple[NodeView, ...],
        running: tuple[RunningJob, ...],
        account_limits: Mapping[str, Limits],
        user_limits: Mapping[str, Limits],
        account_parents: Mapping[str, str | None],
    ) -> None:
        self.account_limits = account_limits
        self.user_limits = user_limits
        self.parents = account_parents
        self.models = {(n.name, g.index): g.model for n in nodes for g in n.gpus}
        self.accounts: dict[str, _Usage] = defaultdict(_Usage)
        self.users: dict[str, _Usage] = defaultdict(_Usage)
        self._lineages: dict[str, list[str]] = {}
        #: Per account, whether it or an ancestor has a limit (most accounts have none).
        self._limited: dict[str, bool] = {}
        for job in running:
            self._charge(job.account, job.user, self._models_of(job.allocations))

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

    def _charge(self, account: str, user: str, models: list[tuple[str, float]], sign: int = 1) -> None:
        for usage in [*(self.accounts[a] for a in self.lineage(account)), self.users[user]]:
            usage.jobs += sign
            for model, amount in models:
                usage.gpus += sign * amount
                usage.by_model[model] += sign * amount

    def blocker(self, job: PendingJob) -> PendingReason | None:
        """The first limit this job would break by starting, on its request alone."""
        limited = self._limited.get(job.account)
        if limited is None:
            limited = self._limited[job.account] = any(a in self.account_limits for a in self.lineage(job.account))
        if not limited and job.user not in self.user_limits:
            return None
        first = next(self._violations(job), None)
        return first.code if first else None

    def blockers(self, job: PendingJob) -> list[Blocker]:
        """Every limit this job would break by starting, each with its figures."""
        return list(self._violations(job))

    def _violations(self, job: PendingJob) -> Iterator[Blocker]:
        for account in self.lineage(job.account):
            yield from _violations(self.account_limits.get(account), self.accounts[account], job, "account", account)
        yield from _violations(self.user_limits.get(job.user), self.users[job.user], job, "user", job.user)

    def blocker_after_placement(self, job: PendingJob, start: Start) -> PendingReason | None:
        """Per-model limits, once the placement says which models the job would use."""
        wanted: dict[str, float] = defaultdict(float)
        for model, amount in self._models_of(start.allocations):
            wanted[model] += amount
        checks = [
            *(
                (self.account_limits.get(a), self.accounts[a], PendingReason.ACCOUNT_GPU_LIMIT)
                for a in self.lineage(job.account)
            ),
            (self.user_limits.get(job.user), self.users[job.user], PendingReason.USER_GPU_LIMIT),
        ]
        for limits, usage, reason in checks:
            if limits is None:
                continue
            for model, count in wanted.items():
                cap = limits.max_gpus_per_model.get(model)
                if cap is not None and usage.by_model[model] + count > cap + _EPSILON:
                    return reason
        return None

    def commit(self, job: PendingJob, start: Start) -> None:
        self._charge(job.account, job.user, self._models_of(start.allocations))

    def release(self, job: RunningJob) -> None:
        """Uncharge a running job that this cycle evicts."""
        self._charge(job.account, job.user, self._models_of(job.allocations), sign=-1)


def _violations(limits: Limits | None, usage: _Usage, job: PendingJob, scope: str, name: str) -> Iterator[Blocker]:
    """The limits of one account or user that ``job`` would break, most basic first."""
    if limits is None:
        return
    account = scope == "account"
    who = f"{scope} {name}"

    def over(limit: str, used: float, cap: int, code: PendingReason, message: str) -> Blocker:
        evidence = {
            "scope": scope,
            "name": name,
            "limit": limit,
            "used": gpu_count(used),
            "cap": cap,
            "requested": gpu_count(job.gpu_amount),
        }
        return Blocker(code, message, evidence)

    if limits.max_walltime_seconds is not None and job.walltime_seconds > limits.max_walltime_seconds:
        yield Blocker(
            PendingReason.WALLTIME_LIMIT,
            f"{who} allows at most {duration_text(limits.max_walltime_seconds)} of walltime; "
            f"this job asks for {duration_text(job.walltime_seconds)}",
            {
                "scope": scope,
                "name": name,
                "limit": "max_walltime_seconds",
                "cap": limits.max_walltime_seconds,
                "requested": job.walltime_seconds,
            },
        )
    if limits.max_running_jobs is not None and usage.jobs + 1 > limits.max_running_jobs:
        code = PendingReason.ACCOUNT_JOB_LIMIT if account else PendingReason.USER_JOB_LIMIT
        message = f"{who} runs {usage.jobs} of its {limits.max_running_jobs} jobs at once"
        yield over("max_running_jobs", usage.jobs, limits.max_running_jobs, code, message)
    gpu_code = PendingReason.ACCOUNT_GPU_LIMIT if account else PendingReason.USER_GPU_LIMIT
    if limits.max_gpus is not None and usage.gpus + job.gpu_amount > limits.max_gpus + _EPSILON:
        message = (
            f"{who} holds {gpu_count(usage.gpus)} of its {limits.max_gpus} GPUs; "
            f"this job needs {gpu_count(job.gpu_amount)}"
        )
        yield over("max_gpus", usage.gpus, limits.max_gpus, gpu_code, message)
    if job.gpu_model:
        cap = limits.max_gpus_per_model.get(job.gpu_model)
        used = usage.by_model[job.gpu_model]
        if cap is not None and used + job.gpu_amount > cap + _EPSILON:
            message = (
                f"{who} holds {gpu_count(used)} of its {cap} {job.gpu_model} GPUs; "
                f"this job needs {gpu_count(job.gpu_amount)}"
            )
            yield over(f"max_gpus_per_model[{job.gpu_model}]", used, cap, gpu_code, message)


#: Shares are floats: 0.1 + 0.2 must not exceed a limit of 0.3.
_EPSILON = 1e-9


def gpu_count(amount: float) -> int | float:
    """A GPU amount for people and JSON: ``4`` for whole GPUs, ``2.5`` with shares."""
    rounded = round(amount, 3)
    return int(rounded) if rounded == int(rounded) else rounded


def duration_text(seconds: int) -> str:
    """``5400`` -> ``"1 h 30 min"``: walltimes the way people read them."""
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    if hours and minutes:
        return f"{hours} h {minutes} min"
    if hours:
        return f"{hours} h"
    return f"{minutes} min" if minutes else f"{seconds} s"
