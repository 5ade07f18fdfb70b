"""The layout holds: no two project files import each other, however indirectly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def _checker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("check_import_cycles", ROOT / "scripts/check_import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_cycle_through_a_third_module_is_found() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("app.a", "app.b"), ("app.b", "app.c"), ("app.c", "app.a"), ("app.c", "app.d")]:
        graph.add_import(importer=importer, imported=imported)
    assert _checker().cycles(graph) == [["app.a", "app.b", "app.c"]]


def test_the_project_has_no_import_cycle(capsys) -> None:
    assert _checker().main() == 0, capsys.readouterr().out
