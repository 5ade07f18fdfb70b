"""A job's own output files (``sbatch -o/-e``) are opened by the local runner, which may be
root, so they are opened as the job's owner, within their roots, by descriptor: no path
a researcher names can make the portal write where they may not.

Attacked as a researcher would: ``-o`` naming another user's file, the portal's database,
a link their own earlier job planted (to the portal's files, to another user's), a
directory on the way swapped for a link, a FIFO that would hold the runner up. On the
sandboxed and the unsandboxed local backend, with the portal as root (CI) and, rerun in a
child process, as an ordinary user. No Django: the "portal" is a var/ tree.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.backends import load_backend
from scheduler.backends.base import (
    Backend,
    JobOutput,
    JobSpec,
    Placement,
    PollResult,
    RemoteState,
    RunAs,
    WorkdirBounds,
)
from tests.backends.test_workdir_symlinks import _python_anyone_runs
from tests.conftest import require_bwrap

NODES = [{"name": "n-01", "cpus": 8, "memory_mib": 8000, "gpus": {"count": 1, "model": "L4", "memory_mib": 24576}}]
ALICE, BOB = RunAs("alice", 20001, 20001), RunAs("bob", 20002, 20002)
ORDINARY_UID = 20005
REPO = Path(__file__).resolve().parents[2]
DATABASE = "SQLite format 3 portal-secret"


@dataclass
class Site:
    """A portal (its var/ tree), alice's and bob's homes, and the local backend."""

    backend: Backend
    var: Path
    alice_home: Path
    bob_home: Path

    def bounds(self) -> WorkdirBounds:
        return WorkdirBounds(roots=(str(self.alice_home),), refused=(str(self.var), str(REPO)))

    def run(
        self, command: str, output: JobOutput | None = None, bounds: WorkdirBounds | None = None, *, key: str = ""
    ) -> PollResult:
        """Run ``command`` as alice in her home (none: a fresh directory of its own, when
        given a ``key``), its output also to ``output``'s files."""
        spec = JobSpec(
            key=key or f"{uuid.uuid4()}.1",
            name="attack",
            owner="alice",
            account="lab",
            command=command,
            script="",
            walltime_seconds=60,
            placements=(Placement("n-01", (0,)),),
            run_as=ALICE,
            workdir="" if key else str(self.alice_home),
            workdir_bounds=bounds or self.bounds(),
            output=output,
        )
        external_id = self.backend.submit(spec)
        deadline = time.monotonic() + 60
        while not (result := self.backend.poll([external_id])[external_id]).state.is_terminal:
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(0.05)
        return result

    def output_to(self, path: Path | str) -> PollResult:
        """A job that says something, its output to ``path``."""
        return self.run("echo written by the job", JobOutput(stdout=str(path), stderr=str(path)))


def _owned(path: Path, who: RunAs, mode: int) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, who.uid or 0, who.gid or 0)
    path.chmod(mode)
    return path


@pytest.fixture(params=["bwrap", "none"])
def site(request: pytest.FixtureRequest, passable_tmp: Path) -> Site:
    if request.param == "bwrap":
        require_bwrap()
    var = passable_tmp / "var"
    var.mkdir(mode=0o755)
    (var / "quartermaster.sqlite3").write_text(DATABASE)
    homes = passable_tmp / "home"
    homes.mkdir(mode=0o755)
    alice = _owned(homes / "alice", ALICE, 0o700)
    bob = _owned(homes / "bob", BOB, 0o755)
    (bob / "notes.txt").write_text("bob's notes\n")
    (bob / "notes.txt").chmod(0o666 if os.geteuid() != 0 else 0o644)  # as root: only bob may write it
    if os.geteuid() == 0:
        os.chown(bob / "notes.txt", BOB.uid or 0, BOB.gid or 0)
    config = {"nodes": NODES, "sandbox": request.param, "kill_grace_seconds": 1, "homes_dir": str(passable_tmp / "jh")}
    return Site(load_backend("local", "demo", config, work_dir=var / "work"), var, alice, bob)


def refused(result: PollResult, words: str) -> None:
    assert result.state is RemoteState.FAILED, result
    assert result.reason.startswith("output file refused: ") and words in result.reason, result.reason


def test_the_owner_s_own_file_is_written_as_the_owner(site: Site) -> None:
    result = site.output_to(site.alice_home / "out.txt")

    assert result.state is RemoteState.COMPLETED, result
    assert (site.alice_home / "out.txt").read_text() == "written by the job\n"
    assert (site.alice_home / "out.txt").stat().st_uid == (ALICE.uid if os.geteuid() == 0 else os.geteuid())


