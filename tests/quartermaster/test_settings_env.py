"""Settings helpers fail loudly on bad values instead of guessing, and ``.env.example``
lists exactly the variables Quartermaster reads.

The rule for ``.env.example``: it lists every variable the portal's own processes
(web, Celery, ``run_scheduler``) read, that is every variable ``quartermaster/settings.py``
reads, plus those that code in the server packages (``SERVER_PACKAGES``) reads with
``os.environ`` directly (``QM_NATIVE_CORE``, ``SLURM_CONF``), except ``NOT_LISTED``:
test-only hooks and the node agent, which runs on GPU nodes and documents its own
variables in ``--help``. The client (``qm``), benchmarks and scripts are separate
programs and are not scanned. Conversely every listed variable is read somewhere in the
repository (a test-only one such as ``QM_REQUIRE_SERVICES`` may be listed).
"""

from __future__ import annotations

import ast
import os
import runpy
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from quartermaster.env import (
    env_bool,
    env_choice,
    env_float,
    env_group_map,
    env_int,
    env_list,
    env_rate,
    env_secret,
    env_sharing_overheads,
    env_weights,
)


@pytest.mark.parametrize("raw,expected", [("1", True), ("yes", True), ("ON", True), ("0", False), ("off", False)])
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("X", raw)
    assert env_bool("X") is expected


@pytest.mark.parametrize(
    "reader,raw",
    [(env_bool, "maybe"), (env_int, "ten"), (env_int, "1.5"), (env_float, "fast")],
)
def test_bad_values_raise_naming_the_variable(monkeypatch, reader, raw):
    monkeypatch.setenv("QM_SETTING", raw)
    with pytest.raises(ImproperlyConfigured, match="QM_SETTING"):
        reader("QM_SETTING", 0) if reader is not env_bool else reader("QM_SETTING")


def test_minimums_are_enforced(monkeypatch):
    monkeypatch.setenv("TICK", "0")
    with pytest.raises(ImproperlyConfigured, match=r">= 0\.1"):
        env_float("TICK", 5.0, minimum=0.1)
    monkeypatch.setenv("N", "-1")
    with pytest.raises(ImproperlyConfigured, match=">= 1"):
        env_int("N", 5, minimum=1)


def test_maximums_are_enforced(monkeypatch):
    monkeypatch.setenv("LEVEL", "1.5")
    with pytest.raises(ImproperlyConfigured, match=r"LEVEL must be <= 1, got 1\.5"):
        env_float("LEVEL", 0.8, minimum=0, maximum=1)


def test_unset_or_empty_gives_the_default(monkeypatch):
    monkeypatch.delenv("UNSET", raising=False)
    monkeypatch.setenv("EMPTY", "")
    assert env_int("UNSET", 7) == 7 and env_int("EMPTY", 7) == 7
    assert env_list("UNSET", ["a"]) == ["a"]


def test_list_trims_and_drops_empty_items(monkeypatch):
    monkeypatch.setenv("HOSTS", " a.example, ,b.example ")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]


