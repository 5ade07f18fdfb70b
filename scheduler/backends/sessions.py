"""What every backend does for an interactive session's job: one home, so the local,
Slurm and Kubernetes adapters agree on which job is a session and where its apps are.

1. A session's job is the one whose environment carries the session's secret
   (:data:`scheduler.backends.job_env.SESSION_SECRET_ENV`, set by the portal at dispatch). A
   user's own ``env`` may never set it (``job_env.is_reserved``: the API refuses it), so
   a batch job cannot pass for a session.
2. A cluster's ``apps_env`` is a Python environment with the apps' servers in it
   (``make apps`` builds ``var/apps-env`` from ``requirements-apps.txt``: JupyterLab,
   TensorBoard). Its ``bin/`` goes first on the ``PATH`` of session jobs only: an ordinary
   job's ``python3`` stays the node's own. It must be at the same path on every node
   (a shared file system on Slurm) and is only ever read by jobs: the local sandbox binds
   it read-only, and unsandboxed it must belong to root and be closed to other users'
   changes (one user's job must not plant code in another user's JupyterLab).
3. A virtual environment's ``python`` is a link to the Python it was made from
   (``pyvenv.cfg``'s ``home``), whose standard library the servers need too:
   :func:`apps_env_paths` names both, for a sandbox that shows only what it binds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from scheduler.backends.base import BackendError, JobSpec
from scheduler.backends.job_env import SESSION_SECRET_ENV as SECRET_ENV

#: The config key, the same on every kind of cluster.
APPS_ENV_KEY = "apps_env"
#: Where Debian, and the sandbox, keep the operating system's programs: a Python under
#: one of them needs no bind of its own.
_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/lib/", "/lib64/", "/sbin/")


def is_session(spec: JobSpec) -> bool:
    """Whether ``spec`` is an interactive session's job (its secret is in its env)."""
    return SECRET_ENV in spec.env


def apps_env_from_config(value: object, bad: Callable[[str], BackendError]) -> str:
    """The configured ``apps_env`` as an absolute, normalised path ('' when unset). Raises
    ``bad(message)`` for anything else; reads no file (backends are built without I/O)."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not value.startswith("/") or os.path.normpath(value) != value:
        raise bad(f"{APPS_ENV_KEY} must be an absolute, normalised path (the apps' environment), got {value!r}")
    return value


def apps_bin(apps_env: str) -> str:
    """The directory that goes first on a session job's ``PATH``."""
    return f"{apps_env}/bin"


def session_path(apps_env: str, path: str) -> str:
    """``path`` with the apps' ``bin/`` first (unchanged without an ``apps_env``)."""
    return f"{apps_bin(apps_env)}:{path}" if apps_env else path


def missing_apps_env(apps_env: str) -> str | None:
    """Why the apps' environment cannot serve a session on this machine, or None."""
    if not os.path.isdir(apps_bin(apps_env)):
        return f"{APPS_ENV_KEY} {apps_env} has no bin/ directory (make apps builds it)"
    return None


def base_python(apps_env: str) -> str | None:
    """The installation of the Python the environment was made from (``pyvenv.cfg``'s
    ``home`` is its ``bin/``), or None where the file does not say or the environment is
    not a virtual environment."""
    try:
        text = Path(apps_env, "pyvenv.cfg").read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip().startswith("/"):
            return os.path.dirname(os.path.normpath(value.strip()))
    return None


def apps_env_paths(apps_env: str) -> tuple[str, ...]:
    """What a job must see, read-only, to run the apps: the environment and, outside the
    system directories, the Python installation it was made from (a pyenv or a
    ``/opt/python``)."""
    base = base_python(apps_env)
    if base is None or (base + "/").startswith(_SYSTEM_PREFIXES) or (base + "/").startswith(apps_env + "/"):
        return (apps_env,)
    return (apps_env, base)
