"""The replay applies evictions: a preempted job is requeued, resumes from its last
checkpoint after a restart, and what that costs is counted."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest

from scheduler.core.queue import waiting
from scheduler.core.types import Decisions, Eviction, Policy, Snapshot, Start
from scheduler.replay import simulator
from scheduler.replay.cli import main
from scheduler.replay.metrics import measure
from scheduler.replay.simulator import RestartCost, replay
from scheduler.replay.trace import SimulationError, TraceJob, homogeneous_cluster


def test_an_evicted_job_is_requeued_and_its_lost_gpu_seconds_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 0 (2 GPUs) runs from 0; at t=30 job 1 evicts it and takes the node for 100 s.
    No checkpoint yet (one every 1,800 s): job 0 reloads for 60 s and runs its full
    100 s again from 130: (30 + 60) x 2 = 180 GPU-seconds lost."""
    real = simulator.schedule  # type: ignore[attr-defined]

    def preempting(snapshot: Snapshot, policy: Policy, now: datetime) -> Decisions:
        running = {r.id: r for r in snapshot.running}
        if 0 in running and any(p.id == 1 for p in waiting(snapshot)):
            victim = running[0]
            return Decisions(starts=[Start(1, "sim", victim.allocations)], evictions=[Eviction(0, 1, "test")])
        return real(snapshot, policy, now)

    monkeypatch.setattr(simulator, "schedule", preempting)
    trace = [TraceJob(10, 0, 100, 2, "a", 200), TraceJob(11, 30, 100, 2, "b", 200)]
    result = replay(trace, homogeneous_cluster(1, 2), Policy())

    assert [(r.first_start_s, r.start_s, r.end_s, r.runs) for r in result.records] == [
        (0, 130, 290, 2),
        (30, 30, 130, 1),
    ]
    assert [r.wait_s for r in result.records] == [190, 0]  # all of job 0's time but its 100 s of work
    metrics = measure(result)
    assert (metrics.preemptions, metrics.lost_gpu_s) == (1, 180.0)


def test_the_headline_sim_figures_are_printed_per_policy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,duration_s,num_gpus,vc\n1,0,10,1,a\n2,5,10,2,b\n")
    out = io.StringIO()
    main([str(trace), "--nodes", "1", "--gpus-per-node", "2", "--policy", "fifo"], out)
    names = {json.loads(line)["metric"] for line in out.getvalue().splitlines()}
    wanted = {"sim_avg_jct_s", "sim_avg_wait_s", "sim_p99_wait_s", "sim_utilization", "sim_jain"}
    assert wanted | {"sim_makespan_s", "sim_preemptions", "sim_lost_gpu_s"} <= names


def test_an_evicted_job_resumes_from_its_last_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 0 (1 GPU, 5,000 s of work) is evicted at t=4,000 by job 1 (1,000 s): its
    checkpoints every 1,800 s saved 3,600 s of work; it reloads for 60 s and does the
    remaining 1,400 s from t=5,000, ending at 6,460; lost: 400 s of work + 60 s."""
    real = simulator.schedule  # type: ignore[attr-defined]

    def preempting(snapshot: Snapshot, policy: Policy, now: datetime) -> Decisions:
        running = {r.id: r for r in snapshot.running}
        if 0 in running and any(p.id == 1 for p in waiting(snapshot)):
            return Decisions(starts=[Start(1, "sim", running[0].allocations)], evictions=[Eviction(0, 1, "test")])
        return real(snapshot, policy, now)

    monkeypatch.setattr(simulator, "schedule", preempting)
    trace = [TraceJob(10, 0, 5_000, 1, "a", 14_400), TraceJob(11, 4_000, 1_000, 1, "b", 3_600)]
    result = replay(trace, homogeneous_cluster(1, 1), Policy(), restart=RestartCost(60, 1_800))

    resumed = result.records[0]
    assert (resumed.first_start_s, resumed.start_s, resumed.end_s, resumed.runs) == (0, 5_000, 6_460, 2)
    assert resumed.wait_s == 6_460 - 5_000
    assert (result.preemptions, result.lost_gpu_s) == (1, 460)
    # without checkpoints the whole run is lost and redone
    again = replay(trace, homogeneous_cluster(1, 1), Policy(), restart=RestartCost(60, 0))
    assert (again.records[0].end_s, again.lost_gpu_s) == (5_000 + 60 + 5_000, 4_060)


def test_a_restart_cost_is_never_negative() -> None:
    with pytest.raises(SimulationError):
        RestartCost(restart_s=-1)
