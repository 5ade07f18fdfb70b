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
"""

from __future__ import annotations

from collections import deque

from scheduler.core.priority import expected_ratio

#: How many of the latest ended jobs a user's ratio averages (Tsafrir et al.: two).
USER_HISTORY = 2
#: ... and an account's, for its users with no history yet.
ACCOUNT_HISTORY = 20


class RuntimePredictor:
    """Mean run-time-to-walltime ratios of each user's and each account's latest ended jobs."""

    def __init__(self, user_history: int = USER_HISTORY, account_history: int = ACCOUNT_HISTORY) -> None:
        if user_history < 1 or account_history < 1:
            raise ValueError("history lengths must be >= 1")
        self.user_history = user_history
        self.account_history = account_history
        self._history: dict[tuple[str, str], deque[float]] = {}
        #: ``(account, user)`` and ``(account, "")`` -> the mean ratio: what
        #: ``Snapshot.runtime_ratios`` takes; kept up to date as jobs end.
        self.ratios: dict[tuple[str, str], float] = {}

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

    def expected_s(self, account: str, user: str, walltime_s: int) -> float:
        """The run time expected of a new job: its walltime times the user's ratio, else
        the account's, else the walltime itself."""
        return walltime_s * expected_ratio(self.ratios, account, user)
