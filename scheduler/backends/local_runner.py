"""Detached runner for one job of the ``local`` backend.

Usage: ``python -m scheduler.backends.local_runner JOB_DIR``.

Why a separate process: the worker that submits a job may die or restart at any moment,
yet the job must keep running, be held to its walltime and leave a result behind. So the
runner detaches from its caller (a double fork, on top of the new session the caller
gives it), runs the job's command in a process group of its own, and records everything
in files inside the job directory. Those files are all a later process needs to poll or
cancel the job.

Stdlib only: it must start fast and must not depend on Django or on the cluster config.
``local.py`` imports the file names and the small helpers below so both sides agree on
the layout of a job directory (documented in ``local.py``).

Contract with ``local.py``:

1. The first runner to create ``runner.claim`` (``O_EXCL``) runs the job; any other
   runner for the same directory exits 0 at once, so a duplicate launch is harmless.
2. ``runner.json`` (pid, start time, boot id) is written before the caller's ``wait()``
   returns and before the cancel marker is first checked, so a cancel either finds the
   runner to signal or is seen by the runner before it starts the command.
3. ``result.json`` is written exactly once, atomically, when the job ends for any
   reason the runner survives (exit, walltime, cancel, failure to start, runner error).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler.backends.user_paths import OpenedDir, UnsafePath, open_user_dir, open_user_file

SPEC_FILE = "spec.json"
SCRIPT_FILE = "job.sh"
#: Writes the files a job brought, run once before its ranks (in the job's own directory).
SETUP_FILE = ".qm-files.sh"
CLAIM_FILE = "runner.claim"
RUNNER_FILE = "runner.json"
STARTED_FILE = "started.json"
CANCEL_FILE = "cancel"
RESULT_FILE = "result.json"
OUTPUT_FILE = "output.log"
#: Each rank's stdout and stderr, whole and apart (:func:`rank_log_name`).
LOGS_DIR = "logs"
RUNNER_LOG_FILE = "runner.log"
#: The job's own directory (its working directory and home, the script in it), the only
#: place of the job directory the job sees; the runner's files stay out of its reach. A
#: job that runs unsandboxed as another uid has its own in ``homes_dir`` instead (local.py).
WORK_DIR = "work"
#: What a sandboxed job sees of this machine, read-only: the operating system. Not the
#: portal (its code, database, secrets, var/ tree), not /home, /opt or /srv, not other jobs.
SANDBOX_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")

#: How often the runner checks the walltime and the cancel marker, in seconds.
CHECK_INTERVAL = 0.1
#: How long, once the job's processes are gone, the runner waits for the last of its
#: output to be copied into the job's own files (longer only while a process that left
#: the job's group still holds its output open).
COPY_GRACE_SECONDS = 10.0
#: The only variables a job inherits from the worker that started it: enough for a
#: shell and common tools, and never the portal's own secrets (SECRET_KEY,
#: DATABASE_URL, broker credentials), which a job owner must not be able to read.
INHERITED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM")

_PROC = Path("/proc")

_signalled = False


def atomic_write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so readers see the old file or the whole new one, never half.

    Writes a temporary file in the same directory, fsyncs it, then ``os.replace``s it
    into place. Raises ``OSError`` on failure and leaves no temporary file behind.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """Return the JSON object in ``path``, or None if the file does not exist.

    Raises ``ValueError`` if the file holds something other than a JSON object and
    ``OSError`` for any other failure to read it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def boot_id() -> str:
    """This machine's boot id ('' where the OS does not expose one).

    Recorded next to each pid: a pid from an earlier boot names nothing we started.
    """
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of ``pid`` from /proc, or None if gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may itself contain them.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot; None where /proc is unavailable.

    Together with the pid it identifies a process even after the pid is reused.
    """
    if not (_PROC / "self/stat").exists():
        return None
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def process_alive(pid: int, start_ticks: int | None) -> bool:
    """Whether the process ``pid`` that started at ``start_ticks`` is still running.

    A zombie counts as dead (it has exited; only its parent has not reaped it), and so
    does a live process whose start time differs (the pid was reused).
    """
    if (_PROC / "self/stat").exists():
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return False
        return start_ticks is None or stat[1] == start_ticks
    try:  # No /proc (macOS): fall back to the pid alone.
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _on_signal(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT mean "cancel": only set a flag; the main loop does the work."""
    global _signalled
    _signalled = True


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop(children: list[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM the job's process group (every rank), then SIGKILL it if a rank outlives
    ``grace``."""
    group = children[0].pid
    _killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    try:
        for child in children:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _killpg(group, signal.SIGKILL)
        for child in children:
            child.wait()


def inherited_environment() -> dict[str, str]:
    """The part of this process's environment a job may see (see ``INHERITED_ENV``)."""
    return {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}


def sandbox_argv(
    bwrap: str,
    work: Path,
    shared: list[str],
    identity: dict[str, Any] | None,
    *,
    workdir: tuple[OpenedDir, str] | None = None,
    readonly: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command a job runs under: the system directories read-only, its own
    work directory (and the site's ``shared`` paths) writable, a private /tmp, its own
    PID namespace (no other process, the portal's included, is in its /proc, so no
    ``/proc/<pid>/environ`` to read) and the machine's GPU devices.

    ``readonly`` paths (a session's apps environment) are bound read-only, last, so that
    a writable shared path above one cannot make it writable; the directories above them
    are made empty in the sandbox (the portal's tree around an apps environment stays
    out of sight).

    With an ``identity`` (the runner is root) bubblewrap sets the sandbox up as root,
    which needs no access for the job's user to the directories above its own, and the
    job then starts through ``setpriv`` as that uid/gid, with no supplementary groups, no
    capabilities and ``no_new_privs`` (a setuid program such as sudo gains nothing).

    The job stays in the runner's process group, so the runner's SIGTERM and SIGKILL
    reach all of it. bubblewrap itself must outlive a SIGTERM (its death would kill the
    job at once, with no grace to checkpoint): the runner starts it with SIGTERM
    ignored, and ``env --default-signal=TERM`` gives the job the default back.
    ``--die-with-parent`` ends the job with the runner.

    A ``workdir`` (the directory the runner opened, and the path its owner gave) is
    bound by its descriptor (``--bind-fd``), never by name, at that path, where the job
    starts: the caller passes the descriptor down (``pass_fds``).
    """
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    for path in SANDBOX_SYSTEM:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
    for device in sorted(_PROC.parent.glob("dev/nvidia*")):
        argv += ["--dev-bind", str(device), str(device)]
    made: set[str] = {"/", "/tmp"}
    bound: list[str] = []

    def passage_to(path: str) -> list[str]:
        # The directories above a bound one exist in the sandbox only to be passed
        # through: the job may traverse them, not list them. One inside a path bound
        # already is that path's own (made here, it would be made on the host).
        dirs: list[str] = []
        for parent in map(str, reversed(Path(path).parents)):
            inside = any(parent == b or parent.startswith(b.rstrip("/") + "/") for b in bound)
            if parent not in made and not inside:
                made.add(parent)
                dirs += ["--perms", "0711", "--dir", parent]
        return dirs

    targets = [*shared, str(work)] + ([workdir[1]] if workdir else [])
    for path in targets:
        argv += passage_to(path)
        if workdir and path == workdir[1]:
            argv += ["--bind-fd", str(workdir[0].fd), path]
        else:
            argv += ["--bind", path, path]
        bound.append(path)
    for path in readonly:
        argv += [*passage_to(path), "--ro-bind", path, path]
        bound.append(path)
    argv += ["--chdir", workdir[1] if workdir else str(work), "--"]
    if identity:
        argv += [
            "setpriv",
            f"--reuid={identity['uid']}",
            f"--regid={identity['gid']}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    return [*argv, "env", "--default-signal=TERM", "--"]


def _open_workdir(spec: dict[str, Any], identity: dict[str, Any] | None) -> OpenedDir | None:
    """The job's ``workdir`` opened as its user and checked where it really is (None
    without one: the job starts in its own directory). Raises ``UnsafePath``."""
    if not spec.get("workdir"):
        return None
    return open_user_dir(
        str(spec["workdir"]),
        roots=[str(root) for root in spec.get("workdir_roots", [])],
        refused=[str(tree) for tree in spec.get("workdir_refused", [])],
        identity=identity,
    )


def _create_new(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, which must not exist yet (nor be a link to anywhere)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _cancel_requested(job_dir: Path) -> bool:
    return _signalled or (job_dir / CANCEL_FILE).exists()


def _cancel_grace(job_dir: Path, default: float) -> float:
    """The grace the cancel asked for (a preemption's), else the backend's default."""
    try:
        marker = json.loads((job_dir / CANCEL_FILE).read_text())
        return float(marker.get("grace_seconds", default))
    except (OSError, ValueError, TypeError, AttributeError):
        return default


def _record(
    job_dir: Path, state: str, *, exit_code: int | None = None, reason: str = "", started_at: float | None = None
) -> None:
    """Write result.json unless one already exists (the first outcome wins)."""
    path = job_dir / RESULT_FILE
    if path.exists():
        return
    atomic_write_json(
        path,
        {
            "state": state,
            "exit_code": exit_code,
            "reason": reason,
            "started_at": started_at,
            "ended_at": time.time(),
        },
    )


class OutputRefused(UnsafePath):
    """An output file of the job's (``sbatch -o/-e``) cannot be written as its user."""


@dataclasses.dataclass
class _OutputFiles:
    """The job's own output files, open for writing (``spec["output"]``): each stream's
    descriptor (None: that stream goes to the portal's log alone; the same descriptor
    for both when one file takes both)."""

    stdout: int | None
    stderr: int | None

    def close(self) -> None:
        for fd in {self.stdout, self.stderr} - {None}:
            with contextlib.suppress(OSError):
                os.close(fd)  # type: ignore[arg-type]


def _open_output(spec: dict[str, Any], identity: dict[str, Any] | None, home: Path) -> _OutputFiles | None:
    """Open the job's output files as its user, within its roots (``user_paths.open_user_file``).
    Raises :class:`OutputRefused` naming the file that cannot be written."""
    output = spec.get("output")
    if not output:
        return None
    opened: dict[str, int] = {}
    try:
        for path in dict.fromkeys(p for p in (output.get("stdout"), output.get("stderr")) if p):
            opened[path] = open_user_file(
                str(path),
                roots=[str(root) for root in spec.get("workdir_roots", [])],
                refused=[str(tree) for tree in spec.get("workdir_refused", [])],
                identity=identity,
                truncate=not output.get("append"),
                home=str(home),
            )
    except UnsafePath as exc:
        for fd in opened.values():
            os.close(fd)
        raise OutputRefused(f"output file refused: {exc}") from None
    return _OutputFiles(opened.get(output.get("stdout") or ""), opened.get(output.get("stderr") or ""))


class _Copy(threading.Thread):
    """Copies one stream of one rank, as it comes, into the portal's log (``output.log``),
    that rank's log of that stream (``logs/rank-N.stdout``) and the job's own file, if
    it has one. A failure to write the job's file (a full disk) is said once in the
    log, which goes on getting everything: the job is never held up by its file."""

    def __init__(self, source: int, logs: tuple[int, ...], file: int | None) -> None:
        super().__init__(daemon=True)
        self.source, self.logs, self.file = source, logs, file

    def run(self) -> None:
        writing = self.file is not None
        try:
            while chunk := os.read(self.source, 65536):
                for log in self.logs:
                    with contextlib.suppress(OSError):
                        _write_all(log, chunk)
                if writing:
                    try:
                        _write_all(self.file, chunk)  # type: ignore[arg-type]
                    except OSError as exc:
                        writing = False
                        note = f"[local backend: writing the job's output file failed ({exc.strerror}); "
                        with contextlib.suppress(OSError):
                            _write_all(self.logs[0], (note + "the rest is in this log only]\n").encode())
        finally:
            os.close(self.source)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def rank_log_name(rank: int, stream: str) -> str:
    """The file in :data:`LOGS_DIR` that takes ``stream`` (stdout, stderr or combined) of
    ``rank``."""
    return f"rank-{rank}.{stream}"


def rank_streams(spec: dict[str, Any]) -> tuple[str, ...]:
    """The streams each rank's output is kept in: stdout and stderr apart, or both in
    one, ``combined``, when the job asked for one file that takes both in the order
    written (``sbatch -o f -e f``): only one pipe for both keeps that order."""
    output = spec.get("output") or {}
    if output.get("stdout") and output.get("stdout") == output.get("stderr"):
        return ("combined",)
    return ("stdout", "stderr")


class _Streams:
    """Where every rank's stdout and stderr go: a pipe for each stream (one for both when
    the job's own file takes both: :func:`rank_streams`), which a :class:`_Copy` empties
    into the portal's log (``output.log``: everything, the quick view's tail), the rank's
    log of that stream (``logs/rank-N.stdout``...: each whole, for the full logs) and the
    job's own file for it, if any. The runner holds no write end of a pipe once the ranks
    started, so a copy ends when the job's last process has. Across two pipes, the
    order of a stdout line and a stderr line written at once is the order they are read
    in, as with Slurm's separate ``--output`` and ``--error``."""

    def __init__(self, job_dir: Path, files: _OutputFiles | None, ranks: int, streams: tuple[str, ...]) -> None:
        # The runner's files: the job has only the pipes.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        self.log = os.open(job_dir / OUTPUT_FILE, flags, 0o644)
        os.makedirs(job_dir / LOGS_DIR, mode=0o700, exist_ok=True)
        self.files = files
        self._held: list[int] = []
        self._ends: list[int] = []
        self._copies: list[_Copy] = []
        #: Each rank's (stdout, stderr) descriptors.
        self.ranks: list[tuple[int, int]] = []
        for rank in range(ranks):
            ends = []
            for stream in streams:
                rank_log = os.open(job_dir / LOGS_DIR / rank_log_name(rank, stream), flags, 0o600)
                self._held.append(rank_log)
                file = getattr(files, "stdout" if stream == "combined" else stream) if files else None
                ends.append(self._pipe((self.log, rank_log), file))
            self.ranks.append((ends[0], ends[-1]))

    def _pipe(self, logs: tuple[int, ...], file: int | None) -> int:
        read_end, write_end = os.pipe()
        self._ends.append(write_end)
        copy = _Copy(read_end, logs, file)
        copy.start()
        self._copies.append(copy)
        return write_end

    def started(self) -> None:
        """Every rank has its descriptors: close the runner's write ends."""
        for fd in self._ends:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ends = []

    def finish(self) -> None:
        """Wait for the copies (bounded: :data:`COPY_GRACE_SECONDS`), then close."""
        self.started()
        deadline = time.monotonic() + COPY_GRACE_SECONDS
        for copy in self._copies:
            copy.join(max(0.0, deadline - time.monotonic()))
        if any(copy.is_alive() for copy in self._copies):
            note = b"[local backend: a process that left the job still holds its output; its logs may lack the end]\n"
            with contextlib.suppress(OSError):
                _write_all(self.log, note)
            return  # the copies still use the descriptors; the runner exits shortly
        if self.files is not None:
            self.files.close()
        for fd in self._held:
            os.close(fd)
        os.close(self.log)


@dataclasses.dataclass
class _Launch:
    """How every process of a job starts: its argv (the sandbox's wrapper included), its
    environment, where (``cwd``: the directory the runner holds open, by descriptor, with
    the descriptors to pass down) and as whom (``as_user``: Popen's user arguments when
    it runs unsandboxed as another uid)."""

    argv: list[str]
    wrapper: list[str]
    env: dict[str, str]
    cwd: str
    fds: tuple[int, ...]
    as_user: dict[str, Any]
    sandboxed: bool
    #: The job's own directory (its script and the writer of its files are in it).
    home: Path
    #: The job's own output files, opened (None: the portal's log alone).
    output: _OutputFiles | None = None

    def popen_args(self) -> dict[str, Any]:
        return {"cwd": self.cwd, "pass_fds": self.fds, "stdin": subprocess.DEVNULL, **self.as_user}


def _run(job_dir: Path) -> int:
    """Run the job described by spec.json to its end and record the outcome.

    Steps:
    1. If cancel was requested before we start, record CANCELLED and run nothing.
    2. Prepare: open the workdir as the job's user (refused: FAILED), build the
       environment and the sandbox, make the job's own directory (its script in it) and hand
       it to its user, open its own output files (``sbatch -o/-e``) as its user, within
       its roots (refused: FAILED, naming the file).
    3. Write the files the job brought, once, as the job, before any rank.
    4. Start the command once per rank (one per placed node, each with its own rank
       variables and GPUs: ``ranks`` in spec.json), all in one process group of their
       own, each rank's stdout and stderr through pipes that threads of the runner's
       copy into output.log, the rank's own logs and the job's own files
       (:class:`_Streams`), and record the first rank's identity and start
       time in started.json.
    5. Wait, checking every CHECK_INTERVAL for cancel (signal or marker), walltime and a
       rank that failed; each stops the whole group (SIGTERM, then SIGKILL after the
       grace period): like ``srun --kill-on-bad-exit``, one failed rank ends the job,
       since the others would wait for it forever in a collective.
    6. SIGKILL whatever is left in the group (background processes), let the copies
       into the job's files finish, then record COMPLETED / FAILED(exit code of the
       first rank that failed) / TIMEOUT / CANCELLED.
    """
    spec = read_json(job_dir / SPEC_FILE)
    if spec is None:
        raise ValueError(f"{job_dir / SPEC_FILE} is missing")
    if _cancel_requested(job_dir):
        _record(job_dir, "CANCELLED", reason="cancelled before it started")
        return 0
    try:
        launch = _prepare(job_dir, spec)
    except OutputRefused as exc:
        _record(job_dir, "FAILED", exit_code=1, reason=str(exc))
        return 0
    except UnsafePath as exc:
        _record(job_dir, "FAILED", exit_code=1, reason=f"workdir refused: {exc}")
        return 0
    walltime, grace = float(spec["walltime_seconds"]), float(spec["kill_grace_seconds"])
    if spec.get("setup") and not _write_files(job_dir, launch, walltime):
        _record(job_dir, "FAILED", exit_code=1, reason="could not write the job's files into its directory")
        return 0
    ranks = spec.get("ranks") or [{}]
    streams = _Streams(job_dir, launch.output, len(ranks), rank_streams(spec))
    children = _start_ranks(job_dir, launch, ranks, streams)
    if not children:
        streams.finish()
        return 0
    started_at = time.time()
    outcome, returncodes = _watch(job_dir, children, started_at, walltime, grace)
    streams.finish()  # every line is in the job's own files before it is said to have ended
    _record_outcome(job_dir, spec, outcome, returncodes, len(children), started_at)
    return 0


def _make_home(home: Path, spec: dict[str, Any], identity: dict[str, Any] | None) -> None:
    """The job's own directory, new (``mkdir`` fails on anything already there), with
    its script and the writer of its files, then handed to its user: made here, before
    the directory is the job's, nothing of its user can be in the way. The files' writer
    is a file because the files can be larger than one argument may be (128 KiB)."""
    os.mkdir(home, 0o700)
    if spec.get("script"):
        _create_new(home / SCRIPT_FILE, spec["script"])
    if spec.get("setup"):
        _create_new(home / SETUP_FILE, spec["setup"])
    if identity:
        for path in (home, *home.iterdir()):
            os.chown(path, identity["uid"], identity["gid"], follow_symlinks=False)


def _prepare(job_dir: Path, spec: dict[str, Any]) -> _Launch:
    """Step 2. Raises ``UnsafePath`` when the job's workdir may not be used."""
    home = Path(spec["home"])
    identity = spec.get("run_as")
    workdir = _open_workdir(spec, identity)
    env = inherited_environment()
    env.update({"HOME": str(home), "TMPDIR": "/tmp"})
    if identity:
        env.update({"USER": identity["user"], "LOGNAME": identity["user"]})
    env.update({str(k): str(v) for k, v in spec["env"].items()})
    _make_home(home, spec, identity)
    output = _open_output(spec, identity, home)
    wrapper: list[str] = []
    as_user: dict[str, Any] = {}
    if spec.get("sandbox"):
        bound = (workdir, str(spec["workdir"])) if workdir else None
        wrapper = sandbox_argv(
            spec["sandbox"],
            home,
            list(spec.get("shared_paths", [])),
            identity,
            workdir=bound,
            readonly=[str(path) for path in spec.get("readonly_paths", [])],
        )
    elif identity:  # no sandbox: at least never the portal's user
        as_user = {"user": identity["uid"], "group": identity["gid"], "extra_groups": []}
    return _Launch(
        argv=wrapper + [str(a) for a in spec["argv"]],
        wrapper=wrapper,
        env=env,
        # Every process starts in the directory the runner holds open, never by its name again.
        cwd=workdir.proc_path if workdir else str(home),
        home=home,
        fds=(workdir.fd,) if workdir else (),
        as_user=as_user,
        sandboxed=bool(spec.get("sandbox")),
        output=output,
    )


def _write_files(job_dir: Path, launch: _Launch, walltime: float) -> bool:
    """Step 3: the files the job brought, written once as the job (see local.py)."""
    with open(job_dir / OUTPUT_FILE, "ab") as log:
        try:
            setup = subprocess.run(
                [*launch.wrapper, "bash", str(launch.home / SETUP_FILE)],
                env=launch.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=max(60.0, min(walltime, 600.0)),
                check=False,
                **launch.popen_args(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.write(f"[local backend: writing the job's files failed: {exc}]\n".encode())
            return False
    return setup.returncode == 0


def _start_ranks(
    job_dir: Path, launch: _Launch, ranks: list[dict[str, str]], streams: _Streams
) -> list[subprocess.Popen[bytes]]:
    """Step 4's start: one process per rank in one process group, its output to
    ``streams``; [] (FAILED recorded) when one cannot start. In the sandbox, bubblewrap
    starts with SIGTERM ignored (see sandbox_argv); the runner's own handler is back at
    once (a cancel in between is seen in its marker)."""
    term_handler = signal.signal(signal.SIGTERM, signal.SIG_IGN) if launch.sandboxed else None
    children: list[subprocess.Popen[bytes]] = []
    try:
        for rank, (stdout, stderr) in zip(ranks, streams.ranks, strict=True):
            children.append(
                subprocess.Popen(
                    launch.argv,
                    env={**launch.env, **{str(k): str(v) for k, v in rank.items()}},
                    stdout=stdout,
                    stderr=stderr,
                    process_group=children[0].pid if children else 0,
                    **launch.popen_args(),
                )
            )
    except OSError as exc:
        if children:
            _killpg(children[0].pid, signal.SIGKILL)
            for child in children:
                child.wait()
        _record(job_dir, "FAILED", exit_code=127, reason=f"could not start the command: {exc}")
        return []
    finally:
        streams.started()
        if term_handler is not None:
            signal.signal(signal.SIGTERM, term_handler)
    return children


def _watch(
    job_dir: Path, children: list[subprocess.Popen[bytes]], started_at: float, walltime: float, grace: float
) -> tuple[str | None, list[int]]:
    """Steps 4 (started.json) and 5; returns the outcome that stopped the job (None: its
    ranks ended by themselves) and the ranks' exit codes in the order they ended."""
    deadline = time.monotonic() + walltime
    leader = children[0]
    returncodes: list[int] = []
    outcome: str | None = None
    try:
        atomic_write_json(
            job_dir / STARTED_FILE,
            {
                "pid": leader.pid,
                "start_ticks": process_start_ticks(leader.pid),
                "started_at": started_at,
                "ranks": len(children),
            },
        )
        running = list(children)
        while running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                running[0].wait(timeout=CHECK_INTERVAL)
            for child in [c for c in running if c.poll() is not None]:
                running.remove(child)
                returncodes.append(child.returncode)
            if outcome is not None or not running:
                continue
            if _cancel_requested(job_dir):
                outcome = "CANCELLED"
                _stop(children, _cancel_grace(job_dir, grace))
            elif time.monotonic() >= deadline:
                outcome = "TIMEOUT"
                _stop(children, grace)
            elif any(code != 0 for code in returncodes):
                outcome = "RANK_FAILED"
                _stop(children, grace)
    finally:
        # Runs on errors too: never leave the job's processes behind unrecorded.
        _killpg(leader.pid, signal.SIGKILL)
    return outcome, returncodes


def _record_outcome(
    job_dir: Path, spec: dict[str, Any], outcome: str | None, returncodes: list[int], ranks: int, started_at: float
) -> None:
    """Step 6's record: what stopped the job, else the first failed rank's exit."""
    returncode = next((code for code in returncodes if code != 0), 0)
    rank_note = "" if ranks == 1 else f" (first of {ranks} ranks to fail)"
    if outcome == "CANCELLED":
        _record(job_dir, outcome, reason="cancelled", started_at=started_at)
    elif outcome == "TIMEOUT":
        _record(job_dir, outcome, reason=f"walltime of {spec['walltime_seconds']}s exceeded", started_at=started_at)
    elif returncode == 0:
        _record(job_dir, "COMPLETED", exit_code=0, started_at=started_at)
    elif returncode < 0:
        reason = f"killed by {signal.Signals(-returncode).name}{rank_note}"
        _record(job_dir, "FAILED", exit_code=128 - returncode, reason=reason, started_at=started_at)
    else:
        reason = f"exit code {returncode}{rank_note}"
        _record(job_dir, "FAILED", exit_code=returncode, reason=reason, started_at=started_at)


def main(argv: list[str]) -> int:
    """Claim the job, detach, run it. Returns the exit status of *this* process.

    The caller's process (the intermediate) exits as soon as the detached runner has
    written runner.json, so the caller can ``wait()`` for it without blocking on the job
    and no zombie is left in a long-lived worker.
    """
    if len(argv) != 1:
        print("usage: python -m scheduler.backends.local_runner JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(argv[0]).resolve()
    # Installed before anything is visible to cancel(); inherited across fork.
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        fd = os.open(job_dir / CLAIM_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return 0  # another runner owns this job
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)

    read_end, write_end = os.pipe()
    if os.fork() > 0:
        os.close(write_end)
        os.read(read_end, 1)  # returns b"" once the runner wrote runner.json (or died)
        return 0
    os.close(read_end)
    try:
        try:
            atomic_write_json(
                job_dir / RUNNER_FILE,
                {
                    "pid": os.getpid(),
                    "start_ticks": process_start_ticks(os.getpid()),
                    "boot_id": boot_id(),
                    "launched_at": time.time(),
                },
            )
        finally:
            os.close(write_end)
        return _run(job_dir)
    except Exception as exc:  # the runner's last line of defence: record, then exit
        traceback.print_exc()
        try:
            _record(job_dir, "FAILED", reason=f"runner error: {exc!r}")
        except OSError:
            traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
