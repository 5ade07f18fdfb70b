"""The files agent: one filesystem operation for the Files page and API, run AS the user.

The portal never reads or writes a researcher's files itself. For each operation it starts
this program as the user's cluster identity (``scheduler.files.acting``: dropped to their
uid here when the portal is root, ``sudo -n -u <user>`` under the rule in
``deploy/sudoers.d/quartermaster`` when it is a service user, or directly when the user is
the portal's own uid), so the kernel checks every access with *their* permissions, and
another user's files stay as closed to the portal as they are to that user's shell.

Every path is opened once, by descriptor, through :mod:`scheduler.backends.user_paths`,
and its real location (read back from the descriptor) must lie under one of the user's
roots and outside the portal's own trees; what is read, written or listed afterwards goes
through that descriptor, so a symlink swapped in between a check and a use changes
nothing. Names inside a folder are opened with ``O_NOFOLLOW``. Devices, FIFOs and sockets
are never opened for reading (``O_PATH`` first, then only a regular file is reopened).

Protocol (stdin/stdout; stderr only for a crash):

1. stdin, first line: the request, one JSON object: ``op`` (``list``, ``get``, ``put``,
   ``delete``, ``mkdir``), ``path``, ``roots``, ``refused``, the identity (``uid``,
   ``gid``: used only when this process is root), and the op's own fields.
2. stdout, first line: the answer's head, one JSON object: ``{"ok": true, ...}`` or
   ``{"ok": false, "status": 4xx, "error": "..."}`` (then the agent exits 1).
3. Then the body: ``list``: one line, a JSON array of ``[name, st_mode, size, mtime]``,
   and a last line ``{"end": true, ...}``;
   ``get``: a file's bytes (exactly ``size``), or a folder as a tar stream; ``put``: reads
   frames from stdin (8-byte big-endian length, then that many bytes; length 0 ends the
   file), answers ``{"ok": true, "staged": true, "size": N}``, then reads one byte: ``C``
   puts the file in place (one more head line says how it went), anything else (or
   nothing) removes it. Until ``C`` the upload is a hidden temporary file, so a request
   refused afterwards (CSRF) leaves nothing behind.

Stdlib only, everything imported before the identity is dropped: the portal's Python may
live where the user cannot read (a pyenv under /root).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import IO, Any, NoReturn


def _load_user_paths() -> None:
    """Load the one module the agent needs by its file, when run as a file (``python -I
    -S agent.py``): its package's ``__init__`` would load the backends' protocol (60 ms
    of every listing)."""
    name = "scheduler.backends.user_paths"
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backends", "user_paths.py")
    module = sys.modules[name] = types.ModuleType(name)
    module.__file__ = path
    with open(path, encoding="utf-8") as source:
        exec(compile(source.read(), path, "exec"), module.__dict__)


if __name__ == "__main__":
    _load_user_paths()

from scheduler.backends.user_paths import OpenedPath, UnsafePath, inside, open_user_path  # noqa: E402

#: How much is read or written at once.
CHUNK = 1 << 20
#: The frame header of an upload's chunks: a big-endian unsigned 64-bit length.
FRAME = struct.Struct(">Q")
#: Linux's prctl option that lets this process read its own /proc entries after setuid.
_PR_SET_DUMPABLE = 4
#: The most bytes a file name may have (Linux's NAME_MAX).
NAME_MAX = 255


class Refused(Exception):
    """The operation cannot be done; ``status`` is the HTTP status the portal answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# -- who this process is ------------------------------------------------------------------


def become(uid: int | None, gid: int | None) -> None:
    """Drop to ``uid``/``gid`` for good (no other groups) when this process is root;
    otherwise this process must already be that uid (sudo made it so, or the user is the
    portal's own uid). Never root."""
    if uid is None:
        raise Refused(403, "no cluster identity to act as")
    if uid == 0 or gid == 0:
        raise Refused(403, "the files agent never acts as root")
    if os.geteuid() == 0:
        import ctypes

        os.setgroups([])
        os.setresgid(gid or uid, gid or uid, gid or uid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid, uid, uid):
            raise Refused(403, f"could not become uid {uid}")
        # setuid made this process undumpable, which hides /proc/self/fd from it on some
        # kernels; it is the user's own process now, so let it read its own descriptors.
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    elif os.geteuid() != uid:
        raise Refused(403, f"the files agent runs as uid {os.geteuid()}, not as the user's uid {uid}")
    os.umask(0o022)


