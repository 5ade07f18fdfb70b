"""The contract every Backend honours, run against each backend we can build here.

The first part is backend-agnostic: it receives a :class:`Case` (a backend plus what it
can do) from the ``case`` fixture, so adding a backend means adding a case, not tests.
Tests that need real command execution (logs, exit codes, process groups) take the
``executing`` fixture, which only yields backends that really run commands; where a
backend differs in what it can do (pick GPU indices, enforce a one-second walltime,
kill its own supervisor) the difference is a field of :class:`Case`, never a skip. The
second part specifies the ``local`` backend's own config format and inventory.

The ``slurm`` case runs against the real Slurm dev cluster
(``scripts/slurm-dev-cluster.sh``); without one it skips, and fails in CI.

No Django: these tests build backends directly in ``tmp_path``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from scheduler.backends import load_backend, local_runner
from scheduler.backends.base import (
    ArrayTask,
    Backend,
    BackendError,
    JobOutput,
    JobSpec,
    LogSource,
    LogStreamer,
    Placement,
    PollResult,
    RemoteState,
    RunAs,
    WorkdirBounds,
)
from scheduler.backends.local import LocalBackend
from tests import slurm_dev
from tests.backends.kube.apiserver import FakeKube
from tests.backends.kube.builders import contract_nodes
from tests.backends.kube.real_cluster import real_cluster_case
from tests.backends.multinode import rendezvous_script
from tests.conftest import passable_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_INVENTORY = REPO_ROOT / "scheduler/backends/local_clusters/demo.yaml"
#: How long a job lasts on the simulating backend.
SIMULATED_SECONDS = 1.5
WAIT_SECONDS = 30.0  # an upper bound only: waits end as soon as the condition holds (CI is 2 loaded cores)

NODE_GROUPS: list[dict[str, Any]] = [
    {
        "name": "gpu-{:02d}",
        "count": 2,
        "cpus": 32,
        "memory_mib": 262144,
        "labels": {"rack": "r1"},
        "gpus": {"count": 4, "model": "H100-80GB", "memory_mib": 81920, "compute_capability": "9.0"},
    },
    {
        "name": "mig-01",
        "cpus": 32,
        "memory_mib": 262144,
        "gpus": {
            "count": 2,
            "model": "A100-40GB",
            "memory_mib": 40960,
            "compute_capability": "8.0",
            "mig": ["3g.20gb", "3g.20gb"],
        },
    },
]


@pytest.fixture(autouse=True)
def _isolated_scheduler_settings() -> None:
    """Replaces the Django-side autouse fixture of tests/conftest.py: no Django here."""


# --- Cases ---------------------------------------------------------------------------


@dataclass
class Case:
    """A backend under test and what it can do."""

    backend: Backend
    #: Jobs really run: logs, exit codes and the environment can be observed.
    runs_commands: bool
    #: A new backend instance over the same state, as a restarted worker would build.
    reopen: Callable[[], Backend]
    #: Kill whatever supervises a running job (None where that cannot be simulated).
    kill_supervisor: Callable[[str], None] | None
    #: The backend's kind and config, to build it again in another process.
    kind: str = "local"
    config: dict[str, Any] | None = None
    #: A node and two of its GPU indices to place jobs on, and a second node.
    node: str = "gpu-01"
    gpus: tuple[int, ...] = (0, 1)
    other_node: str = "gpu-02"
    #: The job sees exactly the GPU indices placed (Slurm picks its own on each node).
    exact_gpu_indices: bool = True
    #: The shortest walltime the backend enforces (Slurm counts whole minutes), and how
    #: late after it the job may end (Slurm checks limits every 30 s, then KillWait).
    shortest_walltime: int = 1
    walltime_lag: float = 4.0
    #: Cancel whatever the test left running.
    cleanup: Callable[[], None] | None = None
    #: A directory the job's own user can write and the test can read (jobs on Slurm
    #: run as their owner, who cannot write the test's private tmp_path).
    scratch: Path = Path()

    def placement(self) -> tuple[Placement, ...]:
        return (Placement(self.node, self.gpus),)


def local_config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """The contract's local cluster; its jobs may write the test's ``scratch``, shared
    with them as a site shares a scratch file system (``shared_paths``). Jobs that run
    unsandboxed as other uids get their own directories in the test's passable tree
    (``homes_dir``), removed with it."""
    return {
        "nodes": NODE_GROUPS,
        "state_dir": str(tmp_path / "state"),
        "kill_grace_seconds": 1,
        "shared_paths": [str(local_scratch(tmp_path))],
        "homes_dir": str(passable_dir(tmp_path) / "homes"),
        **extra,
    }


def local_scratch(tmp_path: Path) -> Path:
    """Writable by whatever user the local backend runs jobs as (nobody, as root), and
    reachable by them: the runner opens a job's workdir as the job's user, so it lies in
    a directory others may pass, as a site's /scratch (removed by the case's cleanup)."""
    scratch = passable_dir(tmp_path) / "scratch"
    scratch.mkdir(exist_ok=True)
    scratch.chmod(0o777)
    return scratch


def _local_case(tmp_path: Path, **extra: Any) -> Case:
    config = local_config(tmp_path, **extra)

    def build() -> Backend:
        return load_backend("local", "testcluster", config, work_dir=tmp_path / "work")

    def kill_runner(external_id: str) -> None:
        info = json.loads((tmp_path / "state/jobs" / external_id / local_runner.RUNNER_FILE).read_text())
        os.kill(info["pid"], signal.SIGKILL)

    def cancel_all() -> None:
        jobs = tmp_path / "state/jobs"
        for job_dir in jobs.iterdir() if jobs.is_dir() else ():
            built.cancel(job_dir.name)
        shutil.rmtree(passable_dir(tmp_path), ignore_errors=True)

    built = build()
    return Case(
        backend=built,
        runs_commands="simulate" not in extra,
        reopen=build,
        kill_supervisor=None if "simulate" in extra else kill_runner,
        config=config,
        cleanup=cancel_all,
        scratch=local_scratch(tmp_path),
    )


def _slurm_case(tmp_path: Path) -> Case:
    """The real Slurm dev cluster: node1..node4 with 8 GPUs each, KillWait 5 s. Jobs run
    as their owner, alice (``scripts/slurm-dev-users.sh``), with their output in a
    directory of this test's under her home."""
    test_dir = f".quartermaster/contract-{uuid.uuid4().hex[:12]}"
    config = {"slurm_conf": slurm_dev.slurm_conf(), "output_dir": f"{{home}}/{test_dir}"}
    scratch = slurm_dev.scratch_dir_for(OWNER.user, tmp_path)

    def build() -> Backend:
        return load_backend("slurm", "devcluster", config, work_dir=tmp_path / "work")

    return Case(
        backend=build(),
        runs_commands=True,
        reopen=build,
        kill_supervisor=None,  # a dead slurmd takes Slurm ~45 s to notice, and it requeues
        kind="slurm",
        config=config,
        node="node1",
        other_node="node2",
        exact_gpu_indices=False,
        shortest_walltime=60,
        walltime_lag=45.0,
        cleanup=lambda: slurm_dev.scancel_jobs_in(slurm_dev.home_of(OWNER.user) / test_dir),
        scratch=scratch,
    )


@contextmanager
def _local(tmp_path: Path, **extra: Any) -> Iterator[Case]:
    yield from _cleaned_up(_local_case(tmp_path, **extra))


@contextmanager
def _slurm(tmp_path: Path) -> Iterator[Case]:
    yield from _cleaned_up(_slurm_case(tmp_path))


