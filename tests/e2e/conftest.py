"""Shared by the end-to-end tests: child processes on the test database, started and
stopped (with their output shown on failure) by the ``spawn`` fixture."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The URL of the database this test process uses (the test database)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now, for a child process to serve on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        DEBUG="1",
        DATABASE_URL=database_url(),
        QM_WORK_DIR=str(settings.QM_WORK_DIR),
        SCHEDULER_TICK_SECONDS="0.3",
        SCHEDULER_POLL_SECONDS="0.3",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    """Start a process in the repo root; stop it (and show its output on failure) after."""
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = tmp_path / f"proc-{len(procs)}.log"
        proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
        procs.append((proc, log))
        return proc

    yield start
    for proc, log in procs:  # each runs in its own session: stop its children too
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        sys.stderr.write(f"--- {log.name} ---\n{log.read_text(errors='replace')[-4000:]}\n")


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
