"""Quota limits on what runs at once, per account (and its subtree) and per user.

An account's limit covers every job charged to it or to any account below it, as
Slurm's ``GrpTRES``/``GrpJobs`` do on an association; a user's limit covers all their
jobs. A job over a limit waits with a reason naming the limit and does not block the
queue: it is not waiting for resources, so it takes no reservation.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.core.types import Allocation, Limits, NodeView, PendingJob, PendingReason, RunningJob, Start


@dataclass(slots=True)
class _Usage:
    gpus: int = 0
    jobs: int = 0
    by_model: dict[str, int] = field(default_factory=lambda: defaultdict(int))


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

    def _models_of(self, allocations: tuple[Allocation, ...]) -> list[str]:
        return [self.models.get((a.node, i), "") for a in allocations for i in a.gpu_indices]

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

    def _charge(self, account: str, user: str, models: list[str]) -> None:
        for usage in [*(self.accounts[a] for a in self.lineage(account)), self.users[user]]:
            usage.jobs += 1
            usage.gpus += len(models)
            for model in models:
                usage.by_model[model] += 1

    def blocker(self, job: PendingJob) -> PendingReason | None:
        """The first limit this job would break by starting, on its request alone."""
        limited = self._limited.get(job.account)
        if limited is None:
            limited = self._limited[job.account] = any(a in self.account_limits for a in self.lineage(job.account))
        if not limited and job.user not in self.user_limits:
            return None
        for account in self.lineage(job.account) if limited else ():
            reason = _over(self.account_limits.get(account), self.accounts[account], job, account=True)
            if reason:
                return reason
        return _over(self.user_limits.get(job.user), self.users[job.user], job, account=False)

    def blocker_after_placement(self, job: PendingJob, start: Start) -> PendingReason | None:
        """Per-model limits, once the placement says which models the job would use."""
        models = self._models_of(start.allocations)
        wanted: dict[str, int] = defaultdict(int)
        for model in models:
            wanted[model] += 1
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
                if cap is not None and usage.by_model[model] + count > cap:
                    return reason
        return None

    def commit(self, job: PendingJob, start: Start) -> None:
        self._charge(job.account, job.user, self._models_of(start.allocations))


def _over(limits: Limits | None, usage: _Usage, job: PendingJob, *, account: bool) -> PendingReason | None:
    if limits is None:
        return None
    if limits.max_running_jobs is not None and usage.jobs + 1 > limits.max_running_jobs:
        return PendingReason.ACCOUNT_JOB_LIMIT if account else PendingReason.USER_JOB_LIMIT
    if limits.max_gpus is not None and usage.gpus + job.gpus > limits.max_gpus:
        return PendingReason.ACCOUNT_GPU_LIMIT if account else PendingReason.USER_GPU_LIMIT
    if job.gpu_model:
        cap = limits.max_gpus_per_model.get(job.gpu_model)
        if cap is not None and usage.by_model[job.gpu_model] + job.gpus > cap:
            return PendingReason.ACCOUNT_GPU_LIMIT if account else PendingReason.USER_GPU_LIMIT
    return None