def _cleaned_up(built: Case) -> Iterator[Case]:
    try:
        yield built
    finally:
        if built.cleanup is not None:  # leave no processes behind, whatever the test did
            built.cleanup()


@contextmanager
def _kubernetes(tmp_path: Path) -> Iterator[Case]:
    """Against the fake API server of tests/backends/kube (its controller runs nothing:
    see tests/backends/kube/program.py for the commands it understands)."""
    with FakeKube(nodes=contract_nodes()) as kube:
        config = {"api_server": kube.url, "kill_grace_seconds": 1}

        def build() -> Backend:
            return load_backend("kubernetes", "testcluster", config, work_dir=tmp_path / "work")

        yield Case(backend=build(), runs_commands=False, reopen=build, kill_supervisor=None)


@contextmanager
def _kubernetes_cluster(tmp_path: Path) -> Iterator[Case]:
    """Against the real cluster of ``$KUBECONFIG`` (opt-in; see docs/admin/kubernetes.md)."""
    with real_cluster_case(tmp_path) as (build, node, gpus):
        yield Case(backend=build(), runs_commands=False, reopen=build, kill_supervisor=None, node=node, gpus=gpus)


#: Every backend we can build here: name -> a context manager that yields its Case. The
#: local backend runs every test twice: in its bubblewrap sandbox, and with none (as
#: where bubblewrap is not installed), each job as its owner's uid when this is root.
BACKENDS: dict[str, Callable[[Path], AbstractContextManager[Case]]] = {
    "local-bwrap": partial(_local, sandbox="bwrap"),
    "local-nosandbox": partial(_local, sandbox="none"),
    "local-simulate": partial(_local, simulate=SIMULATED_SECONDS),
    "kubernetes": _kubernetes,
    "slurm": _slurm,
}
if os.environ.get("KUBECONFIG"):
    BACKENDS["kubernetes-cluster"] = _kubernetes_cluster
#: Those that really run commands (logs, exit codes, process groups are observable).
EXECUTING = ["local-bwrap", "local-nosandbox", "slurm"]
#: Those whose job supervisor a test can kill.
SUPERVISED = ["local-bwrap", "local-nosandbox"]
#: The service each backend needs, as the marker that skips it here (fails it in CI).
NEEDS = {"slurm": pytest.mark.slurm, "local-bwrap": pytest.mark.bwrap}


def _params(names: list[str]) -> list[Any]:
    """Backend names as pytest params, each with the marker of the service it needs."""
    return [pytest.param(name, marks=NEEDS[name]) if name in NEEDS else name for name in names]


@pytest.fixture(params=_params(list(BACKENDS)))
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    with BACKENDS[request.param](tmp_path) as built:
        yield built


@pytest.fixture(params=_params(EXECUTING))
def executing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    """Only backends that really run commands: tests of logs, exit codes, signals."""
    with BACKENDS[request.param](tmp_path) as built:
        assert built.runs_commands
        yield built


