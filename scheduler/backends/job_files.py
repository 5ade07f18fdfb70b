"""The files a job brings (a training script, a config): small text files sent with the
submission, written into the job's working directory by the job itself, first thing.

Why by the job and not by the portal: on Slurm and Kubernetes the working directory is
on the cluster, where only the job (as its owner) can write; a few lines of shell in
front of its command put the files there on every backend alike, with the owner's
permissions, and need no shared file system between the portal and the nodes. Each file
travels base64-encoded in a quoted here-document, so no byte of it is ever read by a
shell as code.

Names are relative paths without ``..`` (``train.py``, ``conf/base.yaml``); a file
replaces one of the same name in the working directory, except the backends' own files
there (:data:`RESERVED_NAMES`, anything named :data:`RESERVED_PREFIX`...), which no job file
may replace: it would change what the job runs, or how its files are written.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
from collections.abc import Mapping

from scheduler.backends.local_runner import SCRIPT_FILE, SETUP_FILE

#: The here-document's end marker; base64 text never contains it.
_END = "QM_FILE_END"
#: The start of every name the backends give a file of their own in a job's working
#: directory (the local runner's file writer, Slurm's per-rank script): never a job file's.
RESERVED_PREFIX = ".qm-"
#: The local runner's own files in the job's directory, which a job file would replace.
RESERVED_NAMES = frozenset({SCRIPT_FILE, SETUP_FILE})


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a job file's name, or None."""
    if not name or len(name) > 255 or name.startswith("/") or "\\" in name:
        return f"{name!r} is not a relative file name"
    if any(ord(c) < 32 for c in name):
        return f"{name!r} has control characters"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts) or posixpath.normpath(name) != name:
        return f"{name!r} must be a plain relative path (no '..', '.', or empty parts)"
    if parts[0] in RESERVED_NAMES or parts[0].startswith(RESERVED_PREFIX):
        return (
            f"{name!r} is the name of one of the portal's own files in the job's directory "
            f"({', '.join(sorted(RESERVED_NAMES))}, {RESERVED_PREFIX}*); choose another"
        )
    return None


def prelude(files: Mapping[str, str], *, fresh_dir: str = "") -> str:
    """Shell lines that make the job's working directory (``fresh_dir``: create and enter
    that one first) and write ``files`` into it; empty when there is nothing to do."""
    lines = []
    if fresh_dir:
        quoted = shlex.quote(fresh_dir)
        lines.append(f"mkdir -p {quoted} && cd {quoted}")
    for name in sorted(files):
        parent = posixpath.dirname(name)
        if parent:
            lines.append(f"mkdir -p {shlex.quote(parent)}")
        encoded = base64.encodebytes(files[name].encode("utf-8")).decode("ascii")
        lines.append(f"base64 -d > {shlex.quote(name)} <<'{_END}'\n{encoded}{_END}")
    return "".join(f"{line}\n" for line in lines)
