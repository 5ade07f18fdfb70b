"""Finding the real Slurm dev cluster the Slurm tests run against.

``scripts/slurm-dev-cluster.sh start`` starts it (``.ci/run`` does so in CI) and tests
find it through ``SLURM_CONF``, or at the script's default place. Tests marked ``slurm``
skip with this module's reason when none answers, and FAIL under
``QM_REQUIRE_SERVICES=1`` (see tests/conftest.py).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

DEFAULT_CONF = Path(os.environ.get("SLURM_DEV_DIR", "/tmp/qm-slurm-dev")) / "etc/slurm.conf"
HOW_TO_START = "start one with: sudo bash scripts/slurm-dev-cluster.sh start"


def slurm_conf() -> str:
    """The slurm.conf of the dev cluster ('' when there is none)."""
    conf = os.environ.get("SLURM_CONF", "")
    if conf:
        return conf
    return str(DEFAULT_CONF) if DEFAULT_CONF.is_file() else ""


@cache
def unavailable_reason() -> str:
    """Why the Slurm tests cannot run here, or '' when a cluster answers."""
    conf = slurm_conf()
    if not conf:
        return f"no Slurm cluster: SLURM_CONF is unset and {DEFAULT_CONF} does not exist; {HOW_TO_START}"
    try:
        subprocess.run(
            ["scontrol", "ping"],
            env={**os.environ, "SLURM_CONF": conf},
            capture_output=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Slurm at {conf} does not answer `scontrol ping` ({exc}); {HOW_TO_START}"
    # The backend runs each job as its owner through `sudo -n -u`, as the portal's service
    # user does: a cluster root started is no use to another user without that rule.
    try:
        sudo = subprocess.run(
            ["sudo", "-n", "-u", "alice", "true"], capture_output=True, text=True, timeout=30, check=False
        )
        said = "" if sudo.returncode == 0 else sudo.stderr.strip() or f"exit {sudo.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        said = str(exc)
    if said:
        return f"this user may not run jobs as the dev cluster's users (sudo -n -u alice: {said}); run as root"
    return ""


def scancel_jobs_in(*directories: Path) -> None:
    """Cancel the dev cluster's live jobs whose working directory is under one of
    ``directories`` (what one test submitted), so no test leaves jobs holding GPUs for the next."""
    env = {**os.environ, "SLURM_CONF": slurm_conf()}
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%Z"], env=env, capture_output=True, text=True, timeout=30, check=False
    ).stdout
    prefixes = tuple(str(d) for d in directories)
    ids = [i for i, _, cwd in (line.partition("|") for line in out.splitlines()) if cwd.startswith(prefixes)]
    if ids:
        subprocess.run(["scancel", *ids], env=env, capture_output=True, timeout=30, check=False)


def home_of(user: str) -> Path:
    """A dev-cluster user's home directory (``scripts/slurm-dev-users.sh`` makes them)."""
    return Path(pwd.getpwnam(user).pw_dir)


def scratch_dir_for(user: str, tmp_path: Path) -> Path:
    """A fresh directory that ``user``'s jobs can write and the test (root) can read:
    jobs on the dev cluster run as their owner, who cannot enter pytest's private
    ``tmp_path``. A link to it is left in ``tmp_path`` for whoever reads the test's files."""
    scratch = Path(tempfile.mkdtemp(prefix="qm-slurm-scratch-"))
    shutil.chown(scratch, user)
    (tmp_path / "scratch").symlink_to(scratch)
    return scratch


def nodes_responding() -> bool:
    """Whether slurmctld hears every node's slurmd again (no state is unknown, down or
    marked ``*``): after a slurmctld restart or a resume, nothing starts until it does."""
    env = {**os.environ, "SLURM_CONF": slurm_conf()}
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True, timeout=30, check=False
    ).stdout.split()
    return bool(out) and not any(s.endswith("*") or s.startswith(("unk", "down")) for s in out)
