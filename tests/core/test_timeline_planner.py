"""The queue planner behind start estimates is exact: for every job it finds the same
start and GPUs as trying every candidate instant in order on every node.

``Planner`` keeps step functions per node, per-request cursors and release indexes that
drop nodes for good; the reference below keeps none of that. It lists what is free on
each node at each instant from scratch (capacity now, plus releases, minus the jobs
planned so far), and at each candidate instant (now, a release, the end of a planned
job) in order hands ``Ledger.place`` what stays free for the job's whole walltime.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.placement import Ledger, NodeCapacity
from scheduler.core.timeline import Planner, gpu_list_key
from scheduler.core.types import CPU_MILLIS, Allocation, GpuView, NodeView, PendingJob, PlacementStrategy
from tests.builders import T0, node, pending


@dataclass
class Reference:
    """The plan by brute force. Times are microseconds after ``T0``."""

    nodes: list[NodeView]  # schedulable, in ledger order
    free_now: dict[str, tuple[set[int], int, int]]  # node -> GPUs, CPUs, memory free now
    releases: list[tuple[int, Allocation]]  # given back from then on
    planned: list[tuple[int, int, Allocation]] = field(default_factory=list)  # held on [start, end)

    def free_at(self, name: str, at: int) -> tuple[set[int], int, int]:
        gpus, cpus, memory = self.free_now[name]
        gpus = set(gpus)
        for when, a in self.releases:
            if a.node == name and when <= at:
                gpus, cpus, memory = gpus | set(a.gpu_indices), cpus + a.cpu_millis, memory + a.memory_mib
        for start, end, a in self.planned:
            if a.node == name and start <= at < end:
                gpus, cpus, memory = gpus - set(a.gpu_indices), cpus - a.cpu_millis, memory - a.memory_mib
        return gpus, cpus, memory

    def instants(self) -> list[int]:
        return sorted({0, *(when for when, _ in self.releases), *(end for _, end, _ in self.planned)})

    def plan(self, job: PendingJob, strategy: PlacementStrategy) -> tuple[int, tuple[Allocation, ...]] | None:
        walltime = job.walltime_seconds * 1_000_000
        for at in self.instants():
            inside = [t for t in self.instants() if at < t < at + walltime]
            ledger = Ledger(())
            for n in self.nodes:
                now_gpus = self.free_at(n.name, at)[0]
                gpus, cpus, memory = set(now_gpus), 10**12, 10**12
                for t in (at, *inside):
                    g, c, m = self.free_at(n.name, t)
                    gpus &= g
                    cpus, memory = min(cpus, c), min(memory, m)
                capacity = NodeCapacity(
                    n, {g.index: g.index in gpus for g in n.gpus}, cpus, memory, free_count=len(now_gpus)
                )
                ledger.by_name[n.name] = capacity
                ledger.by_cluster.setdefault(n.cluster, []).append(capacity)
            start = ledger.place(job, None, strategy)
            if start is not None:
                self.planned += [(at, at + walltime, a) for a in start.allocations]
                return at, start.allocations
        return None


@st.composite
def worlds(  # type: ignore[no-untyped-def]
    draw: st.DrawFn,
    *,
    running_per_node: int = 1,
    running_cpus: int = 2,
    ends_minutes: tuple[int, ...] = (-30, 0, 30, 60, 90, 180, 360),
    queue: int = 12,
    models: tuple[str, ...] = ("", "", "H100-80GB", "L4"),
    walltimes: tuple[int, ...] = (1800, 3600, 3 * 3600),
):
    """Up to six nodes in two clusters (some down, some with a broken GPU), whose busy
    GPUs belong to up to ``running_per_node`` running jobs each, released at one of
    ``ends_minutes`` after now (or already due); and a queue of up to ``queue`` jobs."""
    nodes = [
        node(
            f"n{i}",
            gpus=draw(st.integers(1, 4)),
            model=draw(st.sampled_from(["H100-80GB", "L4"])),
            cluster=draw(st.sampled_from(["a", "b"])),
            cpus=draw(st.sampled_from([4, 64])),
            fractional_cpus=draw(st.booleans()),
            schedulable=draw(st.integers(0, 9)) > 0,
            unhealthy=draw(st.sampled_from([(), (0,)])),
        )
        for i in range(draw(st.integers(1, 6)))
    ]
    ledger = Ledger(nodes)
    releases = []
    for n in nodes:
        taken = draw(st.lists(st.sampled_from(range(len(n.gpus))), unique=True, max_size=len(n.gpus)))
        jobs_on_node = draw(st.integers(1, running_per_node))
        for k in range(jobs_on_node):
            gpus = tuple(taken[k::jobs_on_node])
            if gpus:
                allocation = Allocation(n.name, gpus, draw(st.integers(0, running_cpus)) * CPU_MILLIS)
                ledger.take((allocation,))
                ends = T0 + timedelta(minutes=draw(st.sampled_from(ends_minutes)))
                releases.append((ends, (allocation,)))
    jobs = [
        pending(
            i,
            nodes=draw(st.integers(1, 2)),
            gpus_per_node=draw(st.integers(0, 3)),
            cpus_per_node=draw(st.sampled_from([0, 0.5, 1, 3])),
            gpu_model=draw(st.sampled_from(models)),
            walltime_seconds=draw(st.sampled_from(walltimes)),
        )
        for i in range(1, draw(st.integers(1, queue)) + 1)
    ]
    return nodes, ledger, releases, jobs, draw(st.sampled_from(list(PlacementStrategy)))


#: Each node's running jobs release at one of few instants, so one node releases several
#: times and two jobs on it may end together; longer queues of few kinds, so requests of
#: one kind are planned again and again from where the last one stopped.
crowded = worlds(
    running_per_node=3,
    running_cpus=1,
    ends_minutes=(-30, 0, 30, 60, 180),
    queue=20,
    models=("", "H100-80GB"),
    walltimes=(1800, 3600),
)


def assert_plans_as_the_reference(world) -> None:  # type: ignore[no-untyped-def]
    nodes, ledger, releases, jobs, strategy = world
    planner = Planner(ledger, releases, T0, strategy)
    by_name = {n.name: n for n in nodes}
    reference = Reference(
        [c.node for capacities in ledger.by_cluster.values() for c in capacities],
        {
            name: ({i for i, free in c.free_gpus.items() if free}, c.free_cpu_millis, c.free_memory_mib)
            for name, c in ledger.by_name.items()
        },
        [
            (max((at - T0) // timedelta(microseconds=1), 0), a)
            for at, allocations in releases
            for a in allocations
            if by_name[a.node].schedulable
        ],
    )
    for job in jobs:
        expected = reference.plan(job, strategy)
        planned = planner.plan(job)
        if expected is None:
            assert planned is None
        else:
            assert planned == (T0 + timedelta(microseconds=expected[0]), expected[1])


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_the_planner_finds_the_same_start_and_gpus_as_trying_every_instant(world) -> None:  # type: ignore[no-untyped-def]
    assert_plans_as_the_reference(world)


@settings(max_examples=300, deadline=None)
@given(crowded)
def test_nodes_that_release_several_times_and_long_queues_plan_as_trying_every_instant(world) -> None:  # type: ignore[no-untyped-def]
    assert_plans_as_the_reference(world)


def test_the_gpu_list_key_tells_apart_lists_that_differ_in_any_field() -> None:
    base = node("n", gpus=2).gpus
    assert gpu_list_key(base) == gpu_list_key(tuple(replace(g) for g in base))
    for f in fields(GpuView):
        value = getattr(base[1], f.name)
        changed = {
            int: lambda v: v + 1,
            str: lambda v: f"{v}x",
            bool: lambda v: not v,
            tuple: lambda v: (v[0], v[1] + 1),
        }[type(value)](value)
        other = (base[0], replace(base[1], **{f.name: changed}))
        assert other != base and gpu_list_key(other) != gpu_list_key(base), f.name