@pytest.fixture(params=_params(SUPERVISED))
def supervised(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    """Only backends whose job supervisor a test can kill (``Case.kill_supervisor``)."""
    with BACKENDS[request.param](tmp_path) as built:
        yield built


#: Whom the contract's jobs run as: a user of the Slurm dev cluster (in account lab); the
#: uid and gid are what a Kubernetes pod and the local backend, as root, run with.
OWNER = RunAs("alice", 20001, 20001)


def job(case: Case, command: str = "true", **fields: Any) -> JobSpec:
    """A JobSpec with a fresh key, run as :data:`OWNER`, placed on the case's node
    unless told otherwise."""
    values: dict[str, Any] = {
        "key": f"{uuid.uuid4()}.1",
        "name": "test job",
        "owner": "alice",
        "run_as": OWNER,
        "account": "lab",
        "command": command,
        "script": "",
        "walltime_seconds": 60,
        "placements": case.placement(),
    }
    values.update(fields)
    return JobSpec(**values)


def wait_for(
    backend: Backend, external_id: str, until: Callable[[PollResult], bool] | None = None, timeout: float = WAIT_SECONDS
) -> PollResult:
    """Poll until ``until`` holds (default: a terminal state); fail after ``timeout``."""
    until = until or (lambda result: result.state.is_terminal)
    deadline = time.monotonic() + timeout
    while True:
        result = backend.poll([external_id])[external_id]
        if until(result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{external_id} still {result} after {timeout}s")
        time.sleep(0.05)


def running(result: PollResult) -> bool:
    return result.state is RemoteState.RUNNING


def job_processes(key: str) -> list[int]:
    """Host pids of the processes a job started (they carry its ``QM_JOB_KEY``). Found by
    looking, not by a pid the job reports: a sandboxed job sees only its own pid namespace."""
    marker = f"QM_JOB_KEY={key}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue  # ended meanwhile
    return found


def no_job_processes_left(key: str) -> None:
    """Wait (bounded) until none of the job's processes is left; fail naming them."""
    deadline = time.monotonic() + WAIT_SECONDS
    while (left := job_processes(key)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes of job {key} still running: {left}"


def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while not (path.exists() and path.read_text().strip()):
        if time.monotonic() > deadline:
            pytest.fail(f"{path} never appeared")
        time.sleep(0.05)
    return path.read_text().strip()


# --- The contract --------------------------------------------------------------------


def test_backend_satisfies_the_protocol(case: Case) -> None:
    assert isinstance(case.backend, Backend)
    assert isinstance(type(case.backend).kind, str)


def test_submitted_job_runs_to_completion(case: Case) -> None:
    external_id = case.backend.submit(job(case, "true"))

    result = wait_for(case.backend, external_id)

    assert result.state is RemoteState.COMPLETED
    assert result.exit_code == 0
    assert result.started_at is not None and result.ended_at is not None
    assert result.started_at <= result.ended_at
    assert result.started_at.tzinfo is not None


def test_submit_is_idempotent_per_key(case: Case) -> None:
    runs = case.scratch / "runs.txt"
    spec = job(case, f"echo ran >> {runs}; sleep 0.3")
    ids: list[str] = []

    threads = [threading.Thread(target=lambda: ids.append(case.backend.submit(spec))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids.append(case.backend.submit(spec))

    assert len(set(ids)) == 1 and len(ids) == 9
    assert wait_for(case.backend, ids[0]).state is RemoteState.COMPLETED
    assert case.backend.submit(spec) == ids[0]  # even after it finished
    if case.runs_commands:
        time.sleep(0.3)  # a duplicate, had one started, would have written by now
        assert runs.read_text().splitlines() == ["ran"]


def test_poll_reports_unknown_ids(case: Case) -> None:
    known = case.backend.submit(job(case, "sleep 5"))

    results = case.backend.poll([known, "never-submitted.1", "../../etc/passwd", ""])

    assert set(results) == {known, "never-submitted.1", "../../etc/passwd", ""}
    assert results[known].state is not RemoteState.UNKNOWN
    for unknown in ("never-submitted.1", "../../etc/passwd", ""):
        assert results[unknown].state is RemoteState.UNKNOWN
        assert results[unknown].external_id == unknown
    assert case.backend.poll([]) == {}


def test_cancel_running_job(case: Case) -> None:
    external_id = case.backend.submit(job(case, "sleep 30"))
    wait_for(case.backend, external_id, running)

    case.backend.cancel(external_id)

    result = wait_for(case.backend, external_id)
    assert result.state is RemoteState.CANCELLED
    assert result.ended_at is not None


def test_cancel_is_idempotent(case: Case) -> None:
    external_id = case.backend.submit(job(case, "sleep 30"))

    case.backend.cancel(external_id)
    case.backend.cancel(external_id)
    assert wait_for(case.backend, external_id).state is RemoteState.CANCELLED
    case.backend.cancel(external_id)
    case.backend.cancel("never-submitted.1")

    assert case.backend.poll([external_id])[external_id].state is RemoteState.CANCELLED


def test_live_jobs_are_listed_by_key_for_the_orphan_sweep(case: Case) -> None:
    """``list_jobs()`` (key -> backend id of live jobs) is how reconciliation finds
    backend jobs no active portal job holds; an ended job is not listed."""
    spec = job(case, "sleep 30")
    external_id = case.backend.submit(spec)
    assert case.backend.list_jobs().get(spec.key) == external_id  # type: ignore[attr-defined]

    case.backend.cancel(external_id)
    wait_for(case.backend, external_id)

    assert spec.key not in case.backend.list_jobs()  # type: ignore[attr-defined]


def test_cancel_of_finished_job_changes_nothing(case: Case) -> None:
    external_id = case.backend.submit(job(case, "true"))
    finished = wait_for(case.backend, external_id)

    case.backend.cancel(external_id)

    assert case.backend.poll([external_id])[external_id] == finished


def test_walltime_enforced_as_timeout(case: Case) -> None:
    walltime = case.shortest_walltime
    external_id = case.backend.submit(job(case, f"sleep {walltime + 60}", walltime_seconds=walltime))

    result = wait_for(case.backend, external_id, timeout=walltime + case.walltime_lag + WAIT_SECONDS)

    assert result.state is RemoteState.TIMEOUT
    assert result.started_at is not None and result.ended_at is not None
    assert walltime - 1 <= (result.ended_at - result.started_at).total_seconds() < walltime + case.walltime_lag


def test_job_survives_new_backend_instance(case: Case) -> None:
    spec = job(case, "sleep 30")
    external_id = case.backend.submit(spec)
    wait_for(case.backend, external_id, running)

    restarted = case.reopen()

    assert restarted.poll([external_id])[external_id].state is RemoteState.RUNNING
    restarted.cancel(external_id)
    assert wait_for(case.backend, external_id).state is RemoteState.CANCELLED
    assert restarted.submit(spec) == external_id


def test_placement_on_unknown_node_rejected(case: Case) -> None:
    spec = job(case, placements=(Placement("no-such-node", (0,)),))

    with pytest.raises(BackendError) as caught:
        case.backend.submit(spec)

    assert caught.value.permanent
    assert "no-such-node" in caught.value.message
    assert case.backend.poll([spec.key])[spec.key].state is RemoteState.UNKNOWN


def test_placement_on_missing_gpu_rejected(case: Case) -> None:
    spec = job(case, placements=(Placement(case.node, (0, 99)),))

    with pytest.raises(BackendError) as caught:
        case.backend.submit(spec)

    assert caught.value.permanent
    assert "99" in caught.value.message
    assert case.backend.poll([spec.key])[spec.key].state is RemoteState.UNKNOWN


#: Specs no workload manager could run, and the words every backend refuses them with
#: (``scheduler.backends.spec_check``, one check for all adapters).
MALFORMED: list[tuple[str, Callable[[Case], dict[str, Any]], str]] = [
    ("zero walltime", lambda c: {"walltime_seconds": 0}, "walltime_seconds must be a positive integer, got 0"),
    ("walltime not a number", lambda c: {"walltime_seconds": "60"}, "walltime_seconds must be a positive integer"),
    ("nothing to run", lambda c: {"command": "", "script": ""}, "has neither a command nor a script"),
    ("no placement", lambda c: {"placements": ()}, "has no placements"),
    (
        "same node twice",
        lambda c: {"placements": (Placement(c.node, (0,)), Placement(c.node, (1,)))},
        "is placed twice",
    ),
    ("same GPU twice", lambda c: {"placements": (Placement(c.node, (0, 0)),)}, "repeat: (0, 0)"),
    ("env value not a string", lambda c: {"env": {"SEED": 1}}, "env must map strings to strings"),
    ("env sets the contract's rank", lambda c: {"env": {"QM_NODE_RANK": "1"}}, "env may not set QM_NODE_RANK"),
    ("env sets the master port", lambda c: {"env": {"MASTER_PORT": "1"}}, "env may not set MASTER_PORT"),
]


@pytest.mark.parametrize(("fields", "message"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_every_backend_refuses_a_malformed_spec_in_the_same_words(
    case: Case, fields: Callable[[Case], dict[str, Any]], message: str
) -> None:
    spec = job(case, **fields(case))

    with pytest.raises(BackendError) as caught:
        case.backend.submit(spec)

    assert caught.value.permanent and message in caught.value.message
    assert case.backend.poll([spec.key])[spec.key].state is RemoteState.UNKNOWN


def test_list_nodes_describes_a_consistent_inventory(case: Case) -> None:
    nodes = case.backend.list_nodes()

    assert nodes
    assert len({n.name for n in nodes}) == len(nodes)
    uuids = [g.uuid for n in nodes for g in n.gpus]
    assert len(set(uuids)) == len(uuids) and all(uuids)
    for node in nodes:
        assert node.state in ("up", "drain", "down")
        by_index = {g.index: g for g in node.gpus}
        assert len(by_index) == len(node.gpus), f"{node.name} repeats a GPU index"
        for gpu in node.gpus:
            if gpu.parent_index is not None:
                assert by_index[gpu.parent_index].parent_index is None
                assert gpu.mig_profile
    assert any(n.name == case.node for n in nodes)


def test_read_log_of_unknown_job_is_empty(case: Case) -> None:
    assert case.backend.read_log("never-submitted.1") == ""


# --- The contract, for backends that really run commands -------------------------------


def test_job_sees_its_assigned_gpus(executing: Case) -> None:
    case = executing
    first, second = case.node, case.other_node
    spec = job(
        case,
        'echo "RANK=$QM_NODE_RANK CVD=$CUDA_VISIBLE_DEVICES NODES=$QM_NODELIST GPUS=$QM_GPUS KEY=$QM_JOB_KEY FOO=$FOO"',
        placements=(Placement(first, (1, 3)), Placement(second, (0, 2))),
        env={"FOO": "bar"},
    )

    external_id = case.backend.submit(spec)
    assert wait_for(case.backend, external_id).state is RemoteState.COMPLETED

    log = case.backend.read_log(external_id)
    assert f"NODES={first},{second} GPUS={first}:1,3;{second}:0,2 KEY={spec.key} FOO=bar" in log
    visible = dict(re.findall(r"RANK=(\d) CVD=(\S*)", log))
    assert set(visible) == {"0", "1"}  # one process per node
    if case.exact_gpu_indices:
        assert visible == {"0": "1,3", "1": "0,2"}
    else:  # the workload manager chose which two GPUs of each node
        assert all(len(set(gpus.split(","))) == 2 for gpus in visible.values())


@pytest.mark.parametrize("nodes", [1, 2], ids=["one node", "two nodes"])
def test_every_node_runs_one_rank_and_the_ranks_meet_at_the_master(executing: Case, nodes: int) -> None:
    """The multi-node training contract (scheduler/backends/job_env.py), proven with a
    rendezvous in the manner of torch.distributed's: rank 0 listens at QM_MASTER_ADDR:
    QM_MASTER_PORT and must hear from every other rank."""
    case = executing
    placements = (Placement(case.node, (0,)), Placement(case.other_node, (1,)))[:nodes]
    external_id = case.backend.submit(job(case, command="", script=rendezvous_script(), placements=placements))

    result = wait_for(case.backend, external_id, timeout=WAIT_SECONDS * 2)

    log = case.backend.read_log(external_id)
    assert result.state is RemoteState.COMPLETED, log
    assert f"rendezvous ok: ranks {list(range(nodes))}" in log
    assert all(f"rank {rank} of {nodes}:" in log for rank in range(nodes))


def test_a_failed_rank_ends_every_rank_of_the_job(executing: Case) -> None:
    case = executing
    command = 'if [ "$QM_NODE_RANK" = 1 ]; then exit 3; fi; sleep 300'
    placements = (Placement(case.node, (0,)), Placement(case.other_node, (1,)))
    spec = job(case, command, placements=placements, walltime_seconds=600)
    external_id = case.backend.submit(spec)

    result = wait_for(case.backend, external_id, timeout=WAIT_SECONDS * 2)  # not the 600 s walltime

    assert result.state is RemoteState.FAILED
    if case.kind == "local":  # Slurm reports the signal that ended the step on the other rank
        assert result.exit_code == 3
    no_job_processes_left(spec.key)


def test_a_job_brings_its_files_into_a_directory_of_its_own(executing: Case) -> None:
    case = executing
    files = {
        "train.py": "import os\nprint('config:', open('conf/run.txt').read())\nprint(sorted(os.listdir('.')))\n",
        "conf/run.txt": "lr=0.1",
    }
    external_id = case.backend.submit(job(case, "python3 train.py", files=files))

    result = wait_for(case.backend, external_id)

    log = case.backend.read_log(external_id)
    assert result.state is RemoteState.COMPLETED, log
    assert "config: lr=0.1" in log and "'conf'" in log and "'train.py'" in log


def test_every_rank_of_a_multi_node_job_reads_its_files_whole(executing: Case) -> None:
    """The files are written once, before any rank starts: no rank reads another's half."""
    case = executing
    placements = (Placement(case.node, (0,)), Placement(case.other_node, (1,)))
    command = (
        "python3 -c \"import os; print('rank', os.environ['QM_NODE_RANK'], 'read', len(open('data.txt').read()))\""
    )
    spec = job(case, command, placements=placements, files={"data.txt": "x" * 500_000})

    external_id = case.backend.submit(spec)
    result = wait_for(case.backend, external_id)

    log = case.backend.read_log(external_id)
    assert result.state is RemoteState.COMPLETED, log
    assert "rank 0 read 500000" in log and "rank 1 read 500000" in log


def test_every_task_of_an_array_runs_its_script_and_files_as_its_own_job(executing: Case) -> None:
    """An array's tasks (submitted together, as the portal does) each run the script with
    their own index, read the files they brought and write where no other task does."""
    case = executing
    script = (
        "#!/bin/bash\n"
        'echo "task $QM_ARRAY_TASK_ID of $QM_ARRAY_TASK_COUNT in $QM_ARRAY_JOB_ID: $(cat input.txt)"\n'
        'echo "$QM_ARRAY_TASK_ID" > mine.txt; sleep 1; echo "kept $(cat mine.txt)"\n'
    )
    specs = [
        job(case, command="", script=script, files={"input.txt": "shared input"}, array=ArrayTask(7, task, 3))
        for task in range(3)
    ]

    external_ids = [case.backend.submit(spec) for spec in specs]
    results = [wait_for(case.backend, external_id) for external_id in external_ids]

    for task, (external_id, result) in enumerate(zip(external_ids, results, strict=True)):
        log = case.backend.read_log(external_id)
        assert result.state is RemoteState.COMPLETED, log
        assert f"task {task} of 3 in 7: shared input\nkept {task}\n" in log


def test_a_job_starts_in_its_workdir_and_its_files_land_there(executing: Case) -> None:
    case = executing
    workdir = case.scratch / f"project-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    workdir.chmod(0o777)  # the owner's project directory
    (workdir / "data.txt").write_text("the owner's data\n")
    spec = job(
        case,
        "pwd; cat data.txt; cat notes.txt",
        workdir=str(workdir),
        workdir_bounds=WorkdirBounds((str(case.scratch),)),
        files={"notes.txt": "brought along"},
    )

    external_id = case.backend.submit(spec)
    result = wait_for(case.backend, external_id)

    log = case.backend.read_log(external_id)
    assert result.state is RemoteState.COMPLETED, log
    assert f"{workdir}\nthe owner's data\nbrought along" in log
    assert (workdir / "notes.txt").read_text() == "brought along"


# --- A job's own output files (sbatch -o/-e) -------------------------------------------


def owner_uid(case: Case) -> int:
    """Whose the job's files are: its owner's, where the backend runs jobs as their owners
    (Slurm, as the cluster's account of that name; the local backend as root, as the
    spec's uid), else the portal's own user's."""
    if case.kind == "slurm":
        return pwd.getpwnam(OWNER.user).pw_uid
    return OWNER.uid or 0 if os.geteuid() == 0 else os.geteuid()


def logs_dir(case: Case) -> Path:
    """A fresh directory of the owner's for the job's files, as ``~/logs`` is."""
    logs = case.scratch / f"logs-{uuid.uuid4().hex[:8]}"
    logs.mkdir()
    logs.chmod(0o777)
    return logs


def with_output(case: Case, command: str, output: JobOutput, **fields: Any) -> JobSpec:
    """A job whose output also goes to ``output``'s files, which lie in the case's
    scratch (the portal fills the patterns in first: they reach a backend as paths)."""
    return job(case, command, output=output, workdir_bounds=WorkdirBounds((str(case.scratch),)), **fields)


def ended(case: Case, spec: JobSpec) -> tuple[PollResult, str]:
    external_id = case.backend.submit(spec)
    result = wait_for(case.backend, external_id)
    return result, case.backend.read_log(external_id)


def test_a_job_s_stdout_and_stderr_land_in_its_own_files_as_its_owner(executing: Case) -> None:
    case, logs = executing, logs_dir(executing)
    output = JobOutput(stdout=str(logs / "train-42.out"), stderr=str(logs / "train-42.err"))

    result, log = ended(case, with_output(case, "echo to-stdout; echo to-stderr >&2; exit 3", output))

    assert (result.state, result.exit_code) == (RemoteState.FAILED, 3), (result, log)
    assert (logs / "train-42.out").read_text() == "to-stdout\n"
    assert (logs / "train-42.err").read_text() == "to-stderr\n"
    assert {(logs / name).stat().st_uid for name in ("train-42.out", "train-42.err")} == {owner_uid(case)}
    assert "to-stdout" in log and "to-stderr" in log  # the portal keeps its log


def test_one_file_takes_both_streams_in_the_order_written(executing: Case) -> None:
    case, logs = executing, logs_dir(executing)
    path = str(logs / "slurm-42.out")
    command = "echo one; echo two >&2; echo three; seq 1 20000"

    result, log = ended(case, with_output(case, command, JobOutput(stdout=path, stderr=path)))

    assert result.state is RemoteState.COMPLETED, (result, log)
    lines = Path(path).read_text().splitlines()
    assert lines[:4] == ["one", "two", "three", "1"] and lines[-1] == "20000" and len(lines) == 20003
    assert log.endswith("19999\n20000\n")


def test_stderr_alone_goes_to_its_file_and_stdout_to_the_portal_s_log(executing: Case) -> None:
    case, logs = executing, logs_dir(executing)

    result, log = ended(case, with_output(case, "echo out; echo err >&2", JobOutput(stderr=str(logs / "e.txt"))))

    assert result.state is RemoteState.COMPLETED, (result, log)
    assert (logs / "e.txt").read_text() == "err\n"
    assert "out" in log and "err" in log
    assert sorted(p.name for p in logs.iterdir()) == ["e.txt"]


def test_every_task_of_an_array_writes_its_own_file(executing: Case) -> None:
    case, logs = executing, logs_dir(executing)
    specs = [
        with_output(
            case,
            'echo "task $QM_ARRAY_TASK_ID of $QM_ARRAY_JOB_ID"',
            JobOutput(stdout=str(logs / f"sweep-7_{task}.out"), stderr=str(logs / f"sweep-7_{task}.out")),
            array=ArrayTask(7, task, 3),
        )
        for task in range(3)
    ]

    results = [wait_for(case.backend, case.backend.submit(spec)) for spec in specs]

    assert {result.state for result in results} == {RemoteState.COMPLETED}
    assert [(logs / f"sweep-7_{task}.out").read_text() for task in range(3)] == [
        f"task {task} of 7\n" for task in range(3)
    ]


def test_a_file_is_emptied_first_and_a_requeued_attempt_appends(executing: Case) -> None:
    case, logs = executing, logs_dir(executing)
    path = logs / "run.log"
    path.write_text("an earlier job's\n")
    path.chmod(0o666)

    first, _ = ended(case, with_output(case, "echo first", JobOutput(stdout=str(path), stderr=str(path))))
    again = JobOutput(stdout=str(path), stderr=str(path), append=True)
    second, _ = ended(case, with_output(case, "echo second", again))

    assert (first.state, second.state) == (RemoteState.COMPLETED, RemoteState.COMPLETED)
    assert path.read_text() == "first\nsecond\n"


def test_a_file_its_owner_may_not_write_is_not_written_and_the_job_fails_saying_so(executing: Case) -> None:
    case, logs = executing, logs_dir(executing)
    path = logs / "read-only.txt"
    path.write_text("kept\n")
    path.chmod(0o444)  # not even its owner may write it (and the job's owner is not root)
    runs = logs / "ran.txt"

    result, log = ended(case, with_output(case, f"echo ran > {runs}", JobOutput(stdout=str(path), stderr=str(path))))

    assert result.state is RemoteState.FAILED, (result, log)
    assert path.read_text() == "kept\n" and not runs.exists()  # the job never ran
    said = result.reason if case.kind == "local" else log
    assert "output file" in said and str(path) in said, said


def test_a_cancelled_job_s_last_words_reach_its_file(executing: Case) -> None:
    """SIGTERM reaches the job, not what copies its output: a checkpoint's words land."""
    case, logs = executing, logs_dir(executing)
    ready, path = case.scratch / f"ready-{uuid.uuid4().hex[:8]}", logs / "run.log"
    command = f"trap 'echo checkpointed; exit 0' TERM; echo started; echo up > {ready}; while true; do sleep 0.1; done"
    external_id = case.backend.submit(with_output(case, command, JobOutput(stdout=str(path), stderr=str(path))))
    wait_for_file(ready)

    case.backend.cancel(external_id, grace_seconds=10)

    assert wait_for(case.backend, external_id, timeout=15).state is RemoteState.CANCELLED
    written = path.read_text()  # bash may say its sleep was terminated, between the two
    assert written.startswith("started\n") and written.endswith("checkpointed\n"), written


@pytest.mark.parametrize(
    ("command", "state", "exit_code"),
    [
        ("exit 0", RemoteState.COMPLETED, 0),
        ("exit 3", RemoteState.FAILED, 3),
        ("echo oops >&2; exit 1", RemoteState.FAILED, 1),
        ("kill -KILL $$", RemoteState.FAILED, 137),
    ],
    ids=["zero exit completes", "exit 3 fails with 3", "stderr and exit 1", "killed by SIGKILL is 137"],
)
def test_exit_code_recorded(executing: Case, command: str, state: RemoteState, exit_code: int) -> None:
    case = executing
    external_id = case.backend.submit(job(case, command))

    result = wait_for(case.backend, external_id)

    assert (result.state, result.exit_code) == (state, exit_code)


def test_stdout_and_stderr_are_logged(executing: Case) -> None:
    case = executing
    external_id = case.backend.submit(job(case, "echo to-stdout; echo to-stderr >&2"))
    wait_for(case.backend, external_id)

    log = case.backend.read_log(external_id)

    assert "to-stdout" in log and "to-stderr" in log


# --- The whole log (LogStreamer) ------------------------------------------------------

#: Each rank writes 1.2 MiB and more to stdout and a little to stderr, every line its own.
BIG_LOG_COMMAND = 'seq -f "r${QM_NODE_RANK}-out-%08g" 1 100000; seq -f "r${QM_NODE_RANK}-err-%g" 1 500 >&2'


def expected_stream(rank: int, stream: str) -> bytes:
    """What :data:`BIG_LOG_COMMAND` writes to ``stream`` on ``rank``."""
    count, word = (100000, "out-%08d") if stream == "stdout" else (500, "err-%d")
    return b"".join(f"r{rank}-{word % n}\n".encode() for n in range(1, count + 1))


def whole(backend: LogStreamer, external_id: str, source: LogSource, offset: int = 0) -> bytes:
    chunks = list(backend.stream_log(external_id, source, offset))
    assert all(0 < len(chunk) <= 65536 for chunk in chunks)  # streamed, never the whole log at once
    return b"".join(chunks)


def test_the_whole_log_streams_each_rank_s_output_byte_exact(executing: Case) -> None:
    """Every rank's stdout and stderr where the backend keeps them apart (local), else
    the combined log (Slurm: one file for both streams of every rank), whole."""
    case = executing
    backend = case.backend
    assert isinstance(backend, LogStreamer)
    placements = (Placement(case.node, (0,)), Placement(case.other_node, (1,)))
    external_id = backend.submit(job(case, BIG_LOG_COMMAND, placements=placements))
    assert wait_for(backend, external_id, timeout=WAIT_SECONDS * 2).state is RemoteState.COMPLETED

    sources = backend.log_sources(external_id)

    assert sources[0] == LogSource(None, "combined")
    combined = whole(backend, external_id, sources[0])
    # Both ranks write at once: their output interleaves in the combined log in pieces
    # that need not end at a line's end, so only its bytes, in any order, are known.
    everything = b"".join(expected_stream(r, s) for r in (0, 1) for s in ("stdout", "stderr"))
    assert len(combined) == len(everything) and Counter(combined) == Counter(everything)
    assert combined.endswith(backend.read_log(external_id, 4096).encode())  # the tail is the combined log's end
    apart = {(s.rank, s.stream) for s in sources[1:]}
    if case.kind == "local":
        assert apart == {(r, s) for r in (0, 1) for s in ("stdout", "stderr")}
    for rank, stream in apart:
        assert rank is not None  # only every rank's combined log has none: sources[0]
        assert whole(backend, external_id, LogSource(rank, stream)) == expected_stream(rank, stream)


def test_a_log_read_from_an_offset_resumes_exactly_where_the_last_read_ended(executing: Case) -> None:
    case = executing
    backend = case.backend
    assert isinstance(backend, LogStreamer)
    external_id = backend.submit(job(case, BIG_LOG_COMMAND))
    assert wait_for(backend, external_id).state is RemoteState.COMPLETED
    source = backend.log_sources(external_id)[-1]
    everything = whole(backend, external_id, source)

    pieces, offset = [], 0
    for size in (1, 4095, 70000, 300000):
        stream = backend.stream_log(external_id, source, offset)
        piece = b""
        for chunk in stream:  # read a little, then stop: the reader lets go of the rest
            piece += chunk
            if len(piece) >= size:
                break
        stream.close()  # type: ignore[attr-defined]
        pieces.append(piece)
        offset += len(piece)
    pieces.append(whole(backend, external_id, source, offset))

    assert b"".join(pieces) == everything
    assert whole(backend, external_id, source, len(everything)) == b""
    assert whole(backend, external_id, source, len(everything) + 10) == b""


def test_where_one_file_takes_both_streams_every_whole_log_keeps_the_order_written(executing: Case) -> None:
    """``sbatch -o f -e f``: the job's file has its lines in the order written, and so has
    each log the portal keeps (the local cluster then keeps each rank's streams as one)."""
    case, logs = executing, logs_dir(executing)
    backend = case.backend
    assert isinstance(backend, LogStreamer)
    path = str(logs / "both.out")
    spec = with_output(case, "echo one; echo two >&2; echo three; echo four >&2", JobOutput(stdout=path, stderr=path))
    external_id = backend.submit(spec)
    assert wait_for(backend, external_id).state is RemoteState.COMPLETED

    sources = backend.log_sources(external_id)

    expected = {LogSource(None, "combined")} | ({LogSource(0, "combined")} if case.kind == "local" else set())
    assert set(sources) == expected
    assert [whole(backend, external_id, source) for source in sources] == [b"one\ntwo\nthree\nfour\n"] * len(sources)


def test_a_local_log_replaced_by_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    with _local(tmp_path, sandbox="none") as case:
        backend = case.backend
        assert isinstance(backend, LocalBackend)
        external_id = backend.submit(job(case, "echo mine"))
        assert wait_for(backend, external_id).state is RemoteState.COMPLETED
        secret = tmp_path / "portal-secret"
        secret.write_text("SECRET_KEY=not for jobs")
        rank_log = tmp_path / "state/jobs" / external_id / local_runner.LOGS_DIR / "rank-0.stdout"
        rank_log.unlink()
        rank_log.symlink_to(secret)

        with pytest.raises(BackendError, match="stream_log"):
            list(backend.stream_log(external_id, LogSource(0, "stdout")))


def test_the_whole_log_of_an_unknown_job_is_empty(case: Case) -> None:
    backend = case.backend
    assert isinstance(backend, LogStreamer)
    assert backend.log_sources("never-submitted.1") == ()
    assert list(backend.stream_log("never-submitted.1", LogSource(None, "combined"))) == []


def test_script_is_run_with_bash(executing: Case) -> None:
    case = executing
    script = '#!/bin/bash\nset -euo pipefail\nwords=(from script)\necho "${words[*]} $((40 + 2))"\n'
    external_id = case.backend.submit(job(case, command="", script=script))

    assert wait_for(case.backend, external_id).state is RemoteState.COMPLETED
    assert "from script 42" in case.backend.read_log(external_id)


def test_read_log_returns_the_tail(executing: Case) -> None:
    case = executing
    external_id = case.backend.submit(job(case, "for i in $(seq 1 500); do echo line-$i; done"))
    wait_for(case.backend, external_id)

    tail = case.backend.read_log(external_id, max_bytes=20)

    assert tail.endswith("line-500\n") and len(tail.encode()) == 20
    assert case.backend.read_log(external_id).count("\n") == 500


def test_cancel_kills_the_whole_process_group(executing: Case) -> None:
    case = executing
    started = case.scratch / "background.started"
    spec = job(case, f"sleep 30 & echo up > {started}; wait")
    external_id = case.backend.submit(spec)
    wait_for_file(started)
    assert job_processes(spec.key)

    case.backend.cancel(external_id)

    assert wait_for(case.backend, external_id).state is RemoteState.CANCELLED
    no_job_processes_left(spec.key)


def test_cancel_with_a_grace_period_lets_the_job_checkpoint(executing: Case) -> None:
    """A preempted job gets SIGTERM and ``grace_seconds`` before SIGKILL. The local
    backend's default grace here (1 s, see ``local_config``) is shorter than the job's 2 s
    checkpoint, so only the longer grace lets it finish writing. (Slurm's grace is the
    cluster's KillWait, 5 s on the dev cluster.)"""
    case = executing
    ready, checkpoint = case.scratch / "ready", case.scratch / "checkpoint"
    command = (
        f"trap 'sleep 2; echo saved > {checkpoint}; exit 0' TERM; echo up > {ready}; while true; do sleep 0.1; done"
    )
    external_id = case.backend.submit(job(case, command))
    wait_for_file(ready)

    case.backend.cancel(external_id, grace_seconds=10)

    assert wait_for(case.backend, external_id, timeout=15).state is RemoteState.CANCELLED
    assert checkpoint.read_text() == "saved\n"


def test_walltime_kills_processes_that_ignore_sigterm(executing: Case) -> None:
    case = executing
    walltime = case.shortest_walltime
    command = "trap '' TERM; while true; do sleep 0.1; done"
    external_id = case.backend.submit(job(case, command, walltime_seconds=walltime))

    result = wait_for(case.backend, external_id, timeout=walltime + case.walltime_lag + WAIT_SECONDS)

    assert result.state is RemoteState.TIMEOUT


def test_runner_death_reports_node_fail(supervised: Case) -> None:
    case = supervised
    assert case.kill_supervisor is not None
    started = case.scratch / "job.started"
    spec = job(case, f"echo up > {started}; exec sleep 30")
    external_id = case.backend.submit(spec)
    wait_for_file(started)

    case.kill_supervisor(external_id)

    result = wait_for(case.backend, external_id, timeout=5)
    assert result.state is RemoteState.NODE_FAIL
    assert result.reason
    case.backend.cancel(external_id)  # cleans up what the dead supervisor left running
    no_job_processes_left(spec.key)
    assert case.backend.poll([external_id])[external_id].state is RemoteState.NODE_FAIL


def test_job_survives_death_of_submitting_process(executing: Case, tmp_path: Path) -> None:
    case = executing
    spec = job(case, "sleep 1; echo finished")
    name = "devcluster" if case.kind == "slurm" else "testcluster"
    program = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from scheduler.backends import load_backend\n"
        "from scheduler.backends.base import JobSpec, Placement, RunAs\n"
        f"config = json.loads({json.dumps(json.dumps(case.config))})\n"
        f"backend = load_backend({case.kind!r}, {name!r}, config, work_dir=Path({str(tmp_path / 'work')!r}))\n"
        f"backend.submit(JobSpec(key={spec.key!r}, name='j', owner='alice', account='lab', run_as={OWNER!r},\n"
        f"    command={spec.command!r}, script='', walltime_seconds=60,\n"
        f"    placements=(Placement({case.node!r}, (0,)),)))\n"
        "os._exit(0)  # die abruptly, as a killed worker would\n"
    )
    subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, check=True, timeout=30)

    external_id = case.backend.submit(spec)  # finds the job the dead process started
    result = wait_for(case.backend, external_id)

    assert result.state is RemoteState.COMPLETED
    assert "finished" in case.backend.read_log(external_id)


# --- The local backend: config and inventory ----------------------------------------------


def _gpus(**overrides: Any) -> dict[str, Any]:
    return {"count": 2, "model": "L4", "memory_mib": 24576, "compute_capability": "8.9", **overrides}


def _group(**overrides: Any) -> dict[str, Any]:
    return {"name": "n-{:02d}", "count": 2, "cpus": 8, "memory_mib": 65536, "gpus": _gpus(), **overrides}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "exactly one of 'nodes' or 'nodes_file'"),
        ({"nodes": [_group()], "nodes_file": "x.yaml"}, "exactly one of"),
        ({"nodes": {"name": "n"}}, "must be a list"),
        ({"nodes": [_group(count=-1)]}, "nodes[0].count must not be negative"),
        ({"nodes": [_group(cpus="many")]}, "nodes[0].cpus must be an integer"),
        ({"nodes": [_group(cpus=True)]}, "nodes[0].cpus must be an integer"),
        ({"nodes": [{"name": "n-01", "cpus": 8}]}, "nodes[0].memory_mib is missing"),
        ({"nodes": [_group(gpus=_gpus(memory_mib=None))]}, "nodes[0].gpus.memory_mib must be an integer"),
        ({"nodes": [_group(gpus=_gpus(count=-8))]}, "nodes[0].gpus.count must not be negative"),
        ({"nodes": [_group(gpus={"count": 1})]}, "nodes[0].gpus.model is missing"),
        ({"nodes": [_group(cpu=8)]}, "unknown key(s) cpu"),
        ({"nodes": [_group(name="n")]}, "needs a placeholder"),
        ({"nodes": [_group(name="n-{x}")]}, "cannot be formatted"),
        ({"nodes": [_group(name="bad name {}")]}, "must match"),
        ({"nodes": [_group(), _group(count=1)]}, "'n-01' is defined twice"),
        ({"nodes": [_group(state="broken")]}, "state must be one of"),
        ({"nodes": [_group(labels=["a"])]}, "labels must be a mapping"),
        ({"nodes": [_group(gpus=_gpus(mig=["huge"]))]}, "not a MIG profile"),
        ({"nodes": [_group(gpus=_gpus(mig=["4g.20gb", "4g.20gb"]))]}, "8 compute slices"),
        ({"nodes": [_group(gpus=_gpus(mig=["3g.20gb", "3g.20gb"]))]}, "needs 40960 MiB"),
        ({"nodes": [_group(gpus=_gpus(sharing="nvlink"))]}, "nodes[0].gpus.sharing must be 'time-slicing' or 'mps'"),
        ({"nodes": [_group(gpus=_gpus(shared=False, sharing="mps"))]}, "gpus.sharing must be"),
        ({"nodes": [_group(gpus=_gpus(sharing="mps", mig=["3g.20gb"]))]}, "either split into MIG slices or shared"),
        ({"nodes": [_group()], "simulate": -1}, "simulate must not be negative"),
        ({"nodes": [_group()], "simulate": "soon"}, "simulate must be a number"),
        ({"nodes": [_group()], "simualte": 5}, "unknown key(s) simualte"),
        ({"nodes": [_group()], "state_dir": 42}, "state_dir must be a path"),
        ({"nodes_file": "/nonexistent/inventory.yaml"}, "cannot read nodes_file"),
    ],
    ids=[
        "no nodes",
        "nodes and nodes_file",
        "nodes not a list",
        "negative count",
        "cpus not an int",
        "cpus a bool",
        "missing memory",
        "gpu memory null",
        "negative gpu count",
        "gpu model missing",
        "typo in group key",
        "count>1 without placeholder",
        "bad placeholder",
        "unsafe node name",
        "duplicate node",
        "unknown node state",
        "labels not a mapping",
        "bad MIG profile",
        "MIG over 7 slices",
        "MIG over GPU memory",
        "unknown sharing mode",
        "shared false but a sharing mode",
        "shared and MIG",
        "negative simulate",
        "simulate not a number",
        "typo in config key",
        "state_dir not a path",
        "unreadable nodes_file",
    ],
)
def test_bad_config_is_permanent_error(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    with pytest.raises(BackendError) as caught:
        LocalBackend(name="c1", config=config, work_dir=tmp_path)

    assert caught.value.permanent
    assert message in caught.value.message


@pytest.mark.parametrize(
    "content", ["nodes: [", "- just a list", '{"nodes": 3}'], ids=["broken yaml", "no mapping", "nodes not a list"]
)
def test_bad_nodes_file_is_permanent_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(content)

    with pytest.raises(BackendError) as caught:
        LocalBackend(name="c1", config={"nodes_file": str(path)}, work_dir=tmp_path)

    assert caught.value.permanent and "inventory.yaml" in caught.value.message


def test_nodes_file_may_be_json_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "inventory.json").write_text(json.dumps({"nodes": [_group(count=3)]}))
    monkeypatch.chdir(tmp_path)

    backend = LocalBackend(name="c1", config={"nodes_file": "inventory.json"}, work_dir=tmp_path)

    assert [n.name for n in backend.list_nodes()] == ["n-01", "n-02", "n-03"]


def test_default_state_dir_is_under_work_dir(tmp_path: Path) -> None:
    backend = LocalBackend(name="c1", config={"nodes": [_group()]}, work_dir=tmp_path)

    assert backend.state_dir == tmp_path / "local-backend" / "c1"
    assert not backend.state_dir.exists()  # nothing is written until a job is submitted


@pytest.mark.parametrize(
    ("config", "euid", "words"),
    [
        ({"sandbox": "bwrap"}, 0, "bubblewrap sandbox (/usr/bin/bwrap): each job runs as its owner's uid ('nobody'"),
        ({"sandbox": "bwrap"}, 1000, "bubblewrap sandbox (/usr/bin/bwrap): each job runs as this portal's own user"),
        ({"sandbox": "none"}, 0, "no sandbox: each job runs as its owner's uid ('nobody' when the owner has none) "),
        ({"sandbox": "none"}, 1000, "(uid 1000) without filesystem isolation, so it can read and change everything"),
        ({"sandbox": "none", "job_user": "jobs"}, 0, "jobs without a uid share 'jobs'"),
        ({"sandbox": "none", "simulate": 5}, 0, "simulated: no job runs on this machine"),
    ],
    ids=["bwrap as root", "bwrap as a user", "none as root", "none as a user", "none, job_user", "simulated"],
)
def test_the_backend_says_what_isolation_its_jobs_have(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any], euid: int, words: str
) -> None:
    monkeypatch.setattr("scheduler.backends.local.shutil.which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr("scheduler.backends.local.os.geteuid", lambda: euid)
    backend = LocalBackend(name="c1", config={"nodes": [_group()], **config}, work_dir=tmp_path)

    assert words in backend.isolation


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs jobs as other uids, and so needs homes_dir")
@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        (lambda base: base.chmod(0o700), "does not let other users pass"),
        (lambda base: base.chmod(0o733), "may be changed by other users"),
        (lambda base: os.chown(base, 20001, 20001), "belongs to uid 20001, not root"),
    ],
    ids=["closed", "writable by others", "a user's"],
)
def test_a_homes_dir_that_is_no_safe_passage_refuses_unsandboxed_jobs(
    tmp_path: Path, setup: Callable[[Path], None], problem: str
) -> None:
    """Root makes each unsandboxed job's own directory there and hands it to the job's
    user: a directory another user may change (or that jobs cannot pass) would let them
    redirect it, or leave the job unable to reach its own files."""
    base = passable_dir(tmp_path) / "closed-homes"
    base.mkdir()
    setup(base)
    with _local(tmp_path, sandbox="none", homes_dir=str(base)) as case:
        with pytest.raises(BackendError, match=f"homes_dir {base} cannot hold .*: {base} {problem}") as refused:
            case.backend.submit(job(case))

        assert refused.value.permanent
        assert not (tmp_path / "state" / "jobs").exists()  # nothing was written


