"""A job on the local backend is untrusted code: tried as an attacker would, it finds
nothing of the portal's (database, secrets, processes, state tree) and nothing of other
users' jobs.

The sandbox is Debian's bubblewrap; without it these tests skip here and fail in CI
(``QM_REQUIRE_SERVICES=1``). As root (CI), jobs also run as their owner's uid, or as
``nobody`` without one. No Django: the "portal" is a var/ tree laid out as the demo's.

Without the sandbox (``sandbox: none``, or no bubblewrap) a job sees the machine as its
uid does, and says so (``LocalBackend.isolation``); what still holds, as root, is that
one user's job cannot find or read another's directory, script or output.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from scheduler.backends import load_backend
from scheduler.backends.base import Backend, JobSpec, Placement, RunAs
from scheduler.backends.local import LocalBackend
from tests.conftest import require_bwrap

NODES = [
    {
        "name": "n-{:02d}",
        "count": 1,
        "cpus": 8,
        "memory_mib": 8000,
        "gpus": {"count": 2, "model": "L4", "memory_mib": 24576, "compute_capability": "8.9"},
    }
]
ALICE, BOB = RunAs("alice", 20001, 20001), RunAs("bob", 20002, 20002)
SECRET = "portal-secret-" + uuid.uuid4().hex

#: What an attacker's job tries: every SQLite file on the machine, every process's
#: environment, the state tree and the other job's directory and output.
ATTACK = """
echo "whoami=$(id -u)"
find / -xdev -name '*.sqlite3' 2>/dev/null | sed 's/^/found /'
for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; done 2>/dev/null | grep -c '{secret}' | sed 's/^/secrets=/'
ls {jobs} 2>&1 | sed 's/^/jobs: /'
cat {victim}/work/notes.txt 2>&1 | sed 's/^/victim: /'
cat {victim}/output.log 2>&1 | sed 's/^/victim-log: /'
cat {database} 2>&1 | head -c 200 | sed 's/^/database: /'
"""


@pytest.fixture
def portal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A var/ tree as the demo has it (a world-readable SQLite file in it, as Django's
    default umask leaves one) and the local backend in it; the portal's secret in this
    process's environment."""
    require_bwrap()
    monkeypatch.setenv("SECRET_KEY", SECRET)
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    database = var / "quartermaster.sqlite3"
    database.write_text(f"SQLite format 3 {SECRET}")
    database.chmod(0o644)
    backend = load_backend("local", "demo", {"nodes": NODES}, work_dir=var / "work")
    return backend, var, database


def run(backend: Backend, command: str, run_as: RunAs, **fields: Any) -> tuple[str, str]:
    """Submit a job as ``run_as`` and wait for its end: its id and its log."""
    values: dict[str, Any] = {
        "key": f"{uuid.uuid4()}.1",
        "name": "attack",
        "owner": run_as.user,
        "account": "lab",
        "command": command,
        "script": "",
        "walltime_seconds": 60,
        "placements": (Placement("n-01", (0,)),),
        "run_as": run_as,
    }
    spec = JobSpec(**{**values, **fields})
    external_id = backend.submit(spec)
    deadline = time.monotonic() + 30
    while not backend.poll([external_id])[external_id].state.is_terminal:
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)
    return external_id, backend.read_log(external_id)


def test_a_job_finds_nothing_of_the_portal_or_of_another_users_job(portal: Any) -> None:
    backend, _, database = portal
    bobs, _ = run(backend, "echo 'bob private notes' > notes.txt; echo bob-output", BOB)
    jobs = backend.state_dir / "jobs"

    alices, log = run(backend, ATTACK.format(secret=SECRET, jobs=jobs, victim=jobs / bobs, database=database), ALICE)
    print(log)  # the attack's own words, for a reader of -s output

    assert "found " not in log  # no SQLite file at all, the portal's least of all
    assert "secrets=0" in log  # no process with the portal's secret in its environment
    # The state tree is a passage to its own directory: unlisted where jobs run as their
    # owners (the portal as root), or, for a portal that is an ordinary user (jobs then run
    # as its uid), the sandbox's tree holding the job's own directory alone.
    listed = [line.removeprefix("jobs: ") for line in log.splitlines() if line.startswith("jobs: ")]
    assert listed == [alices] or (len(listed) == 1 and listed[0].startswith("ls: cannot")), listed
    assert "victim: cat:" in log and "bob private notes" not in log
    assert "victim-log: cat:" in log and "bob-output" not in log
    assert "database: cat:" in log and SECRET not in log


