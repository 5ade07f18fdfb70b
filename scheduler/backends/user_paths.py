"""Opening a path a user named, at the moment of use, as that user: the one home for it.

A path a job's owner gives (a ``workdir``, later a file to list or download) is theirs to
change at any moment: checked as text when submitted, it may be a symlink to ``/proc``, to
the portal's tree or to another user's directory by the time a runner mounts or enters it,
and a link swapped between a check and a use defeats any check made on the name. So the
name is never used twice. It is opened once, by the kernel, as the owner's identity (their
permissions decide what they may reach, never the portal's), and what is used afterwards
is that open file descriptor: its real location, read back from the descriptor itself, is
what is checked against the owner's roots and the portal's own trees, and a sandbox binds
the descriptor (``bwrap --bind-fd``) or a process enters it (``/proc/self/fd/N``), so
nothing can swap what was checked for something else.

Roots are the site's (``JOB_WORKDIR_ROOTS``, ``{user}`` filled in): a symlink on the way to
a root counts only when root owns it (``/home -> /data/home``), since a user's own link at
``/scratch/alice`` would otherwise move their root anywhere.

Stdlib only: the local runner imports it before anything else is loaded.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any


class UnsafePath(Exception):
    """The path cannot be used: it does not exist for its owner, or it really lies outside
    their roots or inside the portal's own files. The message says which, for the owner;
    ``errno`` is the kernel's answer when opening it failed (None: it opened, and lies
    where it may not)."""

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


@dataclass(frozen=True, slots=True)
class OpenedDir:
    """A directory held open by descriptor (``O_PATH``), and where it really is."""

    fd: int
    real: str

    @property
    def proc_path(self) -> str:
        """A name for the directory that cannot be redirected: the kernel resolves it to
        the descriptor's own file, in this process and in a child that inherits the fd."""
        return f"/proc/self/fd/{self.fd}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def inside(path: str, tree: str) -> bool:
    """Whether ``path`` is ``tree`` or lies below it (both absolute, normalised)."""
    return path == tree or tree == "/" or path.startswith(tree.rstrip("/") + "/")


def trusted_real(root: str) -> str:
    """``root`` with the symlinks on its way resolved, as long as root owns each one;
    from the first link anyone else owns on, the rest of the path is taken as written
    (so it can only name itself, never somewhere its owner pointed it)."""
    parts = PurePosixPath(os.path.normpath(root)).parts[1:]
    real = "/"
    for index, part in enumerate(parts):
        candidate = os.path.join(real, part)
        try:
            info = os.lstat(candidate)
        except OSError:
            return os.path.join(real, *parts[index:])
        if os.path.islink(candidate):
            if info.st_uid != 0:
                return os.path.join(real, *parts[index:])
            candidate = os.path.realpath(candidate)
        real = candidate
    return real


@contextlib.contextmanager
def acting_as(identity: dict[str, Any] | None) -> Iterator[None]:
    """Within the block, file access is checked as ``identity`` (uid, gid, no other
    groups), when this process is root and has one; otherwise as this process.

    Only the effective ids change (``setegid``/``seteuid``), and they are put back on
    the way out, errors included. The caller must be single-threaded while in the block:
    the ids are the whole process's.
    """
    if identity is None or os.geteuid() != 0:
        yield
        return
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(int(identity["gid"]))
    try:
        os.seteuid(int(identity["uid"]))
        try:
            yield
        finally:
            os.seteuid(0)
    finally:
        os.setegid(0)
        os.setgroups(groups)


def open_user_dir(
    path: str,
    *,
    roots: Sequence[str],
    refused: Sequence[str] = (),
    identity: dict[str, Any] | None = None,
    holding: bool = True,
) -> OpenedDir:
    """Open the directory ``path`` names now, as ``identity``, and check where it really is.

    Returns an :class:`OpenedDir` the caller must close. Raises :class:`UnsafePath` when
    the owner cannot open it (missing, not a directory, no permission: said alike, as the
    owner's own ``cd`` would fail), when its real location is outside every root, or when
    it lies in one of the ``refused`` trees (the portal's own files) or, ``holding`` (a
    directory a job starts in, which a sandbox binds whole), holds one.
    """
    try:
        with acting_as(identity):
            fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UnsafePath(f"{path} cannot be opened as the job's user: {exc.strerror}") from None
    opened = OpenedDir(fd, os.readlink(f"/proc/self/fd/{fd}"))
    try:
        _check_real(path, opened.real, roots, refused, holding=holding)
    except UnsafePath:
        opened.close()
        raise
    return opened


