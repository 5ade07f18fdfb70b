"""Run-time predictions from history: what a user's jobs tend to run of their walltime.

Users ask for round walltimes (1 h, 4 h, a day) and their jobs end well before them,
each user in their own way: one always runs the full hour, another's "1 h" jobs end in
a minute. Production schedulers learn this from the jobs that ended: Tsafrir, Etsion
and Feitelson (2007) predict a job's run time as the mean of its user's last two run
times, and so beat the users' own estimates in backfilling. A
:class:`RuntimePredictor` keeps the same kind of history, as ratios of run time to
walltime (so one user's 1 h and 1 day jobs teach each other), per user and per account,
and gives the ratios a snapshot carries (``Snapshot.runtime_ratios``).

It learns only from what it is told has ended, in the order it is told: a replay or the
live tick feeds it jobs as they end, so a prediction never uses a job that had not
ended when the decision was made (a property test perturbs the future and compares).

A mean is enough to rank jobs; a start-time estimate with a stated confidence (the p50
and p90 starts, ``scheduler.core.estimate.calibrated_starts``) needs the spread too. So
the predictor also keeps a longer window of each user's and account's ratios
(:attr:`RuntimePredictor.samples`) and reads quantiles from it (:func:`ratio_quantile`),
given how much of its walltime a running job has already run: a job that ran 3 h of a
4 h limit will not end in 30 minutes, whatever its user's median is.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Mapping, Sequence

from scheduler.core.priority import expected_ratio

#: How many of the latest ended jobs a user's ratio averages (Tsafrir et al.: two).
USER_HISTORY = 2
#: ... and an account's, for its users with no history yet.
ACCOUNT_HISTORY = 20
#: How many of the latest ratios the quantiles read, per user and per account.
USER_SAMPLES = 50
ACCOUNT_SAMPLES = 200
#: Fewer of a user's ratios than this say too little of their spread: the account's
#: are read instead (and with fewer of those, the walltime is the prediction).
MIN_SAMPLES = 5

_EPSILON = 1e-9

#: ``(account, user)`` and ``(account, "")`` -> ratios, sorted ascending.
RatioSamples = Mapping[tuple[str, str], Sequence[float]]


def ratio_quantile(samples: RatioSamples, account: str, user: str, q: float, at_least: float = 0.0) -> float:
    """The ``q`` quantile (0 < q <= 1) of what jobs of ``(account, user)`` run of their
    walltime, among the ratios of at least ``at_least`` (how much of it a running job
    has already run): the user's ratios if there are :data:`MIN_SAMPLES`, else the
    account's, else 1 (the walltime). Also 1 when no ratio reaches ``at_least``: the
    job already ran longer than any like it, so only its limit bounds it.

    The quantile is the nearest rank (the smallest ratio with at least ``q`` of the
    ratios at or below it): it is always a ratio that happened, and rises with ``q``.
    """
    if not 0.0 < q <= 1.0:
        raise ValueError(f"q must be in (0, 1], got {q}")
    ratios = samples.get((account, user), ())
    if len(ratios) < MIN_SAMPLES:
        ratios = samples.get((account, ""), ())
        if len(ratios) < MIN_SAMPLES:
            return 1.0
    low = bisect_left(ratios, at_least) if at_least > 0.0 else 0
    left = len(ratios) - low
    if left == 0:
        return 1.0
    return ratios[low + max(math.ceil(q * left - _EPSILON), 1) - 1]  # 0.9 * 10 is 9.000000000000002


class RuntimePredictor:
    """Run-time-to-walltime ratios of each user's and each account's latest ended jobs:
    their means (``ratios``) and, over a longer window, their spread (``samples``)."""

    def __init__(self, user_history: int = USER_HISTORY, account_history: int = ACCOUNT_HISTORY) -> None:
        if user_history < 1 or account_history < 1:
            raise ValueError("history lengths must be >= 1")
        self.user_history = user_history
        self.account_history = account_history
        self._history: dict[tuple[str, str], deque[float]] = {}
        #: ``(account, user)`` and ``(account, "")`` -> the mean ratio: what
        #: ``Snapshot.runtime_ratios`` takes; kept up to date as jobs end.
        self.ratios: dict[tuple[str, str], float] = {}
        #: The same keys -> the latest ratios (up to ``USER_SAMPLES`` or
        #: ``ACCOUNT_SAMPLES``), sorted: what :func:`ratio_quantile` reads.
        self.samples: dict[tuple[str, str], list[float]] = {}
        self._latest: dict[tuple[str, str], deque[float]] = {}

    def observe(self, account: str, user: str, walltime_s: int, run_s: float) -> None:
        """A job of ``user`` in ``account`` that asked for ``walltime_s`` ended after
        ``run_s`` seconds. A walltime of 0 teaches nothing."""
        if walltime_s <= 0:
            return
        ratio = min(max(run_s / walltime_s, 0.0), 1.0)
        lengths = {(account, ""): self.account_history}
        if user:
            lengths[(account, user)] = self.user_history
        for key, length in lengths.items():
            history = self._history.get(key)
            if history is None:
                history = self._history[key] = deque(maxlen=length)
            history.append(ratio)
            self.ratios[key] = sum(history) / len(history)
            self._sample(key, ratio, USER_SAMPLES if key[1] else ACCOUNT_SAMPLES)

    def _sample(self, key: tuple[str, str], ratio: float, length: int) -> None:
        """Add ``ratio`` to the sorted samples of ``key``, dropping its oldest past ``length``."""
        latest = self._latest.get(key)
        if latest is None:
            latest = self._latest[key] = deque()
            self.samples[key] = []
        ordered = self.samples[key]
        if len(latest) == length:
            del ordered[bisect_left(ordered, latest.popleft())]
        latest.append(ratio)
        insort(ordered, ratio)

    def expected_s(self, account: str, user: str, walltime_s: int) -> float:
        """The run time expected of a new job: its walltime times the user's ratio, else
        the account's, else the walltime itself."""
        return walltime_s * expected_ratio(self.ratios, account, user)

    def quantile_s(self, account: str, user: str, walltime_s: int, q: float, ran_s: float = 0.0) -> float:
        """The ``q`` quantile of a job's run time (:func:`ratio_quantile` times its
        walltime), given it has already run ``ran_s`` seconds (0 for one not started)."""
        at_least = min(ran_s / walltime_s, 1.0) if walltime_s > 0 else 0.0
        return walltime_s * ratio_quantile(self.samples, account, user, q, at_least)