def test_an_unsandboxed_job_of_another_uid_gets_its_own_directory_made_in_homes_dir(tmp_path: Path) -> None:
    """homes_dir is made on first use (root, unsandboxed); a job running as the portal's
    own user keeps its directory in the state tree."""
    base = passable_dir(tmp_path) / "made" / "homes"
    with _local(tmp_path, sandbox="none", homes_dir=str(base)) as case:
        external_id = case.backend.submit(job(case, 'echo "HOME=$HOME"'))
        assert wait_for(case.backend, external_id).state is RemoteState.COMPLETED

        home = Path(case.backend.read_log(external_id).split("HOME=", 1)[1].strip())
        if os.geteuid() == 0:
            assert home.parent == base and (base.stat().st_mode & 0o777) == 0o711
            assert home.name.startswith(f"testcluster-{external_id}-")
        else:
            assert home == tmp_path / "state" / "jobs" / external_id / "work" and not base.exists()


def test_node_groups_expand_with_one_based_names_and_defaults(tmp_path: Path) -> None:
    backend = LocalBackend(
        name="c1",
        work_dir=tmp_path,
        config={
            "nodes": [
                _group(name="h100-{:02d}", count=2, labels={"rack": 7}, state="drain", reason="firmware"),
                {"name": "cpu-only", "cpus": 4, "memory_mib": 8192},
            ]
        },
    )

    nodes = backend.list_nodes()

    assert [n.name for n in nodes] == ["h100-01", "h100-02", "cpu-only"]
    assert (nodes[0].state, nodes[0].reason, dict(nodes[0].labels)) == ("drain", "firmware", {"rack": "7"})
    assert [g.index for g in nodes[0].gpus] == [0, 1]
    assert (nodes[2].state, nodes[2].gpus) == ("up", ())


