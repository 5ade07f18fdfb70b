"""Replays under overload: the kept queue, the run-time predictor and preemption.

- A replay that keeps its pending queue across cycles decides what one that hands
  every cycle all pending jobs decides, under every policy.
- The run-time predictor learns only from jobs that ended: perturbing the run times of
  jobs that had not ended by ``T`` changes no decision made before ``T``.
- Preemption never loses a job: every job of the trace ends exactly once, having done
  all its work, whatever was evicted on the way.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.replay.simulator import GUARANTEED, POLICIES, Replay, guarantees_for, replay
from scheduler.replay.trace import TraceJob, homogeneous_cluster, parse_philly_csv
from tests.traces import synthetic_trace

CLUSTER = homogeneous_cluster(3, 8)


def overloaded(seed: int, jobs: int = 260) -> list[TraceJob]:
    """A synthetic trace whose jobs come faster than 24 GPUs can run them."""
    rows = synthetic_trace(seed, jobs, accounts=4, mean_interarrival_s=40, max_gpus=16)
    lines = ["job_id,submit_s,duration_s,num_gpus,vc", *(",".join(map(str, row)) for row in rows)]
    return parse_philly_csv(lines)


def run(trace: list[TraceJob], name: str, **options: object) -> Replay:
    guarantees = guarantees_for(trace, 24) if name in GUARANTEED else None
    return replay(trace, CLUSTER, POLICIES[name], guarantees, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("seed", [1, 2])
def test_a_replay_with_the_kept_queue_decides_what_one_without_it_decides(name: str, seed: int) -> None:
    trace = overloaded(seed)
    kept, full = run(trace, name), run(trace, name, incremental=False)
    assert kept.records == full.records
    assert (kept.cycles, kept.preemptions, kept.lost_gpu_s) == (full.cycles, full.preemptions, full.lost_gpu_s)


@pytest.mark.parametrize("name", ["short-backfill", "stretch-las-preempt"])
def test_the_predictor_never_sees_a_job_that_had_not_ended(name: str) -> None:
    """Jobs still running or waiting at T run three times longer (up to their walltime,
    which the scheduler was told at submission and which stays): every start before T
    is the same. A predictor that read the trace's run times would start other jobs."""
    trace = overloaded(3)
    before = run(trace, name)
    t = sorted(r.end_s for r in before.records)[len(trace) // 3]
    ended = {r.job.id for r in before.records if r.end_s <= t}
    future = [j if j.id in ended else replace(j, duration_s=min(3 * j.duration_s, j.walltime_s)) for j in trace]
    assert future != trace
    after = run(future, name)
    first_starts = {r.job.id: r.first_start_s for r in before.records if r.first_start_s < t}
    assert {r.job.id: r.first_start_s for r in after.records if r.first_start_s < t} == first_starts
    assert len(first_starts) > len(ended)  # the comparison covers decisions, not only the past


@pytest.mark.parametrize("name", ["fairshare-backfill-preempt", "stretch-las-preempt"])
def test_preemption_never_loses_a_job(name: str) -> None:
    trace = overloaded(4)
    result = run(trace, name)
    assert result.preemptions > 0
    assert sorted(r.job.id for r in result.records) == sorted(j.id for j in trace)
    for record in result.records:
        assert record.end_s >= record.start_s >= record.first_start_s >= record.job.submit_s
        assert record.end_s - record.first_start_s >= record.run_s  # every second of work was done
    assert sum(r.runs - 1 for r in result.records) == result.preemptions