def test_a_job_runs_as_its_owner_and_cannot_become_root(portal: Any) -> None:
    backend, _, _ = portal
    _, log = run(backend, "id -u; id -g; id -G; sudo -n id -u 2>&1; echo sudo-exit=$?", ALICE)

    lines = log.splitlines()
    expected = "20001" if os.geteuid() == 0 else str(os.geteuid())  # not root: the portal's user, sandboxed
    assert lines[:3] == [expected, expected if os.geteuid() == 0 else str(os.getegid()), lines[2]]
    if os.geteuid() == 0:
        assert lines[2] == "20001"  # no supplementary groups
    assert "sudo-exit=1" in lines and "0" not in lines  # no_new_privs: sudo gains nothing


def test_a_job_without_a_uid_runs_as_the_unprivileged_job_user(portal: Any) -> None:
    backend, _, _ = portal
    if os.geteuid() != 0:
        pytest.skip("only root can run a job as another user; here jobs run as the portal's user")
    _, log = run(backend, "id -un", RunAs("carol"))

    assert log.strip() == "nobody"


@pytest.fixture
def unsandboxed(passable_tmp: Path) -> LocalBackend:
    """The local backend without a sandbox, run by root: each job as its owner's uid."""
    if os.geteuid() != 0:
        pytest.skip("as an ordinary user every job runs as the portal's own user: no other uid to keep out")
    config = {"nodes": NODES, "sandbox": "none", "homes_dir": str(passable_tmp / "job-homes")}
    return LocalBackend(name="demo", config=config, work_dir=passable_tmp / "var" / "work")


def test_without_a_sandbox_another_users_job_finds_nothing_of_a_job(unsandboxed: LocalBackend) -> None:
    """Alice's job (a script, with a file) works in its own directory; Bob's job, on the
    same machine with no sandbox, cannot list where it is, enter it, read its files or
    reach its output and spec in the state tree."""
    backend = unsandboxed
    script = "#!/bin/bash\necho 'alice private notes' > notes.txt\necho \"home=$HOME\"\necho alice-output\n"
    alices, log = run(backend, "", ALICE, script=script, files={"data.txt": "alice data"})
    home = Path(log.split("home=", 1)[1].split()[0])
    assert "alice-output" in log and (home / "notes.txt").read_text() == "alice private notes\n"
    assert (home.stat().st_uid, home.stat().st_mode & 0o777) == (ALICE.uid, 0o700)
    job_dir = backend.state_dir / "jobs" / alices
    attack = f"""
    echo "whoami=$(id -u)"
    ls {home.parent} 2>&1 | sed 's/^/homes: /'
    ls {home} 2>&1 | sed 's/^/victim-home: /'
    for f in notes.txt job.sh data.txt; do cat {home}/$f 2>&1 | sed 's/^/victim: /'; done
    ls {backend.state_dir}/jobs 2>&1 | sed 's/^/jobs: /'
    for f in output.log spec.json; do cat {job_dir}/$f 2>&1 | sed 's/^/victim-job: /'; done
    """

    _, log = run(backend, attack, BOB)
    print(log)  # the attack's own words, for a reader of -s output

    assert "whoami=20002" in log
    assert "homes: ls: cannot open directory" in log  # a passage: nobody lists whose jobs are there
    assert "victim-home: ls: cannot open directory" in log
    assert log.count("victim: cat:") == 3 and "private notes" not in log and "alice data" not in log
    assert "jobs: ls: cannot" in log
    assert log.count("victim-job: cat:") == 2 and "alice-output" not in log
