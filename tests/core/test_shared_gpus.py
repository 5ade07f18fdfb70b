"""Fractional jobs on shared GPUs (time-slicing / MPS): a share takes its fraction of the GPU;
the sharing overhead is charged in accounting, not lost as capacity."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import PendingReason, Policy, schedule
from scheduler.core.fairshare import UsagePolicy
from scheduler.core.types import (
    Allocation,
    GpuView,
    Limits,
    NodeView,
    PendingJob,
    PlacementStrategy,
    RunningJob,
    Snapshot,
)
from tests.builders import T0, node, pending

NOW = T0 + timedelta(hours=1)


def shared_node(name: str = "s1", gpus: int = 2, memory_mib: int = 81920) -> NodeView:
    return NodeView(
        name=name,
        cluster="c1",
        cpu_millis=64_000,
        memory_mib=512_000,
        gpus=tuple(GpuView(i, "H100-80GB", memory_mib, (9, 0), sharing="time-slicing") for i in range(gpus)),
    )


def share(job_id: int, fraction: float, memory_mib: int = 0, **fields: Any) -> PendingJob:
    return pending(job_id, gpu_share=fraction, gpu_memory_mib_share=memory_mib, **fields)


def gpus_used(snapshot: Snapshot, policy: Policy) -> dict[int, int]:
    return {s.job_id: s.allocations[0].gpu_indices[0] for s in schedule(snapshot, policy, NOW).starts}


def test_shares_pack_onto_one_gpu_until_it_is_full() -> None:
    # 0.4 + 0.4 fit GPU 0; the third 0.4 would make 1.2, so it goes to GPU 1.
    snapshot = Snapshot((shared_node(),), (), (share(1, 0.4), share(2, 0.4), share(3, 0.4)))
    assert gpus_used(snapshot, Policy(placement=PlacementStrategy.PACK)) == {1: 0, 2: 0, 3: 1}


def test_a_shares_capacity_is_its_fraction_two_halves_fill_a_gpu() -> None:
    snapshot = Snapshot((shared_node(),), (), (share(1, 0.5), share(2, 0.5)))
    assert gpus_used(snapshot, Policy()) == {1: 0, 2: 0}


def test_shares_in_thirds_add_up_exactly_in_any_order() -> None:
    # Counted in milli-GPUs: three 0.333 shares fit one GPU, a fourth does not.
    snapshot = Snapshot((shared_node(gpus=1),), (), tuple(share(i, 0.333) for i in (1, 2, 3, 4)))
    decisions = schedule(snapshot, Policy(strict_order=False), NOW)
    assert [s.job_id for s in decisions.starts] == [1, 2, 3]


def test_gpu_memory_shares_must_fit_in_the_gpus_memory() -> None:
    snapshot = Snapshot(
        (shared_node(gpus=1),), (), (share(1, 0.2, 40_000), share(2, 0.2, 40_000), share(3, 0.2, 40_000))
    )
    decisions = schedule(snapshot, Policy(), NOW)
    assert [s.job_id for s in decisions.starts] == [1, 2]
    assert decisions.pending_reasons[3] is PendingReason.RESOURCES


def test_a_fractional_job_only_runs_on_gpus_in_a_sharing_mode() -> None:
    decisions = schedule(Snapshot((node("n1"),), (), (share(1, 0.5),)), Policy(), NOW)
    assert decisions.starts == []
    assert decisions.pending_reasons[1] is PendingReason.NODES_UNAVAILABLE


def test_whole_gpu_jobs_take_free_shared_gpus_but_not_ones_holding_shares() -> None:
    running = (RunningJob(90, (Allocation("s1", (0,), gpu_share=0.3),), NOW, 3600),)
    snapshot = Snapshot((shared_node(),), running, (pending(1, gpus_per_node=2), pending(2, gpus_per_node=1)))
    decisions = schedule(snapshot, Policy(strict_order=False), NOW)
    assert [(s.job_id, s.allocations[0].gpu_indices) for s in decisions.starts] == [(2, (1,))]


def test_a_whole_gpu_job_never_takes_a_gpu_it_could_not_hold_alone() -> None:
    """Kubernetes' time-sliced GPUs come in replicas the device plugin deals out: a
    whole-GPU job there would share its GPU, so it waits; shares may use them."""
    node = shared_node(gpus=1)
    replicated = replace(node, gpus=tuple(replace(g, exclusive=False) for g in node.gpus))
    decisions = schedule(Snapshot((replicated,), (), (pending(1), share(2, 0.5))), Policy(strict_order=False), NOW)
    assert [s.job_id for s in decisions.starts] == [2]
    assert decisions.pending_reasons[1] is PendingReason.NODES_UNAVAILABLE


def test_a_gpu_whose_shares_ended_is_whole_again() -> None:
    running = (RunningJob(90, (Allocation("s1", (0,), gpu_share=0.3),), NOW, 3600),)
    with_share = Snapshot((shared_node(gpus=1),), running, (pending(1),))
    assert schedule(with_share, Policy(), NOW).starts == []
    assert [s.job_id for s in schedule(Snapshot((shared_node(gpus=1),), (), (pending(1),)), Policy(), NOW).starts] == [
        1
    ]


def test_quotas_count_a_share_as_its_fraction_of_a_gpu() -> None:
    jobs = tuple(share(i, 0.5, account="lab", user="u") for i in (1, 2, 3))
    snapshot = Snapshot(
        (shared_node(),), (), jobs, account_limits={"lab": Limits(max_gpus=1)}, account_parents={"lab": None}
    )
    decisions = schedule(snapshot, Policy(), NOW)
    assert [s.job_id for s in decisions.starts] == [1, 2]
    assert decisions.blockers[3][0].message == "account lab holds 1 of its 1 GPUs; this job needs 0.5"


def test_usage_charges_a_share_plus_the_overhead_of_its_gpus_sharing_mode_and_model() -> None:
    policy = UsagePolicy(sharing_overheads={"time-slicing": 0.1, "mps": 0.05, "L4/mps": 0.02})
    half = Allocation("s1", (0,), gpu_share=0.5)
    h100 = shared_node().gpus[0]
    assert policy.gpus_charged(half, h100) == pytest.approx(0.55)
    assert policy.gpus_charged(half, replace(h100, sharing="mps")) == pytest.approx(0.525)
    assert policy.gpus_charged(half, replace(h100, model="L4", sharing="mps")) == pytest.approx(0.51)
    assert policy.gpus_charged(Allocation("n1", (0, 1)), h100) == 1.0  # per whole GPU held
    assert policy.gpus_charged(half, replace(h100, sharing="")) == 0.5  # not a sharing mode: nothing extra


def test_a_negative_sharing_overhead_is_refused() -> None:
    with pytest.raises(ValueError, match="sharing overhead for 'mps'"):
        UsagePolicy(sharing_overheads={"mps": -0.1})


@settings(max_examples=80, deadline=None)
@given(
    requests=st.lists(
        st.tuples(st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.75, 0.9]), st.sampled_from([0, 10_000, 30_000])),
        min_size=1,
        max_size=20,
    ),
    placement=st.sampled_from(list(PlacementStrategy)),
)
def test_property_no_shared_gpu_is_overcommitted_in_capacity_or_memory(
    requests: list[tuple[float, int]], placement: PlacementStrategy
) -> None:
    jobs = tuple(share(i + 1, fraction, memory) for i, (fraction, memory) in enumerate(requests))
    decisions = schedule(
        Snapshot((shared_node(gpus=3),), (), jobs), Policy(strict_order=False, placement=placement), NOW
    )
    load: dict[int, int] = defaultdict(int)  # milli-GPUs
    memory: dict[int, int] = defaultdict(int)
    for start in decisions.starts:
        (allocation,) = start.allocations
        (index,) = allocation.gpu_indices
        load[index] += round(allocation.gpu_share * 1000)
        memory[index] += allocation.gpu_memory_mib
    assert all(value <= 1000 for value in load.values())
    assert all(value <= 81920 for value in memory.values())
    # A job waits only if no GPU has room for it.
    for job in jobs:
        if job.id in decisions.pending_reasons:
            need = round(job.gpu_share * 1000)
            assert all(load[i] + need > 1000 or memory[i] + job.gpu_memory_mib_share > 81920 for i in range(3))
