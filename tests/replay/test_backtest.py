"""The backtest of calibrated start times: a replay that asks for every waiting job's p50
and p90 starts as the estimate pass would, and judges them against when the job started.

What it reports is checked against the same figures reached by a separate path: the
plain replay (no watch) says when each job started, and the queue at each instant a
prediction was asked for is rebuilt from that replay's records alone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.core.estimate import calibrated_starts
from scheduler.core.prediction import RuntimePredictor
from scheduler.core.types import RunningJob, Snapshot
from scheduler.replay.backtest import Backtest, StartCheck, backtest
from scheduler.replay.simulator import policy_named, replay
from scheduler.replay.trace import EPOCH, TraceJob, homogeneous_cluster, request_for
from tests.traces import synthetic_trace, with_walltimes

GPUS_PER_NODE = 8


def seeded_trace(seed: int = 3, jobs: int = 400) -> list[TraceJob]:
    """A Philly-shaped trace, busy enough on two 8-GPU nodes that many jobs wait."""
    rows = synthetic_trace(seed, jobs, accounts=4, mean_interarrival_s=200.0, max_gpus=16)
    return with_walltimes(rows, noise=0.5, seed=seed)


@pytest.fixture(scope="module")
def judged() -> tuple[list[TraceJob], Backtest]:
    trace = seeded_trace()
    return trace, backtest(trace, homogeneous_cluster(2, GPUS_PER_NODE), policy_named("fifo-backfill"), every_s=600)


def test_the_reported_coverage_is_the_coverage_measured_from_a_plain_replay(judged) -> None:
    trace, result = judged
    plain = replay(trace, homogeneous_cluster(2, GPUS_PER_NODE), policy_named("fifo-backfill"))
    started = {record.job.id: record.first_start_s for record in plain.records}
    assert len(result.checks) >= 50  # enough waited to say something
    assert all(check.started_s == started[check.job_id] for check in result.checks)
    before_p50 = sum(started[c.job_id] <= c.p50_s for c in result.checks)
    before_p90 = sum(started[c.job_id] <= c.p90_s for c in result.checks)
    assert result.p50_coverage == before_p50 / len(result.checks)
    assert result.p90_coverage == before_p90 / len(result.checks)
    assert 0 < before_p50 <= before_p90 < len(result.checks)  # neither is trivially 0 or 100%


def test_each_prediction_is_what_the_queue_then_and_the_jobs_ended_by_then_give(judged) -> None:
    """Rebuild the replay's world at each instant predictions were asked for (before
    that instant's cycle), from the plain replay's records: who ran (and where), who
    waited (a job the cycle then starts too), and what had ended."""
    trace, result = judged
    cluster = homogeneous_cluster(2, GPUS_PER_NODE)
    policy = policy_named("fifo-backfill")
    records = replay(trace, cluster, policy).records
    for asked_s in sorted({check.asked_s for check in result.checks})[:12]:
        predictor = RuntimePredictor()
        for record in sorted((r for r in records if r.end_s <= asked_s), key=lambda r: (r.end_s, r.job.submit_s)):
            predictor.observe(record.job.account, record.job.account, record.job.walltime_s, record.job.run_s)
        running = tuple(
            RunningJob(
                sim_id,
                r.allocations,
                EPOCH + timedelta(seconds=r.start_s),
                r.job.walltime_s,
                r.job.account,
                r.job.account,
            )
            for sim_id, r in enumerate(records)
            if r.start_s < asked_s < r.end_s
        )
        waiting = tuple(
            request_for(r.job, GPUS_PER_NODE, sim_id=sim_id)
            for sim_id, r in enumerate(records)
            if r.job.submit_s <= asked_s <= r.start_s
        )
        now = EPOCH + timedelta(seconds=asked_s)
        starts = calibrated_starts(Snapshot(cluster, running, waiting), policy, now, predictor.samples)
        for check in (c for c in result.checks if c.asked_s == asked_s):
            sim_id = next(i for i, r in enumerate(records) if r.job.id == check.job_id)
            assert (check.p50_s, check.p90_s) == (
                (starts.p50[sim_id] - EPOCH).total_seconds(),
                (starts.p90[sim_id] - EPOCH).total_seconds(),
            )


def test_the_p50_error_is_the_median_distance_from_the_p50() -> None:
    checks = tuple(
        StartCheck(i, 0, p50_s=100, p90_s=200, started_s=100 + delta) for i, delta in enumerate((-60, 0, 90, 600))
    )
    result = Backtest(checks, jobs=10)
    assert result.p50_error_s == 75.0  # |deltas| 0, 60, 90, 600: the mean of the middle two
    assert result.p50_coverage == 0.5 and result.p90_coverage == 0.75
    assert Backtest((), jobs=0).p90_coverage == 0.0


def test_a_backtest_asks_at_least_every_second() -> None:
    with pytest.raises(ValueError, match="every_s"):
        backtest(seeded_trace(jobs=5), homogeneous_cluster(1, GPUS_PER_NODE), policy_named("fifo"), every_s=0)
