"""The site the local backend's attack tests run on (``test_workdir_symlinks``,
``test_output_file_attacks``): a portal (a var/ tree with its database), alice's and bob's
homes, the local backend with or without its sandbox; and the rerun of a test module as
an ordinary user, for the embedded demo's case. No Django.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.backends import load_backend
from scheduler.backends.base import Backend, JobOutput, JobSpec, Placement, PollResult, RunAs, WorkdirBounds
from tests.conftest import _missing, require_bwrap

NODES = [{"name": "n-01", "cpus": 8, "memory_mib": 8000, "gpus": {"count": 1, "model": "L4", "memory_mib": 24576}}]
ALICE, BOB = RunAs("alice", 20001, 20001), RunAs("bob", 20002, 20002)
#: The uid the attacks are run again as, the portal being an ordinary user.
ORDINARY_UID = 20005
REPO = Path(__file__).resolve().parents[2]
#: What the portal's database holds, which no job may read or write.
DATABASE = "SQLite format 3 portal-secret"


@dataclass
class Site:
    """A portal (its var/ tree), alice's and bob's homes, and the local backend."""

    backend: Backend
    var: Path
    alice_home: Path
    bob_home: Path
    #: Where unsandboxed jobs' own directories are made, as root.
    job_homes: Path

    def bounds(self) -> WorkdirBounds:
        return WorkdirBounds(roots=(str(self.alice_home),), refused=(str(self.var), str(REPO)))

    def link(self, target: Path, name: str = "w") -> Path:
        """``~alice/name`` made a symlink to ``target``, by alice (she owns the link)."""
        link = self.alice_home / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
        if os.geteuid() == 0:
            os.lchown(link, ALICE.uid or 0, ALICE.gid or 0)
        return link

    def run(
        self,
        command: str,
        output: JobOutput | None = None,
        bounds: WorkdirBounds | None = None,
        *,
        workdir: Path | None = None,
        key: str = "",
    ) -> tuple[PollResult, str]:
        """Run ``command`` as alice until it ends, in ``workdir`` (default: her home; none
        when given a ``key``: a fresh directory of its own), its output also to
        ``output``'s files; its end and its log."""
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
            workdir="" if key else str(workdir or self.alice_home),
            workdir_bounds=bounds or self.bounds(),
            output=output,
        )
        external_id = self.backend.submit(spec)
        deadline = time.monotonic() + 60
        while not (result := self.backend.poll([external_id])[external_id]).state.is_terminal:
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(0.05)
        return result, self.backend.read_log(external_id)


def owned(path: Path, who: RunAs, mode: int) -> Path:
    """``path`` made a directory of ``who``'s (when this process may give it away)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, who.uid or 0, who.gid or 0)
    path.chmod(mode)
    return path


def make_site(sandbox: str, base: Path) -> Site:
    """A site under ``base`` (a folder every user may pass) with the local backend in
    ``sandbox`` mode (``bwrap``: fails in CI, skips elsewhere, without bubblewrap)."""
    if sandbox == "bwrap":
        require_bwrap()
    var = base / "var"
    var.mkdir(mode=0o755)
    (var / "quartermaster.sqlite3").write_text(DATABASE)
    homes = base / "home"
    homes.mkdir(mode=0o755)
    alice = owned(homes / "alice", ALICE, 0o700)
    bob = owned(homes / "bob", BOB, 0o755)  # even a world-readable home stays bob's
    job_homes = base / "job-homes"
    config = {"nodes": NODES, "sandbox": sandbox, "kill_grace_seconds": 1, "homes_dir": str(job_homes)}
    return Site(load_backend("local", "demo", config, work_dir=var / "work"), var, alice, bob, job_homes)


def rerun_as_ordinary_user(test_file: str, base: Path) -> None:
    """Run ``test_file``'s tests again in a child pytest as :data:`ORDINARY_UID` (all but
    the one calling this, whose name must hold ``ordinary_user``); skips when this process
    is not root or is that rerun already."""
    if os.geteuid() != 0:
        pytest.skip("this process is already an ordinary user: the other tests are that run")
    if os.environ.get("QM_TEST_AS_ORDINARY_USER"):
        pytest.skip("already the rerun")
    home = base / "ordinary"
    home.mkdir()
    os.chown(home, ORDINARY_UID, ORDINARY_UID)
    python, python_env = _python_anyone_runs()
    command = [
        *("setpriv", f"--reuid={ORDINARY_UID}", f"--regid={ORDINARY_UID}", "--clear-groups"),
        *(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={home / 'pytest'}"),
        *(test_file, "-k", "not ordinary_user"),
    ]
    # The core's compiled build is root's (build/native): this run needs no scheduling core.
    env = {
        **os.environ,
        **python_env,
        "QM_TEST_AS_ORDINARY_USER": "1",
        "HOME": str(home),
        "DEBUG": "1",
        "QM_NATIVE_CORE": "off",
    }
    child = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert child.returncode == 0, child.stdout[:6000] + child.stderr[-2000:]
    assert " passed" in child.stdout and "failed" not in child.stdout, child.stdout[-2000:]


def _python_anyone_runs() -> tuple[str, dict[str, str]]:
    """This interpreter, if every user may run it; else the system's python3 of the same
    version with this one's packages (a venv under root's 0700 home is root's alone)."""
    real = Path(os.path.realpath(sys.executable))
    if all(above.stat().st_mode & 0o001 for above in real.parents):
        return sys.executable, {}
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin")
    if system is None:
        _missing(f"no python{sys.version_info.major}.{sys.version_info.minor} that an ordinary user may run")
    return str(system), {"PYTHONPATH": sysconfig.get_paths()["purelib"]}
