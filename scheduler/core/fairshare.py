"""Fair-share: decayed usage accounting and Slurm's Fair Tree algorithm, as pure functions.

Two halves, both plain data in and plain data out:

* **Usage accounting.** Usage is billing-weighted GPU-seconds: ``gpus x seconds x
  billing_weight[gpu_model] x qos_usage_factor[qos]`` (both default 1.0), decayed
  exponentially with a half-life (default 7 days, Slurm's ``PriorityDecayHalfLife``).
  A stored usage map is brought forward with :func:`decay_usage_map` and new work is
  added with :func:`charge`, which integrates the decay over the charged interval.
  One tick of the scheduler is therefore::

      usage = decay_usage_map(stored, stored_as_of, now, policy.half_life)
      for interval in running_intervals(snapshot.running, snapshot.nodes, since=stored_as_of):
          usage = charge(usage, interval, now, policy)
      # plus intervals of jobs that finished since stored_as_of, also with since=stored_as_of

  and the result does not depend on how often it runs (see :func:`charge`).

* **Fair Tree** (Slurm's default fair-share algorithm since 19.05; see
  https://slurm.schedmd.com/fair_tree.html and ``fair_tree.c``). Accounts form a tree,
  users hang under accounts as leaves. At every level an association's Level Fairshare
  is ``LF = S / U`` with ``S`` its shares over its siblings' and ``U`` its (subtree) usage
  over its siblings'. Siblings are sorted by LF, highest first, the tree is walked depth
  first and users are ranked in the order they are met; a user's factor is
  ``rank / number_of_users``. So if sibling accounts A and B have ``LF(A) > LF(B)``,
  every user under A outranks every user under B, whatever their own usage.

Where this differs from Slurm (``fair_tree.c`` as of 2023), on purpose:

* Tied sibling accounts have their children merged, as the documentation says. Slurm's
  ``_count_tied_accounts`` stops at the first sibling that is an account, so in practice
  it never merges: it ranks the tied accounts one after the other.
* An association with no effective shares gets factor 0.0 and is not counted in ``N``;
  Slurm gives it LF 0, which only sorts it last among its siblings.
* LF is compared exactly (fractions) rather than in ``long double``.

The module imports nothing outside the standard library and ``scheduler.core``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import TypeVar

from scheduler.core.types import Allocation, GpuView, NodeView, RunningJob

#: ``(account, user)``: the key of a user association and of every per-user map here.
UsageKey = tuple[str, str]

#: Slurm's default ``PriorityDecayHalfLife``.
DEFAULT_HALF_LIFE = timedelta(days=7)

_LN2 = math.log(2.0)

K = TypeVar("K")


# --- Usage accounting -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UsagePolicy:
    """How work turns into fair-share usage.

    ``billing_weights`` maps a GPU model to what one GPU-second of it costs (Slurm's
    ``TRESBillingWeights``); ``qos_usage_factors`` maps a QOS to a multiplier (Slurm's QOS
    ``UsageFactor``). Models and QOS not listed cost 1.0. Raises ``ValueError`` on a
    half-life that is not positive or on a negative weight or factor.
    """

    half_life: timedelta = DEFAULT_HALF_LIFE
    billing_weights: Mapping[str, float] = field(default_factory=dict)
    qos_usage_factors: Mapping[str, float] = field(default_factory=dict)
    #: What sharing a GPU costs, charged on each share: by sharing mode
    #: (``"time-slicing"``, ``"mps"``) or for one model as ``"MODEL/mode"`` (which wins).
    #: A share ``s`` of such a GPU is charged ``s * (1 + overhead)`` GPUs. Placement does
    #: not count it (a share takes its fraction of the GPU): time-slicing's context
    #: switches and MPS's server slow the jobs down, which is what is charged here.
    sharing_overheads: Mapping[str, float] = field(default_factory=dict)

    def overhead(self, gpu: GpuView | None) -> float:
        """The overhead charged on a share of ``gpu`` (0 for a GPU not in a sharing mode)."""
        if gpu is None or not gpu.sharing:
            return 0.0
        table = self.sharing_overheads
        return table.get(f"{gpu.model}/{gpu.sharing}", table.get(gpu.sharing, 0.0))

    def gpus_charged(self, allocation: Allocation, gpu: GpuView | None) -> float:
        """What holding one GPU of ``allocation`` is charged, in GPUs: 1 for a whole GPU,
        a share plus the overhead of its GPU's sharing mode and model."""
        if allocation.gpu_share:
            return allocation.gpu_share * (1 + self.overhead(gpu))
        return 1.0

    def __post_init__(self) -> None:
        if self.half_life <= timedelta(0):
            raise ValueError(f"half_life must be positive, got {self.half_life}")
        tables = (
            ("billing weight", self.billing_weights),
            ("QOS usage factor", self.qos_usage_factors),
            ("sharing overhead", self.sharing_overheads),
        )
        for name, table in tables:
            for key, value in table.items():
                if not value >= 0.0 or math.isinf(value):  # `not >=` also catches NaN
                    raise ValueError(f"{name} for {key!r} must be a finite number >= 0, got {value!r}")

    def rate(self, gpus: float, gpu_model: str = "", qos: str = "") -> float:
        """Usage accrued per second by ``gpus`` GPUs of ``gpu_model`` under ``qos``."""
        return gpus * self.billing_weights.get(gpu_model, 1.0) * self.qos_usage_factors.get(qos, 1.0)


