"""The Files page's and API's operations: list, download, make a folder, delete (uploads:
:mod:`scheduler.files.uploads`). Each one checks the path as text, then runs the files
agent as the user (:mod:`scheduler.files.acting`), which checks it again where it really
is and does the work; nothing here reads or writes a user's file itself.

Which folders a user may reach: their roots, ``JOB_WORKDIR_ROOTS`` with ``{user}`` as their
cluster user name (where their jobs may start, so every job's working directory lies in
one), never the portal's own trees (:func:`scheduler.jobs.workdir.workdir_bounds`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from django.conf import settings

from scheduler.backends.user_paths import inside
from scheduler.files.acting import Actor, FilesError, actor_for, agent_argv
from scheduler.files.agent import CHUNK, kind_of
from scheduler.jobs.workdir import workdir_bounds

#: The longest path accepted (Linux's PATH_MAX).
MAX_PATH = 4096
#: The longest head line the agent writes; anything longer is not the agent talking.
MAX_HEAD = 1 << 16
_F_SETPIPE_SZ = 1031


def clean_path(value: object, field: str = "path") -> str:
    """``value`` as an absolute, normalised path, or :class:`FilesError` (400) naming ``field``.

    ``..`` is refused outright rather than resolved: a path names a place in the user's
    folders, never a way out of one."""
    if not isinstance(value, str) or not value.strip():
        raise FilesError(400, "A path is required.", field)
    if len(value) > MAX_PATH or any(ord(char) < 32 or char == "\x7f" for char in value):
        raise FilesError(400, f"A path has at most {MAX_PATH} characters and no control characters.", field)
    if not value.startswith("/"):
        raise FilesError(400, f"{value!r} is not an absolute path (it must start with /).", field)
    if ".." in value.split("/"):
        raise FilesError(400, f"{value!r} contains '..': name the folder itself.", field)
    return os.path.normpath(value)


def roots_of(actor: Actor) -> list[str]:
    """The top folders ``actor`` may reach through the portal."""
    return list(workdir_bounds(actor.user).roots)


def within_roots(actor: Actor, path: str, field: str = "path") -> list[str]:
    """``actor``'s roots, once ``path`` is seen to lie in one as written (the agent checks
    where it really lies); :class:`FilesError` (403) otherwise."""
    roots = roots_of(actor)
    if not any(inside(path, root) for root in roots):
        raise FilesError(403, f"{path} lies outside your folders ({', '.join(roots)}).", field)
    return roots


@dataclass
class AgentCall:
    """One run of the files agent: its process, and the head line it answered."""

    process: subprocess.Popen[bytes]
    head: dict[str, Any] = field(default_factory=dict)

    @property
    def stdout(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout

    def read_head(self, what: str = "") -> dict[str, Any]:
        """The next head line; :class:`FilesError` with the agent's status when it refused,
        503 when no agent answered (``sudo`` refused, or it crashed)."""
        line = self.stdout.readline(MAX_HEAD)
        try:
            head = json.loads(line) if line.endswith(b"\n") else None
        except ValueError:
            head = None
        if not isinstance(head, dict):
            self.close(keep_stderr=True)
            said = self.process.stderr.read(4096).decode(errors="replace").strip() if self.process.stderr else ""
            self.close()
            raise FilesError(503, f"The portal could not act as your cluster user{what}: {said or 'no answer'}.")
        if not head.get("ok", True):
            self.close()
            message = str(head.get("error", "refused"))
            name, colon, rest = message.partition(": ")
            if colon and name in ("path", "name", "file"):
                raise FilesError(int(head.get("status", 400)), rest[:1].upper() + rest[1:], name)
            raise FilesError(int(head.get("status", 400)), message)
        self.head = head
        return head

    def read_json_line(self) -> Any:
        """The next line of the body, as JSON (None at its end, or if it is not JSON)."""
        try:
            return json.loads(self.stdout.readline())
        except ValueError:
            return None

    def chunks(self) -> Iterator[bytes]:
        """The rest of the agent's output, as it comes; the agent is stopped when the
        consumer stops early (a client that went away)."""
        finished = False
        try:
            while data := self.stdout.read1(CHUNK):  # type: ignore[attr-defined]
                yield data
            finished = True
        finally:
            self.close(stop=not finished)

    def close(self, *, stop: bool = False, keep_stderr: bool = False) -> None:
        """Close the pipes and reap the agent; idempotent. Its stdin closed, an agent
        ends at once (an upload not committed is removed first, so it is not killed
        unless ``stop``: a download nobody reads any more)."""
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        if stop and self.process.poll() is None:
            self.process.kill()
        self.process.wait()  # blocking: a wait with a timeout polls, sleeping up to 50 ms
        if self.process.stderr is not None and not keep_stderr:
            self.process.stderr.close()


def start_agent(actor: Actor, request: dict[str, Any], *, keep_stdin: bool = False) -> AgentCall:
    """Run the agent as ``actor`` on ``request`` (its op and fields), read its head.

    ``keep_stdin``: the caller sends more (an upload's frames); otherwise stdin is closed
    after the request line."""
    full = {
        **request,
        "uid": actor.uid,
        "gid": actor.gid,
        "refused": [str(tree) for tree in workdir_bounds(actor.user).refused],
    }
    process = subprocess.Popen(
        agent_argv(actor),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=CHUNK,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        close_fds=True,
    )
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError):  # fewer, larger reads for big files; best effort
        fcntl.fcntl(process.stdout.fileno(), _F_SETPIPE_SZ, CHUNK)
    call = AgentCall(process)
    try:
        process.stdin.write(json.dumps(full).encode() + b"\n")
        process.stdin.flush()
        if not keep_stdin:
            process.stdin.close()
    except BrokenPipeError:
        pass  # it already answered (or died): its head says which
    call.read_head()
    return call


# -- the operations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a folder, as listed (links not followed)."""

    name: str
    type: str
    size: int
    mtime: datetime
    permissions: str


@dataclass(frozen=True, slots=True)
class Listing:
    path: str
    roots: list[str]
    entries: list[Entry]
    truncated: bool
    skipped: int

    @property
    def parent(self) -> str | None:
        """The folder above, when it still lies in a root (None at a root's top)."""
        above = os.path.dirname(self.path)
        return above if above != self.path and any(inside(above, root) for root in self.roots) else None


def list_folder(user: object, path: object) -> Listing:
    """The entries of the folder ``path``: folders first, then by name."""
    actor = actor_for(user)
    path = clean_path(path)
    roots = within_roots(actor, path)
    call = start_agent(
        actor, {"op": "list", "path": path, "roots": roots, "max_entries": settings.FILES_LIST_MAX_ENTRIES}
    )
    try:
        rows, end = call.read_json_line(), call.read_json_line()
    finally:
        call.close()
    if not isinstance(rows, list) or not isinstance(end, dict) or not end.get("end"):
        raise FilesError(503, f"The listing of {path} was cut short.")
    entries = [
        Entry(name, kind_of(mode), size, datetime.fromtimestamp(mtime, tz=UTC), stat.filemode(mode))
        for name, mode, size, mtime in rows
    ]
    entries.sort(key=lambda e: (e.type != "folder", e.name.casefold(), e.name))
    return Listing(path, roots, entries, bool(end.get("truncated")), int(end.get("skipped", 0)))


@dataclass(frozen=True, slots=True)
class Download:
    """What a download sends: a file, or a folder as a ``.tar`` archive, as it streams."""

    filename: str
    content_type: str
    size: int | None
    chunks: Iterator[bytes]


def open_download(user: object, path: object) -> Download:
    """Start sending ``path``: a file's bytes, or a folder as a tar archive (refused with
    413 over ``FILES_ARCHIVE_MAX_BYTES``/``_ENTRIES``). Devices, FIFOs and sockets: 400."""
    actor = actor_for(user)
    path = clean_path(path)
    request = {
        "op": "get",
        "path": path,
        "roots": within_roots(actor, path),
        "max_bytes": settings.FILES_ARCHIVE_MAX_BYTES,
        "max_entries": settings.FILES_ARCHIVE_MAX_ENTRIES,
    }
    call = start_agent(actor, request)
    head = call.head
    if head.get("kind") == "folder":
        return Download(f"{head['name']}.tar", "application/x-tar", None, call.chunks())
    return Download(str(head["name"]), "application/octet-stream", int(head["size"]), call.chunks())


def make_folder(user: object, path: object, name: object) -> str:
    """Make the folder ``name`` in ``path``; its full path."""
    actor = actor_for(user)
    path = clean_path(path)
    call = start_agent(actor, {"op": "mkdir", "path": path, "roots": within_roots(actor, path), "name": name})
    call.close()
    return os.path.join(path, str(name))


def delete_entry(user: object, path: object, *, recursive: bool) -> str:
    """Delete what ``path`` names (a folder only when empty, unless ``recursive``); what
    it was (``file``, ``folder``, ``link``...)."""
    actor = actor_for(user)
    path = clean_path(path)
    call = start_agent(
        actor, {"op": "delete", "path": path, "roots": within_roots(actor, path), "recursive": recursive}
    )
    call.close()
    return str(call.head["deleted"])
