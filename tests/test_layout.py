"""The layout holds: no two project files, and no two packages, import each other however
indirectly, and the tree the architecture page draws is the tree on disk."""

from __future__ import annotations

import ast
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
    """The folders the architecture page's layout block names: top level, and scheduler's."""
    page = (ROOT / "docs/concepts/architecture.md").read_text()
    block = page[page.index("```\nquartermaster/") + 4 :]
    block = block[: block.index("```")]
    top = set(re.findall(r"^([a-z_]+)/", block, re.M))
    scheduler = set(re.findall(r"^  ([a-z_]+)/", block, re.M))
    return top, scheduler


def _packages(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"}


def test_the_architecture_page_draws_every_package_and_only_packages_that_exist() -> None:
    top, scheduler = _drawn_tree()
    on_disk = _packages(ROOT) | {"tests", "benchmarks"}
    assert top == on_disk, f"drawn but missing: {top - on_disk}; on disk but not drawn: {on_disk - top}"
    assert scheduler == _packages(ROOT / "scheduler"), scheduler ^ _packages(ROOT / "scheduler")


#: Test folders named for a package whose path they shorten (the scheduler's pure parts).
SHORTENED = {"core": "scheduler/core", "replay": "scheduler/replay", "backends": "scheduler/backends"}
#: Test folders that are suites across packages, not mirrors of one.
SUITES = {"contract", "e2e", "browser"}


def test_the_tests_mirror_the_packages() -> None:
    """Each folder of tests/ is named for the package it tests (or is a cross-package suite)."""
    tests = ROOT / "tests"
    strays = []
    for folder in sorted(p.parent for p in tests.glob("**/__init__.py") if p.parent != tests):
        relative = folder.relative_to(tests)
        top, *rest = relative.parts
        if top in SUITES:
            continue
        target = Path(SHORTENED.get(top, top), *rest)
        if top == "backends" and rest:  # helpers of the backends' tests (a fake API server)
            continue
        if not (ROOT / target / "__init__.py").is_file():
            strays.append(str(relative))
    assert strays == [], f"test folders with no package of that name: {strays}"


#: The imports of project modules made inside a function, each with why it cannot be at
#: the top (the goal is none; a new one needs its reason here).
FUNCTION_LEVEL_IMPORTS = {
    ("monitoring/api/views.py", "monitoring"): "charts import plotly (~0.2 s): only when a chart is asked for",
    ("people/apps.py", "common.api"): "Django's AppConfig.ready(): the OpenAPI extension registers once apps load",
    ("people/tasks.py", "people.directory"): "python-ldap is optional: a site without LDAP never imports it",
}
PROJECT_PACKAGES = {
    "quartermaster",
    "common",
    "people",
    "web",
    "scheduler",
    "monitoring",
    "notifications",
    "qm",
    "agent",
}


def _function_level_imports() -> set[tuple[str, str]]:
    found = set()
    for top in sorted(PROJECT_PACKAGES):
        for path in sorted((ROOT / top).glob("**/*.py")):
            if "migrations" in path.parts:
                continue
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    modules = (
                        [node.module or ""]
                        if isinstance(node, ast.ImportFrom)
                        else [a.name for a in node.names]
                        if isinstance(node, ast.Import)
                        else []
                    )
                    for module in modules:
                        if module.split(".")[0] in PROJECT_PACKAGES:
                            found.add((str(path.relative_to(ROOT)), module))
    return found


def test_project_modules_are_imported_at_the_top_but_for_three_named_reasons() -> None:
    found = _function_level_imports()
    assert found == set(FUNCTION_LEVEL_IMPORTS), f"new: {found - set(FUNCTION_LEVEL_IMPORTS)}"
    assert len(found) <= 3
