"""Compile the scheduling core with mypyc into ``build/native/`` (``make native``).

Usage: ``python scripts/build_native_core.py [--required]``

The core then runs compiled wherever this checkout is imported from (see
``scheduler/core/compiled.py`` for how the build is found and when it is ignored). It
needs a C compiler and the Python headers; without them the portal runs the same core
interpreted, so a failed build only warns, unless ``--required`` (or
``QM_NATIVE_CORE=required``) makes it an error. mypyc comes with mypy, pinned in
requirements-dev.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Asked for before the import below turns it off.
REQUIRED = os.environ.get("QM_NATIVE_CORE", "").strip().lower() == "required"
# Import the package interpreted: an older build must not be loaded while its
# replacement is built.
os.environ["QM_NATIVE_CORE"] = "off"
from scheduler.core import compiled  # noqa: E402

#: mypy options for the compile. Not the project's: those load the Django plugins,
#: which need its settings; the core imports no Django, and ``make check`` holds it to
#: the strict options.
MYPY_CONFIG = """\
[mypy]
python_version = 3.11
"""


def build(build_dir: Path) -> None:
    """Compile into a fresh directory, then swap it in with its manifest, so that an
    interrupted build never leaves a manifest beside half the modules."""
    from mypyc.build import mypycify
    from setuptools import setup

    sources = compiled.compiled_sources()
    modules = [str(Path("scheduler") / "core" / name) for name in sources]
    staging = Path(tempfile.mkdtemp(prefix="native-", dir=build_dir.parent))
    work = Path(tempfile.mkdtemp(prefix="native-work-"))
    config = work / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)  # mypyc names modules by their path from here
        extensions = mypycify(
            ["--config-file", str(config), *modules],
            group_name=compiled.GROUP.removesuffix("__mypyc"),
            target_dir=str(work / "c"),
            opt_level="3",
        )
        # The project's own pyproject.toml (qm's packaging) is read by setup() here too;
        # older setuptools call its [tool.setuptools] table "beta" on every build.
        warnings.filterwarnings("ignore", message=r"Support for `\[tool\.setuptools\]`")
        setup(
            name="quartermaster-native-core",
            packages=[],
            py_modules=[],
            ext_modules=extensions,
            script_args=["--quiet", "build_ext", "--build-lib", str(staging), "--build-temp", str(work / "o")],
        )
        manifest = {
            "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
            "group": compiled.GROUP,
            "sources": sources,
        }
        (staging / compiled.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if build_dir.exists():
            shutil.rmtree(build_dir)
        staging.rename(build_dir)
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--required", action="store_true", help="fail (exit 1) if the core cannot be compiled")
    args = parser.parse_args(argv)
    required = args.required or REQUIRED
    build_dir = compiled.BUILD_DIR
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        build(build_dir)
    except (Exception, SystemExit) as error:  # setuptools reports a failed compile as SystemExit
        message = f"build_native_core: the core stays interpreted, compiling failed: {error}"
        print(message, file=sys.stderr)
        return 1 if required else 0
    print(f"build_native_core: compiled {len(compiled.compiled_sources())} modules into {build_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
