"""Guaranteed (nominal) GPU quotas with borrowing and reclaim, as Kueue's cohorts.

An account may hold a *guarantee*: that many GPUs are its own whenever it needs them.
While it does not, others may run on them: use beyond a guarantee is *borrowed* (an
account without a guarantee only ever borrows, once any account holds one). A
*borrowing limit* caps how far beyond its guarantee an account may go. When an account
below its guarantee has a job that does not fit, it *reclaims*: jobs running on
borrowed capacity are evicted for it (see ``scheduler.core.cycle``).

Which running jobs are the borrowed ones is decided afresh every cycle, oldest first:
an account's oldest jobs fill its guarantee, its newest run on borrowed capacity. So
the jobs reclaimed first are the ones that lose the least work, and a job that was
borrowing becomes guaranteed as older jobs of its account end. A guarantee covers the
account's whole subtree, as an account's other limits do; a job is within guarantee
only if every guaranteed account above it has room.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone

from scheduler.core.hours import gpu_count
from scheduler.core.types import Blocker, Limits, PendingJob, PendingReason, RunningJob, Start

_EPOCH_KEY = datetime.min.isoformat()


class GuaranteeBook:
    """GPUs held per account subtree against guarantees, updated as a cycle commits."""

    def __init__(
        self,
        running: Iterable[RunningJob],
        account_limits: Mapping[str, Limits],
        account_parents: Mapping[str, str | None],
    ) -> None:
        self.guarantees = {
            a: lim.guaranteed_gpus for a, lim in account_limits.items() if lim.guaranteed_gpus is not None
        }
        self.borrowing_limits = {
            a: lim.borrowing_limit_gpus
            for a, lim in account_limits.items()
            if lim.guaranteed_gpus is not None and lim.borrowing_limit_gpus is not None
        }
        self.parents = account_parents
        self.held: dict[str, float] = defaultdict(float)
        self.borrowed: set[int] = set()
        self._lineages: dict[str, tuple[str, ...]] = {}
        self._chains: dict[str, tuple[tuple[str, ...], list[str]]] = {}  # account -> lineage, guaranteed levels
        #: ``within_guarantee`` answers per (account, GPUs), until what is held changes.
        self._within: dict[tuple[str, float], bool] = {}
        if not self.guarantees:
            return  # nothing is ever borrowed, and what accounts hold is read against guarantees only
        # _charge inlined: a replay builds a book over every running job each cycle
        held, guarantees, chains, borrowed = self.held, self.guarantees, self._chains, self.borrowed
        for job in _oldest_first(running):
            chain = chains.get(job.account)
            if chain is None:
                chain = chains[job.account] = (self._lineage(job.account), self._guaranteed_levels(job.account))
            lineage, levels = chain
            allocations = job.allocations
            gpus = allocations[0].gpu_amount if len(allocations) == 1 else job.gpu_amount
            for level in lineage:
                held[level] += gpus
            over = not levels
            for level in levels:
                if held[level] > guarantees[level] + 1e-9:
                    over = True
            if over:
                borrowed.add(job.id)

    def copy(self) -> GuaranteeBook:
        """An independent book with the same figures (the caches of the tree are shared)."""
        clone = GuaranteeBook((), {}, self.parents)
        clone.guarantees, clone.borrowing_limits = self.guarantees, self.borrowing_limits
        clone.held = defaultdict(float, self.held)
        clone.borrowed = set(self.borrowed)
        clone._lineages, clone._chains = self._lineages, self._chains
        return clone

    @property
    def active(self) -> bool:
        """Whether any account holds a guarantee (otherwise nothing is ever borrowed)."""
        return bool(self.guarantees)

    def _lineage(self, account: str) -> tuple[str, ...]:
        chain = self._lineages.get(account)
        if chain is None:
            found: list[str] = []
            current: str | None = account
            while current and current not in found:
                found.append(current)
                current = self.parents.get(current)
            chain = self._lineages[account] = tuple(found)
        return chain

    def _guaranteed_levels(self, account: str) -> list[str]:
        return [a for a in self._lineage(account) if a in self.guarantees]

    def within_guarantee(self, job: PendingJob) -> bool:
        """Whether ``job`` would run on guaranteed capacity: every guaranteed account
        above it (at least one) has room for all its GPUs."""
        key = (job.account, job.gpu_amount)
        answer = self._within.get(key)
        if answer is None:
            levels = self._guaranteed_levels(job.account)
            answer = self._within[key] = bool(levels) and all(
                self.held[a] + job.gpu_amount <= self.guarantees[a] + 1e-9 for a in levels
            )
        return answer

    def blocker(self, job: PendingJob) -> Blocker | None:
        """The borrowing limit ``job`` would break by starting, with its figures."""
        for account in self._guaranteed_levels(job.account):
            limit = self.borrowing_limits.get(account)
            if limit is None:
                continue
            guarantee, held = self.guarantees[account], self.held[account]
            if held + job.gpu_amount > guarantee + limit + 1e-9:
                return Blocker(
                    PendingReason.BORROW_LIMIT,
                    f"account {account} holds {gpu_count(held)} GPUs: its guarantee of {guarantee} plus at most "
                    f"{limit} borrowed; this job needs {gpu_count(job.gpu_amount)}",
                    {
                        "scope": "account",
                        "name": account,
                        "limit": "borrowing_limit_gpus",
                        "used": gpu_count(held),
                        "guaranteed": guarantee,
                        "cap": guarantee + limit,
                        "requested": gpu_count(job.gpu_amount),
                    },
                )
        return None

    def reclaimable(self, job: PendingJob, running: Iterable[RunningJob]) -> list[RunningJob]:
        """Running jobs ``job`` may evict to get its guarantee back: borrowed jobs of
        accounts outside every guaranteed account above it."""
        if not self.within_guarantee(job):
            return []
        own = set(self._guaranteed_levels(job.account))
        return [r for r in running if r.id in self.borrowed and not own.intersection(self._lineage(r.account))]

    def commit(self, job: PendingJob, start: Start) -> bool:
        """Charge a started job; returns whether it runs on borrowed capacity."""
        borrowed = self._charge(job.account, sum(a.gpu_amount for a in start.allocations))
        if borrowed:
            self.borrowed.add(job.id)
        return borrowed

    def release(self, job: RunningJob) -> None:
        """Uncharge an evicted job."""
        for account in self._lineage(job.account):
            self.held[account] -= job.gpu_amount
        self.borrowed.discard(job.id)
        self._within.clear()

    def _charge(self, account: str, gpus: float) -> bool:
        chains = self._chains.get(account)
        if chains is None:
            chains = self._chains[account] = (self._lineage(account), self._guaranteed_levels(account))
        lineage, levels = chains
        held = self.held
        self._within.clear()
        for level in lineage:
            held[level] += gpus
        borrowed = not levels
        for level in levels:
            if held[level] > self.guarantees[level] + 1e-9:
                borrowed = True
        return borrowed and bool(self.guarantees)


def _oldest_first(running: Iterable[RunningJob]) -> list[RunningJob]:
    """Running jobs by start (unknown first), then id: the order guarantees fill in.

    The order is that of ``started_at.isoformat()``, which is chronological when every
    start is in one fixed-offset zone (or all are naive); then the datetimes themselves are compared,
    which is much cheaper than formatting every start every cycle.
    """
    jobs = list(running)
    zones = {r.started_at.tzinfo for r in jobs if r.started_at is not None}
    if len(zones) <= 1 and all(zone is None or isinstance(zone, timezone) for zone in zones):
        return sorted(jobs, key=lambda r: (r.started_at is not None, r.started_at, r.id))
    return sorted(jobs, key=lambda r: (r.started_at.isoformat() if r.started_at else _EPOCH_KEY, r.id))