def decay_factor(elapsed_seconds: float, half_life_seconds: float) -> float:
    """``0.5 ** (elapsed / half_life)``: what one unit of usage is worth after ``elapsed``.

    Raises ``ValueError`` if ``half_life_seconds`` is not positive or ``elapsed_seconds``
    is negative (usage never grows back).
    """
    if not half_life_seconds > 0.0:
        raise ValueError(f"half-life must be positive, got {half_life_seconds!r}")
    if elapsed_seconds < 0.0:
        raise ValueError(f"cannot decay backwards in time (elapsed {elapsed_seconds!r} s)")
    return math.pow(0.5, elapsed_seconds / half_life_seconds)


def decay_usage(usage: float, t0: datetime, t1: datetime, half_life: timedelta = DEFAULT_HALF_LIFE) -> float:
    """Usage accumulated as of ``t0``, seen from ``t1``: ``usage * 0.5 ** ((t1 - t0) / half_life)``.

    Decaying t0 -> t1 -> t2 equals decaying t0 -> t2. Raises ``ValueError`` if ``t1 < t0``
    or the half-life is not positive.
    """
    return usage * decay_factor((t1 - t0).total_seconds(), half_life.total_seconds())


def decay_usage_map(
    usage: Mapping[K, float], t0: datetime, t1: datetime, half_life: timedelta = DEFAULT_HALF_LIFE
) -> dict[K, float]:
    """:func:`decay_usage` applied to every value of a map; returns a new dict."""
    factor = decay_factor((t1 - t0).total_seconds(), half_life.total_seconds())
    return {key: value * factor for key, value in usage.items()}


@dataclass(frozen=True, slots=True)
class UsageInterval:
    """``gpus`` GPUs of one model held by one association from ``start`` to ``end``.

    ``end`` is ``None`` while the job still runs (it is charged up to ``now``).
    """

    account: str
    user: str
    start: datetime
    end: datetime | None
    gpus: float
    gpu_model: str = ""
    qos: str = ""

    @property
    def key(self) -> UsageKey:
        return (self.account, self.user)


