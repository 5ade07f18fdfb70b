"""The one interface every workload manager adapter implements.

The scheduler decides *where* a job runs; a backend only carries that decision to the
real workload manager (the local simulated cluster, Slurm, Kubernetes) and reports back.
Adapters are small on purpose: four verbs, plain dataclasses in and out, and a single
error type whose ``permanent`` flag tells the caller whether a retry can help.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable


class BackendError(Exception):
    """Any failure talking to a workload manager.

    ``permanent=True`` means retrying the same call cannot succeed (bad spec, rejected by
    the workload manager's policy); ``permanent=False`` means a transient failure
    (daemon down, timeout) and the caller should retry later.
    """

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent

    def __str__(self) -> str:
        kind = "permanent" if self.permanent else "transient"
        return f"{self.message} ({kind})"


@dataclass(frozen=True, slots=True)
class Placement:
    """The GPUs a job holds on one node."""

    node: str
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RunAs:
    """The POSIX identity a job runs under: its owner's cluster identity.

    ``user`` is the name (what ``sudo -u`` and ``sacct -o User`` show); ``uid`` and
    ``gid`` are given where the portal knows them and a backend sets them itself
    (a Kubernetes pod's ``runAsUser``, the local backend running jobs as root).
    """

    user: str
    uid: int | None = None
    gid: int | None = None


@dataclass(frozen=True, slots=True)
class WorkdirBounds:
    """Where a job's ``workdir`` must really lie, checked when the job starts, after
    every symlink (see :mod:`scheduler.backends.user_paths`): inside one of ``roots`` (the
    owner's trees, ``JOB_WORKDIR_ROOTS``) and not in or above one of ``refused`` (the
    portal's own files, which no job may start in even where a root holds them)."""

    roots: tuple[str, ...]
    refused: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobOutput:
    """Files the job's output is also written to (``sbatch -o/-e``), beside the portal's
    log, which keeps all of it (``read_log``). Paths are filled in (no patterns left):
    absolute, or a file name in the fresh directory a job without a workdir starts in.

    ``stdout`` takes the job's stdout and ``stderr`` its stderr; the same path for both
    is one file that takes both, in the order written; ``""``: that stream goes to the
    portal's log alone. The files are opened as the job's owner, never as the portal:
    one the owner may not write fails the job before it runs, with the reason.
    ``append``: keep what a file holds (a requeued job's later attempt, as Slurm appends
    on a requeue); otherwise it is truncated first."""

    stdout: str = ""
    stderr: str = ""
    append: bool = False

    @property
    def files(self) -> tuple[str, ...]:
        """The distinct files named, stdout's first."""
        return tuple(dict.fromkeys(path for path in (self.stdout, self.stderr) if path))

    @property
    def combined(self) -> bool:
        """Whether one file takes both streams."""
        return bool(self.stdout) and self.stdout == self.stderr


@dataclass(frozen=True, slots=True)
class ArrayTask:
    """One task of a job array: the array's id, this task's index and how many tasks the
    array has (``QM_ARRAY_JOB_ID``, ``QM_ARRAY_TASK_ID``, ``QM_ARRAY_TASK_COUNT``)."""

    array_job: int
    task_id: int
    task_count: int


@dataclass(frozen=True, slots=True)
class JobSpec:
    """Everything a backend needs to start one attempt of one job.

    ``key`` is our stable identity for this attempt (``<job uuid>.<attempt>``). Backends
    label what they create with it, so a retried ``submit`` finds the first one instead
    of starting a duplicate, and reconciliation can find orphans.
    """

    key: str
    name: str
    owner: str
    account: str
    command: str
    script: str
    walltime_seconds: int
    placements: tuple[Placement, ...]
    #: CPUs per node, exact to the thousandth: part of a CPU (``Decimal("0.5")``)
    #: reaches only the kinds in ``scheduler.backends.FRACTIONAL_CPU_KINDS``.
    cpus_per_node: Decimal = Decimal(1)
    memory_mib_per_node: int = 0
    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    #: Where it starts (absolute; empty: a fresh directory of its own).
    workdir: str = ""
    #: Where ``workdir`` (and an absolute ``output`` file's directory) may really be
    #: (None: nowhere the portal vouched for; a backend that opens them itself, the
    #: local one, then refuses them).
    workdir_bounds: WorkdirBounds | None = None
    #: Files its output is also written to (None: the portal's log alone).
    output: JobOutput | None = None
    #: Text files (relative name -> content) written into its working directory first.
    files: Mapping[str, str] = field(default_factory=dict)
    #: Whom the job runs as (None: the owner has no cluster identity; a backend that
    #: runs jobs as their owners refuses such a spec rather than use its own user).
    run_as: RunAs | None = None
    #: Which task of which job array this is (None: a plain job).
    array: ArrayTask | None = None
    #: The reservation it runs in, as the workload manager names it ("" none); see
    #: :class:`ReservationAdmin`.
    reservation: str = ""
    #: True when the portal's own record proves that no one handed this attempt to a
    #: backend before (``Job.handoffs`` read back as 1): the backend may skip looking
    #: for an earlier submission under ``key``. False (the default) means it must look.
    first_handoff: bool = False


class RemoteState(enum.StrEnum):
    """A job's state as the workload manager reports it."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    #: The workload manager no longer knows the id (purged, or never existed).
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        return self not in (RemoteState.PENDING, RemoteState.RUNNING)


@dataclass(frozen=True, slots=True)
class PollResult:
    """One job's state as last seen by the backend."""

    external_id: str
    state: RemoteState
    exit_code: int | None = None
    reason: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None


#: How a GPU is shared between fractional jobs: time-slicing (the NVIDIA device plugin's
#: replicas: compute is shared in turns) or MPS (concurrent, with per-client limits).
#: MIG slices are not a sharing mode: each slice is a GPU of its own.
SHARING_MODES = ("time-slicing", "mps")


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU (or one MIG slice, when ``parent_index`` is set) as the backend sees it."""

    index: int
    model: str
    memory_mib: int
    compute_capability: str
    uuid: str = ""
    mig_profile: str = ""
    parent_index: int | None = None
    #: Its sharing mode (``"time-slicing"`` or ``"mps"``; ``""``: none): fractional jobs
    #: may share it.
    sharing: str = ""
    #: Whether a job may hold it whole, alone (``GpuView.exclusive``): False for a GPU
    #: the workload manager only hands out in replicas of its own choosing.
    exclusive: bool = True


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node's inventory and health as the backend sees it."""

    name: str
    cpus: int
    memory_mib: int
    gpus: tuple[GpuInfo, ...]
    state: str = "up"  # "up", "drain" or "down"
    reason: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """A workload manager adapter. Every method raises only :class:`BackendError`."""

    kind: ClassVar[str]
    #: Jobs run as their owner's POSIX user (``JobSpec.run_as``): the backend refuses a
    #: spec without one, and the portal refuses such jobs at submit, so a job never runs
    #: as the portal's own user instead.
    requires_identity: bool

    def submit(self, spec: JobSpec) -> str:
        """Start ``spec`` and return the workload manager's id for it.

        Idempotent per ``spec.key``: a second call for the same key returns the id of
        the first submission and starts nothing new.
        """
        ...

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str | BackendError]:
        """:meth:`submit` for each spec: its id or the error it met, in order. One spec's
        failure never stops the others. (:func:`submit_one_by_one` where the adapter has
        nothing better than a loop; Slurm looks the batch up once and submits
        concurrently.)"""
        ...

    def cancel(self, external_id: str, *, grace_seconds: float | None = None) -> None:
        """Stop the job. Idempotent: cancelling a finished or unknown job is a no-op.

        ``grace_seconds``: how long the job has between SIGTERM and SIGKILL (to
        checkpoint, when it is preempted); ``None`` is the backend's own default.
        """
        ...

    def poll(self, external_ids: Sequence[str]) -> dict[str, PollResult]:
        """Report the state of many jobs in one call.

        Every requested id is in the result; ids the workload manager has never heard
        of come back as :attr:`RemoteState.UNKNOWN`.
        """
        ...

    def list_nodes(self) -> list[NodeInfo]:
        """Return the cluster's nodes with their GPUs and health."""
        ...

    def read_log(self, external_id: str, max_bytes: int = 65536) -> str:
        """Return the last ``max_bytes`` of the job's combined output ('' if none yet)."""
        ...

    def session_host(self, external_id: str, placements: tuple[Placement, ...]) -> str:
        """The address the portal's proxy reaches a running interactive session's server
        at: where the workload manager placed job ``external_id`` (``placements``: the
        nodes the portal gave it, first node first), never anything the job says of
        itself. The local cluster: ``127.0.0.1``; Slurm: the first node's ``NodeAddr``;
        Kubernetes: the session's Service DNS name. Raises ``BackendError`` (transient
        when the workload manager cannot say yet)."""
        ...


#: The streams a job's whole log comes in: a rank's ``stdout`` or ``stderr`` where the
#: workload manager keeps them apart, ``combined`` where one log takes both (and, with
#: no rank, every rank's: the log the quick view's tail is read from).
LOG_STREAMS = ("combined", "stdout", "stderr")
#: How much one chunk of a streamed log holds at most.
LOG_CHUNK_BYTES = 65536


def log_file_chunks(path: Path, offset: int, *, follow_symlinks: bool) -> Iterator[bytes]:
    """A log file a backend reads itself, from ``offset``, :data:`LOG_CHUNK_BYTES` at a
    time: nothing while it is not there (yet); any other ``OSError`` is the caller's to
    name. Without ``follow_symlinks``, a file a job replaced by a link is refused."""
    flags = os.O_RDONLY | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        with open(os.open(path, flags), "rb") as fh:
            fh.seek(offset)
            while chunk := fh.read(LOG_CHUNK_BYTES):
                yield chunk
    except FileNotFoundError:
        return


@dataclass(frozen=True, slots=True)
class LogSource:
    """One log of a job a backend can stream whole: ``stream`` (one of
    :data:`LOG_STREAMS`) of rank ``rank`` (its ``QM_NODE_RANK``), or with ``rank`` None
    the job's whole combined log, every rank's output and the backend's own notes."""

    rank: int | None
    stream: str

    @property
    def label(self) -> str:
        """How a person names it: ``rank 1 stderr``, ``all ranks combined``."""
        return f"{'all ranks' if self.rank is None else f'rank {self.rank}'} {self.stream}"


@runtime_checkable
class LogStreamer(Protocol):
    """Optional: a backend that streams a job's whole log, not only its tail
    (:meth:`Backend.read_log`). Every backend here implements it."""

    def log_sources(self, external_id: str) -> tuple[LogSource, ...]:
        """The logs the job has or will have, the one a reader sees first first; ()
        for a job the workload manager does not know."""
        ...

    def stream_log(self, external_id: str, source: LogSource, offset: int = 0) -> Iterator[bytes]:
        """``source``'s bytes from byte ``offset`` to its end as it is now, in chunks of at
        most :data:`LOG_CHUNK_BYTES`: never the whole log in memory. Nothing for a log
        not written yet or shorter than ``offset``. A caller that stops early closes the
        iterator, which lets go of what it holds (a file, a ``tail``, a connection).
        Raises :class:`BackendError` (at the first ``next`` at the latest)."""
        ...


@runtime_checkable
class NodeAdmin(Protocol):
    """Optional: a backend whose workload manager keeps its own drain state (Slurm).

    The portal calls these when an admin drains or resumes a node, so both agree; a
    node drained in the workload manager comes back as ``NodeInfo.state == "drain"``.
    """

    def drain_node(self, node: str, reason: str) -> None:
        """Let running jobs finish on ``node`` but start nothing new there."""
        ...

    def resume_node(self, node: str) -> None:
        """Make a drained ``node`` schedulable again."""
        ...


@runtime_checkable
class ReservationAdmin(Protocol):
    """Optional: a backend whose workload manager keeps reservations of its own (Slurm's
    ``scontrol create reservation``), so that nothing submitted to it directly runs on
    reserved nodes either. The portal's scheduler enforces reservations itself on every
    backend; this keeps the workload manager in agreement."""

    def reserve(
        self,
        name: str,
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        *,
        maintenance: bool,
        users: Sequence[str],
    ) -> None:
        """Create (or replace) reservation ``name``: ``nodes`` from ``start`` to ``end``,
        for maintenance (no jobs) or for ``users`` (their usernames on the cluster)."""
        ...

    def unreserve(self, name: str) -> None:
        """Delete reservation ``name``; a reservation that is not there is no error."""
        ...


T = TypeVar("T")


def outcome(call: Callable[..., T], *args: Any) -> T | BackendError:
    """``call(*args)``'s result, or the ``BackendError`` it raised: one job of a batch that
    fails must not stop the others."""
    try:
        return call(*args)
    except BackendError as exc:
        return exc


def submit_one_by_one(backend: Backend, specs: Sequence[JobSpec]) -> list[str | BackendError]:
    """``Backend.submit_many`` as a loop over ``submit``."""
    return [outcome(backend.submit, spec) for spec in specs]
