"""The openb trace format and the inflation replay (FGD's packing measure), on small
hand-written tables."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from scheduler.core.types import PlacementStrategy, Policy
from scheduler.replay.inflation import inflate, main
from scheduler.replay.openb import inflated_order, load_nodes, load_order, load_pods
from scheduler.replay.trace import SimulationError

NODES = """sn,cpu_milli,memory_mib,gpu,model
node-a,8000,65536,2,T4
node-b,32000,131072,1,V100M16
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
half,2000,1024,1,500,,LS,Running,0,10,0
whole,4000,2048,1,1000,,LS,Running,0,10,0
pair,1000,1024,2,1000,T4,LS,Running,0,10,0
cpu,30000,1024,0,0,,BE,Running,0,10,0
v100,1000,1024,1,1000,V100M16|V100M32,LS,Running,0,10,0
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    (tmp_path / "order.txt").write_text("NODEPERM 1 0\nhalf -1\nhalf -1\npair -1\nwhole -1\ncpu -1\nv100 -1\n")
    return tmp_path


def test_a_node_list_becomes_shared_gpus_cpus_in_millicores_and_permuted_names(trace: Path) -> None:
    nodes = load_nodes(trace / "nodes.csv", [1, 0])
    assert [(n.name, n.cpu_millis, n.memory_mib, len(n.gpus)) for n in nodes] == [
        ("0001-node-a", 8000, 65536, 2),
        ("0000-node-b", 32000, 131072, 1),
    ]
    assert all(g.shared and g.model == "T4" for g in nodes[0].gpus)


def test_pods_ask_shares_whole_gpus_cpus_and_model_sets(trace: Path) -> None:
    pods = load_pods(trace / "pods.csv")
    half, pair, v100 = pods["half"].request(1), pods["pair"].request(2), pods["v100"].request(3)
    assert (half.gpu_share, half.gpus_per_node, half.cpu_millis_per_node) == (0.5, 1, 2000)
    assert (pair.gpu_share, pair.gpus_per_node, pair.gpu_model) == (0.0, 2, "T4")
    assert v100.gpu_model == "V100M16|V100M32"
    assert [pods[name].gpu_demand_milli for name in ("half", "whole", "pair", "cpu")] == [500, 1000, 2000, 0]


def test_inflation_places_each_pod_once_and_never_ends_one(trace: Path) -> None:
    """3 GPUs (3,000 milli). The two halves go to the smaller node (one V100) and fill
    it; the whole GPU takes a T4; the pair then finds one T4 free and is dropped, the
    CPU-only pod (30 cores; 28 are left on the V100 node) and the V100 pod find no room
    either. Allocated after each pod 500, 1000, 2000 and then 2000 of arrived 4000, 4000,
    5000: 33.33% unallocated from 133% arrived on."""
    (trace / "order.txt").write_text("NODEPERM 1 0\nhalf -1\nhalf -1\nwhole -1\npair -1\ncpu -1\nv100 -1\n")
    pods = load_pods(trace / "pods.csv")
    permutation, order = load_order(trace / "order.txt", pods)
    curve = inflate(load_nodes(trace / "nodes.csv", permutation), order, Policy(explain=False))
    assert (curve.placed, curve.offered) == (3, 6)
    assert curve.allocated_pct == pytest.approx({17: 16.67, 33: 33.33, 67: 66.67, 133: 66.67, 167: 66.67})
    assert curve.unallocated_pct(133) == pytest.approx(33.33)
    assert curve.unallocated_pct(100) is None  # arrived % jumped from 67 to 133


