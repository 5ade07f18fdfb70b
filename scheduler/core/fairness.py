"""How evenly accounts are treated: each job's bounded slowdown, each account's mean of
them, and Jain's index over the accounts. One home for these, read by the trace replay's
figures (``scheduler.replay.metrics``) and by the live fairness watch over the last day
(``scheduler.reads.fairness``), so a site's watch and its replays measure alike.

Pure: the standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

#: Bounded slowdown treats runs shorter than this as this long (the usual 10 s), so a
#: job that ran a second after a minute's wait does not read as 60 times slowed down.
SLOWDOWN_FLOOR_S = 10


def bounded_slowdown(jct_s: float, run_s: float) -> float:
    """``max(1, (wait + run) / max(run, 10 s))`` for a job that took ``jct_s`` from
    submission to its end and ran ``run_s`` of it: 1 for a job that never waited."""
    return max(1.0, jct_s / max(run_s, SLOWDOWN_FLOOR_S))


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 when all equal, 1/n at worst.

    An empty or all-zero input is perfectly fair (1.0).
    """
    xs = list(values)
    square_sum = sum(x * x for x in xs)
    if not xs or square_sum == 0:
        return 1.0
    return sum(xs) ** 2 / (len(xs) * square_sum)


@dataclass(frozen=True, slots=True)
class Fairness:
    """How evenly a set of jobs' accounts fared.

    - ``accounts``: each account's mean bounded slowdown over its jobs (a plain mean, not
      weighted by GPU-hours: a team of many short jobs that each wait long is starved
      however few GPU-hours they are), by name, in name order;
    - ``jain``: Jain's index over those means (1.0: alike; 1/n: one account took it all);
    - ``worst_account`` and ``worst_ratio``: the account with the highest mean and that
      mean over the mean slowdown of all the jobs (1.0 with no jobs);
    - ``jobs``: how many jobs were measured.
    """

    accounts: dict[str, float]
    jain: float
    worst_account: str | None
    worst_ratio: float
    jobs: int


def account_fairness(slowdowns: Iterable[tuple[str, float]]) -> Fairness:
    """The :class:`Fairness` of jobs given as ``(account, bounded slowdown)`` pairs."""
    by_account: dict[str, list[float]] = {}
    for account, slowdown in slowdowns:
        by_account.setdefault(account, []).append(slowdown)
    if not by_account:
        return Fairness({}, 1.0, None, 1.0, 0)
    means = {account: statistics.fmean(values) for account, values in sorted(by_account.items())}
    everyone = statistics.fmean([s for values in by_account.values() for s in values])
    worst = max(means, key=lambda account: (means[account], account))
    return Fairness(
        accounts=means,
        jain=jain_index(means.values()),
        worst_account=worst,
        worst_ratio=means[worst] / everyone,
        jobs=sum(len(values) for values in by_account.values()),
    )
