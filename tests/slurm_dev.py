"""Finding the real Slurm dev cluster the Slurm tests run against.

``scripts/slurm-dev-cluster.sh start`` starts it (``.ci/run`` does so in CI) and tests
find it through ``SLURM_CONF``, or at the script's default place. Tests marked ``slurm``
skip with this module's reason when none answers, and FAIL under
``QM_REQUIRE_SERVICES=1`` (see tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
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
    return ""


def scancel_jobs_in(directory: Path) -> None:
    """Cancel the dev cluster's live jobs whose working directory is under ``directory``
    (what one test submitted), so no test leaves jobs holding GPUs for the next."""
    env = {**os.environ, "SLURM_CONF": slurm_conf()}
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%Z"], env=env, capture_output=True, text=True, timeout=30, check=False
    ).stdout
    ids = [i for i, _, cwd in (line.partition("|") for line in out.splitlines()) if cwd.startswith(str(directory))]
    if ids:
        subprocess.run(["scancel", *ids], env=env, capture_output=True, timeout=30, check=False)
