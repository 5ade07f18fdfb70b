"""Properties every placement must keep, over random clusters and queues."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import Policy, schedule
from tests.builders import MODELS, T0, node, pending, running, snapshot

models = st.sampled_from(sorted(MODELS))


@st.composite
def worlds(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    nodes = [
        node(
            f"n{i}",
            gpus=draw(st.integers(0, 8)),
            model=draw(models),
            cluster=draw(st.sampled_from(["a", "b"])),
            cpus=draw(st.integers(1, 64)),
            schedulable=draw(st.booleans()),
        )
        for i in range(draw(st.integers(1, 8)))
    ]
    busy = []
    for job_id, n in enumerate(nodes, start=1000):
        taken = draw(st.lists(st.sampled_from(range(len(n.gpus))), unique=True)) if n.gpus else []
        if taken:
            busy.append(running(job_id, (n.name, tuple(taken))))
    jobs = [
        pending(
            i,
            age_rank=draw(st.integers(0, 50)),
            nodes=draw(st.integers(1, 3)),
            gpus_per_node=draw(st.integers(0, 8)),
            gpu_model=draw(st.one_of(st.just(""), models)),
            cpus_per_node=draw(st.one_of(st.integers(1, 16), st.sampled_from([0.5, 2.25]))),
            min_gpu_memory_mib=draw(st.sampled_from([0, 20_000, 50_000])),
        )
        for i in range(draw(st.integers(0, 25)))
    ]
    return nodes, busy, jobs, Policy(strict_order=draw(st.booleans()))


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_never_double_allocates_and_respects_requests(world) -> None:  # type: ignore[no-untyped-def]
    nodes, busy, jobs, policy = world
    decisions = schedule(snapshot(nodes, jobs, busy), policy, T0)
    by_name = {n.name: n for n in nodes}
    by_id = {j.id: j for j in jobs}

    held = {(a.node, i) for r in busy for a in r.allocations for i in a.gpu_indices}
    cpus_used = {n.name: 0 for n in nodes}
    for start in decisions.starts:
        job = by_id[start.job_id]
        # gang: exactly `nodes` distinct nodes, all in the start's cluster
        assert len({a.node for a in start.allocations}) == job.nodes == len(start.allocations)
        for alloc in start.allocations:
            n = by_name[alloc.node]
            assert n.schedulable and n.cluster == start.cluster
            assert len(alloc.gpu_indices) == job.gpus_per_node
            gpus = {g.index: g for g in n.gpus}
            for index in alloc.gpu_indices:
                assert (alloc.node, index) not in held, "GPU given twice"
                held.add((alloc.node, index))
                assert job.accepts(gpus[index])
            cpus_used[alloc.node] += alloc.cpu_millis
    assert all(cpus_used[name] <= by_name[name].cpu_millis for name in cpus_used)
    # every pending job is either started or has a reason, never both
    started = {s.job_id for s in decisions.starts}
    assert started.isdisjoint(decisions.pending_reasons)
    assert started | set(decisions.pending_reasons) == set(by_id)