def test_secret_is_required_outside_debug(monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY must be set"):
        env_secret("SECRET_KEY", debug=False, debug_default="x")
    assert env_secret("SECRET_KEY", debug=True, debug_default="dev") == "dev"


def test_a_missing_secret_tells_the_demos_user_what_make_demo_sets(monkeypatch):
    """`manage.py seed_demo --reset-passwords` typed without DEBUG=1 stops here: the message
    says how the embedded demo runs, not only what a production site must set."""
    monkeypatch.delenv("SECRET_KEY", raising=False)
    with pytest.raises(ImproperlyConfigured, match=r"the embedded demo runs with DEBUG=1 \(as make demo does\)"):
        env_secret("SECRET_KEY", debug=False, debug_default="x")


def test_choice_names_the_allowed_values(monkeypatch):
    monkeypatch.setenv("MODE", "fast")
    with pytest.raises(ImproperlyConfigured, match="MODE must be one of a, b"):
        env_choice("MODE", "a", ["a", "b"])
    monkeypatch.setenv("MODE", "b")
    assert env_choice("MODE", "a", ["a", "b"]) == "b"


def test_directory_groups_map_to_accounts_and_roles_and_bad_entries_stop_start_up(monkeypatch):
    monkeypatch.setenv("G", "CN=nlp,ou=groups,dc=x=nlp; cn=leads,ou=groups,dc=x=nlp:coordinator;")
    assert env_group_map("G") == {
        "cn=nlp,ou=groups,dc=x": ("nlp", "member"),
        "cn=leads,ou=groups,dc=x": ("nlp", "coordinator"),
    }
    for bad in ("nlp", "=nlp", "cn=a,dc=x=nlp:boss", "cn=a,dc=x=:member"):
        monkeypatch.setenv("G", bad)
        with pytest.raises(ImproperlyConfigured, match=r"G: .*<member\|coordinator>"):
            env_group_map("G")


def test_sharing_overheads_by_mode_and_model_over_the_defaults(monkeypatch):
    defaults = {"time-slicing": 0.1, "mps": 0.05}
    monkeypatch.delenv("O", raising=False)
    assert env_sharing_overheads("O", defaults) == defaults
    monkeypatch.setenv("O", "0.2")  # a plain number: every mode
    assert env_sharing_overheads("O", defaults) == {"time-slicing": 0.2, "mps": 0.2}
    monkeypatch.setenv("O", "mps=0.03, T4/time-slicing=0.15")
    assert env_sharing_overheads("O", defaults) == {"time-slicing": 0.1, "mps": 0.03, "T4/time-slicing": 0.15}
    for bad, message in (
        ("nvlink=0.1", "names no sharing mode"),
        ("-1", "must be a number >= 0"),
        ("mps", "must look like"),
    ):
        monkeypatch.setenv("O", bad)
        with pytest.raises(ImproperlyConfigured, match=message):
            env_sharing_overheads("O", defaults)


def test_weights_parse_names_and_refuse_bad_entries(monkeypatch):
    monkeypatch.setenv("W", " H100-80GB=2, L4=0.5 ")
    assert env_weights("W") == {"H100-80GB": 2.0, "L4": 0.5}
    for bad in ("H100", "=2", "H100=-1", "H100=fast", "H100=inf", "H100=nan"):
        monkeypatch.setenv("W", bad)
        with pytest.raises(ImproperlyConfigured, match="W must look like"):
            env_weights("W")


@pytest.mark.parametrize("raw", ["30/minute", "5/s", "1000/day", "30/min"])
def test_a_rate_is_a_positive_count_per_period(monkeypatch, raw):
    monkeypatch.setenv("RATE", raw)
    assert env_rate("RATE", "1/minute") == raw


@pytest.mark.parametrize("raw", ["30", "0/minute", "-1/minute", "ten/minute", "30/fortnight"])
def test_a_rate_drf_could_not_read_stops_start_up(monkeypatch, raw):
    monkeypatch.setenv("RATE", raw)
    with pytest.raises(ImproperlyConfigured, match="RATE must look like 30/minute"):
        env_rate("RATE", "1/minute")


# --- .env.example lists every variable -------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "quartermaster" / "settings.py"
#: Read directly from ``os.environ`` by server code, yet deliberately not in .env.example.
NOT_LISTED = {
    "QM_FAILPOINTS": "tests only: kills the process at a named place",
    "PATH": "the operating system's: where a local cluster's jobs look for programs (scheduler.clusters.software)",
}
#: Server-side packages whose direct ``os.environ`` reads belong in .env.example.
SERVER_PACKAGES = ("quartermaster", "common", "people", "web", "scheduler", "monitoring", "notifications")
#: Runs on GPU nodes, not in the portal; its variables are flag defaults (``--help``).
AGENT = ROOT / "agent" / "main.py"


def listed() -> list[str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    return [line.partition("=")[0] for line in lines if line.strip() and not line.startswith("#")]


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def direct_reads(path: Path) -> set[str]:
    """Names ``path`` reads as ``os.environ.get("X")``, ``os.environ["X"]`` or
    ``os.getenv("X")`` (literal names only: a computed one is not configuration)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute):
            if (node.func.attr == "get" and _is_environ(node.func.value)) or node.func.attr == "getenv":
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    return names


def settings_reads() -> set[str]:
    """The first argument of every ``env_*(...)`` call in the settings module."""
    names = set()
    for node in ast.walk(ast.parse(SETTINGS.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("env_"):
            first = node.args[0] if node.args else None
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), (
                f"line {node.lineno}: {node.func.id}() must name its variable with a string literal"
            )
            names.add(first.value)
    return names


def python_files(*tops: str) -> Iterator[Path]:
    for top in tops:
        yield from (ROOT / top).rglob("*.py")


class RecordingEnviron(Mapping[str, str]):
    """A read-only ``os.environ`` that remembers every name looked up."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ, self.names = environ, set[str]()

    def __getitem__(self, name: str) -> str:
        self.names.add(name)
        return self.environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


def test_settings_read_the_environment_only_through_the_helpers():
    tree = ast.parse(SETTINGS.read_text())
    direct = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in {"environ", "getenv"}]
    assert direct == [], f"quartermaster/settings.py reads os.environ directly on lines {direct}: use quartermaster.env"


def test_the_static_scan_sees_every_variable_the_settings_read(monkeypatch):
    recording = RecordingEnviron(os.environ)
    with monkeypatch.context() as patch:  # undone before pytest writes PYTEST_CURRENT_TEST
        patch.setattr(os, "environ", recording)
        runpy.run_path(str(SETTINGS))
    assert "DEBUG" in recording.names  # the recorder saw the reads
    assert recording.names <= settings_reads()


def test_env_example_lists_every_variable_the_portal_reads():
    server = set().union(*(direct_reads(p) for p in python_files(*SERVER_PACKAGES) if p != AGENT))
    missing = (settings_reads() | server) - set(NOT_LISTED) - set(listed())
    assert not missing, f"add to .env.example (with a comment): {sorted(missing)}"


def test_env_example_lists_each_variable_once_and_only_ones_something_reads():
    names = listed()
    assert len(names) == len(set(names)), "a variable is listed twice"
    everywhere = [p for p in ROOT.rglob("*.py") if not {".venv", "build", ".git"} & set(p.relative_to(ROOT).parts)]
    read = settings_reads().union(*(direct_reads(p) for p in everywhere))
    assert set(names) <= read, f"nothing reads {sorted(set(names) - read)}"
