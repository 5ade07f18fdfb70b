"""Planning the queue forward: per-node availability profiles (Slurm's ``node_space``).

A start-time estimate asks "when is the earliest instant this job fits, for its whole
walltime, alongside every job planned before it?". Copying the ledger and replaying
every release for each job (what :func:`scheduler.core.backfill.plan_reservation`
does for one reservation) costs O(nodes + running) per job; for a queue of 10,000 jobs
on 1,000 nodes that is far too slow. Here each node keeps a step function of what is
free on it from ``now`` on, and two facts keep the search short:

1. **Nothing planned ever frees capacity.** Planning a job only takes resources on
   ``[start, end)``, so the set of instants at which a given request (its shape and
   walltime) fits only shrinks. The search for an identical request resumes where the
   previous one ended (a per-request cursor), never from ``now``.
2. **Only releases open room.** Between two instants at which something is released
   (a running job's walltime limit, a planned job's end), a node's availability for a
   window ``[t, t + walltime)`` can only shrink as ``t`` grows. So when the search moves
   to the next release instant, the nodes that fit there are those that still fit among
   the ones that fitted before, plus the nodes something was released on.

The placement chosen at the start instant is the one ``Ledger.place`` would choose on
the free capacity at that instant, GPUs used by later-planned jobs held back: same
node order for pack, spread and first, same GPUs (lowest positions first).

Times are integer microseconds after ``now``, so arithmetic is exact.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler.core.bits import bisect_left, bisect_right, popcount
from scheduler.core.placement import Ledger, request_shape
from scheduler.core.types import (
    Allocation,
    Decisions,
    GpuView,
    NodeView,
    PendingJob,
    PendingReason,
    PlacementStrategy,
    Policy,
)
from scheduler.core.windows import WindowBook

_US = timedelta(microseconds=1)
#: Later than any instant a plan can reach (microseconds after ``now``).
FOREVER = 1 << 62


def to_us(at: datetime, now: datetime) -> int:
    """``at`` as whole microseconds after ``now`` (negative if before)."""
    return (at - now) // _US


@dataclass(slots=True)
class NodeTimeline:
    """What is free on one node from ``now`` on, as a step function.

    Segment ``i`` runs from ``times[i]`` to ``times[i + 1]`` (the last one forever) and
    has ``masks[i]`` free GPUs (bit ``p`` is ``node.gpus[p]``), ``cpus[i]`` free CPUs and
    ``memory[i]`` free MiB. ``times[0]`` is 0 (``now``).
    """

    node: NodeView
    position: int  # in (cluster, name) order: the ledger's order
    bits: dict[int, int]  # GPU index -> bit
    times: list[int] = field(default_factory=lambda: [0])
    masks: list[int] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)
    memory: list[int] = field(default_factory=list)

    def _split(self, at: int) -> int:
        """The index of the segment that starts at ``at``, splitting one if needed."""
        i = bisect_right(self.times, at) - 1
        if self.times[i] == at:
            return i
        i += 1
        self.times.insert(i, at)
        self.masks.insert(i, self.masks[i - 1])
        self.cpus.insert(i, self.cpus[i - 1])
        self.memory.insert(i, self.memory[i - 1])
        return i

    def change(self, start: int, end: int | None, mask: int, cpus: int, memory: int, sign: int) -> None:
        """Give back (``sign`` 1) or take (``sign`` -1) resources on ``[start, end)``."""
        i = self._split(max(start, 0))
        stop = self._split(end) if end is not None else len(self.times)
        for j in range(i, stop):
            self.masks[j] = self.masks[j] | mask if sign > 0 else self.masks[j] & ~mask
            self.cpus[j] += sign * cpus
            self.memory[j] += sign * memory

    def fit(self, start: int, end: int, accepts: int, wanted: int, cpus: int, memory: int) -> int:
        """The accepted GPUs free during all of ``[start, end)`` (a mask, >= 0) if at
        least ``wanted`` of them, ``cpus`` CPUs and ``memory`` MiB stay free throughout.

        Otherwise ``-1 - until``: no window of the same length starting before ``until``
        (and at or after ``start``) can fit, now or after more is planned (planning only
        takes). ``until`` is the end of the segment that rules the node out on its own,
        or of the start's segment if only GPUs free in both fall short; ``FOREVER`` if
        that segment is the last. Stops at the first segment that rules the node out:
        most nodes a search looks at fail, and a window can span many segments.
        """
        times, masks, free_cpu_millis, free_memory = self.times, self.masks, self.cpus, self.memory
        i = first = bisect_right(times, start) - 1
        last = len(times)
        mask = accepts
        while True:
            mask &= masks[i]
            if popcount(mask) < wanted or free_cpu_millis[i] < cpus or free_memory[i] < memory:
                alone = popcount(accepts & masks[i]) < wanted or free_cpu_millis[i] < cpus or free_memory[i] < memory
                ruled_out = i if alone else first
                return -1 - (times[ruled_out + 1] if ruled_out + 1 < last else FOREVER)
            i += 1
            if i == last or times[i] >= end:
                return mask

    def free_at(self, at: int) -> int:
        """The mask of GPUs free at ``at``."""
        return self.masks[bisect_right(self.times, at) - 1]

    def free_count(self, at: int) -> int:
        return popcount(self.masks[bisect_right(self.times, at) - 1])


@dataclass(slots=True)
class _Releases:
    """For the requests that accept the same GPUs: the release events of the nodes where
    such a GPU could still be free, in time order.

    An event is one int, ``instant << shift | node position`` (see ``Planner.shift``):
    one sorted list of ints keeps the events of an instant together, in node order, and
    costs no object per event. Built from the planner's release log when the first
    request of its kind comes, then kept up to date as jobs are planned (``Planner``
    hands each new release to the indexes that watch its node).
    """

    events: list[int]
    floor: int  # accepted GPUs free below which an event serves none of the requests (0 or 1)
    accepts: list[int]  # per node position, the GPUs it accepts (a mask)

    def add(self, event: int, position: int, free: int) -> None:
        """Note a release on the node at ``position``, with ``free`` (a mask) free there
        from then on, unless too few of those GPUs serve these requests (the walk
        would drop it on its first look; see ``Planner._released``) or it is already in
        (a node released twice at one instant)."""
        if popcount(free & self.accepts[position]) < self.floor:
            return
        events = self.events
        k = bisect_left(events, event)
        if k == len(events) or events[k] != event:
            events.insert(k, event)


@dataclass(slots=True)
class _Request:
    """One kind of request (a request shape and walltime), looked up once per job: the
    GPUs it accepts per node, the nodes its labels allow (``None``: any), its release
    index; and the cursor: where the last search for it ended (its instant and the
    nodes that fit; ``fitting`` is ``None`` before the first search), and per node
    position the instant before which it cannot start there (from the last failed
    check, see ``NodeTimeline.fit``): a release before it on that node opens nothing
    for this request."""

    accepts: list[int]
    allowed: list[bool] | None
    index: _Releases
    blocked: list[int]
    at: int = 0
    fitting: list[NodeTimeline] | None = None


def gpu_list_key(gpus: tuple[GpuView, ...]) -> tuple[object, ...]:
    """Equal for two GPU lists exactly when the lists are equal: every field of every
    GPU (``tests/core/test_timeline_planner.py`` checks that none is left out). The
    lists' own equality and hash are the dataclass's, which run as interpreted code even
    in the compiled core; for a thousand nodes that was ~3% of a cycle."""
    return tuple(
        (g.index, g.model, g.memory_mib, g.compute_capability, g.healthy, g.sharing, g.exclusive, g.mig_slice)
        for g in gpus
    )


class Planner:
    """Plans jobs one after another at their earliest start, each holding its resources
    for its whole walltime (a conservative-backfill plan of the queue).

    Built from a ledger (what is free now) and the releases to come; never modifies
    the ledger.
    """

    def __init__(
        self,
        ledger: Ledger,
        releases: Iterable[tuple[datetime, tuple[Allocation, ...]]],
        now: datetime,
        strategy: PlacementStrategy,
        windows: WindowBook | None = None,
    ) -> None:
        self.now = now
        #: Start estimates plan fragmentation-aware placement as pack: the future's
        #: node states are not scored (an estimate is a bound, not the placement).
        self.strategy = PlacementStrategy.PACK if strategy is PlacementStrategy.FRAGMENTATION else strategy
        self.lines: list[NodeTimeline] = []
        self.by_name: dict[str, NodeTimeline] = {}
        self.clusters: dict[str, list[NodeTimeline]] = {}
        #: The distinct GPU lists of the nodes, and per node position which one it has:
        #: most nodes share theirs with many others, so what a request accepts is
        #: worked out once per list (see ``_accepts``).
        gpu_lists: dict[tuple[object, ...], int] = {}
        self._gpu_lists: list[tuple[GpuView, ...]] = []
        self._gpu_list: list[int] = []
        for cluster, capacities in ledger.by_cluster.items():
            for capacity in capacities:
                kind = gpu_lists.setdefault(gpu_list_key(capacity.node.gpus), len(gpu_lists))
                if kind == len(self._gpu_lists):
                    self._gpu_lists.append(capacity.node.gpus)
                self._gpu_list.append(kind)
                bits = {gpu.index: p for p, gpu in enumerate(capacity.node.gpus)}
                mask = sum(1 << bits[i] for i, free in capacity.free_gpus.items() if free and i in bits)
                line = NodeTimeline(capacity.node, len(self.lines), bits)
                line.masks.append(mask)
                line.cpus.append(capacity.free_cpu_millis)
                line.memory.append(capacity.free_memory_mib)
                self.lines.append(line)
                self.by_name[capacity.node.name] = line
                self.clusters.setdefault(cluster, []).append(line)
        #: Per node position, every release on it as an event (see ``_Releases``): a new
        #: index starts from those of the nodes it watches.
        self.shift = max(len(self.lines), 1).bit_length()
        self._log: list[list[int]] = [[] for _ in self.lines]
        self._build(releases)
        if windows:
            self._set_aside(windows)
        self._accepting: dict[tuple[object, ...], list[int]] = {}
        #: Node labels -> per node, whether it carries them (jobs without labels: None).
        self._labelled: dict[tuple[tuple[tuple[str, str], ...], bool], list[bool]] = {}
        self._indexes: dict[tuple[object, ...], _Releases] = {}
        #: Per node position, the indexes its releases go to (those it could serve).
        self._watchers: list[list[_Releases]] = [[] for _ in self.lines]
        self._requests: dict[tuple[object, ...], _Request] = {}

    def _build(self, releases: Iterable[tuple[datetime, tuple[Allocation, ...]]]) -> None:
        """Add the releases to come to each node's step function, all at once.

        The same segments as giving each release back in turn over ``[at, forever)``:
        one boundary per instant something is released at, each segment holding what
        is free now plus everything released by its start. Sorting a node's releases
        once costs far less than splitting its lists once per release.
        """
        now, shift, by_name = self.now, self.shift, self.by_name
        per_line: dict[int, list[tuple[int, int, int, int]]] = {}
        for at, allocations in releases:
            instant = max(to_us(at, now), 0)
            for allocation in allocations:
                line = by_name.get(allocation.node)
                if line is None:
                    continue
                bits, mask = line.bits, 0
                for gpu_index in allocation.gpu_indices:
                    bit = bits.get(gpu_index)
                    if bit is not None:
                        mask |= 1 << bit
                per_line.setdefault(line.position, []).append(
                    (instant, mask, allocation.cpu_millis, allocation.memory_mib)
                )
                self._log[line.position].append(instant << shift | line.position)
        for position, given in per_line.items():
            line = self.lines[position]
            given.sort(key=lambda g: g[0])
            times, masks, cpus, memory = line.times, line.masks, line.cpus, line.memory
            for instant, mask, more_cpus, more_memory in given:
                if instant != times[-1]:
                    times.append(instant)
                    masks.append(masks[-1])
                    cpus.append(cpus[-1])
                    memory.append(memory[-1])
                masks[-1] |= mask
                cpus[-1] += more_cpus
                memory[-1] += more_memory

    def _set_aside(self, windows: WindowBook) -> None:
        """Take each window's nodes whole for its span, as if a job held them (one more
        CPU and MiB than they have, so that even a request for none finds no room), and
        log its end as a release there: nothing is planned into a window. Jobs that ask
        for a reservation are not planned here (``estimate_queue``)."""
        for window in windows.windows:
            start, end = max(to_us(window.start_at, self.now), 0), to_us(window.end_at, self.now)
            for name in window.nodes:
                line = self.by_name.get(name)
                if line is None:
                    continue
                whole = (1 << len(line.bits)) - 1
                line.change(start, end, whole, line.node.cpu_millis + 1, line.node.memory_mib + 1, -1)
                self._log[line.position].append(end << self.shift | line.position)

    def _allowed(self, job: PendingJob) -> list[bool] | None:
        """Per node, whether it carries the job's node labels (``None``: it asks for none).
        A GPU job's accept masks already say so; a CPU-only job needs this."""
        if not job.picks_nodes:
            return None
        key = (job.node_labels, job.part_of_a_cpu)
        allowed = self._labelled.get(key)
        if allowed is None:
            allowed = self._labelled[key] = [job.fits_node(line.node) for line in self.lines]
        return allowed

    def _released(
        self, wanted: int, accepts_key: tuple[object, ...], accepts: list[int], allowed: list[bool] | None = None
    ) -> _Releases:
        """The release index of jobs that accept the GPUs of ``accepts_key`` (asking
        ``wanted`` of them per node).

        One index per set of accepted GPUs, so a search walks only the instants at which
        something is released on a node that could hold it (a job asking for one GPU
        model skips every release on other models' nodes). Jobs asking 1, 2, 4 or 8 of
        the same GPUs share one index: every planned job adds its end to the indexes that
        watch its nodes, and one index per GPU count made that several insertions into
        long lists per job. A node's event is dropped once none of the accepted GPUs is
        free there at its instant (the ``floor``); planning only takes, so that stays
        true (see ``plan``). A search asking more skips an event with too few free
        without dropping it. Instant 0 starts with every node that has an accepted GPU,
        so a first search looks at what is free now through the same walk: a busy
        cluster has few such nodes, and most are dropped for good on the first look.
        """
        floor = min(wanted, 1)
        key = (floor, accepts_key)
        index = self._indexes.get(key)
        if index is None:
            eligible = [
                popcount(mask) >= floor and (allowed is None or allowed[position])
                for position, mask in enumerate(accepts)
            ]
            watched = [position for position, ok in enumerate(eligible) if ok]
            events = set(watched)  # instant 0
            for position in watched:
                events.update(self._log[position])
            index = self._indexes[key] = _Releases(sorted(events), floor, accepts)
            for position in watched:
                self._watchers[position].append(index)
        return index

    def _accepts(self, job: PendingJob) -> tuple[tuple[object, ...], list[int]]:
        """Per node, the mask of GPUs that satisfy the job's per-GPU constraints and node
        labels (and the key they are cached under)."""
        key = (
            job.gpu_model,
            job.min_gpu_memory_mib,
            job.min_compute_capability,
            job.gpu_share > 0,
            job.gpu_memory_mib_share,
            job.node_labels,
            job.part_of_a_cpu,
        )
        masks = self._accepting.get(key)
        if masks is None:
            per_list = [sum(1 << p for p, gpu in enumerate(gpus) if job.accepts(gpu)) for gpus in self._gpu_lists]
            masks = self._accepting[key] = [per_list[kind] for kind in self._gpu_list]
            if job.picks_nodes:
                for line in self.lines:
                    if not job.fits_node(line.node):
                        masks[line.position] = 0
        return key, masks

    # A hot loop, kept inline: once per pending job of every estimate pass over the queue.
    def plan(self, job: PendingJob, describe: bool = True) -> tuple[datetime, tuple[Allocation, ...]] | None:  # noqa: C901, PLR0915
        """Plan ``job`` at its earliest start and hold its resources until its walltime
        ends. Returns the start and allocations (none unless ``describe``: an estimate
        needs only the start), or ``None`` if it never fits.

        Steps:
        1. Resume at the cursor of identical requests (or ``now``, scanning every node).
        2. Keep the nodes one share of the job fits on for the whole walltime; if the
           strategy can place the gang on them, that instant is the start.
        3. Otherwise move to the next release instant at which some node of the job's
           release index still has ``gpus_per_node`` accepted GPUs free ("opens"):
           re-check the nodes kept, add the nodes that opened, and go to 2. Past the
           last release nothing changes any more: the job never fits.

        Instants at which nothing opens are skipped without re-checking the nodes kept:
        with nothing given back on them, what is free over the window only shrinks
        as the window moves later, so the nodes that fit there are a subset of those
        kept, and a subset cannot be placed where the whole set could not.
        """
        wanted, cpus, memory = job.gpus_per_node, job.cpu_millis_per_node, job.memory_mib_per_node
        walltime = job.walltime_seconds * 1_000_000
        lines, shift = self.lines, self.shift
        key = (request_shape(job), walltime)
        request = self._requests.get(key)
        if request is None:
            accepts_key, accepts = self._accepts(job)
            allowed = self._allowed(job)
            index = self._released(wanted, accepts_key, accepts, allowed)
            request = self._requests[key] = _Request(accepts, allowed, index, [-1] * len(lines))
        accepts, allowed, blocked = request.accepts, request.allowed, request.blocked
        events, floor = request.index.events, request.index.floor
        low = (1 << shift) - 1
        fitting: list[tuple[NodeTimeline, int]] = []
        if request.fitting is None and job.nodes > 0:
            at, i = 0, 0  # a first search walks the index from instant 0 (see _released)
        else:
            at = request.at
            candidates = request.fitting if request.fitting is not None else lines
            for line in candidates:
                if allowed is not None and not allowed[line.position]:
                    continue
                mask = line.fit(at, at + walltime, accepts[line.position], wanted, cpus, memory)
                if mask >= 0:
                    fitting.append((line, mask))
                else:
                    blocked[line.position] = -1 - mask
            i = bisect_right(events, at << shift | low)  # the first event after ``at``
        while True:
            if len(fitting) >= job.nodes:
                chosen = self._choose(job, fitting, at)
                if chosen is not None:
                    break
            opened: list[NodeTimeline] = []
            while not opened:
                if i == len(events):
                    request.at, request.fitting = at, [line for line, _ in fitting]
                    return None
                at = events[i] >> shift
                after = (at + 1) << shift
                while i < len(events) and events[i] < after:
                    position = events[i] & low
                    line = lines[position]  # free_at(at), inlined: the walk's innermost step
                    free = popcount(line.masks[bisect_right(line.times, at) - 1] & accepts[position])
                    if free < wanted:
                        if free < floor:
                            del events[i]  # only shrinks from here: never again
                        else:
                            i += 1  # too few for this job, enough for others of the index
                        continue
                    if blocked[position] <= at:
                        opened.append(line)
                    i += 1
            if fitting:
                kept = {line.position for line, _ in fitting}
                opened = [line for line, _ in fitting] + [line for line in opened if line.position not in kept]
            end = at + walltime
            fitting = []
            for line in opened:
                mask = line.fit(at, end, accepts[line.position], wanted, cpus, memory)
                if mask >= 0:
                    fitting.append((line, mask))
                else:
                    blocked[line.position] = -1 - mask
        request.at, request.fitting = at, [line for line, _ in fitting]
        allocations = []
        end = at + walltime
        for line, mask in chosen:
            picked = 0
            for _ in range(wanted):  # the lowest ``wanted`` GPUs of the mask
                low_bit = mask & -mask
                picked |= low_bit
                mask ^= low_bit
            line.change(at, end, picked, cpus, memory, -1)
            if describe:
                gpus = tuple(gpu.index for p, gpu in enumerate(line.node.gpus) if picked >> p & 1)
                allocations.append(Allocation(line.node.name, gpus, cpus, memory))
            event = end << shift | line.position
            self._log[line.position].append(event)
            free = line.free_at(end)
            for watching in self._watchers[line.position]:
                watching.add(event, line.position, free)
        return self.now + timedelta(microseconds=at), tuple(allocations)

    def _choose(
        self, job: PendingJob, fitting: list[tuple[NodeTimeline, int]], at: int
    ) -> list[tuple[NodeTimeline, int]] | None:
        """The nodes ``Ledger.place`` would pick among those that fit, or ``None``.

        Per cluster (in ledger order) the fitting nodes are ordered as the strategy
        orders candidates (pack: fewest free GPUs at ``at`` first; spread: most; first:
        by name; ties by name) and the first ``job.nodes`` taken; pack keeps the cluster
        that leaves the fewest free GPUs on the chosen nodes, the others the first
        cluster that has enough. Each chosen node gives its lowest ``gpus_per_node``
        GPUs of the mask that fits.
        """
        if len(fitting) < job.nodes:
            return None
        if job.nodes == 1 and self.strategy is not PlacementStrategy.SPREAD:
            # One node: pack's fewest free GPUs (first's lowest position) over all
            # clusters is the same pick, as positions run in cluster order.
            if self.strategy is PlacementStrategy.PACK:
                return [min(fitting, key=lambda o: (o[0].free_count(at), o[0].position))]
            return [min(fitting, key=lambda o: o[0].position)]
        by_cluster: dict[str, list[tuple[int, int, NodeTimeline, int]]] = {}
        for line, mask in fitting:
            by_cluster.setdefault(line.node.cluster, []).append((line.free_count(at), line.position, line, mask))
        best: tuple[int, list[tuple[NodeTimeline, int]]] | None = None
        for cluster in self.clusters:
            options = by_cluster.get(cluster)
            if options is None or len(options) < job.nodes:
                continue
            if self.strategy is PlacementStrategy.PACK:
                options.sort(key=lambda o: (o[0], o[1]))
            elif self.strategy is PlacementStrategy.SPREAD:
                options.sort(key=lambda o: (-o[0], o[1]))
            else:
                options.sort(key=lambda o: o[1])
            picked = options[: job.nodes]
            placement = [(line, mask) for _, _, line, mask in picked]
            if self.strategy is not PlacementStrategy.PACK:
                return placement
            leftover = sum(free - job.gpus_per_node for free, _, _, _ in picked)
            if best is None or leftover < best[0]:
                best = (leftover, placement)
        return best[1] if best else None


