"""Shared fixtures: personas, service requirements, inline dispatch.

Personas (as in healthchecks' tests): alice owns jobs in account ``lab``; bob
coordinates ``lab`` and so sees alice's jobs; dora is a plain member of ``lab`` and
does not; charlie belongs to ``other`` and must see nothing of alice's; admin is staff.

Tests marked ``postgres``, ``redis``, ``slurm``, ``bwrap`` (the local backend's
sandbox, Debian's bubblewrap) or ``apps`` (the interactive apps' environment that
``make apps`` builds) need that service. Without it they skip on a
laptop, and FAIL when ``QM_REQUIRE_SERVICES=1`` (CI), so CI can never go green by
silently skipping.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.builders import builtin_apps, join, make_account, make_local_cluster, make_user

REQUIRE_SERVICES = os.environ.get("QM_REQUIRE_SERVICES", "0") == "1"


def _missing(reason: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}", pytrace=False)
    pytest.skip(reason)


def passable_dir(for_path: Path) -> Path:
    """A fresh directory for the test whose ``tmp_path`` is ``for_path``, that every user
    may pass through (not list) to reach what lies below it, as /home and /scratch are.

    Jobs run as their owners open their directories as those owners, and pytest keeps
    ``tmp_path`` under a 0700 directory (which another pytest session puts back to 0700
    whenever it starts), so tests whose jobs work in directories of their own make them
    here. Remove it with ``shutil.rmtree`` (:func:`passable_tmp` does).
    """
    path = passable_path(for_path)
    for made in (path.parent, path):
        made.mkdir(mode=0o711, exist_ok=True)
        made.chmod(0o711)
    return path


def passable_path(for_path: Path) -> Path:
    """Where :func:`passable_dir` makes its directory, made or not."""
    root = Path(tempfile.gettempdir()) / f"qm-tests-passable-{os.geteuid()}"
    return root / hashlib.sha256(str(for_path).encode()).hexdigest()[:16]


@pytest.fixture
def passable_tmp(tmp_path: Path) -> Iterator[Path]:
    """:func:`passable_dir` for this test, removed afterwards."""
    path = passable_dir(tmp_path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def redis_url() -> str:
    return os.environ.get("REDIS_URL", "")


def redis_available() -> bool:
    url = redis_url()
    if not url:
        return False
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=2).ping())
    except redis.RedisError:
        return False


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres"):
        from django.conf import settings

        if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
            _missing("this test needs PostgreSQL: set DATABASE_URL=postgres://...")
    if item.get_closest_marker("redis") and not redis_available():
        _missing(f"this test needs Redis: set REDIS_URL (now {redis_url()!r}) to a running server")
    if item.get_closest_marker("slurm"):
        require_slurm()
    if item.get_closest_marker("bwrap"):
        require_bwrap()
    if item.get_closest_marker("apps"):
        require_apps_env()


def apps_env() -> Path:
    """The interactive apps' environment the tests start JupyterLab and TensorBoard from:
    ``QM_APPS_ENV``, else the one ``make apps`` builds in the checkout (CI's .ci/run does)."""
    configured = os.environ.get("QM_APPS_ENV", "")
    return Path(configured) if configured else Path(__file__).resolve().parents[1] / "var" / "apps-env"


def require_apps_env() -> None:
    """Skip the running test (fail it in CI) unless the apps' environment is built."""
    if not (apps_env() / "bin" / "jupyter-lab").exists():
        _missing(f"the interactive apps' environment {apps_env()} is not built (make apps)")


def require_bwrap() -> None:
    """Skip the running test (fail it in CI) unless bubblewrap is installed: the
    ``bwrap`` marker's check, and the sandboxed local backend's fixtures'."""
    if not shutil.which("bwrap"):
        _missing("bubblewrap is not installed (apt-get install bubblewrap)")


def require_slurm() -> None:
    """Skip the running test (fail it in CI) unless the Slurm dev cluster answers.

    The ``slurm`` marker's check; fixtures that hand out the cluster call it too, so a
    test that forgets the marker still skips or fails with the reason instead of erroring
    on a missing ``scontrol``.
    """
    from tests.slurm_dev import unavailable_reason

    if reason := unavailable_reason():
        _missing(reason)


@pytest.fixture(autouse=True)
def _isolated_scheduler_settings(settings: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Dispatch inline and keep backend files per test, unless a test says otherwise:
    the local backend's too, and the directories it makes for jobs that run unsandboxed
    as other uids (root without bubblewrap), which would otherwise go to /var/lib."""
    settings.SCHEDULER_DISPATCH = "inline"
    settings.QM_WORK_DIR = tmp_path / "work"
    homes = passable_path(tmp_path) / "job-homes"
    monkeypatch.setattr("scheduler.backends.local.DEFAULT_HOMES_DIR", homes)
    # Tests change the hardware between requests: the submit-time check sees it at once.
    settings.SCHEDULER_INVENTORY_RECHECK_SECONDS = 0
    settings.SCHEDULER_STRANDED_SECONDS = 0  # every tick recomputes the overview's stranded GPUs
    # Password hashing is deliberately slow; tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Rate limits (what-if) count in the cache: start each test with none spent.
    from django.core.cache import cache

    cache.clear()
    yield
    shutil.rmtree(homes.parent, ignore_errors=True)


@dataclass
class World:
    alice: Any
    bob: Any
    dora: Any
    charlie: Any
    admin: Any
    lab: Any
    other: Any
    cluster: Any


@pytest.fixture
def world(db: None) -> World:
    builtin_apps()
    lab, other = make_account("lab"), make_account("other")
    alice, bob, dora, charlie = (make_user(n) for n in ("alice", "bob", "dora", "charlie"))
    join(alice, lab)
    join(bob, lab, "coordinator")
    join(dora, lab)
    join(charlie, other)
    return World(
        alice=alice,
        bob=bob,
        dora=dora,
        charlie=charlie,
        admin=make_user("admin", staff=True),
        lab=lab,
        other=other,
        cluster=make_local_cluster(),
    )


@pytest.fixture
def tick(django_capture_on_commit_callbacks: Any) -> Any:
    """``tick()`` runs one scheduling tick and its after-commit dispatches, as the
    scheduler loop does, and returns the ``TickResult``."""
    from scheduler.tick.run import run_tick

    def run() -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return run_tick()

    return run


@pytest.fixture
def client_for(db: None) -> Any:
    """``client_for(user)`` -> a DRF APIClient logged in as ``user`` (session auth)."""
    from rest_framework.test import APIClient

    def build(user: Any) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_login(user)
        return client

    return build
