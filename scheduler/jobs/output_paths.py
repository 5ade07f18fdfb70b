"""A job's own output files (``sbatch -o/--output``, ``-e/--error``): their patterns, and
where they may lie. Pure: the standard library only.

A job's output always goes to the portal's log (``qm log ID``, ``GET .../log/``); with
``output_path`` its stdout and stderr are also written to that file, and with
``error_path`` its stderr to that one instead (sbatch's rules). The file is written as
the job's owner, never as the portal (each backend says how).

Patterns, as sbatch fills them in (:func:`expand`), when the job is handed to its
cluster, so an array's tasks each get their own file:

=====  ======================================================================
``%j``  the job's id: the portal's (the ``qm``/API id), on every backend alike
``%x``  the job's name
``%A``  the array's id (its first task's id); a job that is no array: its id
``%a``  the array task's index; a job that is no array: 4294967294, as Slurm
``%u``  the owner's user name on the cluster
``%%``  a ``%``
=====  ======================================================================

A digit after ``%`` pads a number with zeros (``%4a`` -> ``0007``), as in Slurm; a path
with a backslash is taken as written, its backslashes removed, no pattern filled in. The
patterns of one file per node, task or step (``%N %n %t %s %J %b``) are refused by
name: a job here writes one file (:func:`pattern_problem`).

Where (:func:`placement_problem`): a relative path lies in the job's working directory
(``workdir``); without one, in the fresh directory the job starts in, which holds no
subdirectories, so then it is a plain file name. An absolute one, or one in the workdir,
must lie under the owner's roots (``JOB_WORKDIR_ROOTS``) and outside the portal's own
files, checked here as text when the job is submitted and again where it really is when
the local backend opens it (``scheduler.backends.user_paths``). ``/dev/null`` is no file
at all: the output stays in the portal's log only.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: A file path may be at most this long, as given (a pattern) and once filled in.
MAX_PATH_LENGTH = 1024
#: No file: the output stays in the portal's log alone (sbatch's ``-o /dev/null``).
DISCARD = "/dev/null"
#: Slurm's ``%a`` for a job that is no array (its ``NO_VAL``).
NO_ARRAY_TASK = 4294967294

#: The patterns filled in, and what each stands for.
PATTERNS: dict[str, str] = {
    "j": "the job's id",
    "x": "the job's name",
    "A": "the array's id",
    "a": "the array task's index",
    "u": "the owner's user name",
    "%": "a %",
}
#: Slurm's other patterns, refused with what to use instead.
REFUSED_PATTERNS: dict[str, str] = {
    "N": "One file per node (%N, the node's name) is not supported: a job writes one file; use %j.",
    "n": "One file per node (%n) is not supported: a job writes one file; use %j.",
    "t": "One file per task (%t) is not supported: a job writes one file; use %j.",
    "s": "Job steps (%s) are not supported: a job here is one step; use %j.",
    "J": "Job steps (%J, jobid.stepid) are not supported: a job here is one step; use %j.",
    "b": "%b (the array index modulo 10) is not supported; use %a.",
}
_PATTERN = re.compile(r"%(\d?)(.?)", re.DOTALL)
_NUMERIC = frozenset("jAa")


@dataclass(frozen=True, slots=True)
class Names:
    """What the patterns of one job stand for."""

    job_id: int
    name: str
    user: str
    #: The array's id and this task's index (None: a job that is no array).
    array_job: int | None = None
    array_task: int | None = None


def pattern_problem(path: str) -> str | None:
    """Why ``path`` cannot name a job's output file, as a sentence; None when it can.

    Refused: a NUL or other control character, a path longer than
    :data:`MAX_PATH_LENGTH`, one that names a directory (``out/``, ``.``), and any
    ``%`` pattern but those of :data:`PATTERNS` (the refused ones by name)."""
    if len(path) > MAX_PATH_LENGTH:
        return f"A file path has at most {MAX_PATH_LENGTH} characters."
    if any(ord(char) < 32 or char == "\x7f" for char in path):
        return "A file path may not hold control characters (tabs, newlines, NUL)."
    if not path.strip():
        return "Give a file path, or leave it empty."
    if path.endswith("/") or posixpath.basename(path) in (".", ".."):
        return f"{path} names a directory; give a file (out-%j.txt)."
    if "\\" in path:
        return None  # taken as written: no pattern is filled in
    for found in _PATTERN.finditer(path):
        letter = found[2]
        if letter in PATTERNS:
            continue
        if letter in REFUSED_PATTERNS:
            return REFUSED_PATTERNS[letter]
        shown = f"%{found[1]}{letter}" if letter else "a % at the end"
        return (
            f"{shown} is not a pattern: use %j (job id), %x (name), %A (array id), %a (task index), "
            "%u (user) or %% (a %)."
        )
    return None


def expand(path: str, names: Names) -> str:
    """``path`` with its patterns filled in for one job (``path`` must have no
    :func:`pattern_problem`). A name or user name is put in as one path component: a
    ``/`` in it becomes ``_``, and so does a name that is only dots."""
    if "\\" in path:
        return path.replace("\\", "")
    array_job = names.array_job if names.array_job is not None else names.job_id
    array_task = names.array_task if names.array_task is not None else NO_ARRAY_TASK
    values: dict[str, object] = {
        "j": names.job_id,
        "x": _component(names.name),
        "A": array_job,
        "a": array_task,
        "u": _component(names.user),
        "%": "%",
    }

    def fill(found: re.Match[str]) -> str:
        width, letter = found[1], found[2]
        if letter not in values:
            return found[0]  # not a pattern (pattern_problem refuses it): left as it is
        value = values[letter]
        return f"{value:0{width}d}" if width and letter in _NUMERIC else str(value)

    return _PATTERN.sub(fill, path)


def filled(path: str, names: Names, workdir: str) -> str:
    """The file ``path`` names for one job: its patterns filled in (:func:`expand`) and,
    relative, put in ``workdir`` (without one it stays a name in the job's own fresh
    directory); '' for no file (``""`` or :data:`DISCARD`)."""
    if not path:
        return ""
    path = expand(path, names)
    if path == DISCARD:
        return ""
    return posixpath.normpath(posixpath.join(workdir, path)) if workdir else path


def _component(value: str) -> str:
    value = value.replace("/", "_")
    return "_" * len(value) if value and set(value) == {"."} else value


def placement_problem(
    path: str, *, workdir: str, user: str, roots: Iterable[str], refused: Iterable[str]
) -> str | None:
    """Why the file ``path`` names (a pattern without :func:`pattern_problem`, checked
    as text, its ``%u`` filled in with ``user``) may not lie where it does, for a job
    that starts in ``workdir`` ('': its own fresh directory); None when it may.
    ``roots`` are the owner's trees and ``refused`` the portal's. (A plain file name
    without a workdir is the job's own directory's: the caller checks it is none of the
    portal's own files there.)"""
    if path == DISCARD:
        return None
    path = (
        path.replace("\\", "")
        if "\\" in path
        else _PATTERN.sub(lambda found: _component(user) if found[2] == "u" else found[0], path)
    )
    if not path.startswith("/"):
        if workdir:
            return _tree_problem(posixpath.normpath(posixpath.join(workdir, path)), roots, refused)
        if "/" in path:
            return (
                f"{path} lies in a subdirectory of the job's own fresh directory, which has none: without a "
                "workdir (-D) give a file name (out-%j.txt), or an absolute path."
            )
        return None
    if posixpath.normpath(path) != path or "//" in path:
        return f"{path} has '..', '.' or '//' parts; give the path without them."
    return _tree_problem(path, roots, refused)


def _tree_problem(full: str, roots: Iterable[str], refused: Iterable[str]) -> str | None:
    tree = posixpath.dirname(full)
    roots = list(roots)
    if not any(_inside(tree, root) for root in roots):
        return f"A job's files may lie only under {', '.join(roots) or 'nowhere'}; {full} does not."
    if any(_inside(tree, own) for own in refused):
        return f"{full} lies in the portal's own files."
    return None


def _inside(path: str, tree: str) -> bool:
    return path == tree or tree == "/" or path.startswith(tree.rstrip("/") + "/")