# -- names and places ----------------------------------------------------------------------


def check_name(name: object, field: str = "name") -> str:
    """A single file or folder name: no ``/``, not ``.`` or ``..``, no NUL, <= 255 bytes."""
    if not isinstance(name, str) or not name:
        raise Refused(400, f"{field}: a name is required")
    if "/" in name or "\0" in name or name in (".", ".."):
        raise Refused(400, f"{field}: {name!r} is not a plain file name (no '/', not '.' or '..')")
    if len(name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        raise Refused(400, f"{field}: a name has at most {NAME_MAX} bytes")
    return name


def open_checked(request: dict[str, Any], path: str) -> OpenedPath:
    """``path`` opened by descriptor and checked (see the module docstring)."""
    try:
        return open_user_path(path, roots=request["roots"], refused=request["refused"])
    except UnsafePath as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise Refused(404, f"{path} does not exist") from None
        if exc.errno is not None and exc.errno not in (errno.EACCES, errno.EPERM, errno.ELOOP):
            raise Refused(400, str(exc)) from None
        raise Refused(403, str(exc)) from None


def open_folder(request: dict[str, Any], path: str) -> OpenedPath:
    opened = open_checked(request, path)
    if not stat.S_ISDIR(opened.info.st_mode):
        opened.close()
        raise Refused(400, f"path: {path} is not a folder")
    return opened


def reopen(opened: OpenedPath, flags: int) -> int:
    """The very file ``opened`` holds, opened again for use (the kernel checks the user's
    permission now; the name is never looked up again)."""
    try:
        return os.open(opened.proc_path, flags | os.O_CLOEXEC)
    except OSError as exc:
        raise Refused(403, f"{opened.real} cannot be read as its owner: {exc.strerror}") from None


#: What an entry is, by its file type bits, in the words the API uses.
KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "folder",
    stat.S_IFLNK: "link",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "device",
    stat.S_IFBLK: "device",
}


def kind_of(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "other")


def in_refused(request: dict[str, Any], real: str) -> bool:
    return any(inside(real, os.path.realpath(tree)) for tree in request["refused"])


# -- output ---------------------------------------------------------------------------------


def say(out: IO[bytes], head: dict[str, Any]) -> None:
    out.write(json.dumps(head).encode() + b"\n")
    out.flush()


# -- the operations --------------------------------------------------------------------------


