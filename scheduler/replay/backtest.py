"""The backtest of calibrated start times: did jobs start before their p50 and p90?

A p90 start is worth showing only if about 90% of jobs start before it. The backtest
replays a trace (the site's own recent history, ``scheduler.backtests``) through the
simulator and, as the live estimate pass would, asks for every waiting job's p50 and
p90 starts (``scheduler.core.estimate.calibrated_starts``) from what the replay knows
then: the queue, the running jobs, and the run-time ratios of the jobs that had ended
(a :class:`~scheduler.core.prediction.RuntimePredictor` fed as they end). Each job is
judged on the first prediction it got against when the replay first started it.

Modelling, so the figures are read for what they are: predictions are asked for every
``every_s`` seconds of the trace's clock, as the periodic estimate pass runs, so a job
started before the first pass after its submission had no prediction and is not
judged (as no one was shown one). Nothing new is known to the prediction, so jobs
submitted later that go ahead of a judged one (a higher priority) make it late: that
is part of what the backtest measures.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from scheduler.core.estimate import calibrated_starts
from scheduler.core.fairshare import AccountNode
from scheduler.core.prediction import RuntimePredictor
from scheduler.core.types import Limits, NodeView, Policy, Snapshot
from scheduler.replay.simulator import replay
from scheduler.replay.trace import EPOCH, TraceJob

#: How often predictions are asked for, in seconds of the trace's clock (the live
#: estimate pass runs every ``SCHEDULER_ESTIMATE_SECONDS``; coarser keeps a week's
#: backtest within a minute).
EVERY_S = 300


@dataclass(frozen=True, slots=True)
class StartCheck:
    """One judged job: its first prediction and when it first started (trace clock, s)."""

    job_id: int
    asked_s: int
    p50_s: int
    p90_s: int
    started_s: int

    @property
    def before_p50(self) -> bool:
        return self.started_s <= self.p50_s

    @property
    def before_p90(self) -> bool:
        return self.started_s <= self.p90_s


@dataclass(frozen=True, slots=True)
class Backtest:
    """The judged jobs, out of ``jobs`` replayed."""

    checks: tuple[StartCheck, ...]
    jobs: int

    @property
    def p50_coverage(self) -> float:
        """The share of judged jobs that started at or before their p50 (0 with none)."""
        return sum(c.before_p50 for c in self.checks) / len(self.checks) if self.checks else 0.0

    @property
    def p90_coverage(self) -> float:
        return sum(c.before_p90 for c in self.checks) / len(self.checks) if self.checks else 0.0

    @property
    def p50_error_s(self) -> float:
        """The median of ``|start - p50|`` over the judged jobs (0 with none)."""
        return float(statistics.median(abs(c.started_s - c.p50_s) for c in self.checks)) if self.checks else 0.0


def backtest(
    trace: Sequence[TraceJob],
    cluster: Sequence[NodeView],
    policy: Policy,
    guarantees: Mapping[str, Limits] | None = None,
    accounts: Sequence[AccountNode] = (),
    *,
    every_s: int = EVERY_S,
) -> Backtest:
    """Replay ``trace`` as :func:`~scheduler.replay.simulator.replay` does (same
    arguments) and judge the p50 and p90 starts predicted during it. Pure; costs one
    replay plus two queue plans per ``every_s`` of the trace's clock while a job waits
    for its first prediction."""
    if every_s < 1:
        raise ValueError(f"every_s must be >= 1, got {every_s}")
    watch = _Predictions(policy, every_s)
    result = replay(trace, cluster, policy, guarantees, accounts, watch=watch)
    checks = []
    for sim_id, (asked_s, p50_s, p90_s) in sorted(watch.asked.items()):
        if sim_id in watch.trivial:
            continue
        record = result.records[sim_id]
        started_s = record.first_start_s if record.first_start_s >= 0 else record.start_s
        checks.append(StartCheck(record.job.id, asked_s, p50_s, p90_s, started_s))
    return Backtest(tuple(checks), len(result.records))


@dataclass(slots=True)
class _Predictions:
    """The :class:`~scheduler.replay.simulator.ReplayWatch` that asks for predictions."""

    policy: Policy
    every_s: int
    predictor: RuntimePredictor = field(default_factory=RuntimePredictor)
    #: sim id -> (asked at, p50, p90), seconds on the trace's clock.
    asked: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    #: Jobs asked for whose p90 was the instant asked (the cycle starts them).
    trivial: set[int] = field(default_factory=set)
    last_pass_s: int | None = None

    def ended(self, sim_id: int, job: TraceJob) -> None:
        # A trace names teams, not people: the replay's user is the account.
        self.predictor.observe(job.account, job.account, job.walltime_s, job.run_s)

    def cycle(self, now: datetime, snapshot: Callable[[], Snapshot]) -> None:
        t = _seconds(now)
        if self.last_pass_s is not None and t < self.last_pass_s + self.every_s:
            return
        self.last_pass_s = t
        planned = snapshot()
        if all(job.id in self.asked for job in planned.pending):
            return
        starts = calibrated_starts(planned, self.policy, now, self.predictor.samples)
        for job in planned.pending:
            if job.id in self.asked or job.id not in starts.p90:
                continue
            # A job even the p90 plan starts at once was promised nothing to judge.
            self.asked[job.id] = (t, _seconds(starts.p50[job.id]), _seconds(starts.p90[job.id]))
            if starts.p90[job.id] == now:
                self.trivial.add(job.id)


def _seconds(at: datetime) -> int:
    return int((at - EPOCH).total_seconds())
