"""What switching the site's scheduling policy to another (``stretch-las-preempt``, say)
would have changed for fairness, measured on the site's own recent history: the jobs
that ran in the last days replayed twice on the cluster as it is, with the accounts and
limits as they are, once under the site's own policy and once under the other. Per
account, the mean bounded slowdown of its jobs under each; overall, Jain's index over
those means and the worst account against everyone (``scheduler.replay.metrics``, from
``scheduler.core.fairness``, which the fairness watch reads on the live jobs).

The fairness watch (``monitoring.fairness``) runs one when it finds an account starving,
as a stored simulation (``scheduler.simulations``) that the admin opens from the notice.
The two replays differ only in the policy, so their difference is the switch's effect
on that history; the modelling is the previews' (``scheduler.previews``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from scheduler.config import current_policy
from scheduler.previews import MIN_JOBS, TooLittleHistory, site_history
from scheduler.replay.metrics import AccountFigures, by_account, measure
from scheduler.replay.simulator import Replay, policy_named, replay
from scheduler.tick.snapshot import load_accounts, load_hardware, load_limits


@dataclass(frozen=True, slots=True)
class AccountSwitch:
    """One account's jobs and their mean bounded slowdown under each policy (``None``:
    none of its jobs could run under that one, its limits keeping them out)."""

    account: str
    jobs: int
    today: float | None
    switched: float | None


@dataclass(frozen=True, slots=True)
class Switch:
    """The comparison: ``policy`` is the other policy's name; ``jain_*`` and
    ``worst_ratio_*`` the figures of :class:`~scheduler.core.fairness.Fairness` under
    each."""

    days: int
    jobs: int
    policy: str
    rows: tuple[AccountSwitch, ...]
    jain_today: float
    jain_switched: float
    worst_ratio_today: float
    worst_ratio_switched: float


def policy_switch(policy: str, *, days: int, now: datetime, progress: Callable[[float], None] | None = None) -> Switch:
    """Replay the ``days`` before ``now`` under the site's policy and under ``policy``
    (a registered replay policy); ``progress`` is told the fraction done after each.
    Raises :class:`~scheduler.replay.trace.SimulationError` for an unknown policy and
    :class:`~scheduler.previews.TooLittleHistory` below :data:`MIN_JOBS` jobs."""
    other = policy_named(policy)
    trace = site_history(now, days)
    if len(trace) < MIN_JOBS:
        raise TooLittleHistory(
            f"{len(trace)} jobs ran in the last {days} days; a comparison needs at least {MIN_JOBS}."
        )
    cluster, accounts, limits = load_hardware(), load_accounts(), load_limits()[0]
    results: list[Replay] = []
    for each in (replace(current_policy(), explain=False, estimates=False), other):
        results.append(replay(trace, cluster, each, limits, accounts))
        if progress is not None:
            progress(len(results) / 2)
    today, switched = (by_account(result) for result in results)
    rows = tuple(
        AccountSwitch(
            name,
            (today.get(name) or switched[name]).jobs,
            _slowdown(today.get(name)),
            _slowdown(switched.get(name)),
        )
        for name in sorted(today.keys() | switched.keys())
    )
    measured = [measure(result) for result in results]
    return Switch(
        days,
        len(trace),
        policy,
        rows,
        measured[0].jain_fairness,
        measured[1].jain_fairness,
        measured[0].worst_account_slowdown_ratio,
        measured[1].worst_account_slowdown_ratio,
    )


def _slowdown(figures: AccountFigures | None) -> float | None:
    return None if figures is None else figures.avg_bounded_slowdown