def accrued_usage(interval: UsageInterval, now: datetime, policy: UsagePolicy, since: datetime | None = None) -> float:
    """Decayed usage, as of ``now``, of the part of ``interval`` in ``[since, now]``.

    Usage accrues continuously at rate ``r = policy.rate(gpus, model, qos)`` and each bit
    decays from the moment it accrued, so for the charged span ``[a, b]`` (``a = max(start,
    since)``, ``b = min(end or now, now)``) with half-life ``h`` seconds::

        usage = integral_a^b r * 0.5 ** ((now - t) / h) dt
              = r * (h / ln 2) * (0.5 ** ((now - b) / h) - 0.5 ** ((now - a) / h))

    which tends to ``r * (b - a)`` when ``h`` is large. It is computed with ``expm1`` so
    short spans lose no precision. An empty span (``b <= a``) accrues 0.0.
    """
    a = interval.start if since is None else max(interval.start, since)
    b = now if interval.end is None else min(interval.end, now)
    span = (b - a).total_seconds()
    if span <= 0.0 or interval.gpus <= 0:
        return 0.0
    rate = policy.rate(interval.gpus, interval.gpu_model, interval.qos)
    h = policy.half_life.total_seconds()
    tail = decay_factor((now - b).total_seconds(), h)  # decay since the span ended
    return rate * (h / _LN2) * tail * -math.expm1(-_LN2 * span / h)


def charge(
    usage: Mapping[UsageKey, float],
    interval: UsageInterval,
    now: datetime,
    policy: UsagePolicy,
    since: datetime | None = None,
) -> dict[UsageKey, float]:
    """A new usage map (values as of ``now``) with ``interval`` charged to its association.

    ``usage`` must already be decayed to ``now``. ``since`` clips the interval so that a
    periodic tick charges only what accrued since the previous one; charging ``[a, c]`` at
    once equals charging ``[a, b]``, decaying to ``c`` and charging ``[b, c]``.
    The input map is not modified.
    """
    updated = dict(usage)
    amount = accrued_usage(interval, now, policy, since)
    if amount > 0.0:
        updated[interval.key] = updated.get(interval.key, 0.0) + amount
    return updated


def usage_as_of(intervals: Iterable[UsageInterval], now: datetime, policy: UsagePolicy) -> dict[UsageKey, float]:
    """Decayed usage of every association as of ``now``, from its whole history."""
    usage: dict[UsageKey, float] = {}
    for interval in intervals:
        amount = accrued_usage(interval, now, policy)
        if amount > 0.0:
            usage[interval.key] = usage.get(interval.key, 0.0) + amount
    return usage


def gpu_map(nodes: Iterable[NodeView]) -> dict[tuple[str, int], GpuView]:
    """Every GPU by (node name, index)."""
    return {(n.name, g.index): g for n in nodes for g in n.gpus}


def running_intervals(
    jobs: Iterable[RunningJob],
    nodes: Iterable[NodeView],
    since: datetime | None = None,
    policy: UsagePolicy | None = None,
) -> list[UsageInterval]:
    """Open intervals (``end=None``) for running jobs, one per job and GPU model held.

    The GPU model comes from the node's GPU list. Jobs not started yet and allocations
    with no GPUs are skipped; GPUs on nodes missing from ``nodes`` count as model ``""``.
    ``since`` moves each start forward (the start of the span a tick should charge).
    """
    gpu_at = gpu_map(nodes)
    policy = policy or UsagePolicy()
    intervals: list[UsageInterval] = []
    for job in jobs:
        if job.started_at is None:
            continue
        start = job.started_at if since is None else max(job.started_at, since)
        per_model: dict[str, float] = {}
        for allocation in job.allocations:
            for index in allocation.gpu_indices:
                gpu = gpu_at.get((allocation.node, index))
                model = gpu.model if gpu is not None else ""
                per_model[model] = per_model.get(model, 0.0) + policy.gpus_charged(allocation, gpu)
        for model, gpus in sorted(per_model.items()):
            intervals.append(UsageInterval(job.account, job.user, start, None, gpus, model, job.qos))
    return intervals


# --- The account tree -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccountNode:
    """An account: ``parent`` is another account's name, or ``None`` for a top-level one."""

    name: str
    parent: str | None = None
    shares: int = 1


@dataclass(frozen=True, slots=True)
class UserAssociation:
    """A user's membership of an account, with the user's shares inside that account."""

    account: str
    user: str
    shares: int = 1

    @property
    def key(self) -> UsageKey:
        return (self.account, self.user)