def do_list(request: dict[str, Any], out: IO[bytes]) -> None:
    """The folder's entries, as they are (links not followed), at most ``max_entries``:
    one line holding a JSON array of ``[name, st_mode, size, mtime]`` (one document, so
    the C encoder writes 10,000 entries in a few milliseconds), then the end line."""
    path = request["path"]
    opened = open_folder(request, path)
    try:
        readable = reopen(opened, os.O_RDONLY | os.O_DIRECTORY)
    finally:
        opened.close()
    limit = int(request.get("max_entries") or 0)
    say(out, {"ok": True, "path": path, "real": opened.real})
    rows: list[tuple[str, int, int, float]] = []
    skipped, truncated = 0, False
    with os.scandir(readable) as entries:
        for entry in entries:
            if limit and len(rows) >= limit:
                truncated = True
                break
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                skipped += 1  # gone since
                continue
            rows.append((entry.name, info.st_mode, info.st_size, info.st_mtime))
    os.close(readable)
    try:
        body = json.dumps(rows, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a name that is not UTF-8 cannot be addressed: left out
        kept = [row for row in rows if _is_utf8(row[0])]
        skipped += len(rows) - len(kept)
        body = json.dumps(kept, ensure_ascii=False).encode()
    out.write(body + b"\n")
    say(out, {"end": True, "truncated": truncated, "skipped": skipped})


def _is_utf8(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def do_get(request: dict[str, Any], out: IO[bytes]) -> None:
    """A regular file's bytes, or a folder as a tar stream; anything else is refused."""
    path = request["path"]
    opened = open_checked(request, path)
    try:
        mode = opened.info.st_mode
        if stat.S_ISDIR(mode):
            send_folder(request, opened, out)
        elif stat.S_ISREG(mode):
            send_file(opened, out)
        else:
            raise Refused(400, f"path: {path} is a {kind_of(mode)}, not a file or folder: it cannot be downloaded")
    finally:
        opened.close()


def send_file(opened: OpenedPath, out: IO[bytes]) -> None:
    fd = reopen(opened, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        say(out, {"ok": True, "kind": "file", "name": os.path.basename(opened.real), "size": size})
        copy_exactly(fd, out, size)
    finally:
        os.close(fd)


def copy_exactly(fd: int, out: IO[bytes], size: int) -> None:
    """``size`` bytes of ``fd`` to ``out`` (the kernel copies them where it can); a file
    that shrank meanwhile ends the stream short, which the client sees as cut."""
    out.flush()
    target = out.fileno()
    sent = 0
    try:
        while sent < size:
            count = os.sendfile(target, fd, sent, min(CHUNK * 8, size - sent))
            if count == 0:
                raise Refused(409, "the file shrank while it was being sent")
            sent += count
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS):
            raise
        os.lseek(fd, sent, os.SEEK_SET)
        while sent < size and (data := os.read(fd, min(CHUNK, size - sent))):
            out.write(data)
            sent += len(data)
        out.flush()


def send_folder(request: dict[str, Any], opened: OpenedPath, out: IO[bytes]) -> None:
    """The folder as a tar stream, after a first walk checked its size against the limits."""
    import tarfile

    max_entries, max_bytes = int(request["max_entries"]), int(request["max_bytes"])
    entries = total = 0
    for _rel, info, _fd in walk(request, opened):
        entries += 1
        total += info.st_size if stat.S_ISREG(info.st_mode) else 0
        if entries > max_entries:
            raise Refused(413, f"path: the folder holds more than {max_entries} entries, the most an archive may hold")
        if total > max_bytes:
            raise Refused(413, f"path: the folder holds more than {max_bytes} bytes, the most an archive may hold")
    name = os.path.basename(opened.real) or "root"
    say(out, {"ok": True, "kind": "folder", "name": name, "entries": entries, "bytes": total})
    options: dict[str, Any] = {"format": tarfile.PAX_FORMAT, "bufsize": CHUNK, "copybufsize": CHUNK}
    sent = 0
    with tarfile.open(fileobj=out, mode="w|", **options) as archive:
        for rel, info, fd in walk(request, opened, open_files=True):
            sent += info.st_size if isinstance(fd, int) else 0
            if sent > max_bytes:  # files grew since they were counted: cut, never exceed
                raise Refused(413, f"path: the folder grew past {max_bytes} bytes while it was archived")
            member = tarfile.TarInfo(f"{name}/{rel}")
            member.mode, member.mtime = stat.S_IMODE(info.st_mode), int(info.st_mtime)
            if stat.S_ISDIR(info.st_mode):
                member.type = tarfile.DIRTYPE
                archive.addfile(member)
            elif stat.S_ISLNK(info.st_mode):
                member.type, member.linkname = tarfile.SYMTYPE, str(fd)  # the link's text, never its target
                archive.addfile(member)
            elif isinstance(fd, int):
                member.size = info.st_size
                with os.fdopen(fd, "rb", buffering=0) as source:
                    archive.addfile(member, Exactly(source, info.st_size))


class Exactly:
    """A file read as if it had ``size`` bytes: cut when it grew, padded with zeros when it
    shrank since it was measured (a tar member's size is written before its content)."""

    def __init__(self, source: IO[bytes], size: int) -> None:
        self.source, self.left = source, size

    def read(self, count: int = -1) -> bytes:
        count = self.left if count < 0 else min(count, self.left)
        data = self.source.read(count) or b""
        data += b"\0" * (count - len(data))
        self.left -= len(data)
        return data


def walk(
    request: dict[str, Any], top: OpenedPath, *, open_files: bool = False
) -> Iterator[tuple[str, os.stat_result, int | str | None]]:
    """Everything below ``top``, depth first: ``(relative name, lstat, extra)``, where
    extra is an open descriptor of a regular file (``open_files``; the caller closes it),
    a link's text, or None. Every folder and file is opened by name in its parent's
    descriptor with ``O_NOFOLLOW``, as the user; what they may not read, special files and
    the portal's own trees are left out."""
    root_fd = reopen(top, os.O_RDONLY | os.O_DIRECTORY)
    yield from _walk(request, root_fd, top.real, "", open_files)


def _walk(
    request: dict[str, Any], dir_fd: int, real: str, rel: str, open_files: bool
) -> Iterator[tuple[str, os.stat_result, int | str | None]]:
    try:
        with os.scandir(dir_fd) as found:
            names = sorted(entry.name for entry in found)
        for name in names:
            where, path = f"{real.rstrip('/')}/{name}", f"{rel}{name}"
            if in_refused(request, where):
                continue
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                try:
                    child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                except OSError:
                    continue
                yield path, info, None
                yield from _walk(request, child, where, f"{path}/", open_files)
            elif stat.S_ISLNK(info.st_mode):
                try:
                    yield path, info, os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    continue
            elif stat.S_ISREG(info.st_mode):
                if not open_files:
                    yield path, info, None
                    continue
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                try:
                    fd = os.open(name, flags, dir_fd=dir_fd)
                except OSError:
                    continue
                now = os.fstat(fd)
                if not stat.S_ISREG(now.st_mode):  # swapped for a FIFO or device since
                    os.close(fd)
                    continue
                yield path, now, fd
    finally:
        os.close(dir_fd)


def do_put(request: dict[str, Any], out: IO[bytes], source: IO[bytes]) -> None:
    """Receive a file into the folder ``path`` as ``name`` (see the protocol above)."""
    name = check_name(request.get("name"), "file")
    limit = int(request["max_bytes"])
    folder = open_folder(request, request["path"])
    staged = f".qm-upload-{os.urandom(8).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd = os.open(staged, flags, 0o666, dir_fd=folder.fd)
        except OSError as exc:
            raise Refused(403, f"path: cannot write in {request['path']} as its owner: {exc.strerror}") from None
        try:
            say(out, {"ok": True})
            size = receive(source, fd, limit)
        except BaseException:
            os.close(fd)
            os.unlink(staged, dir_fd=folder.fd)
            raise
        os.close(fd)
        say(out, {"ok": True, "staged": True, "size": size})
        if source.read(1) != b"C":
            os.unlink(staged, dir_fd=folder.fd)
            return
        try:
            place(folder, staged, name, replace=bool(request.get("replace")))
        except BaseException:
            os.unlink(staged, dir_fd=folder.fd)
            raise
        say(out, {"ok": True, "name": name, "size": size})
    finally:
        folder.close()


def receive(source: IO[bytes], fd: int, limit: int) -> int:
    """Write the framed chunks of ``source`` to ``fd`` until the empty frame; refuse more
    than ``limit`` bytes and a stream cut short (the portal gave up)."""
    size = 0
    while True:
        head = source.read(FRAME.size)
        if len(head) != FRAME.size:
            raise Refused(400, "file: the upload was cut short")
        (length,) = FRAME.unpack(head)
        if length == 0:
            return size
        size += length
        if size > limit:
            raise Refused(413, f"file: larger than {limit} bytes, the most an upload may hold")
        while length:
            data = source.read(min(length, CHUNK))
            if not data:
                raise Refused(400, "file: the upload was cut short")
            os.write(fd, data)
            length -= len(data)


def place(folder: OpenedPath, staged: str, name: str, *, replace: bool) -> None:
    """Give the staged file its name: replacing a file of that name when ``replace``,
    atomically either way (a link never replaces a folder; a hard link fails if the name
    is taken, so two uploads never overwrite each other unasked)."""
    try:
        if replace:
            os.rename(staged, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
        else:
            os.link(staged, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd, follow_symlinks=False)
            os.unlink(staged, dir_fd=folder.fd)
    except FileExistsError:
        raise Refused(409, f"file: {name} already exists in this folder (replace it to overwrite)") from None
    except IsADirectoryError:
        raise Refused(409, f"file: {name} is a folder in this folder; it is not replaced by a file") from None


def do_delete(request: dict[str, Any], out: IO[bytes]) -> None:
    """Delete the entry ``path`` names (a link itself, never its target); a folder only
    empty unless ``recursive``. A root itself, and anything holding the portal's own
    files, is never deleted."""
    path = request["path"]
    if any(path == root.rstrip("/") for root in request["roots"]):
        raise Refused(400, f"path: {path} is one of your top folders; it cannot be deleted here")
    name = check_name(os.path.basename(path), "path")
    parent = open_folder(request, os.path.dirname(path))
    try:
        try:
            info = os.stat(name, dir_fd=parent.fd, follow_symlinks=False)
        except FileNotFoundError:
            raise Refused(404, f"{path} does not exist") from None
        real = f"{parent.real.rstrip('/')}/{name}"
        if any(inside(os.path.realpath(tree), real) for tree in request["refused"]):
            raise Refused(403, f"path: {path} holds the portal's own files")
        kind = kind_of(info.st_mode)
        remove(parent, name, kind, path, recursive=bool(request.get("recursive")))
        say(out, {"ok": True, "deleted": kind})
    finally:
        parent.close()


def remove(parent: OpenedPath, name: str, kind: str, path: str, *, recursive: bool) -> None:
    import shutil

    try:
        if kind != "folder":
            os.unlink(name, dir_fd=parent.fd)
        elif recursive:
            # by descriptor, never following a link, whatever is swapped in meanwhile
            shutil.rmtree(name, dir_fd=parent.fd)
        else:
            os.rmdir(name, dir_fd=parent.fd)
    except OSError as exc:
        if exc.errno == errno.ENOTEMPTY:
            raise Refused(409, f"path: {path} is not empty; confirm to delete it and everything in it") from None
        raise Refused(403, f"path: {path} cannot be deleted as its owner: {exc.strerror}") from None


def do_mkdir(request: dict[str, Any], out: IO[bytes]) -> None:
    name = check_name(request.get("name"))
    folder = open_folder(request, request["path"])
    try:
        os.mkdir(name, 0o777, dir_fd=folder.fd)
    except FileExistsError:
        raise Refused(409, f"name: {name} already exists in this folder") from None
    except OSError as exc:
        raise Refused(403, f"path: cannot make a folder in {request['path']} as its owner: {exc.strerror}") from None
    finally:
        folder.close()
    say(out, {"ok": True, "name": name})


OPERATIONS = {"list": do_list, "get": do_get, "delete": do_delete, "mkdir": do_mkdir}


def serve(source: IO[bytes], out: IO[bytes]) -> int:
    """Read the request, become the user, do the operation; the exit status."""
    try:
        try:
            request = json.loads(source.readline())
            load_for(request.get("op"))
            become(request.get("uid"), request.get("gid"))
            validate(request)
        except (ValueError, KeyError, TypeError) as exc:
            raise Refused(400, f"a malformed request to the files agent: {exc}") from None
        if request["op"] == "put":
            do_put(request, out, source)
        else:
            OPERATIONS[request["op"]](request, out)
    except Refused as exc:
        fail(out, exc.status, str(exc))
    except BrokenPipeError:
        return 1  # the portal went away (a client stopped a download)
    return 0


def load_for(op: object) -> None:
    """Import what ``op`` needs now, before the identity is dropped (see the docstring)."""
    # Loaded here, used by a local import later (which then reads no file).
    if op == "get":
        import tarfile  # noqa: F401
    elif op == "delete":
        import shutil  # noqa: F401


def validate(request: dict[str, Any]) -> None:
    if request.get("op") not in (*OPERATIONS, "put"):
        raise ValueError(f"unknown op {request.get('op')!r}")
    path = request.get("path")
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path or os.path.normpath(path) != path:
        raise ValueError("path must be absolute and normalised")
    for key in ("roots", "refused"):
        if not isinstance(request.get(key), list) or not all(isinstance(p, str) for p in request[key]):
            raise ValueError(f"{key} must be a list of paths")


def fail(out: IO[bytes], status: int, message: str) -> NoReturn:
    try:
        say(out, {"ok": False, "status": status, "error": message})
    finally:
        raise SystemExit(1)


def main(argv: Sequence[str] = ()) -> int:
    return serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