def test_a_file_name_without_a_workdir_lands_in_the_job_s_own_directory(site: Site, passable_tmp: Path) -> None:
    key = f"{uuid.uuid4()}.1"

    result = site.run("echo in my own directory", JobOutput(stdout="slurm-42.out", stderr="slurm-42.out"), key=key)

    assert result.state is RemoteState.COMPLETED, result
    # Its own directory: in the job's state directory, or in homes_dir when it runs unsandboxed as another uid.
    found = [*site.var.glob(f"work/local-backend/demo/jobs/{key}/work/slurm-42.out"), *passable_tmp.glob("jh/*/*.out")]
    assert [path.read_text() for path in found] == ["in my own directory\n"]
    assert found[0].stat().st_uid == (ALICE.uid if os.geteuid() == 0 else os.geteuid())


def test_another_user_s_file_is_refused(site: Site) -> None:
    refused(site.output_to(site.bob_home / "notes.txt"), "lies outside")

    assert (site.bob_home / "notes.txt").read_text() == "bob's notes\n"


def test_another_user_s_file_in_the_owner_s_roots_is_not_written_as_root(site: Site) -> None:
    """Even where the roots hold bob's home, the file is opened as alice: root's right to
    write it is never used."""
    if os.geteuid() != 0:
        pytest.skip("only root can run a job as another user; here jobs run as the portal's user")
    roots = WorkdirBounds(roots=(str(site.alice_home.parent),), refused=(str(site.var), str(REPO)))

    result = site.run("echo written", JobOutput(stdout=str(site.bob_home / "notes.txt")), bounds=roots)

    refused(result, "Permission denied")
    assert (site.bob_home / "notes.txt").read_text() == "bob's notes\n"


def test_the_portal_s_database_is_refused_whatever_the_roots_allow(site: Site) -> None:
    roots = WorkdirBounds(roots=("/",), refused=(str(site.var), str(REPO)))

    result = site.run("echo written", JobOutput(stdout=str(site.var / "quartermaster.sqlite3")), bounds=roots)

    refused(result, "lies in the portal's own files")
    assert (site.var / "quartermaster.sqlite3").read_text() == DATABASE


@pytest.mark.parametrize("target", ["database", "bob"], ids=["to the portal's database", "to another user's file"])
def test_a_link_the_job_planted_is_not_followed(site: Site, target: str) -> None:
    victim = site.var / "quartermaster.sqlite3" if target == "database" else site.bob_home / "notes.txt"
    before = victim.read_text()
    planted = site.run(f"ln -s {victim} out.txt")  # alice's own job, in her home
    assert planted.state is RemoteState.COMPLETED, planted

    refused(site.output_to(site.alice_home / "out.txt"), "symbolic link, which is not followed")
    assert victim.read_text() == before


def test_a_directory_on_the_way_linked_into_the_portal_is_refused(site: Site) -> None:
    planted = site.run(f"ln -s {site.var} logs")
    assert planted.state is RemoteState.COMPLETED, planted

    refused(site.output_to(site.alice_home / "logs" / "quartermaster.sqlite3"), f"(really {site.var})")
    assert (site.var / "quartermaster.sqlite3").read_text() == DATABASE


def test_a_fifo_does_not_hold_the_runner_up(site: Site) -> None:
    made = site.run("mkfifo out.fifo")
    assert made.state is RemoteState.COMPLETED, made

    result = site.output_to(site.alice_home / "out.fifo")

    refused(result, "out.fifo")


def test_the_attacks_fail_with_the_portal_as_an_ordinary_user(passable_tmp: Path) -> None:
    """The same attacks, the backend run by an ordinary user (the embedded demo's case):
    this module again in a child pytest under another uid."""
    if os.geteuid() != 0:
        pytest.skip("this process is already an ordinary user: the other tests are that run")
    if os.environ.get("QM_TEST_AS_ORDINARY_USER"):
        pytest.skip("already the rerun")
    base = passable_tmp / "ordinary"
    base.mkdir()
    os.chown(base, ORDINARY_UID, ORDINARY_UID)
    python, python_env = _python_anyone_runs()
    command = [
        *("setpriv", f"--reuid={ORDINARY_UID}", f"--regid={ORDINARY_UID}", "--clear-groups"),
        *(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={base / 'pytest'}"),
        *(__file__, "-k", "not ordinary_user"),
    ]
    env = {
        **os.environ,
        **python_env,
        "QM_TEST_AS_ORDINARY_USER": "1",
        "HOME": str(base),
        "DEBUG": "1",
        "QM_NATIVE_CORE": "off",
    }
    child = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert child.returncode == 0, child.stdout[:6000] + child.stderr[-2000:]
    assert " passed" in child.stdout and "failed" not in child.stdout, child.stdout[-2000:]
