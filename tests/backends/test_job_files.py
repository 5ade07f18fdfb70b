"""The files a job brings are written by the job itself, byte for byte, whatever they
hold: no byte of them is ever read by a shell as code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scheduler.backends.job_files import name_problem, prelude


@pytest.fixture(autouse=True)
def _isolated_scheduler_settings() -> None:
    """No Django here."""


TRICKY = {
    "train.py": "print('hello')\n",
    "conf/base.yaml": "lr: 0.1\nname: $HOME `id` $(touch /tmp/pwned)\n",
    "marker.txt": "QM_FILE_END\nEOF\n'\"\\\n",
    "no-newline": "ends without one",
    "ünïcode.txt": "日本語 ✓",
    "empty": "",
}


def test_every_file_arrives_byte_for_byte_and_nothing_in_it_runs(tmp_path: Path) -> None:
    script = prelude(TRICKY, fresh_dir="job-1") + "echo done\n"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    for name, text in TRICKY.items():
        assert (tmp_path / "job-1" / name).read_text(encoding="utf-8") == text
    assert not Path("/tmp/pwned").exists()


def test_no_files_and_no_fresh_directory_is_no_shell_at_all() -> None:
    assert prelude({}) == ""


@pytest.mark.parametrize(
    "name",
    ["", "/etc/passwd", "../up", "a/../../b", "a//b", "./a", "a/", "dir\\name", "new\nline", "nul\x00", "x" * 256],
)
def test_a_name_that_could_leave_the_working_directory_is_refused(name: str) -> None:
    assert name_problem(name) is not None


@pytest.mark.parametrize("name", ["train.py", "conf/base.yaml", "a-b_c.d", ".hidden", "deep/er/path.txt"])
def test_plain_relative_names_are_fine(name: str) -> None:
    assert name_problem(name) is None
