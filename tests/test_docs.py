"""The documentation: the README stays a front door, the site builds with every warning
an error, loads nothing from another host, and its `qm` reference is `qm`'s own parser."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for must in ("make demo", "make test", "/jobs/new/", "qm submit", "curl ", "What to read next"):
        assert must in readme, must


class _Assets(HTMLParser):
    """Every address a page loads by itself: scripts, stylesheets, icons, images, frames."""

    LOADS = {("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"), ("source", "src")}

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if (tag, name) in self.LOADS and value:
                self.found.append(value)


def _elsewhere(address: str) -> bool:
    return bool(re.match(r"^([a-z]+:)?//", address, re.I))


def test_the_site_builds_strictly_and_loads_nothing_from_another_host(tmp_path: Path) -> None:
    """`mkdocs build --strict` (make check's) into a scratch folder; then no page, and no
    stylesheet, names an asset on another host (Material's Google fonts are off). The
    theme's JavaScript still carries addresses it would fetch only for features this
    site does not use (Mermaid diagrams, a repository link, a pre-2020 browser's polyfill)."""
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    external = []
    for page in site.rglob("*.html"):
        assets = _Assets()
        assets.feed(page.read_text())
        external += [f"{page.relative_to(site)}: {a}" for a in assets.found if _elsewhere(a)]
    for sheet in site.rglob("*.css"):
        text = sheet.read_text()
        loads = re.findall(r"url\(\s*['\"]?([^)'\"\s]+)", text) + re.findall(r"@import\s+['\"]([^'\"]+)", text)
        external += [f"{sheet.relative_to(site)}: {a}" for a in loads if _elsewhere(a)]
    assert external == []


def _hook(name: str = "qm_reference") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / f"docs/hooks/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_qm_reference_names_every_verb_and_option_of_qms_parser() -> None:
    from qm.cli import build_parser

    reference = _hook().reference()
    parser = build_parser()
    flags = [f for a in parser._actions for f in a.option_strings]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                assert f"### qm {verb}\n" in reference, verb
                flags += [f for a in sub._actions for f in a.option_strings]
    missing = sorted({f for f in flags if f"`{f}" not in reference} - {"-h", "--help"})
    assert missing == [], missing


def test_the_qm_reference_shows_no_address_or_token_of_the_machine_that_built_it(monkeypatch) -> None:
    monkeypatch.setenv("QM_URL", "http://builder.invalid:1")
    monkeypatch.setenv("QM_TOKEN", "qm_secret_of_the_builder")
    reference = _hook().reference()
    assert "builder.invalid" not in reference and "qm_secret_of_the_builder" not in reference
    assert "`http://127.0.0.1:8000`" in reference


def test_the_qm_page_asks_for_the_reference() -> None:
    page = (ROOT / "docs/user/qm.md").read_text()
    assert _hook().MARKER in page


def test_the_qos_page_maps_every_qos_limit_to_its_slurm_option_from_their_one_list() -> None:
    from people.limits import QOS_LIMITS

    hook = _hook("quota_limits")
    assert hook.QOS_MARKER in (ROOT / "docs/admin/qos.md").read_text()
    rows = [line for line in hook.qos_table().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [limit.name for limit in QOS_LIMITS]
    assert [row.split("`")[3] for row in rows] == [limit.slurm for limit in QOS_LIMITS]


def test_the_quotas_page_lists_every_quota_limit_from_their_one_list() -> None:
    from people.limits import QUOTA_LIMITS

    hook = _hook("quota_limits")
    assert hook.MARKER in (ROOT / "docs/admin/quotas.md").read_text()
    rows = [line for line in hook.table().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [limit.name for limit in QUOTA_LIMITS]
