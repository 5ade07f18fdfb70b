"""A job's ``workdir`` is opened when the job starts, as its owner, and used by descriptor:
a symlink cannot take a job anywhere its owner's roots do not hold.

Attacked as a researcher would: their own earlier job (or their shell) makes ``~/w`` a
link to the host's ``/proc``, to the portal's tree or to another user's home, then submits
a job with ``workdir: ~/w``; or swaps the link while jobs start. On the sandboxed and the
unsandboxed local backend, with the portal as root (CI) and, rerun in a child process, as
an ordinary user. No Django: the "portal" is a var/ tree laid out as the demo's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduler.backends import load_backend
from scheduler.backends.base import Backend, JobSpec, Placement, PollResult, RemoteState, RunAs, WorkdirBounds
from scheduler.backends.user_paths import UnsafePath, open_user_dir, trusted_real
from tests.conftest import _missing, require_bwrap

NODES = [
    {
        "name": "n-{:02d}",
        "count": 1,
        "cpus": 8,
        "memory_mib": 8000,
        "gpus": {"count": 1, "model": "L4", "memory_mib": 24576},
    }
]
ALICE, BOB = RunAs("alice", 20001, 20001), RunAs("bob", 20002, 20002)
#: What a job prints of where it started: every name in it, one a line.
LOOK = "ls -a1"
ORDINARY_UID = 20005
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Site:
    """A portal (its var/ tree), alice's and bob's homes, and the local backend."""

    backend: Backend
    var: Path
    alice_home: Path
    bob_home: Path

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
    tmp_path = passable_tmp  # the homes' parent, as /home is: passable by everyone
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    (var / "quartermaster.sqlite3").write_text("SQLite format 3 portal-secret")
    homes = tmp_path / "home"
    homes.mkdir(mode=0o755)
    alice = _owned(homes / "alice", ALICE, 0o700)
    bob = _owned(homes / "bob", BOB, 0o755)  # even a world-readable home stays bob's
    (bob / "secret.txt").write_text("bob's secret")
    (_owned(alice / "project", ALICE, 0o700) / "mine.txt").write_text("alice's data")
    homes = tmp_path / "job-homes"  # where unsandboxed jobs' own directories are, as root
    config = {"nodes": NODES, "sandbox": request.param, "kill_grace_seconds": 1, "homes_dir": str(homes)}
    backend = load_backend("local", "demo", config, work_dir=var / "work")
    return Site(backend, var, alice, bob)


def run(site: Site, workdir: Path) -> tuple[PollResult, str]:
    spec = JobSpec(
        key=f"{uuid.uuid4()}.1",
        name="look",
        owner="alice",
        account="lab",
        command=LOOK,
        script="",
        walltime_seconds=60,
        placements=(Placement("n-01", (0,)),),
        run_as=ALICE,
        workdir=str(workdir),
        workdir_bounds=site.bounds(),
    )
    external_id = site.backend.submit(spec)
    deadline = time.monotonic() + 60
    while not (result := site.backend.poll([external_id])[external_id]).state.is_terminal:
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)
    return result, site.backend.read_log(external_id)


def _refused(result: PollResult, log: str, words: str) -> None:
    assert result.state is RemoteState.FAILED, (result, log)
    assert "workdir refused" in result.reason and words in result.reason, result.reason
    assert log == "", log  # nothing ran


def test_a_workdir_linked_to_the_hosts_proc_is_refused(site: Site) -> None:
    result, log = run(site, site.link(Path("/proc")))
    _refused(result, log, "(really /proc) lies outside")


def test_a_workdir_linked_into_the_portals_tree_is_refused(site: Site) -> None:
    for target in (site.var, REPO / "scheduler"):
        result, log = run(site, site.link(target))
        _refused(result, log, "")
        assert "portal's own files" in result.reason or "lies outside" in result.reason


def test_a_workdir_linked_to_another_users_home_is_refused(site: Site) -> None:
    result, log = run(site, site.link(site.bob_home))
    _refused(result, log, "")
    assert "bob's secret" not in log and "secret.txt" not in log


def test_a_link_inside_the_owners_own_tree_is_followed(site: Site) -> None:
    result, log = run(site, site.link(site.alice_home / "project"))
    assert result.state is RemoteState.COMPLETED, (result, log)
    assert "mine.txt" in log.splitlines()


def test_a_link_swapped_while_jobs_start_never_reaches_proc(site: Site) -> None:
    """A racing thread flips ``~/w`` between alice's project and ``/proc`` as fast as it
    can while jobs start there: each job either ran in her project or was refused."""
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            site.link(site.alice_home / "project", "w.new")
            os.replace(site.alice_home / "w.new", site.alice_home / "w")
            site.link(Path("/proc"), "w.new")
            os.replace(site.alice_home / "w.new", site.alice_home / "w")

    site.link(site.alice_home / "project")
    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        outcomes = [run(site, site.alice_home / "w") for _ in range(8)]
    finally:
        stop.set()
        flipper.join()
    for result, log in outcomes:
        names = log.splitlines()
        assert "self" not in names and "cmdline" not in names, log
        if result.state is RemoteState.COMPLETED:
            assert "mine.txt" in names, log
        else:
            _refused(result, log, "")


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
        "setpriv",
        f"--reuid={ORDINARY_UID}",
        f"--regid={ORDINARY_UID}",
        "--clear-groups",
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--basetemp={base / 'pytest'}",
        __file__,
        "-k",
        "not ordinary_user",
    ]
    # The core's compiled build is root's (build/native): this run needs no scheduling core.
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


# -- the helper itself ------------------------------------------------------------------


def test_a_missing_workdir_is_refused_in_the_owners_words(tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="cannot be opened as the job's user"):
        open_user_dir(str(tmp_path / "nowhere"), roots=[str(tmp_path)])


def test_a_root_reached_through_someone_elses_link_is_taken_as_written(tmp_path: Path) -> None:
    """``/scratch/alice`` made by alice as a link to ``/etc`` does not make ``/etc`` hers;
    a link root owns (``/home -> /data/home``) does move the root."""
    (tmp_path / "data" / "home").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "data" / "home")
    followed = tmp_path / ("data/home" if os.geteuid() == 0 else "home")  # only root's links move a root
    assert trusted_real(str(tmp_path / "home" / "alice")) == str(followed / "alice")
    if os.geteuid() == 0:
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        (scratch / "alice").symlink_to("/etc")
        os.lchown(scratch / "alice", ALICE.uid or 0, ALICE.gid or 0)
        assert trusted_real(str(scratch / "alice")) == str(scratch / "alice")
        with pytest.raises(UnsafePath, match="lies outside"):
            open_user_dir(str(scratch / "alice"), roots=[str(scratch / "alice")])
