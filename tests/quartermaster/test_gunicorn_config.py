"""gunicorn reads the repository's ``gunicorn.conf.py`` by default, and each worker then
freezes what it loaded out of the cycle collector's way (the submission p99 figure); its
control socket is the portal's own."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from pathlib import Path

from gunicorn.app.base import Application
from gunicorn.config import Config

ROOT = Path(__file__).resolve().parents[2]


def test_gunicorn_started_in_the_repository_reads_its_config_file() -> None:
    assert Config().settings["config"].default == "./gunicorn.conf.py"
    assert (ROOT / "gunicorn.conf.py").is_file()


class ConfigOnly(Application):  # type: ignore[misc]
    """gunicorn's own loading of the file, without a command line or an app."""

    def load_config(self) -> None:
        self.load_config_from_file(str(ROOT / "gunicorn.conf.py"))

    def load(self) -> None:
        return None


def test_a_worker_freezes_what_it_loaded_once_initialised() -> None:
    hook = ConfigOnly().cfg.post_worker_init
    assert gc.get_freeze_count() == 0
    try:
        hook(None)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_control_socket_is_the_portals_own_not_the_service_users(monkeypatch, tmp_path) -> None:
    """gunicorn's default (~/.gunicorn/gunicorn.ctl) is one path for every portal a
    service user runs; each portal's lives in its own QM_VAR_DIR."""
    monkeypatch.setenv("QM_VAR_DIR", str(tmp_path / "one"))
    assert ConfigOnly().cfg.control_socket == str(tmp_path / "one" / "gunicorn.ctl")
    monkeypatch.delenv("QM_VAR_DIR")
    assert ConfigOnly().cfg.control_socket == str(ROOT / "var" / "gunicorn.ctl")  # settings.VAR_DIR's default


def _start(var_dir: Path, home: Path) -> subprocess.Popen[bytes]:
    environment = {k: v for k, v in os.environ.items() if k not in {"XDG_RUNTIME_DIR", "DATABASE_URL"}}
    environment |= {"QM_VAR_DIR": str(var_dir), "HOME": str(home), "DEBUG": "1"}
    command = [sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:0", "--workers", "1", "quartermaster.wsgi"]
    return subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_two_portals_of_one_user_each_get_their_own_control_socket(tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    portals = {name: tmp_path / name / "var" for name in ("a", "b")}
    started = [_start(var_dir, home) for var_dir in portals.values()]
    try:
        deadline = time.monotonic() + 60
        sockets = [var_dir / "gunicorn.ctl" for var_dir in portals.values()]
        while not all(s.is_socket() for s in sockets) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(s.is_socket() for s in sockets)
        assert not (home / ".gunicorn").exists()
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=30)
