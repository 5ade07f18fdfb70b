"""The checks every backend makes on a :class:`~scheduler.backends.base.JobSpec` before it
talks to its workload manager: one home, so the three adapters refuse the same specs
with the same words.

What is checked here holds for any workload manager (a positive whole walltime,
something to run, at least one placement, no node or GPU placed twice, a string-to-string
environment that leaves the names of the job-environment contract, ``job_env``, to the
backend, output files named as every backend can open them). What depends on the
backend stays in it: how a key may be spelt (a file name, a Kubernetes label value) and
whether a placed node or GPU exists in its inventory.
"""

from __future__ import annotations

import posixpath

from scheduler.backends.base import JobSpec
from scheduler.backends.job_env import RESERVED_WORDS, is_reserved
from scheduler.backends.job_files import name_problem
from scheduler.sessions.script import SECRET_ENV


def spec_problem(spec: JobSpec) -> str | None:
    """The first thing wrong with ``spec`` that no backend could run, as a phrase that
    follows "job <key>: "; ``None`` when there is none. Adapters raise it as a permanent
    :class:`~scheduler.backends.base.BackendError` (a retry cannot help)."""
    walltime = spec.walltime_seconds
    if isinstance(walltime, bool) or not isinstance(walltime, int) or walltime <= 0:
        return f"walltime_seconds must be a positive integer, got {walltime!r}"
    if not (spec.script or spec.command):
        return "has neither a command nor a script"
    if not spec.placements:
        return "has no placements"
    seen: set[str] = set()
    for placement in spec.placements:
        if placement.node in seen:
            return f"node {placement.node!r} is placed twice"
        seen.add(placement.node)
        if len(set(placement.gpu_indices)) != len(placement.gpu_indices):
            return f"GPU indices on {placement.node} repeat: {placement.gpu_indices}"
    for key, value in spec.env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            return f"env must map strings to strings, got {key!r}: {value!r}"
        # A session's secret is the portal's own, set at dispatch (the API refuses it in a
        # user's env): the one reserved name a spec carries in ``env``.
        if is_reserved(key) and key != SECRET_ENV:
            return f"env may not set {key}: {RESERVED_WORDS}"
    if spec.workdir and (not spec.workdir.startswith("/") or posixpath.normpath(spec.workdir) != spec.workdir):
        return f"workdir must be an absolute, normalised path, got {spec.workdir!r}"
    for name, content in spec.files.items():
        problem = name_problem(name) if isinstance(name, str) else f"{name!r} is not a file name"
        if problem or not isinstance(content, str):
            return f"files: {problem or f'the content of {name} is not text'}"
    for path in spec.output.files if spec.output else ():
        problem = _output_problem(path, spec.workdir)
        if problem:
            return f"output file {path!r}: {problem}"
    return None


def _output_problem(path: str, workdir: str) -> str | None:
    """Why ``path`` cannot be an output file of a job that starts in ``workdir``: an
    absolute, normalised path, or (in the job's own fresh directory) a file name."""
    if any(ord(char) < 32 for char in path):
        return "has control characters"
    if path.startswith("/"):
        return None if posixpath.normpath(path) == path else "must be normalised (no '..', '.' or '//')"
    if workdir:
        return "must be absolute (in the workdir) once filled in"
    return name_problem(path) if "/" not in path else "must be a file name in the job's own directory"
