"""The ``local`` backend: a simulated GPU cluster that really runs jobs on this machine.

Nodes and GPUs come from config, so a laptop can pretend to be a cluster of H100 and A100
nodes; each job's command then runs here as a subprocess, with ``CUDA_VISIBLE_DEVICES``
and ``QM_*`` variables describing the GPUs the scheduler gave it. With ``simulate`` set no
command runs at all: each job simply lasts that many seconds (demos, tests).

Everything about a job lives in files, so any process (a restarted worker, a second
backend instance) can poll or cancel it, and a job outlives the worker that submitted it.

State directory layout (``state_dir``, default ``work_dir/local-backend/<cluster>``; it and
its directories are made 0700)::

    tmp/                    staging: a job dir is built here, then renamed into jobs/
    jobs/<key>/             one per JobSpec.key; its appearance is the atomic submit; the
                            portal's user's alone (0700), as is everything in it
        spec.json           what to run: argv, env, walltime, placements, submitted_at,
                            simulate (seconds, or null for real execution), home
        work/               the job's own directory (its home), made by the runner, owned
                            by the job's user (0700): job.sh, the script, when the spec
                            has one, and whatever the job writes
        runner.claim        O_EXCL lock: the runner that creates it runs the job
        runner.json         runner pid, start ticks and boot id (liveness checks)
        started.json        the command's pid, start ticks and start time
        cancel              cancel marker: {"requested_at": epoch seconds}
        result.json         the outcome: state, exit_code, reason, started_at, ended_at
        output.log          the command's stdout and stderr (the portal's log: a job's own
                            ``-o/-e`` files, opened by the runner as the job's user
                            within its roots, get copies of the streams they name)
        logs/rank-N.stdout  each rank's stdout and stderr, whole and apart (the full
        logs/rank-N.stderr  logs: ``stream_log``), copied there as output.log gets them;
                            rank-N.combined instead when the job's own file takes both
        runner.log          the runner's own output (tracebacks), for debugging

The runner is :mod:`scheduler.backends.local_runner`; its docstring states its side of
the contract. External ids are the spec keys.

Where a job's own directory is: the sandbox binds ``jobs/<key>/work`` into the job at its
path, and a job that runs as the portal's own user reaches it as it is. A job that runs
unsandboxed as another uid (the portal is root, without bubblewrap) could not: the state
tree is the portal's alone, and may lie under a home no other user may pass (``/root``).
Its own directory is then ``homes_dir/<cluster>-<key>-<random>`` (default
:data:`DEFAULT_HOMES_DIR`), in a root-owned directory every user may pass but not list,
so a job reaches its own directory by name and no other user can find or read it.

GPU numbering: a node's physical GPUs are indices ``0..n-1``. When ``gpus.mig`` splits
each GPU into slices, the slices follow the physical GPUs: slice ``j`` of GPU ``i`` has
index ``n + i * len(mig) + j`` and ``parent_index = i``. The parent stays in the list to
describe the hardware, but like a real MIG-enabled GPU it cannot be allocated whole:
placements must name its slices.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import yaml

from scheduler.backends import local_runner as runner
from scheduler.backends.base import (
    SHARING_MODES,
    BackendError,
    GpuInfo,
    JobSpec,
    LogSource,
    NodeInfo,
    Placement,
    PollResult,
    RemoteState,
    log_file_chunks,
    submit_one_by_one,
)
from scheduler.backends.job_env import job_env, master_env, rank_env
from scheduler.backends.job_files import prelude
from scheduler.backends.sessions import (
    apps_env_from_config,
    apps_env_paths,
    is_session,
    missing_apps_env,
    session_path,
)
from scheduler.backends.spec_check import spec_problem
from scheduler.backends.user_paths import trusted_real

#: A job whose runner has not announced itself this long after submit is NODE_FAIL.
STARTUP_GRACE_SECONDS = 60.0
#: A repeated submit relaunches a runner that never claimed the job only within this
#: window (the first submitter died between creating the job dir and launching it).
RELAUNCH_WINDOW_SECONDS = 30.0
#: How long submit waits for the runner to detach before leaving it to start alone.
LAUNCH_TIMEOUT_SECONDS = 30.0

#: The PATH of a session's job when the portal's own process has none.
_PLAIN_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Where the own directories of jobs that run unsandboxed as other uids are made.
DEFAULT_HOMES_DIR = Path("/var/lib/quartermaster/job-homes")

_CONFIG_KEYS = frozenset(
    {
        "nodes",
        "nodes_file",
        "simulate",
        "state_dir",
        "kill_grace_seconds",
        "sandbox",
        "job_user",
        "shared_paths",
        "homes_dir",
        "apps_env",
    }
)
_GROUP_KEYS = frozenset({"name", "count", "cpus", "memory_mib", "labels", "state", "reason", "gpus"})
_GPU_KEYS = frozenset({"count", "model", "memory_mib", "compute_capability", "mig", "shared", "sharing"})
_NODE_STATES = ("up", "drain", "down")
#: Keys, cluster and node names: safe as file names and in QM_GPUS ("n:0,1;m:2").
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
#: MIG profiles such as "3g.40gb", "1g.10gb+me": compute slices, then memory in GB.
_MIG_PROFILE = re.compile(r"(?P<slices>[1-7])g\.(?P<gb>[1-9][0-9]*)gb(?:\+me)?")
_UUID_NAMESPACE = uuid.UUID("6f1c9f0e-4a55-5b1e-9a43-9f7b3c1d2e10")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class _Corrupt(Exception):
    """A job's state file exists but cannot be understood."""