def test_list_nodes_splits_mig_gpus_into_slices_after_the_physical_ones(tmp_path: Path) -> None:
    backend = LocalBackend(name="c1", config=local_config(tmp_path), work_dir=tmp_path)

    node = next(n for n in backend.list_nodes() if n.name == "mig-01")

    assert [(g.index, g.parent_index, g.mig_profile, g.memory_mib) for g in node.gpus] == [
        (0, None, "", 40960),
        (1, None, "", 40960),
        (2, 0, "3g.20gb", 20480),
        (3, 0, "3g.20gb", 20480),
        (4, 1, "3g.20gb", 20480),
        (5, 1, "3g.20gb", 20480),
    ]
    assert all(g.uuid.startswith("GPU-") for g in node.gpus[:2])
    assert all(g.uuid.startswith("MIG-") for g in node.gpus[2:])


def test_gpu_uuids_are_deterministic_per_cluster(tmp_path: Path) -> None:
    def uuids(cluster: str) -> list[str]:
        backend = LocalBackend(name=cluster, config=local_config(tmp_path), work_dir=tmp_path)
        return [g.uuid for n in backend.list_nodes() for g in n.gpus]

    assert uuids("c1") == uuids("c1")
    assert not set(uuids("c1")) & set(uuids("c2"))