@dataclass(frozen=True, slots=True)
class FairShareTree:
    """Accounts and user associations, validated; build it with :meth:`build`.

    Children of an account are its sub-accounts and its user associations (Slurm allows
    both under one account). An implicit root holds the top-level accounts. Children are
    kept in name order so every result is deterministic.
    """

    accounts: tuple[AccountNode, ...]
    users: tuple[UserAssociation, ...]
    sub_accounts: Mapping[str | None, tuple[AccountNode, ...]] = field(init=False, repr=False, compare=False)
    account_users: Mapping[str, tuple[UserAssociation, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, AccountNode] = {}
        for account in self.accounts:
            if account.name in by_name:
                raise ValueError(f"account {account.name!r} is defined twice")
            if account.shares < 0:
                raise ValueError(f"account {account.name!r} has negative shares ({account.shares})")
            by_name[account.name] = account
        for account in self.accounts:
            seen = {account.name}
            parent = account.parent
            while parent is not None:
                if parent not in by_name:
                    raise ValueError(f"account {account.name!r} has unknown parent {parent!r}")
                if parent in seen:
                    raise ValueError(f"account {account.name!r} is part of a cycle")
                seen.add(parent)
                parent = by_name[parent].parent
        keys: set[UsageKey] = set()
        for association in self.users:
            if association.account not in by_name:
                raise ValueError(f"user {association.user!r} is in unknown account {association.account!r}")
            if association.key in keys:
                raise ValueError(f"user {association.user!r} is in account {association.account!r} twice")
            if association.shares < 0:
                raise ValueError(f"user {association.user!r} has negative shares ({association.shares})")
            keys.add(association.key)

        sub_accounts: dict[str | None, list[AccountNode]] = {}
        for account in sorted(self.accounts, key=lambda a: a.name):
            sub_accounts.setdefault(account.parent, []).append(account)
        account_users: dict[str, list[UserAssociation]] = {}
        for association in sorted(self.users, key=lambda u: u.user):
            account_users.setdefault(association.account, []).append(association)
        object.__setattr__(self, "sub_accounts", {k: tuple(v) for k, v in sub_accounts.items()})
        object.__setattr__(self, "account_users", {k: tuple(v) for k, v in account_users.items()})

    @classmethod
    def build(
        cls,
        accounts: Iterable[AccountNode],
        users: Iterable[UserAssociation | tuple[str, str] | tuple[str, str, int]],
    ) -> FairShareTree:
        """A tree from accounts and ``(account, user[, shares])`` associations.

        Raises ``ValueError`` on a duplicate account or association, an unknown parent or
        account, a cycle, or negative shares.
        """
        associations = tuple(u if isinstance(u, UserAssociation) else UserAssociation(*u) for u in users)
        return cls(tuple(accounts), associations)


# --- Fair Tree --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One line of ``sshare -l``: an account (``user == ""``) or a user association.

    ``norm_shares_level`` is Fair Tree's S (shares over siblings' shares);
    ``norm_shares`` is Slurm's NormShares, the product of S down the tree (the fraction
    of the whole machine the association is entitled to). ``effective_usage`` is Fair
    Tree's U (usage over siblings' usage); ``norm_usage`` is usage over the whole tree's.
    ``level_fs`` is S / U: ``inf`` with no usage, 0.0 with no shares. ``fairshare`` and
    ``rank`` are set on user rows only (``None`` on account rows); ``rank`` is ``None``
    for a user with no effective shares, whose factor is 0.0.
    """

    account: str
    user: str
    depth: int
    raw_shares: int
    norm_shares_level: float
    norm_shares: float
    raw_usage: float
    effective_usage: float
    norm_usage: float
    level_fs: float
    fairshare: float | None
    rank: int | None


@dataclass(eq=False, slots=True)
class _Assoc:
    """Working state for one association during a Fair Tree pass."""

    account: str
    user: str  # "" for an account
    shares: int
    depth: int
    children: list[_Assoc] = field(default_factory=list)
    usage: Fraction = Fraction(0)  # own usage for a user, subtree usage for an account
    s: Fraction = Fraction(0)
    u: Fraction = Fraction(0)
    norm_shares: Fraction = Fraction(0)
    level_fs: Fraction | None = None  # None is infinity (no usage, some shares)
    rank: int | None = None

    @property
    def is_user(self) -> bool:
        return bool(self.user)

    def sort_key(self) -> tuple[int, Fraction, int, str, str]:
        """Highest LF first; on equal LF users before accounts (as ``_cmp_level_fs``)."""
        if self.level_fs is None:
            return (0, Fraction(0), 0 if self.is_user else 1, self.account, self.user)
        return (1, -self.level_fs, 0 if self.is_user else 1, self.account, self.user)


@dataclass(slots=True)
class _Ranking:
    """``rank``/``rnt`` of ``_calc_tree_fs``: the current rank and the rank without ties."""

    rank: int
    rank_no_ties: int


def fair_tree_factors(tree: FairShareTree, usage: Mapping[UsageKey, float]) -> dict[UsageKey, float]:
    """The Fair Tree fair-share factor of every user association, in ``[0, 1]``.

    ``usage`` maps ``(account, user)`` to decayed usage (see :func:`charge`); missing
    associations have none, keys not in the tree are ignored. With ``N`` users that have
    shares, the highest ranked user gets 1.0 and the lowest ``1/N``; tied users share a
    rank and the next user is ranked as if there were no tie (1.0, 1.0, 1/3 for three
    users, two tied). A user with no effective shares (its own or an ancestor account's
    shares are 0) is not ranked and gets 0.0. Raises ``ValueError`` on negative or
    non-finite usage. See :func:`sshare` for the ranking rules.

    The last answer is remembered (for the same tree object and equal usage): a
    replay calls this every cycle while usage changes every few minutes. Callers must
    not modify the returned dict.
    """
    last = _last_factors
    if last is not None and last[0] is tree and last[1] == usage:
        return last[2]
    factors = {
        (row.account, row.user): row.fairshare for row in sshare(tree, usage) if row.user and row.fairshare is not None
    }
    globals()["_last_factors"] = (tree, dict(usage), factors)
    return factors


_last_factors: tuple[FairShareTree, dict[UsageKey, float], dict[UsageKey, float]] | None = None


def sshare(tree: FairShareTree, usage: Mapping[UsageKey, float]) -> list[ShareRow]:
    """The ``sshare -l`` report: one row per account and user association, in tree order.

    Tree order is depth first from the top-level accounts; under an account come its
    users (by name), then its sub-accounts (by name).

    The Fair Tree pass, as Slurm's ``_calc_tree_fs``:

    1. Usage of an account is the sum over its subtree. For each association, ``S`` is
       its shares over its siblings' total and ``U`` its usage over its siblings' total
       (0 when the siblings have none); ``LF = S / U``, infinity when ``U == 0 < S``, 0.0
       when ``S == 0``. LF is computed with exact fractions, so ties are real ties and
       never an artefact of rounding.
    2. Starting at the root, siblings are sorted by LF, highest first; on equal LF users
       come before accounts. Associations with ``S == 0`` (and so their subtrees) are
       left out of the ranking.
    3. Siblings are visited in that order. A user gets the current rank, which starts at
       ``N`` and drops by one per user met. Ties, as the Fair Tree documentation states:
       sibling users with equal LF share a rank; sibling accounts with equal LF have
       their children merged and sorted together (each child keeps the LF computed among
       its own siblings) before descending; an account whose LF equals a preceding
       sibling user's makes its highest ranked user share that user's rank.
    4. A user's factor is ``rank / N``.

    Raises ``ValueError`` on negative or non-finite usage.
    """
    roots = _build(tree, usage)
    total = sum((a.usage for a in roots), Fraction(0))
    _level(roots, Fraction(1))
    rankable = _count_rankable(roots)
    _rank(roots, _Ranking(rankable, rankable), tied_with_previous=False)
    rows: list[ShareRow] = []
    _report(roots, total, rankable, rows)
    return rows


def _build(tree: FairShareTree, usage: Mapping[UsageKey, float]) -> list[_Assoc]:
    for key, value in usage.items():
        if not value >= 0.0 or math.isinf(value):
            raise ValueError(f"usage of {key!r} must be a finite number >= 0, got {value!r}")

    def account_node(account: AccountNode, depth: int) -> _Assoc:
        node = _Assoc(account.name, "", account.shares, depth)
        for association in tree.account_users.get(account.name, ()):
            own = Fraction(usage.get(association.key, 0.0))
            node.children.append(_Assoc(account.name, association.user, association.shares, depth + 1, usage=own))
        node.children.extend(account_node(sub, depth + 1) for sub in tree.sub_accounts.get(account.name, ()))
        node.usage = sum((c.usage for c in node.children), Fraction(0))
        return node

    return [account_node(account, 0) for account in tree.sub_accounts.get(None, ())]


def _level(siblings: list[_Assoc], parent_norm_shares: Fraction) -> None:
    """Set S, U, LF and NormShares of ``siblings`` and, recursively, of their subtrees."""
    share_total = sum(a.shares for a in siblings)
    usage_total = sum((a.usage for a in siblings), Fraction(0))
    for assoc in siblings:
        assoc.s = Fraction(assoc.shares, share_total) if share_total else Fraction(0)
        assoc.u = assoc.usage / usage_total if usage_total else Fraction(0)
        assoc.norm_shares = parent_norm_shares * assoc.s
        if assoc.s == 0:
            assoc.level_fs = Fraction(0)
        elif assoc.u == 0:
            assoc.level_fs = None  # infinity: shares and no usage
        else:
            assoc.level_fs = assoc.s / assoc.u
        _level(assoc.children, assoc.norm_shares)


def _count_rankable(siblings: list[_Assoc]) -> int:
    count = 0
    for assoc in siblings:
        if assoc.s == 0:
            continue
        count += 1 if assoc.is_user else _count_rankable(assoc.children)
    return count


def _rank(siblings: list[_Assoc], ranking: _Ranking, tied_with_previous: bool) -> None:
    """Step 3 of :func:`sshare` over one (possibly merged) list of siblings."""
    ordered = sorted((a for a in siblings if a.s > 0), key=_Assoc.sort_key)
    previous_lf: Fraction | None = None  # LF of the sibling visited last (None: infinity)
    i = 0
    while i < len(ordered):
        assoc = ordered[i]
        # The first sibling inherits the tie of the account it descends from.
        tied = tied_with_previous if i == 0 else assoc.level_fs == previous_lf
        if assoc.is_user:
            if not tied:
                ranking.rank = ranking.rank_no_ties
            assoc.rank = ranking.rank
            ranking.rank_no_ties -= 1
            i += 1
        else:
            # Accounts with this LF are adjacent (users with it sort before them): merge.
            end = i + 1
            while end < len(ordered) and not ordered[end].is_user and ordered[end].level_fs == assoc.level_fs:
                end += 1
            merged = [child for account in ordered[i:end] for child in account.children]
            _rank(merged, ranking, tied_with_previous=tied)
            i = end
        previous_lf = assoc.level_fs


def _report(siblings: list[_Assoc], total: Fraction, rankable: int, rows: list[ShareRow]) -> None:
    for assoc in sorted(siblings, key=lambda a: (not a.is_user, a.account if not a.is_user else a.user)):
        fairshare: float | None = None
        if assoc.is_user:
            fairshare = assoc.rank / rankable if assoc.rank is not None else 0.0
        rows.append(
            ShareRow(
                account=assoc.account,
                user=assoc.user,
                depth=assoc.depth,
                raw_shares=assoc.shares,
                norm_shares_level=float(assoc.s),
                norm_shares=float(assoc.norm_shares),
                raw_usage=float(assoc.usage),
                effective_usage=float(assoc.u),
                norm_usage=float(assoc.usage / total) if total else 0.0,
                level_fs=math.inf if assoc.level_fs is None else _to_float(assoc.level_fs),
                fairshare=fairshare,
                rank=assoc.rank,
            )
        )
        if not assoc.is_user:
            _report(assoc.children, total, rankable, rows)


def _to_float(value: Fraction) -> float:
    """``float(value)``, saturating at infinity (tiny usage next to large can overflow LF)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf
