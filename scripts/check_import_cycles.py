"""Fail if any two project files import each other, directly or through others.

import-linter's contracts fence the layers; this check forbids every cycle between
project modules, including imports inside functions (grimp reads every ``import``
statement, wherever it is): a cycle "broken" by a function-level import is still a
cycle here. Imports under ``if TYPE_CHECKING:`` are left out: they never run, and they
are how ``scheduler/core/types.py``, the core's runtime leaf, names the policy classes
its dataclasses hold (``FairShareTree``, ``Carry``, the priority weights) in annotations.
Prints each cycle found, one per line, and exits 1 if there is any.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

PACKAGES = ("scheduler", "portal", "monitoring", "qm")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
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
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
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
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=True)
    found = cycles(graph)
    for component in found:
        print("import cycle: " + " <-> ".join(component))
    if not found:
        print(f"no import cycles among {len(graph.modules)} modules of {', '.join(PACKAGES)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