#: Reasons under which the queue alone does not decide when a job starts.
NOT_ESTIMATED = frozenset(
    {
        PendingReason.NODES_UNAVAILABLE,
        PendingReason.DEPENDENCY,
        PendingReason.DEPENDENCY_NEVER,
        PendingReason.ARRAY_TASK_LIMIT,
        PendingReason.ACCOUNT_GPU_LIMIT,
        PendingReason.ACCOUNT_JOB_LIMIT,
        PendingReason.USER_GPU_LIMIT,
        PendingReason.USER_JOB_LIMIT,
        PendingReason.QOS_USER_GPU_LIMIT,
        PendingReason.QOS_USER_CPU_LIMIT,
        PendingReason.QOS_USER_JOB_LIMIT,
        PendingReason.QOS_GROUP_GPU_LIMIT,
    }
)


def estimate_queue(
    queue: Iterable[PendingJob],
    decisions: Decisions,
    ledger: Ledger,
    releases: Iterable[tuple[datetime, tuple[Allocation, ...]]],
    now: datetime,
    policy: Policy,
    windows: WindowBook | None = None,
) -> dict[int, datetime]:
    """Job id -> latest expected start, for every job of ``queue`` (in queue order) that
    the cycle's ``decisions`` started or left waiting for resources or priority.

    ``ledger`` is what is free after the cycle's starts and evictions; ``releases`` are
    when running and just-started jobs give their resources back (their walltime
    limits). Jobs started now are estimated ``now``. The others are planned in queue
    order, each at the earliest instant it fits for its whole walltime alongside every
    job planned before it; under a strict-order policy without backfill no job is
    planned before the one ahead of it (the queue is walked forward in time, as the
    cycle would walk it at each release). Jobs waiting on a dependency, their array's
    throttle, a quota limit or hardware that is not up get no estimate, and neither do
    jobs that ask for a reservation (they start inside it or not at all). No job is
    planned into a reservation or maintenance window it is not admitted to (``windows``).
    """
    estimates = {start.job_id: now for start in decisions.starts}
    waiting = [
        job
        for job in queue
        if job.id not in estimates
        and decisions.pending_reasons.get(job.id) not in NOT_ESTIMATED
        and not job.reservation
    ]
    if policy.strict_order and not policy.backfill:
        estimates.update(_in_order(waiting, ledger, releases, now, policy.placement, windows))
        return estimates
    planner = Planner(ledger, releases, now, policy.placement, windows)
    for job in waiting:
        planned = planner.plan(job, describe=False)
        if planned is not None:
            estimates[job.id] = planned[0]
    return estimates


def _in_order(
    waiting: list[PendingJob],
    ledger: Ledger,
    releases: Iterable[tuple[datetime, tuple[Allocation, ...]]],
    now: datetime,
    strategy: PlacementStrategy,
    windows: WindowBook | None = None,
) -> dict[int, datetime]:
    """Strict order: each job starts at the first release instant (or window boundary),
    no earlier than the job ahead of it, at which it fits on what is free then
    (``Ledger.place``) outside the windows it is not admitted to."""
    trial = ledger.copy()
    events = [(max(to_us(at, now), 0), seq, allocations) for seq, (at, allocations) in enumerate(releases)]
    if windows:
        boundaries = {to_us(t, now) for w in windows.windows for t in (w.start_at, w.end_at) if t > now}
        events += [(instant, len(events) + k, ()) for k, instant in enumerate(sorted(boundaries))]
    heapq.heapify(events)
    seq = len(events)
    at = 0
    failed: set[tuple[object, ...]] = set()  # shapes that do not fit at ``at``
    estimates: dict[int, datetime] = {}
    for job in waiting:
        # With windows, what is out depends on the walltime too.
        shape = (request_shape(job), job.walltime_seconds) if windows else request_shape(job)
        while True:
            while events and events[0][0] <= at:
                trial.release(heapq.heappop(events)[2])
            held = windows.holds(job, now + timedelta(microseconds=at)) if windows else None
            start = None if shape in failed else trial.place(job, held or None, strategy)
            if start is not None:
                trial.commit(start)
                seq += 1
                heapq.heappush(events, (at + job.walltime_seconds * 1_000_000, seq, start.allocations))
                estimates[job.id] = now + timedelta(microseconds=at)
                break
            failed.add(shape)
            if not events:
                break  # never fits: no estimate, and the jobs behind it are not held up
            at = events[0][0]
            failed.clear()
    return estimates
