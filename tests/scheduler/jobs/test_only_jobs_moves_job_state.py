"""Written invariant: a job's state moves only in ``scheduler/jobs/`` (the state machine,
its transitions and their bulk forms: claiming, marking running, moving many).

Read from the source, as a reviewer would: any call outside ``scheduler/jobs/`` that
writes ``state`` (``update``/``create``-style calls with ``state=``, or a bulk update whose
``same``/``columns`` name ``state``) on the Job model, or assigns ``<obj>.state``, fails
this test naming the place. A write to another model's ``state`` (nodes, simulations) is
told apart by the model the call starts from, followed through one local assignment.
Tests, benchmarks (which build their own worlds) and migrations are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HOME = ROOT / "scheduler" / "jobs"
SKIPPED = {".venv", ".git", "tests", "benchmarks", "var", "build", "migrations", "node_modules"}
WRITES = {"update", "create", "update_or_create", "get_or_create", "bulk_update"}
BULK = {"update_rows", "update_matching_rows", "update_versioned_rows"}
#: Keywords of the bulk updates that say what is written (``where``/``match`` only guard).
BULK_WRITTEN = {"same", "columns"}


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _assigned_roots(tree: ast.AST) -> dict[str, str]:
    """Local name -> the model name its value starts from (``silent = Node.objects...``)."""
    roots: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            root = _root(node.value)
            if isinstance(root, ast.Name):
                roots[node.targets[0].id] = root.id
    return roots


def _on_a_job(receiver: ast.AST, roots: dict[str, str]) -> bool:
    """Whether a call on ``receiver`` may write a Job: it starts from ``Job``, or from a
    name whose model cannot be told (never from another model's class)."""
    root = _root(receiver)
    if not isinstance(root, ast.Name):
        return True
    model = roots.get(root.id, root.id)
    return model == "Job" or not model[:1].isupper()


def _names_state(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "state" for k in node.keys)


def _scopes(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node -> the function (or module) it is written in."""
    scope_of: dict[ast.AST, ast.AST] = {}

    def visit(node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            scope_of[child] = scope
            visit(child, child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope)

    visit(tree, tree)
    return scope_of


def state_writes(source: str) -> list[int]:
    """Line numbers in ``source`` that write a Job's state."""
    tree = ast.parse(source)
    scope_of = _scopes(tree)
    roots_in: dict[ast.AST, dict[str, str]] = {}
    found = []
    for node in ast.walk(tree):
        scope = scope_of.get(node, tree)
        roots = roots_in.setdefault(scope, _assigned_roots(scope))
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            keywords = {k.arg: k.value for k in node.keywords}
            if (
                name in WRITES
                and "state" in keywords
                and isinstance(func, ast.Attribute)
                and _on_a_job(func.value, roots)
            ):
                found.append(node.lineno)
            elif name in BULK:
                model = node.args[0] if node.args else keywords.get("model")
                is_job = isinstance(model, ast.Name) and model.id == "Job"
                if is_job and any(_names_state(keywords.get(k)) for k in BULK_WRITTEN if k in keywords):
                    found.append(node.lineno)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == "state" for t in node.targets
        ):
            found.append(node.lineno)
    return found


def _project_files() -> list[Path]:
    tops = [top for top in sorted(ROOT.iterdir()) if top.is_dir() and top.name not in SKIPPED]
    return [
        path
        for top in tops
        for path in sorted(top.glob("**/*.py"))
        if not SKIPPED & set(path.relative_to(ROOT).parts) and HOME not in path.parents
    ]


def test_no_module_outside_scheduler_jobs_writes_a_jobs_state() -> None:
    places = [
        f"{path.relative_to(ROOT)}:{line}" for path in _project_files() for line in state_writes(path.read_text())
    ]
    assert places == [], "Job.state moves only in scheduler/jobs/: " + ", ".join(places)


def test_the_check_sees_each_way_of_writing_a_state() -> None:
    """Each of these is caught (so the test above cannot pass by seeing nothing)."""
    writes = {
        "Job.objects.filter(pk=1).update(state='RUNNING')": 1,
        "jobs = Job.objects.filter(pk=1)\njobs.update(state='RUNNING')": 2,
        "update_matching_rows(Job, ids, {}, same={'state': 'RUNNING'})": 1,
        "update_rows(Job, ids, {}, same={'state': 'RUNNING'}, where={'state': 'PENDING'})": 1,
        "job.state = 'FAILED'": 1,
    }
    for source, line in writes.items():
        assert state_writes(source) == [line], source
    reads_and_others = [
        "Job.objects.filter(state='RUNNING').update(priority=1)",
        "silent = Node.objects.filter(up=True)\nsilent.update(state='DOWN')",
        "def f():\n    silent = Node.objects.all()\n    silent.update(state='DOWN')\ndef g():\n    silent = f()",
        "Simulation.objects.filter(pk=1).update(state='DONE')",
        "update_rows(Job, ids, {'nice': [1]}, where={'state': 'PENDING'})",
    ]
    for source in reads_and_others:
        assert state_writes(source) == [], source
