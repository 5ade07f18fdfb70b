"""gunicorn reads the repository's ``gunicorn.conf.py`` by default, and each worker then
freezes what it loaded out of the cycle collector's way (the submission p99 figure)."""

from __future__ import annotations

import gc
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
