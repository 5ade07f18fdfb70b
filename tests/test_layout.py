"""The layout holds: no two project files, and no two packages, import each other however
indirectly, and the tree the README draws is the tree on disk."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _checker() -> Any:
    spec = importlib.util.spec_from_file_location("check_import_cycles", ROOT / "scripts/check_import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _graph(*edges: tuple[str, str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for importer, imported in edges:
        graph.setdefault(importer, set()).add(imported)
        graph.setdefault(imported, set())
    return graph


def test_a_cycle_through_a_third_module_is_found() -> None:
    graph = _graph(("app.a", "app.b"), ("app.b", "app.c"), ("app.c", "app.a"), ("app.c", "app.d"))
    assert _checker().cycles(graph) == [["app.a", "app.b", "app.c"]]


def test_two_packages_that_import_each_other_through_different_files_are_a_circle() -> None:
    """No two files close it: people.a -> common.b, common.c -> people.d."""
    checker = _checker()
    modules = _graph(("people.a", "common.b"), ("common.c", "people.d"), ("scheduler.jobs.x", "scheduler.models"))
    assert checker.cycles(modules) == []
    assert checker.cycles(checker.package_graph(modules, set())) == [["common", "people"]]


def test_a_named_exception_is_no_circle() -> None:
    checker = _checker()
    modules = _graph(("people.a", "common.b"), ("common.c", "people.d"))
    assert checker.cycles(checker.package_graph(modules, {("common.c", "people.d")})) == []


def test_the_project_has_no_import_cycle_and_no_package_circle(capsys) -> None:
    assert _checker().main() == 0, capsys.readouterr().out


def _drawn_tree() -> tuple[set[str], set[str]]:
    """The folders the README's layout block names: top level, and scheduler's."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("```\nquartermaster/") + 4 :]
    block = block[: block.index("```")]
    top = set(re.findall(r"^([a-z_]+)/", block, re.M))
    scheduler = set(re.findall(r"^  ([a-z_]+)/", block, re.M))
    return top, scheduler


def _packages(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"}


def test_the_readme_draws_every_package_and_only_packages_that_exist() -> None:
    top, scheduler = _drawn_tree()
    on_disk = _packages(ROOT) | {"tests", "benchmarks"}
    assert top == on_disk, f"drawn but missing: {top - on_disk}; on disk but not drawn: {on_disk - top}"
    assert scheduler == _packages(ROOT / "scheduler"), scheduler ^ _packages(ROOT / "scheduler")