def test_list_nodes_returns_copies(tmp_path: Path) -> None:
    backend = LocalBackend(name="c1", config=local_config(tmp_path), work_dir=tmp_path)

    backend.list_nodes()[0].labels["rack"] = "tampered"  # type: ignore[index]

    assert backend.list_nodes()[0].labels["rack"] == "r1"


def test_demo_inventory(tmp_path: Path) -> None:
    backend = LocalBackend(name="demo", config={"nodes_file": str(DEMO_INVENTORY)}, work_dir=tmp_path)

    nodes = {n.name: n for n in backend.list_nodes()}

    physical = [g for n in nodes.values() for g in n.gpus if g.parent_index is None]
    assert len(nodes) == 10 and len(physical) == 72
    assert {g.model for g in nodes["h100-04"].gpus} == {"H100-80GB"}
    assert {(g.memory_mib, g.compute_capability) for g in nodes["l4-02"].gpus} == {(24576, "8.9")}
    slices = [g for g in nodes["a100-04"].gpus if g.parent_index is not None]
    assert len(slices) == 16 and {g.memory_mib for g in slices} == {20480}
    assert [g.index for g in slices] == list(range(8, 24))
    assert all(g.parent_index is None for g in nodes["a100-03"].gpus)


@pytest.mark.parametrize(
    ("placements", "message"),
    [
        ((Placement("mig-01", (0,)),), "split into MIG slices"),
    ],
    ids=["whole MIG parent"],
)
def test_malformed_placements_rejected(tmp_path: Path, placements: tuple[Placement, ...], message: str) -> None:
    case = _local_case(tmp_path, simulate=1)

    with pytest.raises(BackendError) as caught:
        case.backend.submit(job(case, placements=placements))

    assert caught.value.permanent and message in caught.value.message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"key": "../escape"}, "key must match"),
    ],
    ids=["unsafe key"],
)
def test_malformed_specs_rejected(tmp_path: Path, fields: dict[str, Any], message: str) -> None:
    case = _local_case(tmp_path, simulate=1)

    with pytest.raises(BackendError) as caught:
        case.backend.submit(job(case, **fields))

    assert caught.value.permanent and message in caught.value.message
    assert not (tmp_path / "state/jobs").exists() or not any((tmp_path / "state/jobs").iterdir())


