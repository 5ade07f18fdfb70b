"""Plain data the scheduling core works on.

The core never sees a model or a queryset: ``scheduler/tick/snapshot.py`` turns the
database into these frozen dataclasses, the core returns :class:`Decisions`, and
``scheduler/tick/apply.py`` writes them back. Keeping the boundary this narrow is what lets
the policy be tested, benchmarked and replayed against traces without a database.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from scheduler.core.hours import job_gpus

if TYPE_CHECKING:  # the policy modules import these types; annotations only here
    from scheduler.core.carry import Carry
    from scheduler.core.fairshare import FairShareTree
    from scheduler.core.priority import PriorityBreakdown, PriorityWeights
    from scheduler.core.queue import PendingQueue

ComputeCapability = tuple[int, int]

#: Where a waiting job stands in line (see ``scheduler.core.positions``): ``(jobs
#: ahead, GPU-hours ahead)``, the jobs that wait their turn ahead of it, in the cycle's
#: order, for nodes it could also run on, and the GPUs x walltime they ask for. A plain
#: tuple: a cycle makes one per waiting job (a dataclass took 20 times as long to build:
#: 2 ms per 10,000 jobs).
QueuePosition = tuple[int, float]

#: CPUs are counted in thousandths (millicores, Kubernetes' unit) everywhere in the core:
#: ``NodeView.cpu_millis``, ``PendingJob.cpu_millis_per_node``, ``Allocation.cpu_millis``.
#: Integers, so that fractional requests (half a CPU is 500) add up and compare exactly
#: where floats would leave 0.1 + 0.2 CPUs unequal to 0.3.
CPU_MILLIS = 1000


def cpu_millis(cpus: int | float | Decimal) -> int:
    """CPUs as people write them (``8``, ``0.5``, a ``Decimal`` from the database) in
    millicores, the core's count: ``0.5`` -> ``500``. The inverse of :func:`cpu_count`."""
    return round(cpus * CPU_MILLIS)


def cpu_count(millis: int) -> int | float:
    """Millicores as a number of CPUs: whole as an int (``8000`` -> ``8``), else a float
    (``500`` -> ``0.5``), so that stored and shown amounts read as people wrote them."""
    whole, part = divmod(millis, CPU_MILLIS)
    return whole if not part else millis / CPU_MILLIS


def cpu_text(millis: int) -> str:
    """Millicores as CPUs for people: ``8000`` -> ``"8"``, ``500`` -> ``"0.5"``."""
    return str(cpu_count(millis))


def gpu_model_choices(text: str) -> tuple[str, ...]:
    """The models a ``gpu_model`` request accepts: ``"V100M16|V100M32"`` -> both (Slurm's
    ``--constraint`` syntax for alternatives); ``""`` -> none named (any model)."""
    return tuple(part.strip() for part in text.split("|")) if text else ()


def parse_compute_capability(text: str) -> ComputeCapability:
    """``"8.9"`` -> ``(8, 9)``. Raises ``ValueError`` on anything else."""
    major, sep, minor = text.strip().partition(".")
    if not sep or not major.isdigit() or not minor.isdigit():
        raise ValueError(f"compute capability must look like '8.0', got {text!r}")
    return int(major), int(minor)


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on concurrent use. ``None`` (or a missing model) means unlimited."""

    max_gpus: int | None = None
    max_gpus_per_model: Mapping[str, int] = field(default_factory=dict)
    max_running_jobs: int | None = None
    #: Jobs asking for longer than this wait (the limit was lowered after they were
    #: submitted; new ones are refused at submission).
    max_walltime_seconds: int | None = None
    #: Kueue-style nominal quota: GPUs this account (and its subtree) is guaranteed.
    #: Use beyond it runs on capacity borrowed from others and may be reclaimed.
    guaranteed_gpus: int | None = None
    #: How far beyond its guarantee the account may borrow (``None``: up to what is idle).
    borrowing_limit_gpus: int | None = None


@dataclass(frozen=True, slots=True)
class QosLimits:
    """Caps a QOS puts on its running jobs, as Slurm's QOS ``MaxTRESPerUser`` (GPUs,
    CPUs), ``MaxJobsPerUser`` and ``GrpTRES`` (GPUs) do. ``None`` means unlimited.

    The per-user caps count one user's running jobs in this QOS, whatever their
    account; the group cap counts every running job in it (see ``scheduler.core.qos``).
    """

    max_gpus_per_user: int | None = None
    #: In millicores (:data:`CPU_MILLIS`), as the core counts CPUs.
    max_cpu_millis_per_user: int | None = None
    max_running_jobs_per_user: int | None = None
    #: GPUs all its running jobs together may hold.
    max_gpus: int | None = None

    @property
    def caps_anything(self) -> bool:
        return (
            self.max_gpus_per_user is not None
            or self.max_cpu_millis_per_user is not None
            or self.max_running_jobs_per_user is not None
            or self.max_gpus is not None
        )


@dataclass(frozen=True, slots=True)
class GpuView:
    """One allocatable GPU (a whole GPU or one MIG slice) on a node."""

    index: int
    model: str
    memory_mib: int
    compute_capability: ComputeCapability
    healthy: bool = True
    #: Its sharing mode (``scheduler.backends.base.SHARING_MODES``; "" for none):
    #: fractional jobs may share it; a whole-GPU job still may take it while no share is
    #: on it. A share takes its fraction of the GPU; what sharing costs is charged in
    #: accounting by mode (``fairshare.UsagePolicy.sharing_overheads``).
    sharing: str = ""
    #: Whether a job may hold it whole, alone. False where the workload manager hands out
    #: a shared GPU only in slices it chooses itself (Kubernetes' time-slicing replicas:
    #: a pod asking ``nvidia.com/gpu: 1`` gets a replica that others may share), so a
    #: whole-GPU job there would not run alone.
    exclusive: bool = True
    #: A MIG slice of a GPU (its ``model`` is then the label ``<model>/<profile>``): a
    #: fraction of a GPU, so only a request that names its label takes it (see
    #: :meth:`PendingJob.accepts`); a request for N GPUs means N whole ones.
    mig_slice: bool = False

    @property
    def shared(self) -> bool:
        """Whether fractional jobs may share it."""
        return bool(self.sharing)


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as the scheduler sees it: capacity, health and allocatable GPUs."""

    name: str
    cluster: str
    cpu_millis: int
    memory_mib: int
    gpus: tuple[GpuView, ...]
    schedulable: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Whether its workload manager can hand out part of a CPU (Kubernetes' millicores,
    #: the local cluster); Slurm allocates whole CPUs, so a fractional request never
    #: goes there (see ``PendingJob.fits_node``).
    fractional_cpus: bool = True


@dataclass(frozen=True, slots=True)
class Allocation:
    """What one job holds on one node."""

    node: str
    gpu_indices: tuple[int, ...]
    cpu_millis: int = 0
    memory_mib: int = 0
    #: A fractional job's share of its one shared GPU (0 < share < 1) and the GPU
    #: memory it reserves there; 0 for whole GPUs.
    gpu_share: float = 0.0
    gpu_memory_mib: int = 0

    def joined(self, other: Allocation) -> Allocation:
        """What this and ``other`` (on the same node) hold together: the GPUs of both,
        their CPUs and memory added. What reservations and windows keep back on a node
        is summed this way."""
        return Allocation(
            self.node,
            self.gpu_indices + tuple(i for i in other.gpu_indices if i not in self.gpu_indices),
            self.cpu_millis + other.cpu_millis,
            self.memory_mib + other.memory_mib,
        )

    @property
    def gpu_amount(self) -> float:
        """GPUs this allocation counts for in quotas: its share, or its whole GPUs."""
        return self.gpu_share if self.gpu_share else float(len(self.gpu_indices))


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job that holds resources (dispatching or running).

    ``started_at`` + ``walltime_seconds`` bound when its resources free up, which is
    what backfill reservations and start-time estimates are built from.
    """

    id: int
    allocations: tuple[Allocation, ...]
    started_at: datetime | None = None
    walltime_seconds: int = 0
    account: str = ""
    user: str = ""
    qos: str = ""
    #: The array it is a task of (its array job id), 0 for a plain job.
    array_job: int = 0
    #: GPU-seconds of service it had in earlier runs, before this one (it was preempted
    #: and requeued): with ``Policy.service_levels`` its level counts them.
    attained_gpu_s: int = 0
    #: The GPU models its request accepted (``PendingJob.gpu_model``; "" any): the
    #: workload mix counts its shape as demand only those models can serve.
    gpu_model: str = ""

    @property
    def gpus(self) -> int:
        return sum(len(a.gpu_indices) for a in self.allocations)

    @property
    def gpu_amount(self) -> float:
        if len(self.allocations) == 1:  # the common case, without a generator (0 + x is x)
            return self.allocations[0].gpu_amount
        return sum(a.gpu_amount for a in self.allocations)


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting to start and what it asks for (per node, times ``nodes``)."""

    id: int
    submitted_at: datetime
    nodes: int = 1
    gpus_per_node: int = 1
    cpu_millis_per_node: int = CPU_MILLIS
    memory_mib_per_node: int = 0
    #: A GPU model, or a set of acceptable ones as ``"V100M16|V100M32"`` ("" any).
    gpu_model: str = ""
    min_gpu_memory_mib: int = 0
    min_compute_capability: ComputeCapability | None = None
    walltime_seconds: int = 3600
    account: str = ""
    user: str = ""
    qos: str = ""
    nice: int = 0
    #: ``(kind, job_id)`` pairs: afterok, afternotok or afterany (see ``dependencies``).
    dependencies: tuple[tuple[str, int], ...] = ()
    #: A fractional request: this share (0 < share < 1) of one shared GPU per node, with
    #: ``gpu_memory_mib_share`` of its memory; ``gpus_per_node`` is then 1.
    gpu_share: float = 0.0
    gpu_memory_mib_share: int = 0
    #: Node labels every node of the job must carry (``key``, ``value``), sorted: Slurm's
    #: ``--constraint`` or a Kubernetes node selector (``rack=r1``, ``network=infiniband``).
    node_labels: tuple[tuple[str, str], ...] = ()
    #: A task of a job array: the array's job id (0 for a plain job), and how many of its
    #: tasks may run at once (``--array=0-999%50``; 0: no limit).
    array_job: int = 0
    array_limit: int = 0
    #: The reservation (:class:`Window`) it runs in (``sbatch --reservation``; "" none):
    #: only on its nodes, only while it lasts.
    reservation: str = ""
    #: GPU-seconds of service it had in earlier runs (preempted and requeued; 0 for a new
    #: job): with ``Policy.service_levels`` it sets the job's queue level.
    attained_gpu_s: int = 0

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def part_of_a_cpu(self) -> bool:
        """Whether it asks for a number of CPUs that is not whole (``0.5``, ``2.25``):
        only nodes with ``fractional_cpus`` can hand that out."""
        return self.cpu_millis_per_node % CPU_MILLIS != 0

    @property
    def picks_nodes(self) -> bool:
        """Whether some nodes are out for this job whatever is free on them: it asks for
        node labels, or for part of a CPU (see :meth:`fits_node`). The placement's fast
        path skips :meth:`fits_node` for the rest."""
        return bool(self.node_labels) or self.part_of_a_cpu

    def fits_node(self, node: NodeView) -> bool:
        """Whether ``node`` carries every label the job asks for, and can hand out the
        part of a CPU it asks for."""
        if self.part_of_a_cpu and not node.fractional_cpus:
            return False
        return all(node.labels.get(key) == value for key, value in self.node_labels)

    @property
    def gpu_amount(self) -> float:
        """GPUs this job counts for in quotas and guarantees: shares count as such
        (:func:`scheduler.core.hours.job_gpus`)."""
        return job_gpus(self.nodes, self.gpus_per_node, self.gpu_share)

    def accepts(self, gpu: GpuView) -> bool:
        """Whether one GPU satisfies this job's per-GPU constraints."""
        if self.gpu_share:
            if not gpu.shared or gpu.memory_mib < self.gpu_memory_mib_share:
                return False
        elif not gpu.exclusive:
            return False
        if gpu.mig_slice and not self.gpu_model:
            return False  # "any GPU" is any whole GPU; a slice only by its name (checked next)
        if (
            self.gpu_model
            and gpu.model != self.gpu_model
            and ("|" not in self.gpu_model or gpu.model not in gpu_model_choices(self.gpu_model))
        ):
            return False
        if gpu.memory_mib < self.min_gpu_memory_mib:
            return False
        if self.min_compute_capability is not None and gpu.compute_capability < self.min_compute_capability:
            return False
        return gpu.healthy


@dataclass(frozen=True, slots=True)
class Window:
    """A reservation an admin made (``scontrol create reservation``): ``nodes`` set aside
    from ``start_at`` to ``end_at``.

    For **maintenance** no job may run on them in that time; otherwise only jobs that
    ask for it by ``name`` (``PendingJob.reservation``) and belong to one of its
    ``accounts`` or ``users``, which then run nowhere else, and only inside it. Either
    way no job of anyone else is placed or planned so that its walltime would reach
    into the window on those nodes (see ``scheduler.core.windows``).
    """

    name: str
    nodes: frozenset[str]
    start_at: datetime
    end_at: datetime
    maintenance: bool = False
    accounts: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()

    def admits(self, job: PendingJob) -> bool:
        """Whether ``job`` may run on these nodes during the window."""
        return (
            not self.maintenance
            and job.reservation == self.name
            and (job.account in self.accounts or job.user in self.users)
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The world at one instant: nodes, who holds what, who waits, and the limits.

    Limits are keyed by account name and user name; ``account_parents`` gives the tree
    so an account's limit covers its subtree (see ``scheduler.core.limits``).
    """

    nodes: tuple[NodeView, ...]
    running: tuple[RunningJob, ...]
    pending: tuple[PendingJob, ...]
    account_limits: Mapping[str, Limits] = field(default_factory=dict)
    user_limits: Mapping[str, Limits] = field(default_factory=dict)
    account_parents: Mapping[str, str | None] = field(default_factory=dict)
    #: Fair-share inputs: the account tree with users, and decayed usage per
    #: ``(account, user)`` as of the snapshot.
    fairshare_tree: FairShareTree | None = None
    usage: Mapping[tuple[str, str], float] = field(default_factory=dict)
    qos_priorities: Mapping[str, int] = field(default_factory=dict)
    #: What jobs are expected to run of their walltime, per ``(account, user)`` and per
    #: ``(account, "")``, learned from jobs that ended (``scheduler.core.prediction``):
    #: the shortness priority factor's input. Missing: 1 (the walltime).
    runtime_ratios: Mapping[tuple[str, str], float] = field(default_factory=dict)
    #: QOS name -> names of the QOS whose running jobs it may preempt.
    qos_preempts: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: States of the jobs pending jobs depend on.
    dependency_states: Mapping[int, str] = field(default_factory=dict)
    #: QOS name -> the longest walltime a job in it may ask for.
    qos_max_walltime: Mapping[str, int] = field(default_factory=dict)
    #: QOS name -> the caps it puts on its running jobs (only QOS that have some).
    qos_limits: Mapping[str, QosLimits] = field(default_factory=dict)
    #: Clusters whose workload manager cannot be reached now -> the error (their nodes
    #: come in unschedulable).
    unreachable_clusters: Mapping[str, str] = field(default_factory=dict)
    #: Reservations and maintenance windows that have not ended (see :class:`Window`).
    windows: tuple[Window, ...] = ()
    #: Optional state consecutive snapshots of one caller share (a replay): the cycle's
    #: books are updated from it instead of rebuilt (see ``scheduler.core.carry``).
    #: Decisions are the same without it.
    carry: Carry | None = field(default=None, compare=False)
    #: Optional: the pending jobs kept across cycles (see ``scheduler.core.queue``), in
    #: place of ``pending`` (then empty). Starts and evictions are the same as with
    #: ``pending``; jobs the cycle never reached get no reason.
    queue: PendingQueue | None = field(default=None, compare=False)


class PlacementStrategy(enum.Enum):
    """How to choose among nodes that can all hold a job."""

    PACK = "pack"  # fewest free GPUs first
    SPREAD = "spread"  # most free GPUs first: spreads load and heat
    FIRST = "first"  # node name order
    #: Where the job strands the least capacity for the workload's request shapes
    #: (FGD-style, see ``scheduler.core.fragmentation``); gangs place as ``PACK``. Default.
    FRAGMENTATION = "fragmentation"


@dataclass(frozen=True, slots=True)
class Policy:
    """Knobs of the scheduling cycle.

    ``strict_order``: like Slurm's main scheduler without backfill, once the first job
    waiting for busy resources is met, later jobs may not jump ahead of it (they get
    reason ``Priority``). ``backfill`` lets them jump ahead when that cannot delay the
    blocked jobs' reservations. ``max_starts`` bounds the work of one cycle.
    """

    strict_order: bool = True
    max_starts: int = 1000
    #: EASY backfill: blocked jobs get reservations, later jobs may start if they do not
    #: delay them. Overrides ``strict_order``.
    backfill: bool = False
    #: How many blocked jobs get a reservation (1 = EASY; more = toward conservative).
    reservations: int = 1
    #: At most this many of them of one account (0: no cap): under overload the
    #: reservations go to each account's first blocked job instead of the first jobs
    #: of the queue, so that no account's big jobs wait for whole nodes unboundedly.
    reservations_per_account: int = 0
    #: Which of the nodes that fit a job it is placed on.
    placement: PlacementStrategy = PlacementStrategy.FRAGMENTATION
    #: Multifactor priority (age, fair-share, size, QOS, nice) orders the queue; ``None``
    #: orders by submit time (FIFO).
    priority: PriorityWeights | None = None
    #: A blocked job whose QOS may preempt others evicts the fewest, cheapest victims.
    preemption: bool = False
    #: A running job is safe from preemption for this long after it starts.
    preempt_min_runtime_seconds: int = 0
    #: An account below its guarantee may evict jobs running on borrowed capacity.
    reclaim: bool = True
    #: Give every waiting job all its blockers with evidence (``Decisions.blockers``).
    explain: bool = True
    #: Also plan the whole queue forward and give every waiting job a latest expected
    #: start (``Decisions.estimates``; see ``scheduler.core.timeline.estimate_queue``).
    estimates: bool = False
    #: Also give every waiting job its place in line: the jobs and GPU-hours ahead of it
    #: on the nodes it could run on (``Decisions.positions``; see
    #: ``scheduler.core.positions``).
    positions: bool = False
    #: Least-attained-service preemption (after Tiresias' discretized 2D-LAS):
    #: thresholds in GPU-seconds, ascending, that split jobs into levels by the service
    #: they have had (GPUs x run time, earlier runs included). A job that cannot start
    #: may evict running jobs that have passed its level's threshold, once they ran
    #: ``preempt_min_runtime_seconds``; the queue order stays the priority's (a
    #: requeued job is not put behind every new one). Empty: off.
    service_levels: tuple[int, ...] = ()


class PendingReason(enum.StrEnum):
    """Why a job did not start, in the vocabulary Slurm users already know."""

    RESOURCES = "Resources"  # fits the cluster, but the GPUs/CPUs are busy now
    PRIORITY = "Priority"  # a job ahead of it is waiting for resources
    NODES_UNAVAILABLE = "ReqNodeNotAvail"  # no schedulable node could ever fit it now
    CYCLE_LIMIT = "SchedCycleLimit"  # the cycle hit max_starts before reaching it
    ACCOUNT_GPU_LIMIT = "AccountGpuLimit"  # its account (or an ancestor) is at its GPU quota
    ACCOUNT_JOB_LIMIT = "AccountJobLimit"  # ... at its running-jobs quota
    USER_GPU_LIMIT = "UserGpuLimit"  # the owner is at their GPU quota
    USER_JOB_LIMIT = "UserJobLimit"  # ... at their running-jobs quota
    DEPENDENCY = "Dependency"  # waits for jobs it depends on to end
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"  # a dependency can no longer be met
    WALLTIME_LIMIT = "WalltimeLimit"  # asks more time than its QOS or quota now allows
    BORROW_LIMIT = "AccountBorrowLimit"  # its account has borrowed all it may beyond its guarantee
    HELD = "JobHeldUser"  # held by its owner or an admin (set by the portal, not the cycle)
    ARRAY_TASK_LIMIT = "JobArrayTaskLimit"  # its array runs as many tasks as its throttle allows
    RESERVATION = "Reservation"  # waits for the reservation it asks for to begin (or to hold it)
    QOS_USER_GPU_LIMIT = "QOSMaxGRESPerUser"  # the owner holds all the GPUs its QOS allows a user
    QOS_USER_CPU_LIMIT = "QOSMaxCpuPerUserLimit"  # ... all the CPUs its QOS allows a user
    QOS_USER_JOB_LIMIT = "QOSMaxJobsPerUserLimit"  # ... runs all the jobs its QOS allows a user
    QOS_GROUP_GPU_LIMIT = "QOSGrpGRES"  # its QOS's running jobs hold all the GPUs the QOS allows


@dataclass(slots=True)
class Blocker:
    """One thing that keeps a job waiting, with the figures that show it.

    ``code`` is machine-readable (a :class:`PendingReason`), ``message`` a sentence for
    people, ``evidence`` the numbers behind the sentence (JSON-ready: str, int, float,
    lists and dicts of them), so a portal page or a script can show or act on them.

    Read-only by convention, like the cycle's other results, but not ``frozen``: a
    frozen dataclass sets each field through ``object.__setattr__``, which makes it
    about 4x slower to build, and a cycle builds one or more per waiting job (10,000
    jobs: ~8 ms of the call). Blockers are shared between jobs; never change one.
    """

    code: PendingReason
    message: str
    evidence: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Start:
    """A decision to start one job on these allocations."""

    job_id: int
    cluster: str
    allocations: tuple[Allocation, ...]


@dataclass(frozen=True, slots=True)
class Reservation:
    """Where and when a blocked job is guaranteed to start, at the latest (backfill)."""

    job_id: int
    start_at: datetime
    end_at: datetime
    allocations: tuple[Allocation, ...]


@dataclass(frozen=True, slots=True)
class Eviction:
    """One running job to stop (preempt) so that job ``by`` can start."""

    victim_id: int
    by: int
    reason: str


@dataclass(slots=True)
class Decisions:
    """The output of one cycle: jobs to start, reservations, and why the others wait."""

    starts: list[Start] = field(default_factory=list)
    pending_reasons: dict[int, PendingReason] = field(default_factory=dict)
    reservations: list[Reservation] = field(default_factory=list)
    #: Jobs started ahead of a blocked job by backfill.
    backfilled: set[int] = field(default_factory=set)
    #: Each pending job's priority and its factors (``sprio``), when a policy has one.
    priorities: dict[int, PriorityBreakdown] = field(default_factory=dict)
    #: Running jobs to stop so that a started job can run.
    evictions: list[Eviction] = field(default_factory=list)
    #: Every waiting job's blockers, the one in ``pending_reasons`` first (``policy.explain``).
    blockers: dict[int, tuple[Blocker, ...]] = field(default_factory=dict)
    #: Running and started jobs that use capacity beyond their account's guarantee.
    borrowed: set[int] = field(default_factory=set)
    #: With ``Policy.estimates``: job id -> latest expected start (``squeue --start``).
    estimates: dict[int, datetime] = field(default_factory=dict)
    #: With ``Policy.positions``: job id -> its place in line (``scheduler.core.positions``).
    positions: dict[int, QueuePosition] = field(default_factory=dict)
