"""The compiled core is used only while its build matches the sources byte for byte;
otherwise the package runs interpreted and says why (``scheduler.core.compiled``)."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest

import scheduler.core.timeline
from scheduler.core import compiled

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


@pytest.fixture(autouse=True)
def keep_the_process_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """``activate`` remembers its choice; these calls are not the package's own."""
    monkeypatch.setattr(compiled, "state", compiled.state)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the core's sources to edit."""
    copy = tmp_path / "core"
    shutil.copytree(compiled.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def write_manifest(build: Path, sources: dict[str, str], ext_suffix: str = EXT_SUFFIX) -> None:
    build.mkdir(parents=True, exist_ok=True)
    manifest = {"ext_suffix": ext_suffix, "group": compiled.GROUP, "sources": sources}
    (build / compiled.MANIFEST).write_text(json.dumps(manifest))


def test_a_build_of_exactly_these_sources_matches(package: Path, tmp_path: Path) -> None:
    write_manifest(tmp_path / "build", compiled.compiled_sources(package))
    assert compiled.mismatch(tmp_path / "build", package) is None


def test_an_edited_module_makes_the_build_stale(package: Path, tmp_path: Path) -> None:
    write_manifest(tmp_path / "build", compiled.compiled_sources(package))
    (package / "timeline.py").write_text((package / "timeline.py").read_text() + "\n# edited\n")
    assert "older than the sources" in (compiled.mismatch(tmp_path / "build", package) or "")


def test_a_module_added_since_the_build_makes_it_stale(package: Path, tmp_path: Path) -> None:
    write_manifest(tmp_path / "build", compiled.compiled_sources(package))
    (package / "newrule.py").write_text('"""A new module."""\n')
    assert "older than the sources" in (compiled.mismatch(tmp_path / "build", package) or "")


def test_the_modules_kept_interpreted_are_not_part_of_the_build(package: Path) -> None:
    names = set(compiled.compiled_sources(package))
    assert names.isdisjoint(compiled.INTERPRETED)
    assert {"cycle.py", "timeline.py", "types.py"} <= names


def test_a_build_for_another_interpreter_is_not_loaded(package: Path, tmp_path: Path) -> None:
    write_manifest(tmp_path / "build", compiled.compiled_sources(package), ext_suffix=".cpython-39-x.so")
    assert "this interpreter loads" in (compiled.mismatch(tmp_path / "build", package) or "")


def test_no_build_means_interpreted_with_the_command_that_builds_one(tmp_path: Path) -> None:
    path: list[str] = ["/the/package"]
    state = compiled.activate(path, mode="auto", build_dir=tmp_path / "nothing")
    assert state.startswith("interpreted (no build") and "make native" in state
    assert path == ["/the/package"]


def test_required_fails_loudly_without_a_usable_build(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match="QM_NATIVE_CORE=required"):
        compiled.activate(["/the/package"], mode="required", build_dir=tmp_path / "nothing")


def test_off_never_looks_for_a_build(tmp_path: Path) -> None:
    write_manifest(tmp_path / "build", compiled.compiled_sources())
    path: list[str] = ["/the/package"]
    assert compiled.activate(path, mode="off", build_dir=tmp_path / "build") == "interpreted (QM_NATIVE_CORE=off)"
    assert path == ["/the/package"]


def test_an_unknown_mode_is_an_error_that_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match="auto, off, required"):
        compiled.activate([], mode="fast", build_dir=tmp_path)


def test_this_process_runs_the_core_the_checkout_calls_for() -> None:
    """Compiled exactly when ``make native``'s build matches these sources and it was
    not turned off (``make test`` runs the core's tests once each way)."""
    running_compiled = scheduler.core.timeline.__file__.endswith(EXT_SUFFIX)
    assert running_compiled == (compiled.state == "compiled")
    if compiled.mismatch(compiled.BUILD_DIR) is not None:
        assert not running_compiled
