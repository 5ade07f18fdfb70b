"""Fail if any two project files, or any two packages, import each other, directly or
through others.

import-linter's contracts fence the layers; this check forbids every cycle between
project modules, including imports inside functions (grimp reads every ``import``
statement, wherever it is): a cycle "broken" by a function-level import is still a
cycle here. Imports under ``if TYPE_CHECKING:`` are left out: they never run, and they
are how ``scheduler/core/types.py``, the core's runtime leaf, names the policy classes
its dataclasses hold (``FairShareTree``, ``Carry``, the priority weights) in annotations.

Packages are the top-level ones, with each subpackage of ``scheduler`` counted as one of
its own (``scheduler.api``, ``scheduler.jobs``, ...) and each module at its top as well
(``scheduler.models`` is below every subpackage, ``scheduler.tasks`` above them): a circle
between packages is a tangle even when no two files close it, since no package can then
be read or moved without the others. The imports that the layers contract names as its
exceptions (``ignore_imports`` in pyproject.toml, each with its reason) are left out here
too, so there is one list of them.

Prints each cycle found, one per line, and exits 1 if there is any.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp

PACKAGES = ("quartermaster", "web", "notifications", "monitoring", "scheduler", "people", "common", "qm", "agent")
#: The package whose subpackages each count as a package of their own.
SPLIT = "scheduler"

Graph = dict[str, set[str]]


def module_graph(graph: grimp.ImportGraph) -> Graph:
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def package_of(module: str) -> str:
    """``scheduler.jobs`` for ``scheduler.jobs.submit``, ``scheduler.models`` for itself,
    ``people`` for ``people.api.views``."""
    parts = module.split(".")
    if parts[0] == SPLIT and len(parts) > 1:
        return f"{SPLIT}.{parts[1]}"
    return parts[0]


def named_exceptions(root: Path) -> set[tuple[str, str]]:
    """The ``importer -> imported`` pairs the import-linter contracts ignore."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    pairs = set()
    for contract in config["tool"]["importlinter"]["contracts"]:
        for line in contract.get("ignore_imports", []):
            importer, _, imported = line.partition("->")
            pairs.add((importer.strip(), imported.strip()))
    return pairs


def package_graph(modules: Graph, exceptions: set[tuple[str, str]]) -> Graph:
    """Which package imports which (itself, and the named exceptions, left out)."""
    edges: Graph = {}
    for module, imported in modules.items():
        source = package_of(module)
        edges.setdefault(source, set())
        for target in imported:
            if (module, target) in exceptions:
                continue
            other = package_of(target)
            if other != source:
                edges[source].add(other)
    return edges


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=True)
    modules = module_graph(graph)
    found = cycles(modules)
    packaged = package_graph(modules, named_exceptions(root))
    circles = cycles(packaged)
    for component in found:
        print("import cycle: " + " <-> ".join(component))
    for component in circles:
        print("package circle: " + " <-> ".join(component))
    if not found:
        print(f"no import cycles among {len(graph.modules)} modules of {', '.join(PACKAGES)}")
    if not circles:
        print(f"no package circles among {len(packaged)} packages")
    return 1 if found or circles else 0


if __name__ == "__main__":
    sys.exit(main())