def _is_safe_name(value: object) -> bool:
    return isinstance(value, str) and _SAFE_NAME.fullmatch(value) is not None


def _sandbox(reader: _ConfigReader, value: object) -> str:
    """The bubblewrap binary jobs run in, or '' for none (``sandbox: none``, or ``auto``
    where Debian's ``bubblewrap`` is not installed: jobs then see everything their uid
    sees on this machine, and :attr:`LocalBackend.isolation` says so)."""
    if value not in ("auto", "bwrap", "none"):
        raise reader.bad(f"sandbox must be auto, bwrap or none, got {value!r}")
    found = shutil.which("bwrap") or ""
    if value == "bwrap" and not found:
        raise reader.bad("sandbox is bwrap but bwrap is not installed (apt-get install bubblewrap)")
    return "" if value == "none" else found


def passage_problem(path: Path) -> str | None:
    """Why root may not make jobs' own directories in ``path`` and hand them to their
    users, or None.

    Every directory on the way must be root's, must let other users pass (else a job
    cannot reach its own directory) and must be closed to their changes, unless sticky
    (``/tmp``: nobody may rename or remove what root made there); any link on the way must
    be root's too. Otherwise another user could swap a directory on the way for a link,
    and root would make (and hand over) a directory wherever that link points.
    """
    real = os.path.realpath(path)
    if trusted_real(str(path)) != real:
        return f"{path} is reached through a link that root does not own"
    chain = [*reversed(Path(real).parents), Path(real)]
    for place in chain:
        info = os.stat(place)
        if info.st_uid != 0:
            return f"{place} belongs to uid {info.st_uid}, not root"
        sticky = place != chain[-1] and info.st_mode & stat.S_ISVTX
        if info.st_mode & 0o022 and not sticky:
            return f"{place} may be changed by other users (mode {stat.filemode(info.st_mode)})"
        if not info.st_mode & 0o001:
            return f"{place} does not let other users pass (mode {stat.filemode(info.st_mode)})"
    return None


