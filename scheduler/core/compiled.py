"""Running the scheduling core compiled, when a build that matches its sources exists.

``make native`` (``scripts/build_native_core.py``) compiles the core's modules with
mypyc, the compiler that ships with mypy (the core is already strictly typed), into
``build/native/``. A cycle then runs about 1.7x faster (``benchmarks/tick.py`` says
which core it timed). The build lives outside the package and is used only while it
matches the sources byte for byte (its manifest holds their SHA-256 digests), so an
edited module never runs stale compiled code: the package falls back to the
interpreted modules, which decide the same (``make test`` runs the core's tests on
both).

How: the build holds one extension module per core module, under
``build/native/scheduler/core/``, plus the shared library they all link to. Putting that
directory first on the package's ``__path__`` makes ``import scheduler.core.timeline``
find the extension before the ``.py`` file; the shared library is loaded first, under
the top-level name the extensions import it by.

``QM_NATIVE_CORE`` chooses: ``auto`` (default) uses a matching build if there is one;
``off`` never does; ``required`` raises ``ImportError`` when it cannot (CI, so the tests
run what ships).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import sysconfig
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUILD_DIR = PACKAGE_DIR.parent.parent / "build" / "native"
MANIFEST = "manifest.json"
#: The name of the shared library every compiled module imports.
GROUP = "scheduler_core__mypyc"
#: Kept interpreted: this module and the package's ``__init__`` run before the choice is
#: made; the trace replay's loop costs little next to the ``schedule()`` calls it makes,
#: and its tests swap the ``schedule`` it calls.
INTERPRETED = frozenset({"__init__.py", "compiled.py"})
MODES = ("auto", "off", "required")

#: What the last :func:`activate` chose, for reports: ``"compiled"`` or
#: ``"interpreted (<why>)"``.
state = "interpreted (not activated)"


def compiled_sources(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """File name -> SHA-256 of each module the build compiles, as they are now."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(package_dir.glob("*.py"))
        if path.name not in INTERPRETED
    }


def mismatch(build_dir: Path, package_dir: Path = PACKAGE_DIR) -> str | None:
    """Why the build in ``build_dir`` cannot stand in for the sources, or ``None``."""
    try:
        manifest = json.loads((build_dir / MANIFEST).read_text())
    except FileNotFoundError:
        return f"no build in {build_dir} (make native)"
    except (OSError, ValueError) as error:
        return f"unreadable build manifest: {error}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if manifest.get("ext_suffix") != suffix:
        return f"built for {manifest.get('ext_suffix')}, this interpreter loads {suffix}"
    built = manifest.get("sources")
    if built != compiled_sources(package_dir):
        return "the build is older than the sources (make native)"
    return None


def activate(package_path: list[str], mode: str | None = None, build_dir: Path = BUILD_DIR) -> str:
    """Put a matching compiled build first on the core package's ``package_path``
    (its ``__path__``), as ``mode`` (default ``$QM_NATIVE_CORE``) allows; return and
    remember what was chosen. Must run before any compiled module is imported."""
    global state
    mode = (mode if mode is not None else os.environ.get("QM_NATIVE_CORE", "auto")).strip().lower() or "auto"
    if mode not in MODES:
        raise ImportError(f"QM_NATIVE_CORE must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "off":
        state = "interpreted (QM_NATIVE_CORE=off)"
        return state
    why = mismatch(build_dir)
    if why is None:
        try:
            _load_group(build_dir)
        except ImportError as error:
            why = f"the build does not load: {error}"
    if why is not None:
        if mode == "required":
            raise ImportError(f"QM_NATIVE_CORE=required, but the compiled core is unusable: {why}")
        state = f"interpreted ({why})"
        return state
    modules = str(build_dir / "scheduler" / "core")
    if modules not in package_path:
        package_path.insert(0, modules)
    state = "compiled"
    return state


def _load_group(build_dir: Path) -> None:
    """Load the shared library under its top-level name (once per process)."""
    if GROUP in sys.modules:
        return
    path = build_dir / f"{GROUP}{sysconfig.get_config_var('EXT_SUFFIX')}"
    spec = importlib.util.spec_from_file_location(GROUP, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[GROUP] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[GROUP]
        raise