@dataclass(frozen=True, slots=True)
class OpenedPath:
    """Whatever a path named, held open by descriptor (``O_PATH``: opening it had no
    effect, even on a device or a FIFO), where it really is, and its ``fstat``."""

    fd: int
    real: str
    info: os.stat_result

    @property
    def proc_path(self) -> str:
        """See :attr:`OpenedDir.proc_path`: reopening this name reopens this very file."""
        return f"/proc/self/fd/{self.fd}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def open_user_path(
    path: str,
    *,
    roots: Sequence[str],
    refused: Sequence[str] = (),
    identity: dict[str, Any] | None = None,
) -> OpenedPath:
    """Open what ``path`` names now (a file or a directory, links followed as the owner's
    own ``ls`` would follow them), as ``identity``, by ``O_PATH``, and check where it
    really is, as :func:`open_user_dir` does (a directory that holds the portal's files is
    allowed: only what lies in them is refused).

    Returns an :class:`OpenedPath` the caller must close; what is read or written
    afterwards goes through its descriptor (``openat``, or :attr:`OpenedPath.proc_path`),
    never through the name again. Raises :class:`UnsafePath`, with ``errno`` set when the
    owner could not open it.
    """
    try:
        with acting_as(identity):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise UnsafePath(f"{path} cannot be opened as its owner: {exc.strerror}", errno=exc.errno) from None
    try:
        opened = OpenedPath(fd, os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd))
        _check_real(path, opened.real, roots, refused, holding=False)
    except BaseException:
        os.close(fd)
        raise
    return opened


def open_user_file(
    path: str,
    *,
    roots: Sequence[str],
    refused: Sequence[str] = (),
    identity: dict[str, Any] | None = None,
    truncate: bool = True,
    home: str = "",
) -> int:
    """Open the file ``path`` names for the job to write to (appending; emptied first
    when ``truncate``), creating it if need be, as ``identity``, and return the
    descriptor (the caller closes it). ``path`` is absolute, or a file name in ``home``,
    the job's own directory (made by the runner, so trusted as it is).

    As :func:`open_user_dir`: the directory is opened once, as ``identity``, and where it
    really is must lie under one of ``roots`` and outside the ``refused`` trees; the file
    is then opened in that very directory (``openat``), as ``identity``, and must be a
    regular file, not a link (``O_NOFOLLOW``: a link the job planted leads nowhere),
    nor a FIFO that would hold the runner up. Raises :class:`UnsafePath` saying why.
    """
    if path.startswith("/"):
        opened = open_user_dir(
            os.path.dirname(path) or "/", roots=roots, refused=refused, identity=identity, holding=False
        )
    else:
        opened = OpenedDir(os.open(home, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), home)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        with acting_as(identity):
            fd = os.open(os.path.basename(path), flags, 0o644, dir_fd=opened.fd)
    except OSError as exc:
        reason = "it is a symbolic link, which is not followed" if exc.errno == errno.ELOOP else exc.strerror
        raise UnsafePath(f"{path} cannot be opened for writing as the job's user: {reason}") from None
    finally:
        opened.close()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_real(path: str, real: str, roots: Sequence[str], refused: Sequence[str], *, holding: bool = True) -> None:
    """Refuse ``real`` (where ``path`` really is) outside every root, or in a ``refused``
    tree (or, ``holding``, above one: a directory a sandbox would bind)."""
    where = path if real == path else f"{path} (really {real})"
    if not real.startswith("/"):  # a descriptor of something unreachable by path (deleted, another mount ns)
        raise UnsafePath(f"{path} is no longer reachable on this machine")
    for tree in refused:
        own = os.path.realpath(tree)
        if inside(real, own):
            raise UnsafePath(f"{where} lies in the portal's own files")
        if holding and inside(own, real):
            raise UnsafePath(f"{where} holds or lies in the portal's own files")
    # Both: the name must be one of the owner's as written, and so must where it leads.
    if not any(inside(path, root) and inside(real, trusted_real(root)) for root in roots):
        raise UnsafePath(f"{where} lies outside {', '.join(roots) or 'every directory a job may use'}")
