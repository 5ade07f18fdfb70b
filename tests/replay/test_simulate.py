"""The trace simulator: known answers on tiny traces, the walltime rule, the loader, the CLI.

No database: the replay is pure, and ``manage.py simulate`` never opens a connection.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.fairness import jain_index
from scheduler.core.types import Limits
from scheduler.replay.cli import main
from scheduler.replay.metrics import bounds, measure, percentile
from scheduler.replay.simulator import POLICIES, guarantees_for, policy_named, replay
from scheduler.replay.trace import (
    SimulationError,
    TraceJob,
    homogeneous_cluster,
    load_cluster_file,
    load_philly_csv,
    noisy_walltime,
    parse_philly_csv,
    request_for,
    select,
    standard_walltime,
)
from tests.traces import TraceRow, synthetic_trace, write_trace

H = 3600
FIFO = POLICIES["fifo"]
#: The synthetic Philly-shaped trace the loader and command-line tests replay (see
#: tests/traces.py). Seed 5 puts a 64-GPU job among the first 200 (unplaceable on 4
#: nodes of 8 GPUs) and 12- and 24-GPU jobs among the first 300.
SAMPLE_SEED = 5
SAMPLE_JOBS = 2000
SAMPLE_FIRST_ID = 1001


@pytest.fixture(scope="module")
def sample_rows() -> list[TraceRow]:
    return synthetic_trace(SAMPLE_SEED, SAMPLE_JOBS, first_job_id=SAMPLE_FIRST_ID)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory, sample_rows: list[TraceRow]) -> Path:
    """The synthetic trace as a CSV file."""
    return write_trace(tmp_path_factory.mktemp("trace") / "synthetic.csv", sample_rows)


def job(job_id: int, submit: int, duration: int, gpus: int = 1, *, account: str = "a", walltime: int = 0) -> TraceJob:
    """A trace job; walltime defaults to the standard rule."""
    return TraceJob(job_id, submit, duration, gpus, account, walltime or standard_walltime(duration))


# --- Replays with known answers -------------------------------------------------------


@dataclass
class Case:
    id: str
    nodes: int
    gpus_per_node: int
    jobs: list[TraceJob]
    #: trace job id -> (start_s, end_s)
    times: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Metrics field -> expected value (floats compared with pytest.approx)
    metrics: dict[str, float] = field(default_factory=dict)
    #: trace job id -> nodes it holds
    nodes_held: dict[int, int] = field(default_factory=dict)


CASES = [
    Case(
        "two 8-GPU jobs on one 8-GPU node run back to back",
        nodes=1,
        gpus_per_node=8,
        jobs=[job(1, 0, 100, 8), job(2, 0, 50, 8)],
        times={1: (0, 100), 2: (100, 150)},
        metrics={"avg_jct_s": 125, "avg_wait_s": 50, "max_wait_s": 100, "makespan_s": 150, "utilization": 1.0},
    ),
    Case(
        "1-GPU jobs share a node and start at once",
        nodes=1,
        gpus_per_node=8,
        jobs=[job(i, 0, 10 * i) for i in range(1, 9)],
        times={i: (0, 10 * i) for i in range(1, 9)},
        metrics={"avg_wait_s": 0, "avg_bounded_slowdown": 1.0},
    ),
    Case(
        "a gang job waits until two nodes are free",
        nodes=2,
        gpus_per_node=8,
        jobs=[job(1, 0, 100, 8), job(2, 10, 50, 16)],
        times={1: (0, 100), 2: (100, 150)},
        metrics={"avg_wait_s": 45, "max_wait_s": 90},
        nodes_held={1: 1, 2: 2},
    ),
    Case(
        "12 GPUs on 8-GPU nodes hold two whole nodes; utilization counts the 12 used",
        nodes=2,
        gpus_per_node=8,
        jobs=[job(1, 0, 100, 12), job(2, 0, 100, 4)],
        times={1: (0, 100), 2: (100, 200)},
        metrics={"utilization": (12 * 100 + 4 * 100) / (16 * 200)},
        nodes_held={1: 2, 2: 1},
    ),
    Case(
        "strict FIFO: a 1-GPU job waits behind a blocked 8-GPU job",
        nodes=1,
        gpus_per_node=8,
        jobs=[job(1, 0, 100, 1), job(2, 1, 10, 8), job(3, 2, 10, 1)],
        times={1: (0, 100), 2: (100, 110), 3: (110, 120)},
    ),
    Case(
        "equal submit times start in row order",
        nodes=1,
        gpus_per_node=1,
        jobs=[job(9, 5, 10), job(3, 5, 10), job(7, 5, 10)],
        times={9: (5, 15), 3: (15, 25), 7: (25, 35)},
    ),
    Case(
        "a job over its walltime is killed at the walltime and counted",
        nodes=1,
        gpus_per_node=8,
        jobs=[job(1, 0, 5000, walltime=H), job(2, 0, 100)],
        times={1: (0, H), 2: (0, 100)},
        metrics={"timeouts": 1, "jobs": 2},
    ),
    Case(
        "fully packed schedule: utilization 1.0",
        nodes=2,
        gpus_per_node=4,
        jobs=[job(1, 0, 100, 8), job(2, 50, 100, 4), job(3, 100, 50, 4), job(4, 100, 100, 4), job(5, 150, 50, 4)],
        times={1: (0, 100), 2: (100, 200), 3: (100, 150), 4: (150, 250), 5: (200, 250)},
        metrics={"utilization": 1.0, "makespan_s": 250},
    ),
    Case(
        "bounded slowdown floors runs at 10 s: 15 s wait + 5 s run = 2",
        nodes=1,
        gpus_per_node=1,
        jobs=[job(1, 0, 15), job(2, 0, 5)],
        times={1: (0, 15), 2: (15, 20)},
        metrics={"avg_bounded_slowdown": (1.0 + 2.0) / 2},
    ),
    Case(
        "a job bigger than the cluster is not replayed and counted unplaceable",
        nodes=2,
        gpus_per_node=8,
        jobs=[job(1, 0, 10, 32), job(2, 0, 10, 16)],
        times={2: (0, 10)},
        metrics={"unplaceable": 1, "jobs": 1},
    ),
    Case(
        "an idle gap: utilization over first submit to last end",
        nodes=1,
        gpus_per_node=1,
        jobs=[job(1, 0, 100), job(2, 300, 100)],
        times={1: (0, 100), 2: (300, 400)},
        metrics={"utilization": 0.5, "makespan_s": 400, "avg_jct_s": 100},
    ),
    Case(
        "accounts treated alike: Jain's index 1.0",
        nodes=2,
        gpus_per_node=1,
        jobs=[job(1, 0, 100, account="x"), job(2, 0, 100, account="y")],
        metrics={"jain_fairness": 1.0},
    ),
    Case(
        "one account waits, the other not: Jain's index below 1",
        nodes=1,
        gpus_per_node=1,
        jobs=[job(1, 0, 100, account="x"), job(2, 0, 100, account="y")],
        # slowdowns x: 1, y: 2 -> (1 + 2)^2 / (2 * (1 + 4)) = 0.9
        metrics={"jain_fairness": 0.9},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_replay_known_answers(case: Case) -> None:
    result = replay(case.jobs, homogeneous_cluster(case.nodes, case.gpus_per_node), FIFO)
    by_id = {r.job.id: r for r in result.records}

    assert {i: (r.start_s, r.end_s) for i, r in by_id.items() if i in case.times} == case.times
    metrics = measure(result)
    for name, expected in case.metrics.items():
        assert getattr(metrics, name) == pytest.approx(expected), name
    for job_id, nodes in case.nodes_held.items():
        assert len(by_id[job_id].allocations) == nodes


def test_replay_calls_schedule_only_when_jobs_wait() -> None:
    # t=0: job 1 submitted (call); t=100: it ends, nothing pending (no call); t=500: job 2 (call)
    result = replay([job(1, 0, 100), job(2, 500, 10)], homogeneous_cluster(1, 1), FIFO)
    assert result.cycles == 2


def test_fairshare_lets_the_light_account_go_before_the_heavy_one() -> None:
    # Account "heavy" ran a long job; then both accounts queue a job behind a blocker.
    # FIFO keeps submit order (heavy first); fair-share puts the light account first.
    trace = [
        job(1, 0, 20_000, account="heavy"),
        job(2, 19_000, 2_000, account="other"),  # the blocker, holding the GPU until 21,000
        job(3, 19_500, 100, account="heavy"),
        job(4, 19_600, 100, account="light"),
    ]
    cluster = homogeneous_cluster(1, 1)
    fifo = {r.job.id: r.start_s for r in replay(trace, cluster, FIFO).records}
    fair = {r.job.id: r.start_s for r in replay(trace, cluster, POLICIES["fairshare-backfill"]).records}
    assert fifo[3] < fifo[4]
    assert fair[4] < fair[3]


def test_guarantees_follow_each_accounts_share_of_the_trace_rounded_down() -> None:
    trace = [job(1, 0, 300, 2, account="big"), job(2, 0, 100, 1, account="small"), job(3, 0, 100, 2, account="big")]
    # GPU-seconds: big 800, small 100 -> 8/9 and 1/9 of 16 GPUs
    assert {a: lim.guaranteed_gpus for a, lim in guarantees_for(trace, 16).items()} == {"big": 14, "small": 1}


def test_preempt_policy_reclaims_borrowed_gpus_for_an_account_under_its_guarantee() -> None:
    # "flood" fills the only node while "owner" is idle; when owner submits, the newest
    # flood job (on borrowed GPUs) is requeued and owner starts at once.
    trace = [
        job(1, 0, 10_000, 1, account="flood"),
        job(2, 10, 10_000, 1, account="flood"),
        job(3, 100, 50, 1, account="owner"),
    ]
    cluster = homogeneous_cluster(1, 2)
    guarantees = {"flood": Limits(guaranteed_gpus=1), "owner": Limits(guaranteed_gpus=1)}
    result = replay(trace, cluster, POLICIES["fairshare-backfill-preempt"], guarantees)
    starts = {r.job.id: r.start_s for r in result.records}
    assert starts[3] == 100
    assert starts[2] > 100  # requeued, rerun from scratch (no checkpoint yet) after the owner's job
    assert result.preemptions == 1
    assert measure(result).lost_gpu_s == 90 + 60  # its 90 s of work and the 60 s restart
    plain = {r.job.id: r.start_s for r in replay(trace, cluster, POLICIES["fairshare-backfill"]).records}
    assert plain[3] > 100


def test_measure_of_nothing_is_an_error() -> None:
    result = replay([job(1, 0, 10, 16)], homogeneous_cluster(1, 8), FIFO)
    assert result.unplaceable and not result.records
    with pytest.raises(SimulationError, match="no job was replayed"):
        measure(result)


# --- Rules: walltime, request shape, cluster, policies ---------------------------------


@pytest.mark.parametrize(
    ("duration", "walltime"),
    [
        (0, 1 * H),
        (1, 1 * H),
        (1 * H, 1 * H),
        (1 * H + 1, 4 * H),
        (4 * H, 4 * H),
        (4 * H + 1, 12 * H),
        (12 * H + 1, 24 * H),
        (24 * H + 1, 72 * H),
        (72 * H + 1, 168 * H),
        (168 * H, 168 * H),
        (168 * H + 1, 336 * H),
        (500 * H, 504 * H),
    ],
    ids=lambda v: f"{v / H:g}h",
)
def test_standard_walltime(duration: int, walltime: int) -> None:
    assert standard_walltime(duration) == walltime


def test_noisy_walltime_is_seeded_per_job_and_lands_on_standard_limits() -> None:
    assert noisy_walltime(5000, 1, noise=0, seed=3) == standard_walltime(5000)
    draws = [noisy_walltime(5000, job_id, noise=1.0, seed=7) for job_id in range(200)]
    assert draws == [noisy_walltime(5000, job_id, noise=1.0, seed=7) for job_id in range(200)]
    assert draws != [noisy_walltime(5000, job_id, noise=1.0, seed=8) for job_id in range(200)]
    assert {w % H for w in draws} == {0}
    assert any(w < 5000 for w in draws), "underestimates exist, so timeouts can happen"
    with pytest.raises(SimulationError):
        noisy_walltime(5000, 1, noise=-1, seed=0)


@pytest.mark.parametrize(
    ("gpus", "gpus_per_node", "shape"),
    [(1, 8, (1, 1)), (8, 8, (1, 8)), (16, 8, (2, 8)), (12, 8, (2, 8)), (32, 8, (4, 8)), (3, 2, (2, 2))],
    ids=lambda v: str(v),
)
def test_request_shape(gpus: int, gpus_per_node: int, shape: tuple[int, int]) -> None:
    request = request_for(job(1, 42, 10, gpus), gpus_per_node, sim_id=5)
    assert (request.nodes, request.gpus_per_node) == shape
    assert request.id == 5 and request.cpu_millis_per_node == 0
    assert request.submitted_at.timestamp() == 42
    assert request.walltime_seconds == standard_walltime(10)


def test_homogeneous_cluster() -> None:
    nodes = homogeneous_cluster(12, 4)
    assert [n.name for n in nodes] == sorted(n.name for n in nodes)
    assert {len(n.gpus) for n in nodes} == {4}
    gpu = nodes[0].gpus[0]
    assert (gpu.model, gpu.memory_mib, gpu.compute_capability) == ("GPU", 80 * 1024, (9, 0))
    with pytest.raises(SimulationError):
        homogeneous_cluster(0, 8)


def test_unknown_policy_lists_the_known_ones() -> None:
    assert policy_named("fifo") == FIFO
    with pytest.raises(
        SimulationError,
        match=r"unknown policy 'nope'; known policies: fairshare-backfill, fairshare-backfill-preempt, fifo, "
        r"fifo-backfill",
    ):
        policy_named("nope")


# --- Metrics helpers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "index"),
    [([1, 1, 1], 1.0), ([5, 5], 1.0), ([1, 0, 0], 1 / 3), ([1, 3], 16 / 20), ([], 1.0), ([0, 0], 1.0)],
    ids=["equal", "equal pair", "one gets all", "1 vs 3", "empty", "all zero"],
)
def test_jain_index(values: list[float], index: float) -> None:
    assert jain_index(values) == pytest.approx(index)


@pytest.mark.parametrize(
    ("q", "value"), [(0, 1.0), (50, 2.5), (95, 3.85), (100, 4.0)], ids=["min", "median", "p95", "max"]
)
def test_percentile_interpolates_linearly(q: float, value: float) -> None:
    assert percentile([4, 1, 3, 2], q) == pytest.approx(value)


def test_bounds() -> None:
    trace = [job(1, 0, 100, 2), job(2, 100, 300, 1)]
    b = bounds(trace, capacity_gpus=2)
    assert b.demand_gpu_s == 500
    assert b.offered_load == pytest.approx(500 / (2 * 100))
    # the last job cannot end before 400: the shortest makespan is 400
    assert b.utilization_bound == pytest.approx(500 / (2 * 400))
    assert b.jct_lower_bound_s == 200


# --- Loader and sample ----------------------------------------------------------------


def test_loader_reads_the_sample(sample: Path, sample_rows: list[TraceRow]) -> None:
    trace = load_philly_csv(sample)
    assert len(trace) == SAMPLE_JOBS
    # every row, column by column, in row order; vc is the account; the standard walltime
    assert trace == [
        TraceJob(r.job_id, r.submit_s, r.duration_s, r.num_gpus, r.vc, standard_walltime(r.duration_s))
        for r in sample_rows
    ]
    assert trace[0].id == SAMPLE_FIRST_ID and trace[0].submit_s == 0
    assert [j.submit_s for j in trace] == sorted(j.submit_s for j in trace)
    assert len({j.account for j in trace}) > 1
    # with noise, each job's walltime is the one seeded by its own trace id
    noisy = load_philly_csv(sample, walltime_noise=0.5, seed=3)
    assert [j.walltime_s for j in noisy] == [noisy_walltime(j.duration_s, j.id, noise=0.5, seed=3) for j in trace]
    assert [j.walltime_s for j in noisy] != [j.walltime_s for j in trace]


def test_select_window_then_limit() -> None:
    trace = [job(i, 10 * i, 1) for i in range(10)]
    assert [j.id for j in select(trace, window_start=20, window_end=60)] == [2, 3, 4, 5]
    assert [j.id for j in select(trace, window_start=20, limit=2)] == [2, 3]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("job_id,submit_s,duration_s,num_gpus\n1,0,10,1\n", "missing column"),
        ("job_id,submit_s,duration_s,num_gpus,vc\n1,0,ten,1,a\n", r"t\.csv:2: .* must be integers"),
        ("job_id,submit_s,duration_s,num_gpus,vc\n1,0,10,1,a\n2,5,10,0,a\n", r"t\.csv:3: .*gpus must be >= 1"),
    ],
    ids=["no vc column", "not a number", "zero GPUs"],
)
def test_loader_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(SimulationError, match=message):
        parse_philly_csv(io.StringIO(text), source="t.csv")


def test_loader_on_a_missing_file() -> None:
    with pytest.raises(SimulationError, match="cannot read trace"):
        load_philly_csv("/nonexistent/trace.csv")


# --- Properties of every replay -------------------------------------------------------


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[TraceJob], int, int]:
    nodes = draw(st.integers(1, 3))
    gpus_per_node = draw(st.sampled_from([1, 2, 4, 8]))
    jobs = [
        TraceJob(
            id=i,
            submit_s=draw(st.integers(0, 60)),
            duration_s=draw(st.integers(0, 40)),
            gpus=draw(st.integers(1, gpus_per_node * (nodes + 1))),
            account=draw(st.sampled_from("xyz")),
            walltime_s=draw(st.integers(1, 50)),
        )
        for i in range(draw(st.integers(1, 25)))
    ]
    jobs.sort(key=lambda j: j.submit_s)
    return jobs, nodes, gpus_per_node


@settings(max_examples=200, deadline=None)
@given(traces())
def test_replay_never_over_allocates_and_runs_jobs_exactly(world: tuple[list[TraceJob], int, int]) -> None:
    jobs, nodes, gpus_per_node = world
    result = replay(jobs, homogeneous_cluster(nodes, gpus_per_node), FIFO)

    # every job is either replayed or could never fit
    assert len(result.records) + len(result.unplaceable) == len(jobs)
    assert all(math.ceil(j.gpus / gpus_per_node) > nodes for j in result.unplaceable)
    held: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for record in result.records:
        j = record.job
        assert record.start_s >= j.submit_s
        assert record.run_s == min(j.duration_s, j.walltime_s)
        assert record.timed_out == (j.duration_s > j.walltime_s)
        assert record.gpus_held >= j.gpus
        for allocation in record.allocations:
            for index in allocation.gpu_indices:
                held.setdefault((allocation.node, index), []).append((record.start_s, record.end_s))
    # no GPU is held by two jobs at any instant (intervals are [start, end))
    for intervals in held.values():
        busy = sorted((s, e) for s, e in intervals if e > s)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(busy))
    # strict FIFO: jobs start in submission order
    starts = [r.start_s for r in result.records]
    assert starts == sorted(starts)
    if result.records:
        m = measure(result)
        assert 0 <= m.utilization <= 1 + 1e-9
        assert m.timeouts == sum(1 for r in result.records if r.timed_out)


# --- Command line and management command ----------------------------------------------


def _figures(text: str) -> dict[tuple[str | None, str], Any]:
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:
        assert set(line) - {"cluster"} == {"metric", "value", "unit", "policy", "trace", "nodes", "gpus_per_node"}
    return {(line["policy"], line["metric"]): line["value"] for line in lines}


def test_main_prints_bounds_and_one_line_per_metric(sample: Path) -> None:
    out = io.StringIO()
    # 8 nodes of 8 GPUs hold the trace's largest gang (64 GPUs): every job is placeable
    argv = [str(sample), "--nodes", "8", "--gpus-per-node", "8", "--limit", "300", "--policy", "fifo"]
    assert main(argv, out) == 0

    figures = _figures(out.getvalue())
    assert figures[(None, "jobs")] == figures[("fifo", "jobs")] == 300
    assert figures[("fifo", "unplaceable")] == figures[("fifo", "timeouts")] == 0
    assert figures[("fifo", "utilization")] <= figures[(None, "utilization_bound")] + 1e-9
    assert figures[("fifo", "avg_jct_s")] >= figures[(None, "jct_lower_bound_s")]
    assert ("fifo", "replay_wall_s") in figures


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--policy", "fairshare-preempt"],
            "unknown policy 'fairshare-preempt'; known policies: fairshare-backfill, fairshare-backfill-preempt, fifo, "
            "fifo-backfill",
        ),
        (["--nodes", "0"], "--nodes: must be >= 1"),
        (["--gpus-per-node", "x"], "--gpus-per-node: must be a whole number"),
        (["--window-start", "10", "--window-end", "10"], "must be before --window-end"),
        (["--window-start", "999999999"], "no job of .* is in the selection"),
        (["--walltime-noise", "-1"], "--walltime-noise: must be a finite number >= 0"),
    ],
    ids=[
        "unknown policy",
        "zero nodes",
        "non-numeric GPUs",
        "empty window",
        "window after the trace",
        "negative noise",
    ],
)
def test_main_rejects_bad_options_clearly(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], sample: Path
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([str(sample), *argv], io.StringIO())
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_main_on_a_missing_trace(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["/nonexistent/trace.csv"], io.StringIO())
    assert "cannot read trace '/nonexistent/trace.csv'" in capsys.readouterr().err


def test_manage_py_simulate_delegates_without_a_database(sample: Path, sample_rows: list[TraceRow]) -> None:
    out = io.StringIO()
    call_command("simulate", str(sample), "--nodes", "4", "--limit", "200", "--policy", "fifo", stdout=out)

    figures = _figures(out.getvalue())
    # 4 nodes of 8 GPUs: the jobs of more than 32 GPUs are counted unplaceable, the rest replayed
    too_big = sum(1 for r in sample_rows[:200] if r.num_gpus > 32)
    assert too_big > 0, "the sample is meant to hold a job bigger than 4 x 8 GPUs"
    assert (figures[("fifo", "jobs")], figures[("fifo", "unplaceable")]) == (200 - too_big, too_big)
    reference = io.StringIO()
    main([str(sample), "--nodes", "4", "--limit", "200", "--policy", "fifo"], reference)
    same = _figures(reference.getvalue())
    clocks = {"replay_wall_s", "sim_wall_s"}
    assert {k: v for k, v in figures.items() if k[1] not in clocks} == {
        k: v for k, v in same.items() if k[1] not in clocks
    }


def test_every_policy_is_replayed_when_none_is_named(sample: Path) -> None:
    out = io.StringIO()
    main([str(sample), "--nodes", "4", "--limit", "50"], out)
    assert {policy for policy, metric in _figures(out.getvalue()) if metric == "sim_wall_s"} == set(POLICIES)


def test_manage_py_simulate_errors_are_command_errors(sample: Path) -> None:
    with pytest.raises(CommandError, match="known policies: fairshare-backfill, fairshare-backfill-preempt, fifo"):
        call_command("simulate", str(sample), "--policy", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="cannot read trace"):
        call_command("simulate", "/nonexistent/trace.csv", stdout=io.StringIO())


def test_a_cluster_file_gives_a_heterogeneous_cluster(tmp_path: Path, sample: Path) -> None:
    spec = {"nodes": [{"name": "big", "count": 2, "gpus": 8}, {"name": "small", "count": 3, "gpus": 4, "model": "L4"}]}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(spec))
    out = io.StringIO()
    main([str(sample), "--cluster", str(path), "--limit", "100", "--policy", "fifo-backfill"], out)
    figures = _figures(out.getvalue())
    assert figures[("fifo-backfill", "jobs")] + figures[("fifo-backfill", "unplaceable")] == 100
    nodes = load_cluster_file(path)
    assert [n.name for n in nodes] == ["big-001", "big-002", "small-001", "small-002", "small-003"]
    assert {g.model for n in nodes for g in n.gpus} == {"GPU", "L4"}


@pytest.mark.parametrize(
    "content,message",
    [
        ("not json", "cannot read cluster file"),
        ('{"nodes": []}', "needs a non-empty list"),
        ('{"nodes": [{"name": "a", "gpus": 0}]}', r"nodes\[0\]\.gpus must be an integer >= 1"),
        ('{"nodes": [{"name": "a", "gpus": 2, "colour": "red"}]}', "must be an object with"),
        ('{"nodes": [{"name": "a", "gpus": 2}, {"name": "a", "gpus": 2}]}', "names a node twice"),
    ],
)
def test_bad_cluster_files_are_refused_naming_the_problem(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(content)
    with pytest.raises(SimulationError, match=message):
        load_cluster_file(path)