def test_whole_node_pods_no_node_could_hold_are_counted_apart(trace: Path) -> None:
    """The largest node holds 2 GPUs, so a 2-GPU pod asks a whole node. ``big`` (more CPUs
    than any node) is dropped at 67% arrived: no placement could start it, so it is not
    starved; ``pair`` finds one T4 free at 133% arrived and does not count: past 100%
    every cluster drops large pods."""
    with (trace / "pods.csv").open("a") as pods_file:
        pods_file.write("big,9000,1024,2,1000,,LS,Running,0,10,0\n")
    (trace / "order.txt").write_text("NODEPERM 1 0\nbig -1\nhalf -1\nhalf -1\nwhole -1\npair -1\n")
    pods = load_pods(trace / "pods.csv")
    permutation, order = load_order(trace / "order.txt", pods)
    curve = inflate(load_nodes(trace / "nodes.csv", permutation), order, Policy(explain=False))
    assert (curve.placed, curve.offered) == (3, 5)
    assert (curve.whole_node_failed, curve.whole_node_never_fit) == (0, 1)


def test_a_whole_node_pod_a_broken_node_keeps_out_is_starved(trace: Path) -> None:
    """Half a T4 taken (the pod names T4s), the 2-T4 pod comes at 83% arrived: the T4 node
    would hold it idle, so it counts as starved."""
    with (trace / "pods.csv").open("a") as pods_file:
        pods_file.write("t4half,1000,1024,1,500,T4,LS,Running,0,10,0\n")
    (trace / "order.txt").write_text("NODEPERM 1 0\nt4half -1\npair -1\n")
    pods = load_pods(trace / "pods.csv")
    permutation, order = load_order(trace / "order.txt", pods)
    curve = inflate(load_nodes(trace / "nodes.csv", permutation), order, Policy(explain=False))
    assert (curve.placed, curve.whole_node_failed, curve.whole_node_never_fit) == (1, 1, 0)


def test_a_seeded_order_inflates_to_130_percent_of_the_gpus(trace: Path) -> None:
    pods = list(load_pods(trace / "pods.csv").values())
    order = inflated_order(pods, total_gpus=3, seed=7)
    assert sorted(p.name for p in order[: len(pods)]) == sorted(p.name for p in pods)  # every pod once first
    assert sum(p.gpu_demand_milli for p in order) >= 3 * 1300
    assert inflated_order(pods, total_gpus=3, seed=7) == order  # the seed decides


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        ("name,cpu_milli,memory_mib,num_gpu\nx,1,1,1\n", "missing column(s) gpu_milli"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,lots,1,1,100\n", "row 2: cpu_milli must be a whole number"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,1,2,500\n", "row 2: gpu_milli 500 with num_gpu 2"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1,-5,1,100\n", "row 2: memory_mib must be >= 0"),
    ],
)
def test_bad_rows_are_refused_naming_the_row_and_column(tmp_path: Path, pods: str, message: str) -> None:
    (tmp_path / "pods.csv").write_text(pods)
    with pytest.raises(SimulationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_pods(tmp_path / "pods.csv")


def test_an_order_naming_an_unknown_pod_is_refused(trace: Path) -> None:
    (trace / "order.txt").write_text("NODEPERM 0 1\nghost -1\n")
    with pytest.raises(SimulationError, match="line 2 names pod 'ghost'"):
        load_order(trace / "order.txt", load_pods(trace / "pods.csv"))


def test_the_command_prints_one_json_line_per_point_and_placement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten GPUs and pods of 0.1 GPU, shuffled and copied to 130%: each arrival is 1%, and
    a hundred fill the GPUs exactly, whichever placement."""
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nbig,1000000,1000000,10,T4\n")
    (tmp_path / "pods.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\ntenth,100,10,1,100\n")
    argv = [str(tmp_path / "nodes.csv"), str(tmp_path / "pods.csv"), "--seed", "3", "--placement", "fragmentation,pack"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in io.StringIO(capsys.readouterr().out)]
    points = {
        (line["placement"], line["arrived_pct"]): line["value"]
        for line in lines
        if line["metric"] == "sim_unallocated_gpu_pct" and line["unit"] == "%" and line["order"] == "seed 3"
    }
    for placement in (PlacementStrategy.FRAGMENTATION.value, "pack"):
        assert [points[placement, pct] for pct in (90, 95, 100, 130)] == [10.0, 5.0, 0.0, 0.0]
    assert [line["metric"] for line in lines].count("sim_wall_s") == 2