def test_job_on_mig_slices_sees_the_slice_indices(tmp_path: Path) -> None:
    case = _local_case(tmp_path)
    external_id = case.backend.submit(
        job(
            case,
            'echo CVD=$CUDA_VISIBLE_DEVICES; echo "PWD=$(pwd) HOME=$HOME"',
            placements=(Placement("mig-01", (3, 4)),),
        )
    )

    assert wait_for(case.backend, external_id).state is RemoteState.COMPLETED
    log = case.backend.read_log(external_id)
    assert "CVD=3,4" in log
    home = re.search(r"PWD=(\S+) HOME=(\S+)", log)
    assert home and home[1] == home[2] and external_id in home[1], log  # the job runs in its own directory


def test_reboot_reports_node_fail(tmp_path: Path) -> None:
    case = _local_case(tmp_path)
    external_id = case.backend.submit(job(case, "sleep 30"))
    wait_for(case.backend, external_id, running)
    runner_file = tmp_path / "state/jobs" / external_id / local_runner.RUNNER_FILE
    original = runner_file.read_text()
    runner_file.write_text(json.dumps({**json.loads(original), "boot_id": "an-earlier-boot"}))
    try:
        result = case.backend.poll([external_id])[external_id]
    finally:
        runner_file.write_text(original)
        case.backend.cancel(external_id)

    assert result.state is RemoteState.NODE_FAIL
    assert "rebooted" in result.reason