def _epoch_to_dt(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(float(value), tz=UTC)


class _ConfigReader:
    """Turns the cluster config into NodeInfo, raising permanent BackendErrors that say
    exactly which value is wrong (``nodes[1].gpus.memory_mib must be ...``)."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def bad(self, message: str) -> BackendError:
        return BackendError(f"local backend {self.cluster!r}: bad config: {message}", permanent=True)

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.bad(f"{where} must be a mapping, got {type(value).__name__}")
        return value

    def check_keys(self, value: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise self.bad(f"{where} has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")

    def integer(self, value: Mapping[str, Any], key: str, where: str, *, default: int | None = None) -> int:
        if key not in value:
            if default is None:
                raise self.bad(f"{where}.{key} is missing")
            return default
        got = value[key]
        if isinstance(got, bool) or not isinstance(got, int):
            raise self.bad(f"{where}.{key} must be an integer, got {got!r}")
        if got < 0:
            raise self.bad(f"{where}.{key} must not be negative, got {got}")
        return got

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.bad(f"{where} must be a number of seconds, got {value!r}")
        if value < 0:
            raise self.bad(f"{where} must not be negative, got {value}")
        return float(value)

    def string(self, value: Mapping[str, Any], key: str, where: str, *, default: str | None = None) -> str:
        if key not in value:
            if default is None:
                raise self.bad(f"{where}.{key} is missing")
            return default
        got = value[key]
        if not isinstance(got, str):
            raise self.bad(f"{where}.{key} must be a string, got {got!r}")
        return got

    def node_groups(self, config: Mapping[str, Any]) -> list[Any]:
        """The list of node groups, inline or from ``nodes_file``."""
        if ("nodes" in config) == ("nodes_file" in config):
            raise self.bad("exactly one of 'nodes' or 'nodes_file' is required")
        if "nodes" in config:
            groups, where = config["nodes"], "nodes"
        else:
            raw_path = config["nodes_file"]
            if not isinstance(raw_path, str | os.PathLike):
                raise self.bad(f"nodes_file must be a path, got {raw_path!r}")
            path = Path(raw_path)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, ValueError) as exc:  # ValueError: undecodable, or a NUL in the path
                raise self.bad(f"cannot read nodes_file {str(path)!r}: {exc}") from exc
            try:
                data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
            except (ValueError, yaml.YAMLError) as exc:
                raise self.bad(f"nodes_file {str(path)!r} is not valid YAML/JSON: {exc}") from exc
            file_map = self.mapping(data, f"nodes_file {str(path)!r}")
            if "nodes" not in file_map:
                raise self.bad(f"nodes_file {str(path)!r} has no 'nodes' key")
            groups, where = file_map["nodes"], f"nodes_file {str(path)!r}: nodes"
        if not isinstance(groups, list):
            raise self.bad(f"{where} must be a list of node groups, got {type(groups).__name__}")
        return groups

    def nodes(self, groups: list[Any]) -> list[NodeInfo]:
        nodes: list[NodeInfo] = []
        seen: set[str] = set()
        for number, raw in enumerate(groups):
            for node in self.group(raw, f"nodes[{number}]"):
                if node.name in seen:
                    raise self.bad(f"node name {node.name!r} is defined twice")
                seen.add(node.name)
                nodes.append(node)
        return nodes

    def group(self, raw: Any, where: str) -> list[NodeInfo]:
        group = self.mapping(raw, where)
        self.check_keys(group, _GROUP_KEYS, where)
        pattern = self.string(group, "name", where)
        count = self.integer(group, "count", where, default=1)
        cpus = self.integer(group, "cpus", where)
        memory = self.integer(group, "memory_mib", where)
        state = self.string(group, "state", where, default="up")
        if state not in _NODE_STATES:
            raise self.bad(f"{where}.state must be one of {', '.join(_NODE_STATES)}, got {state!r}")
        reason = self.string(group, "reason", where, default="")
        labels_raw = self.mapping(group.get("labels", {}), f"{where}.labels")
        labels: dict[str, str] = {}
        for key, value in labels_raw.items():
            if isinstance(value, Mapping | list) or value is None:
                raise self.bad(f"{where}.labels.{key} must be a scalar, got {value!r}")
            labels[str(key)] = str(value)
        if "{" not in pattern and count > 1:
            raise self.bad(f"{where}.name {pattern!r} needs a placeholder such as '{{:02d}}' because count is {count}")
        nodes = []
        for index in range(1, count + 1):
            try:
                name = pattern.format(index)
            except (IndexError, KeyError, ValueError) as exc:
                raise self.bad(f"{where}.name {pattern!r} cannot be formatted with an index: {exc}") from exc
            if not _is_safe_name(name):
                raise self.bad(f"{where}: node name {name!r} must match {_SAFE_NAME.pattern}")
            gpus = self.gpus(group.get("gpus"), f"{where}.gpus", name) if "gpus" in group else ()
            nodes.append(
                NodeInfo(
                    name=name, cpus=cpus, memory_mib=memory, gpus=gpus, state=state, reason=reason, labels=dict(labels)
                )
            )
        return nodes

    def gpus(self, raw: Any, where: str, node: str) -> tuple[GpuInfo, ...]:
        spec = self.mapping(raw, where)
        self.check_keys(spec, _GPU_KEYS, where)
        count = self.integer(spec, "count", where)
        model = self.string(spec, "model", where)
        memory = self.integer(spec, "memory_mib", where)
        capability = spec.get("compute_capability", "")
        if isinstance(capability, int | float) and not isinstance(capability, bool):
            capability = str(capability)  # YAML reads an unquoted 9.0 as a float
        if not isinstance(capability, str):
            raise self.bad(f"{where}.compute_capability must be a string like '9.0', got {capability!r}")
        profiles = self.mig_profiles(spec.get("mig", []), f"{where}.mig", memory)
        shared = spec.get("shared", False)
        if not isinstance(shared, bool):
            raise self.bad(f"{where}.shared must be true or false, got {shared!r}")
        sharing = spec.get("sharing", "time-slicing" if shared else "")
        if sharing not in ("", *SHARING_MODES) or (not shared and "shared" in spec and sharing):
            modes = " or ".join(repr(mode) for mode in SHARING_MODES)
            raise self.bad(f"{where}.sharing must be {modes} (shared: true means time-slicing), got {sharing!r}")
        if sharing and profiles:
            raise self.bad(f"{where}: a GPU is either split into MIG slices or shared, not both")

        physical = [
            GpuInfo(
                index=i,
                model=model,
                memory_mib=memory,
                compute_capability=capability,
                uuid="GPU-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{self.cluster}/{node}/{i}")),
                sharing=sharing,
            )
            for i in range(count)
        ]
        slices = [
            GpuInfo(
                index=count + parent * len(profiles) + j,
                model=model,
                memory_mib=slice_memory,
                compute_capability=capability,
                mig_profile=profile,
                parent_index=parent,
                uuid="MIG-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{self.cluster}/{node}/{parent}/mig/{j}")),
            )
            for parent in range(count)
            for j, (profile, slice_memory) in enumerate(profiles)
        ]
        return tuple(physical + slices)

    def mig_profiles(self, raw: Any, where: str, gpu_memory: int) -> list[tuple[str, int]]:
        if not isinstance(raw, list):
            raise self.bad(f"{where} must be a list of MIG profile names, got {raw!r}")
        profiles: list[tuple[str, int]] = []
        for profile in raw:
            match = _MIG_PROFILE.fullmatch(profile) if isinstance(profile, str) else None
            if match is None:
                raise self.bad(f"{where}: {profile!r} is not a MIG profile name like '3g.40gb'")
            profiles.append((profile, int(match["gb"]) * 1024))
        compute = sum(int(p.split("g.", 1)[0]) for p, _ in profiles)
        if compute > 7:
            raise self.bad(f"{where} uses {compute} compute slices; a GPU has at most 7")
        memory = sum(m for _, m in profiles)
        if memory > gpu_memory:
            raise self.bad(f"{where} needs {memory} MiB but the GPU has {gpu_memory} MiB")
        return profiles


class LocalBackend:
    """A simulated cluster whose jobs run as detached subprocesses on this machine.

    Construction validates the whole config and raises ``BackendError(permanent=True)``
    naming the bad value; it touches no files. All other methods raise only
    :class:`BackendError`: permanent for a spec that can never run here, transient for
    I/O failures.
    """

    kind: ClassVar[str] = "local"
    #: Jobs run on this machine; who they run as is the local runner's concern.
    requires_identity: bool = False

    def __init__(self, *, name: str, config: Mapping[str, Any], work_dir: Path, instance: str = "") -> None:
        # ``instance`` is not needed: this backend's jobs live under the portal's work_dir.
        reader = _ConfigReader(name)
        if not _is_safe_name(name):
            raise reader.bad(f"cluster name {name!r} must match {_SAFE_NAME.pattern}")
        config = reader.mapping(config, "config")
        reader.check_keys(config, _CONFIG_KEYS, "config")
        self.name = name
        self._nodes = reader.nodes(reader.node_groups(config))
        self._by_name = {node.name: node for node in self._nodes}
        simulate = config.get("simulate")
        self.simulate: float | None = None if simulate is None else reader.number(simulate, "simulate")
        self.kill_grace_seconds = reader.number(config.get("kill_grace_seconds", 5), "kill_grace_seconds")
        state_dir = config.get("state_dir")
        if state_dir is None:
            self.state_dir = Path(work_dir) / "local-backend" / name
        elif isinstance(state_dir, str | os.PathLike):
            self.state_dir = Path(state_dir).absolute()
        else:
            raise reader.bad(f"state_dir must be a path, got {state_dir!r}")
        self._jobs = self.state_dir / "jobs"
        self._staging = self.state_dir / "tmp"
        self.sandbox = _sandbox(reader, config.get("sandbox", "auto"))
        job_user = config.get("job_user", "nobody")
        if not isinstance(job_user, str) or not _is_safe_name(job_user):
            raise reader.bad(f"job_user must be a user name, got {job_user!r}")
        self.job_user = job_user
        shared = config.get("shared_paths", [])
        if not isinstance(shared, list) or not all(isinstance(p, str) and p.startswith("/") for p in shared):
            raise reader.bad(f"shared_paths must be a list of absolute paths, got {shared!r}")
        self.shared_paths = tuple(shared)
        homes_dir = config.get("homes_dir", str(DEFAULT_HOMES_DIR))
        if not isinstance(homes_dir, str) or not homes_dir.startswith("/"):
            raise reader.bad(f"homes_dir must be an absolute path, got {homes_dir!r}")
        self.homes_dir = Path(os.path.normpath(homes_dir))
        #: The interactive apps' environment (``scheduler.backends.sessions``): '' none.
        self.apps_env = apps_env_from_config(config.get("apps_env"), reader.bad)

    @property
    def isolation(self) -> str:
        """What keeps this cluster's jobs from the portal and from each other, in words:
        the demo prints it, and an operator must never have to guess it."""
        if self.simulate is not None:
            return "simulated: no job runs on this machine"
        if os.geteuid() == 0:
            who = f"its owner's uid ({self.job_user!r} when the owner has none)"
        else:
            who = f"this portal's own user (uid {os.geteuid()})"
        if self.sandbox:
            return (
                f"bubblewrap sandbox ({self.sandbox}): each job runs as {who} and sees only the operating "
                "system, its own directory and the shared paths"
            )
        if os.geteuid() == 0:
            return (
                f"no sandbox: each job runs as {who} without filesystem isolation, so it can read whatever "
                f"that uid can on this machine (world-readable files; jobs without a uid share {self.job_user!r})"
            )
        return (
            f"no sandbox: each job runs as {who} without filesystem isolation, so it can read and change "
            "everything this user can, the portal's database and files included"
        )

    # -- Backend protocol -------------------------------------------------------------

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str | BackendError]:
        return submit_one_by_one(self, specs)

    def submit(self, spec: JobSpec) -> str:
        """Start ``spec``; return its external id (the spec key).

        Idempotent per key: the job directory appears by one atomic rename, so of any
        number of concurrent or repeated submits exactly one creates the job and the rest
        return the same id without starting anything. Raises a permanent BackendError for
        a spec that cannot run on this inventory, a transient one for I/O failures.

        Steps:
        1. Validate the spec against the inventory (nothing is written on failure).
        2. If the job exists, return its id (relaunching a runner only if the first
           submitter died before launching one; the runner's claim file prevents doubles).
        3. Decide whom it runs as and where its own directory will be (refused: permanent).
        4. Build the job directory in tmp/ and rename it into jobs/<key>.
        5. Launch the detached runner (real execution only) and wait for it to detach.
        """
        argv, env = self._validate(spec)
        job_dir = self._jobs / spec.key
        try:
            if job_dir.exists():
                self._relaunch_if_orphaned(job_dir)
                return spec.key
            identity = self._job_identity(spec)
            home = self._home(spec, identity)
            readonly = self._apps_paths(spec, identity)
            # The portal's alone: no job needs to pass through it (module docstring).
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._jobs.mkdir(mode=0o700, exist_ok=True)
            self._staging.mkdir(mode=0o700, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=self._staging, prefix=f"{spec.key}."))
            try:
                self._write_job(staging, spec, argv, env, identity, home, readonly)
                os.rename(staging, job_dir)
            except OSError as exc:
                shutil.rmtree(staging, ignore_errors=True)
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    return spec.key  # a concurrent submit of the same key won
                raise
            if self.simulate is None:
                self._launch(job_dir)
        except OSError as exc:
            raise BackendError(f"local backend {self.name!r}: submit {spec.key}: {exc}", permanent=False) from exc
        return spec.key

    def cancel(self, external_id: str, *, grace_seconds: float | None = None) -> None:
        """Stop the job. Idempotent; a no-op for unknown or finished jobs.

        Writes the cancel marker (the runner polls it; it carries ``grace_seconds``, the
        time between SIGTERM and SIGKILL, when given) and SIGTERMs the runner, which
        stops the job's process group and records CANCELLED. For a job whose runner died
        (NODE_FAIL) it only kills the job's orphaned processes.
        """
        job_dir = self._job_dir(external_id)
        if job_dir is None:
            return
        try:
            spec = self._read(job_dir / runner.SPEC_FILE)
            if spec is None:
                return
            if spec.get("simulate") is not None:
                if time.time() < self._simulated_end(spec):
                    self._write_cancel_marker(job_dir, grace_seconds)
                return
            if (job_dir / runner.RESULT_FILE).exists():
                return
            info = self._read(job_dir / runner.RUNNER_FILE)
            if info is None:
                if time.time() - float(spec["submitted_at"]) < STARTUP_GRACE_SECONDS:
                    self._write_cancel_marker(job_dir, grace_seconds)  # the runner checks it before starting
                return
            if self._runner_alive(info):
                self._write_cancel_marker(job_dir, grace_seconds)
                self._signal(int(info["pid"]), signal.SIGTERM)
                return
            started = self._read(job_dir / runner.STARTED_FILE)
            if (
                started is not None
                and info.get("boot_id") == runner.boot_id()
                and runner.process_alive(int(started["pid"]), started.get("start_ticks"))
            ):
                self._signal(-int(started["pid"]), signal.SIGKILL)
        except _Corrupt:
            return
        except OSError as exc:
            raise BackendError(f"local backend {self.name!r}: cancel {external_id}: {exc}", permanent=False) from exc

    def poll(self, external_ids: Sequence[str]) -> dict[str, PollResult]:
        """Report each job's state from its files; unknown ids come back UNKNOWN.

        Reads only. A runner that is gone without a result (killed, machine rebooted)
        makes the job NODE_FAIL, with the reason.
        """
        results: dict[str, PollResult] = {}
        for external_id in external_ids:
            try:
                results[external_id] = self._poll_one(external_id)
            except _Corrupt as exc:
                results[external_id] = PollResult(external_id, RemoteState.NODE_FAIL, reason=str(exc))
            except OSError as exc:
                raise BackendError(f"local backend {self.name!r}: poll {external_id}: {exc}", permanent=False) from exc
        return results

    def list_jobs(self) -> dict[str, str]:
        """Key -> backend id of the jobs this backend still runs (or is about to), for the
        orphan sweep. Here the two are the same: a job's directory is named by its key."""
        try:
            keys = sorted(entry.name for entry in self._jobs.iterdir()) if self._jobs.is_dir() else []
        except OSError as exc:
            raise BackendError(f"local backend {self.name!r}: list jobs: {exc}", permanent=False) from exc
        live = [key for key in keys if not (self._jobs / key / runner.RESULT_FILE).exists()]
        return {key: key for key, result in self.poll(live).items() if not result.state.is_terminal}

    def list_nodes(self) -> list[NodeInfo]:
        """The configured inventory (fresh copies: callers may not alter ours)."""
        return [dataclasses.replace(node, labels=dict(node.labels)) for node in self._nodes]

    def read_log(self, external_id: str, max_bytes: int = 65536) -> str:
        """The last ``max_bytes`` of the job's output ('' for unknown jobs or no output)."""
        job_dir = self._job_dir(external_id)
        if job_dir is None or max_bytes <= 0:
            return ""
        try:
            with open(job_dir / runner.OUTPUT_FILE, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - max_bytes))
                return fh.read(max_bytes).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise BackendError(f"local backend {self.name!r}: read_log {external_id}: {exc}", permanent=False) from exc

    def session_host(self, external_id: str, placements: tuple[Placement, ...]) -> str:
        """Every node of the local cluster is this machine: its loopback address."""
        return "127.0.0.1"

    def log_sources(self, external_id: str) -> tuple[LogSource, ...]:
        """Every rank's combined log (``output.log``: what the tail shows), then each
        rank's stdout and stderr apart (``logs/``), or both in one where the job's own
        file takes both (``runner.rank_streams``); a simulated job has the first only."""
        job_dir = self._job_dir(external_id)
        if job_dir is None:
            return ()
        try:
            spec = self._read(job_dir / runner.SPEC_FILE) or {}
        except _Corrupt as exc:
            raise BackendError(f"local backend {self.name!r}: {exc}", permanent=False) from exc
        combined = LogSource(None, "combined")
        if spec.get("simulate") is not None:
            return (combined,)
        ranks, streams = len(spec.get("ranks") or [{}]), runner.rank_streams(spec)
        return (combined, *(LogSource(rank, stream) for rank in range(ranks) for stream in streams))

    def stream_log(self, external_id: str, source: LogSource, offset: int = 0) -> Iterator[bytes]:
        """The file that holds ``source`` (``output.log`` or ``logs/rank-N.stream``), from
        ``offset``, a chunk at a time; nothing for a job or log not there (yet)."""
        job_dir = self._job_dir(external_id)
        if job_dir is None or source not in self.log_sources(external_id):
            return iter(())
        name = (
            runner.OUTPUT_FILE
            if source.rank is None
            else f"{runner.LOGS_DIR}/{runner.rank_log_name(source.rank, source.stream)}"
        )
        return self._chunks(job_dir / name, offset, external_id)

    def _chunks(self, path: Path, offset: int, external_id: str) -> Iterator[bytes]:
        """``path`` from ``offset``, a chunk at a time. Never through a symlink: the
        runner made these files, and one found replaced by a link is refused."""
        try:
            yield from log_file_chunks(path, offset, follow_symlinks=False)
        except OSError as exc:
            raise BackendError(
                f"local backend {self.name!r}: stream_log {external_id}: {exc}", permanent=False
            ) from exc

    # -- submit helpers -----------------------------------------------------------------

    def _reject(self, spec: JobSpec, message: str) -> BackendError:
        return BackendError(f"local backend {self.name!r}: job {spec.key!r}: {message}", permanent=True)

    def _validate(self, spec: JobSpec) -> tuple[list[str], dict[str, str]]:
        """Check ``spec`` against the inventory; return the argv and the job's extra env."""
        if not _is_safe_name(spec.key):
            raise self._reject(spec, f"key must match {_SAFE_NAME.pattern}")
        problem = spec_problem(spec)
        if problem:
            raise self._reject(spec, problem)
        if spec.workdir and spec.workdir_bounds is None:
            # The runner opens the workdir only within bounds the portal vouched for.
            raise self._reject(spec, f"workdir {spec.workdir} comes without the roots it must lie in")
        placed = [path for path in (spec.output.files if spec.output else ()) if path.startswith("/")]
        if placed and spec.workdir_bounds is None:
            # As the workdir: the runner opens an output file only within those bounds.
            raise self._reject(spec, f"output file {placed[0]} comes without the roots it must lie in")
        # The script file lies in the job's own directory, which is the working directory
        # only without a workdir: the runner finds it by its absolute path (_write_job).
        argv = ["bash", runner.SCRIPT_FILE] if spec.script else ["bash", "-c", spec.command]
        for placement in spec.placements:
            node = self._by_name.get(placement.node)
            if node is None:
                raise self._reject(spec, f"placement on unknown node {placement.node!r}")
            gpus = {gpu.index: gpu for gpu in node.gpus}
            split = {gpu.parent_index for gpu in node.gpus if gpu.parent_index is not None}
            for index in placement.gpu_indices:
                if index not in gpus:
                    raise self._reject(spec, f"node {node.name} has no GPU {index!r} (has {sorted(gpus)})")
                if index in split:
                    raise self._reject(
                        spec, f"GPU {index} on {node.name} is split into MIG slices; place the job on its slices"
                    )
        # Every node of this cluster is this machine: rank 0 listens on loopback.
        env = {**spec.env, **job_env(spec), **master_env("127.0.0.1", str(_free_port()))}
        if is_session(spec) and self.apps_env:
            problem = missing_apps_env(self.apps_env) if self.simulate is None else None
            if problem:
                raise self._reject(spec, problem)
            env["PATH"] = session_path(self.apps_env, os.environ.get("PATH") or _PLAIN_PATH)
        return argv, env

    def _apps_paths(self, spec: JobSpec, identity: dict[str, Any] | None) -> list[str]:
        """What a session's job sees of the apps environment (``apps_env_paths``): bound
        read-only in the sandbox; unsandboxed as another uid, reached by name, so every
        directory on the way must be root's and closed to other users' changes
        (:func:`passage_problem`), else one user could plant code in another's
        JupyterLab. Refused (permanent) when it is not."""
        if not (is_session(spec) and self.apps_env) or self.simulate is not None:
            return []
        paths = list(apps_env_paths(self.apps_env))
        if not self.sandbox and identity is not None:
            for path in paths:
                problem = passage_problem(Path(path))
                if problem:
                    raise self._reject(
                        spec,
                        f"apps_env {self.apps_env} cannot serve sessions that run unsandboxed as their owners: "
                        f"{problem} (build it outside the portal's tree, as root, e.g. /opt/quartermaster/apps-env)",
                    )
        return paths if self.sandbox else []

    @staticmethod
    def _ranks(spec: JobSpec) -> list[dict[str, str]]:
        """What differs between the job's processes: one per placed node, its rank and GPUs."""
        return [
            {**rank_env(str(rank)), "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in placement.gpu_indices)}
            for rank, placement in enumerate(spec.placements)
        ]

    def _job_identity(self, spec: JobSpec) -> dict[str, Any] | None:
        """Whom the runner starts the job as: nobody in particular when the portal is not
        root (the job runs as the portal's user, in the sandbox); as root, the owner's
        uid/gid when their identity has one, else ``job_user`` (never root)."""
        if os.geteuid() != 0:
            return None
        run_as = spec.run_as
        if run_as is not None and run_as.uid is not None:
            identity = {
                "user": run_as.user,
                "uid": run_as.uid,
                "gid": run_as.gid if run_as.gid is not None else run_as.uid,
            }
        else:
            try:
                entry = pwd.getpwnam(self.job_user)
            except KeyError:
                raise self._reject(spec, f"job_user {self.job_user!r} does not exist on this machine") from None
            identity = {"user": self.job_user, "uid": entry.pw_uid, "gid": entry.pw_gid}
        if identity["uid"] == 0 or identity["gid"] == 0:
            raise self._reject(spec, "a job never runs as root")
        return identity

    def _workdir_refused(self, spec: JobSpec) -> list[str]:
        """The trees a job may not start in: the portal's (as it named them) and this
        backend's own, its state directory and the code its runner runs."""
        named = spec.workdir_bounds.refused if spec.workdir_bounds else ()
        return [*named, str(self.state_dir), str(_PACKAGE_ROOT)]

    def _home(self, spec: JobSpec, identity: dict[str, Any] | None) -> Path:
        """The job's own directory (see the module docstring): in its job directory,
        unless it runs unsandboxed as another uid; then a fresh name in ``homes_dir``,
        which is made here if need be and must be a safe passage
        (:func:`passage_problem`)."""
        if self.sandbox or identity is None or self.simulate is not None:
            return self._jobs / spec.key / runner.WORK_DIR
        if not self.homes_dir.is_dir():
            self.homes_dir.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                self.homes_dir.mkdir(mode=0o711)
                self.homes_dir.chmod(0o711)  # whatever the umask
        problem = passage_problem(self.homes_dir)
        if problem:
            raise self._reject(
                spec,
                f"homes_dir {self.homes_dir} cannot hold the directories of jobs that run unsandboxed "
                f"as their owners: {problem}",
            )
        return self.homes_dir / f"{self.name}-{spec.key}-{uuid.uuid4().hex[:12]}"

    def _write_job(
        self,
        job_dir: Path,
        spec: JobSpec,
        argv: list[str],
        env: dict[str, str],
        identity: dict[str, Any] | None,
        home: Path,
        readonly: Sequence[str] = (),
    ) -> None:
        if spec.script:
            argv = ["bash", str(home / runner.SCRIPT_FILE)]
        if self.simulate is not None:
            (job_dir / runner.OUTPUT_FILE).write_text(
                f"[local backend {self.name}: simulated for {self.simulate:g}s; nothing was run]\n", encoding="utf-8"
            )
        runner.atomic_write_json(
            job_dir / runner.SPEC_FILE,
            {
                "key": spec.key,
                "name": spec.name,
                "owner": spec.owner,
                "account": spec.account,
                "argv": argv,
                "script": spec.script,  # written into ``home`` by the runner, which makes it
                "home": str(home),
                "env": env,
                "walltime_seconds": spec.walltime_seconds,
                "kill_grace_seconds": self.kill_grace_seconds,
                "placements": [{"node": p.node, "gpu_indices": list(p.gpu_indices)} for p in spec.placements],
                "ranks": self._ranks(spec),
                "cpus_per_node": float(spec.cpus_per_node),
                "memory_mib_per_node": spec.memory_mib_per_node,
                "image": spec.image,  # recorded, not used: the local backend runs on the host
                "simulate": self.simulate,
                "submitted_at": time.time(),
                "run_as": identity,
                "sandbox": self.sandbox,
                "shared_paths": list(self.shared_paths),
                # Bound read-only in the sandbox: a session's apps environment.
                "readonly_paths": list(readonly),
                "workdir": spec.workdir,
                "workdir_roots": list(spec.workdir_bounds.roots if spec.workdir_bounds else ()),
                "workdir_refused": self._workdir_refused(spec),
                # Opened by the runner as the job's user, within the same bounds.
                "output": dataclasses.asdict(spec.output) if spec.output else None,
                # Written once, by the job's own user, before its ranks start (several
                # ranks writing the same files at once could read each other's halves).
                "setup": prelude(spec.files),
            },
        )

    def _launch(self, job_dir: Path) -> None:
        """Start the detached runner for ``job_dir`` and wait for it to detach.

        Raises OSError if it cannot be started and a transient BackendError if it exits
        with an error; a retried submit relaunches it.
        """
        with open(job_dir / runner.RUNNER_LOG_FILE, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", runner.__name__, str(job_dir)],
                cwd=_PACKAGE_ROOT,  # so "-m scheduler..." resolves without installing
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        try:
            returncode = process.wait(timeout=LAUNCH_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            return  # slow machine: the runner will still start; poll shows PENDING until then
        if returncode != 0:
            raise BackendError(
                f"local backend {self.name!r}: runner for {job_dir.name} exited {returncode} "
                f"before starting the job; see {job_dir / runner.RUNNER_LOG_FILE}",
                permanent=False,
            )

    def _relaunch_if_orphaned(self, job_dir: Path) -> None:
        """Launch a runner for a job no runner ever claimed, if it is still young."""
        spec = self._read(job_dir / runner.SPEC_FILE)
        if spec is None or spec.get("simulate") is not None:
            return
        if (job_dir / runner.CLAIM_FILE).exists() or (job_dir / runner.RESULT_FILE).exists():
            return
        if time.time() - float(spec["submitted_at"]) < RELAUNCH_WINDOW_SECONDS:
            self._launch(job_dir)

    # -- poll helpers -------------------------------------------------------------------

    def _job_dir(self, external_id: str) -> Path | None:
        """The job's directory, or None if the id is malformed or unknown."""
        if not _is_safe_name(external_id):
            return None
        job_dir = self._jobs / external_id
        return job_dir if job_dir.is_dir() else None

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            return runner.read_json(path)
        except ValueError as exc:
            raise _Corrupt(f"unreadable state file {path}: {exc}") from exc

    def _poll_one(self, external_id: str) -> PollResult:
        job_dir = self._job_dir(external_id)
        spec = None if job_dir is None else self._read(job_dir / runner.SPEC_FILE)
        if job_dir is None or spec is None:
            return PollResult(external_id, RemoteState.UNKNOWN, reason="no such job")
        if spec.get("simulate") is not None:
            return self._poll_simulated(external_id, job_dir, spec)

        result = self._read(job_dir / runner.RESULT_FILE)
        if result is not None:
            return self._from_result(external_id, result)
        info = self._read(job_dir / runner.RUNNER_FILE)
        if info is None:
            if (job_dir / runner.CANCEL_FILE).exists():
                return PollResult(external_id, RemoteState.CANCELLED, reason="cancelled before it started")
            if time.time() - float(spec["submitted_at"]) < STARTUP_GRACE_SECONDS:
                return PollResult(external_id, RemoteState.PENDING, reason="runner starting")
            return PollResult(
                external_id,
                RemoteState.NODE_FAIL,
                reason=f"runner never started (no {runner.RUNNER_FILE} after {STARTUP_GRACE_SECONDS:g}s)",
            )
        if self._runner_alive(info):
            started = self._read(job_dir / runner.STARTED_FILE)
            if started is None:
                return PollResult(external_id, RemoteState.PENDING, reason="runner starting")
            return PollResult(external_id, RemoteState.RUNNING, started_at=_epoch_to_dt(started.get("started_at")))
        # The runner may have written its result and exited since we looked.
        result = self._read(job_dir / runner.RESULT_FILE)
        if result is not None:
            return self._from_result(external_id, result)
        started = self._read(job_dir / runner.STARTED_FILE)
        if info.get("boot_id") != runner.boot_id():
            reason = "machine rebooted while the job was running"
        else:
            reason = f"runner process {info.get('pid')} died without recording a result"
        return PollResult(
            external_id,
            RemoteState.NODE_FAIL,
            reason=reason,
            started_at=_epoch_to_dt(None if started is None else started.get("started_at")),
        )

    @staticmethod
    def _from_result(external_id: str, result: Mapping[str, Any]) -> PollResult:
        try:
            state = RemoteState(result["state"])
            exit_code = result.get("exit_code")
            return PollResult(
                external_id,
                state,
                exit_code=None if exit_code is None else int(exit_code),
                reason=str(result.get("reason", "")),
                started_at=_epoch_to_dt(result.get("started_at")),
                ended_at=_epoch_to_dt(result.get("ended_at")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _Corrupt(f"malformed result for {external_id}: {exc!r}") from exc

    @staticmethod
    def _simulated_end(spec: Mapping[str, Any]) -> float:
        return float(spec["submitted_at"]) + min(float(spec["simulate"]), float(spec["walltime_seconds"]))

    def _poll_simulated(self, external_id: str, job_dir: Path, spec: Mapping[str, Any]) -> PollResult:
        """A simulated job runs from submit for ``simulate`` seconds, capped at walltime."""
        submitted = float(spec["submitted_at"])
        end = self._simulated_end(spec)
        marker = self._read(job_dir / runner.CANCEL_FILE)
        if marker is not None and float(marker["requested_at"]) < end:
            return PollResult(
                external_id,
                RemoteState.CANCELLED,
                reason="cancelled",
                started_at=_epoch_to_dt(submitted),
                ended_at=_epoch_to_dt(marker["requested_at"]),
            )
        if time.time() < end:
            return PollResult(external_id, RemoteState.RUNNING, started_at=_epoch_to_dt(submitted))
        if float(spec["simulate"]) > float(spec["walltime_seconds"]):
            return PollResult(
                external_id,
                RemoteState.TIMEOUT,
                reason=f"walltime of {spec['walltime_seconds']}s exceeded",
                started_at=_epoch_to_dt(submitted),
                ended_at=_epoch_to_dt(end),
            )
        return PollResult(
            external_id,
            RemoteState.COMPLETED,
            exit_code=0,
            started_at=_epoch_to_dt(submitted),
            ended_at=_epoch_to_dt(end),
        )

    # -- process helpers ----------------------------------------------------------------

    @staticmethod
    def _runner_alive(info: Mapping[str, Any]) -> bool:
        """Whether the runner in runner.json still runs (same boot, same process)."""
        if info.get("boot_id") != runner.boot_id():
            return False
        return runner.process_alive(int(info["pid"]), info.get("start_ticks"))

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        """Send ``sig`` to ``pid`` (a process group when negative); gone or foreign is fine,
        since the runner also watches the cancel marker."""
        try:
            if pid < 0:
                os.killpg(-pid, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    @staticmethod
    def _write_cancel_marker(job_dir: Path, grace_seconds: float | None = None) -> None:
        """Create the cancel marker once; the first request's time (and grace) is kept."""
        path = job_dir / runner.CANCEL_FILE
        if path.exists():
            return
        # Written aside, then hard-linked into place: linking fails if another cancel won.
        staged = job_dir / f".{runner.CANCEL_FILE}.{os.getpid()}.{uuid.uuid4().hex}"
        marker: dict[str, float] = {"requested_at": time.time()}
        if grace_seconds is not None:
            marker["grace_seconds"] = float(grace_seconds)
        runner.atomic_write_json(staged, marker)
        try:
            os.link(staged, path)
        except FileExistsError:
            pass
        finally:
            staged.unlink(missing_ok=True)


def _free_port() -> int:
    """A TCP port free on loopback now, for a job's rank-0 rendezvous (the job binds it
    a moment later; another job taking it first is as unlikely as with torchrun's own)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
