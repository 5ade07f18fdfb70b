"""The replay applies evictions: a preempted job is requeued and runs its whole duration again."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest

from scheduler.core.types import Decisions, Eviction, Policy, Snapshot, Start
from scheduler.replay import simulator
from scheduler.replay.cli import main
from scheduler.replay.metrics import measure
from scheduler.replay.simulator import replay
from scheduler.replay.trace import TraceJob, homogeneous_cluster


def test_an_evicted_job_is_requeued_and_its_lost_gpu_seconds_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 0 (2 GPUs) runs from 0; at t=30 job 1 evicts it and takes the node for 100 s;
    job 0 then runs its full 100 s again from 130: 60 GPU-seconds lost."""
    real = simulator.schedule  # type: ignore[attr-defined]

    def preempting(snapshot: Snapshot, policy: Policy, now: datetime) -> Decisions:
        running = {r.id: r for r in snapshot.running}
        if 0 in running and any(p.id == 1 for p in snapshot.pending):
            victim = running[0]
            return Decisions(starts=[Start(1, "sim", victim.allocations)], evictions=[Eviction(0, 1, "test")])
        return real(snapshot, policy, now)

    monkeypatch.setattr(simulator, "schedule", preempting)
    trace = [TraceJob(10, 0, 100, 2, "a", 200), TraceJob(11, 30, 100, 2, "b", 200)]
    result = replay(trace, homogeneous_cluster(1, 2), Policy())

    assert [(r.start_s, r.end_s) for r in result.records] == [(130, 230), (30, 130)]
    metrics = measure(result)
    assert (metrics.preemptions, metrics.lost_gpu_s) == (1, 60.0)


def test_the_headline_sim_figures_are_printed_per_policy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,duration_s,num_gpus,vc\n1,0,10,1,a\n2,5,10,2,b\n")
    out = io.StringIO()
    main([str(trace), "--nodes", "1", "--gpus-per-node", "2", "--policy", "fifo"], out)
    names = {json.loads(line)["metric"] for line in out.getvalue().splitlines()}
    wanted = {"sim_avg_jct_s", "sim_avg_wait_s", "sim_p99_wait_s", "sim_utilization", "sim_jain"}
    assert wanted | {"sim_makespan_s", "sim_preemptions", "sim_lost_gpu_s"} <= names