def test_simulated_job_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    case = _local_case(tmp_path, simulate=0.2)
    external_id = case.backend.submit(job(case, f"touch {marker}"))

    result = wait_for(case.backend, external_id)

    assert (result.state, result.exit_code) == (RemoteState.COMPLETED, 0)
    assert not marker.exists()
    assert "simulated" in case.backend.read_log(external_id)


def test_job_does_not_inherit_the_portals_secrets(executing: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "portal-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://portal:pw@db/qm")
    case = executing
    external_id = case.backend.submit(
        job(case, 'echo "secret=${SECRET_KEY:-none} db=${DATABASE_URL:-none} path=$PATH"')
    )
    wait_for(case.backend, external_id)
    log = case.backend.read_log(external_id)
    assert "secret=none db=none" in log
    assert "path=/" in log


@pytest.mark.parametrize(
    ("gpus", "sharing"),
    [
        ({"sharing": "mps"}, "mps"),
        ({"shared": True}, "time-slicing"),
        ({"sharing": "time-slicing"}, "time-slicing"),
        ({}, ""),
    ],
)
def test_a_local_gpu_says_how_it_is_shared(tmp_path: Path, gpus: dict[str, Any], sharing: str) -> None:
    backend = LocalBackend(name="c1", config={"nodes": [_group(count=1, gpus=_gpus(**gpus))]}, work_dir=tmp_path)
    assert {g.sharing for n in backend.list_nodes() for g in n.gpus} == {sharing}
