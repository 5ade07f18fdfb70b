"""The ``slurm`` backend: carries the scheduler's placements to a real Slurm cluster.

It drives Slurm's own commands (``sbatch``, ``scancel``, ``squeue``, ``sinfo``,
``sacct``, ``scontrol``) as subprocesses, so the portal's host needs only the Slurm
client package and a ``slurm.conf`` (config ``slurm_conf``, else ``$SLURM_CONF``).

Contract, per verb:

submit
    One ``sbatch --parsable`` with the script on stdin: ``--nodelist`` of the placed
    nodes, ``--gres=gpu[:type]:N`` per node (N GPUs, the node's GRES type),
    ``--cpus-per-task`` and ``--mem`` per node, ``--time`` from the walltime (Slurm rounds
    up to whole minutes), ``--job-name`` and ``--comment=qm:<instance>:<key>``, ``--output``
    and ``--error`` to one file per job in the owner's ``output_dir`` (or ``log_dir``): the
    portal's log, which ``read_log`` reads; the job's own ``-o/-e`` files are copies its
    script writes as the owner, their patterns filled in by the portal (``%j`` is the
    portal's id, not Slurm's: ``job_output.py``), ``--no-requeue`` (a node failure is
    reported as NODE_FAIL; requeueing is the portal's decision). The job's environment is
    exactly ``spec.env`` plus the job-environment contract (``job_env``) and a plain
    ``PATH``: sbatch runs with a clean environment, so neither the portal's secrets nor
    its ``SBATCH_*`` variables reach the job. Slurm picks the GPU indices on each node
    (``CUDA_VISIBLE_DEVICES`` is Slurm's); ``QM_GPUS`` carries the portal's plan.
    Idempotent per key: under a per-key file lock, the adapter first looks for a job whose
    comment carries the key in ``squeue`` (jobs in slurmctld's memory, which keeps ended
    jobs for ``MinJobAge``) and, on a retry with ``accounting``, in ``sacct`` (the last
    7 days), so a worker that died after ``sbatch`` cannot cause a second job. The lock
    covers workers on one host; workers on several hosts rely on the lookup alone.
cancel
    ``scancel <id>``: Slurm sends SIGTERM, waits the cluster's ``KillWait``, then
    SIGKILL; KillWait is the grace, whatever ``grace_seconds`` asks (Slurm has no
    per-job KillWait). Unknown and finished ids are a no-op.
poll
    One ``squeue -O`` of six fields for every job slurmctld remembers (running, and
    finished within ``MinJobAge``; not ``--json``, which costs 12x as much), then, only
    for ids it did not know, one ``sacct`` call. Ids neither knows are UNKNOWN.
list_nodes
    One ``sinfo --json``: CPUs, memory, GRES (GPU type and count; ``gpu_models`` says
    what each type is as hardware) and state (idle/mixed/allocated are up; drain, down).

As whom: with ``run_as_owner`` (the default) every command that acts on a job (sbatch,
scancel, scontrol, and the ``mkdir``/``tail`` of its output) runs as the job's owner
through ``sudo -n -u`` (``slurm_owner.py``): sbatch as ``spec.run_as`` with
``--account``, the others as the user Slurm records for the job. Reads of the whole
cluster (squeue, sinfo, sacct) and node drains run as the portal.

Errors: every failure is a :class:`BackendError` carrying Slurm's own message. Slurm
refusing a job (invalid GRES, unavailable node configuration, bad partition) is
permanent; an unreachable or busy controller, a timeout or a missing binary is transient.

Extras beyond the protocol: :meth:`drain_node`/:meth:`resume_node` (``scontrol update``),
:meth:`hold`/:meth:`release`/:meth:`requeue` (``scontrol``), :meth:`reserve`/:meth:`unreserve`
(``scontrol create|delete reservation``).
"""

from __future__ import annotations

import fcntl
import getpass
import json
import math
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from scheduler.backends import slurm_parse as parse
from scheduler.backends.base import (
    LOG_CHUNK_BYTES,
    BackendError,
    JobSpec,
    LogSource,
    NodeInfo,
    Placement,
    PollResult,
    RemoteState,
    log_file_chunks,
    outcome,
)
from scheduler.backends.job_env import array_env, job_env
from scheduler.backends.job_files import RESERVED_PREFIX, prelude
from scheduler.backends.job_output import copying_output
from scheduler.backends.sessions import apps_bin, apps_env_from_config, is_session
from scheduler.backends.slurm_owner import Owner, OwnerCommands, OwnerError
from scheduler.backends.spec_check import spec_problem

#: What sbatch is run with for one spec: argv, environment, batch script, owner.
_Request = tuple[list[str], dict[str, str], str, Owner | None]

_CONFIG_KEYS = frozenset(
    {
        "slurm_conf",
        "bin_dir",
        "partition",
        "log_dir",
        "gpu_models",
        "command_timeout_seconds",
        "accounting",
        "run_as_owner",
        "sudo",
        "output_dir",
        "min_uid",
        "submit_concurrency",
        "apps_env",
    }
)
_GPU_MODEL_KEYS = frozenset({"model", "memory_mib", "compute_capability"})
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
#: A job's env names (which names it may not set, SBATCH_* and SLURM_* among them, is
#: ``job_env.is_reserved``, checked by ``spec_check`` for every backend).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Slurm's own tools, found in ``bin_dir`` when it is set.
_SLURM_TOOLS = frozenset({"sbatch", "scancel", "scontrol", "squeue", "sinfo", "sacct"})
#: How far back a submit looks in accounting for an earlier job with the same key.
_ACCOUNTING_LOOKBACK = "now-7days"
#: Submits validate placements against the inventory read at most this long ago. The
#: cache is per process, not per instance: the portal builds a backend per dispatch.
_INVENTORY_TTL_SECONDS = 10.0
_INVENTORY: dict[tuple[str, str], tuple[float, dict[str, NodeInfo]]] = {}


def _job_name(spec: JobSpec) -> str:
    """The Slurm job name: the user's, printable and without commas (a name list
    separator in ``squeue -n``)."""
    return re.sub(r"[^ -~]|,", "_", spec.name)[:200] or spec.key


def _bad(cluster: str, message: str) -> BackendError:
    return BackendError(f"slurm backend {cluster!r}: bad config: {message}", permanent=True)


def _path(cluster: str, config: Mapping[str, Any], key: str) -> Path | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise _bad(cluster, f"{key} must be a path, got {value!r}")
    return Path(value).absolute()


def _gpu_models(cluster: str, raw: Any) -> dict[str, parse.GpuModel]:
    if not isinstance(raw, Mapping):
        raise _bad(cluster, f"gpu_models must be a mapping of GRES type to hardware, got {raw!r}")
    models: dict[str, parse.GpuModel] = {}
    for gres_type, spec in raw.items():
        where = f"gpu_models.{gres_type}"
        if not isinstance(spec, Mapping):
            raise _bad(cluster, f"{where} must be a mapping, got {spec!r}")
        unknown = sorted(str(k) for k in spec if k not in _GPU_MODEL_KEYS)
        if unknown:
            raise _bad(cluster, f"{where} has unknown key(s) {', '.join(unknown)}")
        model, memory, capability = spec.get("model"), spec.get("memory_mib", 0), spec.get("compute_capability", "")
        if not isinstance(model, str) or not model:
            raise _bad(cluster, f"{where}.model must be a non-empty string, got {model!r}")
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            raise _bad(cluster, f"{where}.memory_mib must be a non-negative integer, got {memory!r}")
        if not isinstance(capability, str):
            raise _bad(cluster, f"{where}.compute_capability must be a string like '9.0', got {capability!r}")
        models[str(gres_type)] = parse.GpuModel(model, memory, capability)
    return models


class SlurmBackend:
    """A Slurm cluster reached through its command-line tools.

    Construction validates the config (``BackendError(permanent=True)`` naming the bad
    field) and runs nothing. Every other method raises only :class:`BackendError`.
    """

    kind: ClassVar[str] = "slurm"

    def __init__(self, *, name: str, config: Mapping[str, Any], work_dir: Path, instance: str = "") -> None:
        if not isinstance(config, Mapping):
            raise _bad(name, f"config must be a mapping, got {type(config).__name__}")
        unknown = sorted(str(k) for k in config if k not in _CONFIG_KEYS)
        if unknown:
            allowed = ", ".join(sorted(_CONFIG_KEYS))
            raise _bad(name, f"config has unknown key(s) {', '.join(unknown)} (allowed: {allowed})")
        if not _SAFE_NAME.fullmatch(name):
            raise _bad(name, f"cluster name must match {_SAFE_NAME.pattern}")
        self.name = name
        if instance and not _SAFE_NAME.fullmatch(instance):
            raise _bad(name, f"instance must match {_SAFE_NAME.pattern}")
        #: Our comment on every job: ``qm:<instance>:<key>`` (``qm:<key>`` without one).
        self.comment_prefix = f"{parse.COMMENT_PREFIX}{instance}:" if instance else parse.COMMENT_PREFIX
        self.slurm_conf = _path(name, config, "slurm_conf")
        self.bin_dir = _path(name, config, "bin_dir")
        state_dir = Path(work_dir).absolute() / "slurm-backend" / name
        self.log_dir = _path(name, config, "log_dir") or state_dir / "logs"
        self._lock_dir = state_dir / "locks"
        partition = config.get("partition", "")
        if not isinstance(partition, str):
            raise _bad(name, f"partition must be a string, got {partition!r}")
        self.partition = partition
        self.gpu_models = _gpu_models(name, config.get("gpu_models", {}))
        timeout = config.get("command_timeout_seconds", 30)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise _bad(name, f"command_timeout_seconds must be a positive number, got {timeout!r}")
        self.command_timeout = float(timeout)
        concurrency = config.get("submit_concurrency", 8)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 64:
            raise _bad(name, f"submit_concurrency must be a whole number from 1 to 64, got {concurrency!r}")
        self.submit_concurrency = concurrency
        accounting = config.get("accounting", True)
        if not isinstance(accounting, bool):
            raise _bad(name, f"accounting must be true or false, got {accounting!r}")
        self.accounting = accounting
        run_as_owner = config.get("run_as_owner", True)
        if not isinstance(run_as_owner, bool):
            raise _bad(name, f"run_as_owner must be true or false, got {run_as_owner!r}")
        #: Jobs are submitted (and cancelled, held, read) as their owners through sudo;
        #: false: as the portal's own user, for a single-user site that says so.
        self.requires_identity = run_as_owner
        sudo, output_dir, min_uid = config.get("sudo", "sudo"), config.get("output_dir"), config.get("min_uid", 1000)
        if not isinstance(sudo, str) or not sudo:
            raise _bad(name, f"sudo must be a command name or path, got {sudo!r}")
        if output_dir is None:
            output_dir = "{home}/.quartermaster/slurm"
        if not isinstance(output_dir, str) or not output_dir.startswith(("/", "{home}")):
            raise _bad(name, f"output_dir must be an absolute path template ({{home}}, {{user}}), got {output_dir!r}")
        try:
            output_dir.format(user="u", home="/h")
        except (KeyError, IndexError, ValueError) as exc:
            raise _bad(name, f"output_dir may use only {{user}} and {{home}}, got {output_dir!r}") from exc
        if isinstance(min_uid, bool) or not isinstance(min_uid, int) or min_uid < 1:
            raise _bad(name, f"min_uid must be a positive integer, got {min_uid!r}")
        self.owners = OwnerCommands(sudo=sudo, min_uid=min_uid, output_dir=output_dir)
        #: Each job's user as Slurm reports it, for this instance's verbs (a requeue asks
        #: twice). Deliberately not per process: were Slurm's ids ever reused (its state
        #: wiped), a stale entry would read one user's output for another's job.
        self._job_users: dict[str, str] = {}
        self._inventory_key = (name, str(self.slurm_conf or os.environ.get("SLURM_CONF", "")))
        #: The interactive apps' environment, at this path on every node (shared storage):
        #: first on session jobs' PATH (``scheduler.backends.sessions``); '' none.
        self.apps_env = apps_env_from_config(config.get("apps_env"), lambda message: _bad(name, message))

    # -- Backend protocol ---------------------------------------------------------------

    def submit(self, spec: JobSpec) -> str:
        """Submit ``spec`` with sbatch unless a job with its key exists; return the job id.

        1. Validate the spec against the inventory (permanent errors name the value).
        2. Under the key's lock, unless the spec is its attempt's first hand-off, look
           for an earlier job with comment ``qm:<key>`` in squeue and, if this host
           tried the key before, in accounting too.
        3. Otherwise ``sbatch --parsable`` and return the id it prints.
        """
        return self._submit(spec, self._sbatch(spec), None)

    def submit_many(self, specs: Sequence[JobSpec]) -> list[str | BackendError]:
        """:meth:`submit` for a tick's starts: the sbatch calls run concurrently, at most
        ``submit_concurrency`` (8) at once, each under its key's lock as in :meth:`submit`.
        A first hand-off (``JobSpec.first_handoff``) is looked up nowhere; the others
        (retries) share one ``squeue`` for the batch, not one each, and a key this host
        tried before is looked up again under its lock, accounting too, exactly as
        :meth:`submit` does."""
        requests = [outcome(self._sbatch, spec) for spec in specs]
        known: Mapping[str, str] | BackendError = {}
        if not all(spec.first_handoff for spec in specs):
            known = outcome(self._jobs_by_comment)

        def one(pair: tuple[JobSpec, _Request | BackendError]) -> str | BackendError:
            spec, request = pair
            if isinstance(request, BackendError):
                return request
            if isinstance(known, BackendError) and not spec.first_handoff:
                return known  # a retry must not sbatch unseen: it may have a job already
            return outcome(self._submit, spec, request, None if isinstance(known, BackendError) else known)

        pairs = list(zip(specs, requests, strict=True))
        if len(pairs) <= 1:
            return [one(pair) for pair in pairs]
        with ThreadPoolExecutor(max_workers=min(self.submit_concurrency, len(pairs))) as pool:
            return list(pool.map(one, pairs))

    def _submit(
        self,
        spec: JobSpec,
        request: _Request,
        known: Mapping[str, str] | None,
    ) -> str:
        """sbatch ``request`` for ``spec`` unless its key has a job. A first hand-off
        tried nowhere before (not even on this host) has none; otherwise ``known``
        (comment -> job id, from a batch's one squeue) answers a first try on this host,
        and a key tried on this host before, or without ``known``, is looked up under
        its lock."""
        argv, env, script, owner = request
        with self._key_lock(spec.key) as tried_here_before:
            if spec.first_handoff and not tried_here_before:
                existing = None
            elif known is None or tried_here_before:
                existing = self._find_by_key(spec, in_accounting=tried_here_before)
            else:
                existing = known.get(self.comment_prefix + spec.key) or known.get(parse.COMMENT_PREFIX + spec.key)
            if existing is not None:
                return existing
            if owner is not None and self.owners.needs_output_dir(owner):
                self._make_output_dir(owner)
            out = self._execute(argv, what=f"sbatch for job {spec.key}", changes=True, stdin=script, env=env)
        job_id = out.strip().split(";", 1)[0]
        if not job_id.isdigit():
            raise self._error(f"sbatch printed {out.strip()!r}, not a job id", permanent=False)
        return job_id

    def _jobs_by_comment(self) -> dict[str, str]:
        """Comment -> job id of every job of ours slurmctld remembers (one squeue)."""
        out = self._run(["squeue", "-h", "-a", "-t", "all", "-o", "%i|%k"], what="squeue (lookup of a batch by key)")
        found: dict[str, str] = {}
        for line in out.splitlines():
            job_id, _, comment = line.partition("|")
            comment = comment.strip()
            if comment.startswith(parse.COMMENT_PREFIX):
                found[comment] = job_id.strip()
        return found

    def cancel(self, external_id: str, *, grace_seconds: float | None = None) -> None:
        """``scancel``: SIGTERM, then SIGKILL after the cluster's KillWait.

        ``grace_seconds`` is not passed on: Slurm has no per-job KillWait, and a job that
        handles a bare ``--signal=TERM`` and exits 0 would end COMPLETED, not CANCELLED.
        Set KillWait in slurm.conf to the checkpoint time preempted jobs need.
        """
        if not external_id.isdigit():
            return
        owner = self._job_owner(external_id)
        if self.requires_identity and owner is None:
            return  # Slurm no longer knows the job: nothing to cancel
        self._run(["scancel", external_id], what=f"scancel {external_id}", as_owner=owner)

    def poll(self, external_ids: Sequence[str]) -> dict[str, PollResult]:
        """Every requested id's state: squeue first, sacct for the rest, else UNKNOWN."""
        results: dict[str, PollResult] = {}
        wanted = {i for i in external_ids if i.isdigit()}
        if wanted:
            out = self._run(
                ["squeue", "-h", "-a", "-t", "all", "-O", parse.SQUEUE_POLL_FORMAT],
                what="squeue",
                env={"SLURM_TIME_FORMAT": "%s"},
            )
            for result in map(parse.from_squeue_line, out.splitlines()):
                if result is not None and result.external_id in wanted:
                    results[result.external_id] = result
        missing = sorted(wanted - set(results), key=int)
        if missing and self.accounting:
            for result in self._sacct(missing):
                if result.external_id in wanted:
                    results[result.external_id] = result
        return {
            i: results.get(i) or PollResult(i, RemoteState.UNKNOWN, reason="Slurm does not know this job")
            for i in external_ids
        }

    def list_jobs(self) -> dict[str, str]:
        """Key -> Slurm job id of every live job carrying our comment
        (``qm:<instance>:<key>``), for the portal's orphan sweep; one ``squeue`` call.
        Jobs without it are ignored: other users', another portal's on the same cluster,
        and ours submitted before comments named the instance (never ours to cancel)."""
        out = self._run(
            ["squeue", "-h", "-a", "-t", "PENDING,RUNNING,SUSPENDED,CONFIGURING", "-o", "%i|%k"],
            what="squeue (our jobs)",
        )
        live: dict[str, str] = {}
        for line in out.splitlines():
            job_id, _, comment = line.partition("|")
            comment = comment.strip()
            key = comment.removeprefix(self.comment_prefix)
            if key != comment and ":" not in key and job_id.strip().isdigit():
                live[key] = job_id.strip()
        return live

    def list_nodes(self) -> list[NodeInfo]:
        """The cluster's nodes from ``sinfo --json``, one entry per node."""
        data = self._json(["sinfo", "--json"], what="sinfo")
        nodes: dict[str, NodeInfo] = {}
        for raw in data.get("nodes", []):
            try:
                node = parse.node_from_sinfo(raw, self.name, self.gpu_models)
            except (KeyError, TypeError, ValueError) as exc:
                raise self._error(f"unreadable sinfo node {raw!r}: {exc}", permanent=False) from exc
            nodes.setdefault(node.name, node)  # a node in two partitions is listed twice
        _INVENTORY[self._inventory_key] = (time.monotonic(), nodes)
        return list(nodes.values())

    def read_log(self, external_id: str, max_bytes: int = 65536) -> str:
        """The last ``max_bytes`` of the job's output file ('' for unknown jobs).

        Run as owner, the file is the owner's (in their ``output_dir``) and is read as
        them too, with ``tail``: never by making job outputs readable to the portal.
        """
        if not external_id.isdigit() or max_bytes <= 0:
            return ""
        if self.requires_identity:
            owner = self._job_owner(external_id)
            if owner is None:
                return ""
            path = self.owners.output_dir(owner) / f"slurm-{external_id}.out"
            try:
                data = self._run(["tail", "-c", str(max_bytes), "--", str(path)], what="read_log", as_owner=owner)
            except BackendError as exc:
                if "No such file" in exc.message:
                    return ""
                raise
            return data
        try:
            with open(self.log_path(external_id), "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - max_bytes))
                return fh.read(max_bytes).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise self._error(f"read_log {external_id}: {exc}", permanent=False) from exc

    def session_host(self, external_id: str, placements: tuple[Placement, ...]) -> str:
        """Where a running session's server answers: the ``NodeAddr`` of the node its
        batch script runs on (the first of its allocation: ``squeue %B``), as Slurm has
        it, never as the job says. Transient BackendError while the job has no node."""
        if not external_id.isdigit():
            raise self._error(f"session_host: {external_id!r} is not a Slurm job id", permanent=True)
        out = self._run(["squeue", "-h", "-j", external_id, "-o", "%B"], what=f"squeue (batch host of {external_id})")
        host = parse.batch_host(out)
        if host is None:
            raise self._error(f"session_host: job {external_id} runs on no node yet", permanent=False)
        shown = self._run(["scontrol", "show", "node", host], what=f"scontrol show node {host}")
        address = parse.node_address(shown)
        if address is None:
            raise self._error(f"session_host: scontrol shows no NodeAddr for node {host}", permanent=False)
        return address

    def log_sources(self, external_id: str) -> tuple[LogSource, ...]:
        """One log, combined: the batch script's ``--output`` and ``--error`` are one file,
        which every rank's ``srun`` task writes to as well."""
        if not external_id.isdigit():
            return ()
        if self.requires_identity and self._job_owner(external_id) is None:
            return ()
        return (LogSource(None, "combined"),)

    def stream_log(self, external_id: str, source: LogSource, offset: int = 0) -> Iterator[bytes]:
        """The job's output file from ``offset``, streamed. Run as owner, it is read as the
        owner, as :meth:`read_log` reads it: ``tail -c +N`` through sudo, its output
        read a chunk at a time (``tail`` seeks to ``offset``; the file never passes
        through the portal whole)."""
        if source != LogSource(None, "combined") or not self.log_sources(external_id):
            return iter(())
        if not self.requires_identity:
            return self._file_chunks(self.log_path(external_id), offset, external_id)
        owner = self._job_owner(external_id)
        assert owner is not None  # log_sources said Slurm knows the job's user
        path = self.owners.output_dir(owner) / f"slurm-{external_id}.out"
        return self._streamed(["tail", "-c", f"+{offset + 1}", "--", str(path)], owner, external_id)

    def _file_chunks(self, path: Path, offset: int, external_id: str) -> Iterator[bytes]:
        try:
            yield from log_file_chunks(path, offset, follow_symlinks=True)
        except OSError as exc:
            raise self._error(f"stream_log {external_id}: {exc}", permanent=False) from exc

    def _streamed(self, argv: list[str], owner: Owner, external_id: str) -> Iterator[bytes]:
        """``argv``'s stdout, run as ``owner``, a chunk at a time. A reader that stops
        early ends the command; a file not there (yet) is no output, not an error."""
        command = self._command_line(argv, owner)
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self._env()
            )
        except OSError as exc:
            raise self._error(f"cannot run {Path(command[0]).name}: {exc}", permanent=False) from exc
        assert process.stdout is not None and process.stderr is not None
        finished = False
        try:
            while chunk := os.read(process.stdout.fileno(), LOG_CHUNK_BYTES):
                yield chunk
            finished = True
        finally:
            if not finished:
                process.kill()
            process.stdout.close()
            error = process.stderr.read().decode("utf-8", errors="replace")
            process.stderr.close()
            returncode = process.wait()
        if returncode != 0 and "No such file" not in error:
            message = " ".join((error.strip() or f"exit status {returncode}").split())
            raise self._error(f"stream_log {external_id} failed: {message}", permanent=False)

    # -- Extras: node and job administration --------------------------------------------

    def drain_node(self, node: str, reason: str) -> None:
        """Drain ``node`` in Slurm (running jobs finish; nothing new starts there)."""
        self._scontrol_update(["update", f"nodename={node}", "state=drain", f"reason={reason or 'drained'}"])

    def resume_node(self, node: str) -> None:
        """Make a drained ``node`` schedulable again in Slurm."""
        self._scontrol_update(["update", f"nodename={node}", "state=resume"])

    def reserve(
        self,
        name: str,
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        *,
        maintenance: bool,
        users: Sequence[str],
    ) -> None:
        """``scontrol create reservation`` (after deleting one of that name): ``MAINT``
        for maintenance, ``IGNORE_JOBS`` always (jobs running on the nodes finish; the
        portal placed them knowing the window). A reservation for users admits their
        cluster usernames, or the portal's own user where jobs run as the portal; times
        are the controller's local time, as scontrol reads them."""
        self.unreserve(name)
        who = list(users) if self.requires_identity else [getpass.getuser()]
        if maintenance or not who:
            who = ["root"]
        self._scontrol_update(
            [
                "create",
                "reservation",
                f"ReservationName={name}",
                f"StartTime={start.astimezone().strftime('%Y-%m-%dT%H:%M:%S')}",
                f"EndTime={end.astimezone().strftime('%Y-%m-%dT%H:%M:%S')}",
                f"Nodes={','.join(sorted(nodes))}",
                f"Flags={'MAINT,IGNORE_JOBS' if maintenance else 'IGNORE_JOBS'}",
                f"Users={','.join(sorted(who))}",
            ]
        )

    def unreserve(self, name: str) -> None:
        """``scontrol delete ReservationName=...``; one Slurm does not have is no error.
        Slurm refuses to delete a reservation jobs still run in ("in use"): it is ended
        now instead (``EndTime=now``), its jobs run on to their limits, and Slurm purges
        it after them."""
        try:
            self._scontrol_update(["delete", f"ReservationName={name}"])
        except BackendError as exc:
            message = exc.message.lower()
            if "in use" in message:
                self._scontrol_update(["update", f"ReservationName={name}", "EndTime=now"])
            elif "invalid" not in message and "not found" not in message:
                raise

    def hold(self, external_id: str) -> None:
        """``scontrol hold``: keep a pending Slurm job from starting (as its owner)."""
        self._scontrol_update(["hold", external_id], job=external_id)

    def release(self, external_id: str) -> None:
        """``scontrol release``: undo :meth:`hold` (as the job's owner: Slurm lets an
        owner release only what the owner held)."""
        self._scontrol_update(["release", external_id], job=external_id)

    def requeue(self, external_id: str) -> None:
        """``scontrol requeue``: stop the job and queue it again under the same id.

        Our jobs are submitted ``--no-requeue`` (so Slurm does not requeue them on its own
        after a node failure); an explicit requeue first marks the job requeueable.
        """
        self._scontrol_update(["update", f"jobid={external_id}", "requeue=1"], job=external_id)
        self._scontrol_update(["requeue", external_id], job=external_id)

    def log_path(self, external_id: str) -> Path:
        return self.log_dir / f"slurm-{external_id}.out"

    # -- submit helpers -----------------------------------------------------------------

    def _error(self, message: str, *, permanent: bool) -> BackendError:
        return BackendError(f"slurm backend {self.name!r}: {message}", permanent=permanent)

    def _reject(self, spec: JobSpec, message: str) -> BackendError:
        return self._error(f"job {spec.key!r}: {message}", permanent=True)

    def _nodes_by_name(self) -> dict[str, NodeInfo]:
        cached = _INVENTORY.get(self._inventory_key)
        if cached is None or time.monotonic() - cached[0] > _INVENTORY_TTL_SECONDS:
            return {node.name: node for node in self.list_nodes()}
        return cached[1]

    def sbatch_request(self, spec: JobSpec) -> tuple[list[str], dict[str, str], str]:
        """The sbatch command line (through sudo as the owner, when jobs run as their
        owners), environment and batch script that :meth:`submit` runs for ``spec``
        (validated; permanent BackendError otherwise). Public so a benchmark can run the
        very same sbatch without the adapter around it."""
        argv, env, script, _ = self._sbatch(spec)
        return argv, env, script

    def _sbatch(self, spec: JobSpec) -> _Request:
        """:meth:`sbatch_request`, and the owner it runs as (None: as the portal)."""
        if not _SAFE_NAME.fullmatch(spec.key):
            raise self._reject(spec, f"key must match {_SAFE_NAME.pattern}")
        problem = spec_problem(spec)
        if problem:
            raise self._reject(spec, problem)
        inventory = self._nodes_by_name()
        types: set[str] = set()
        for placement in spec.placements:
            node = inventory.get(placement.node)
            if node is None:
                raise self._reject(spec, f"placement on unknown node {placement.node!r}")
            for index in placement.gpu_indices:
                if not 0 <= index < len(node.gpus):
                    raise self._reject(spec, f"node {node.name} has no GPU {index!r} (has {len(node.gpus)})")
            types.add(node.labels.get("gres_type", ""))
        names = [p.node for p in spec.placements]
        counts = {len(p.gpu_indices) for p in spec.placements}
        if len(counts) != 1:
            raise self._reject(spec, f"Slurm gives every node the same GPU count; placements ask for {sorted(counts)}")
        for key, value in spec.env.items():
            if not _ENV_NAME.fullmatch(key) or "\x00" in value:
                raise self._reject(spec, f"env name {key!r} is not a shell variable name (or its value has NUL)")

        owner = self._owner(spec)
        gpus = counts.pop()
        gres_type = types.pop() if len(types) == 1 else ""
        output_dir = self.owners.output_dir(owner) if owner is not None else self.log_dir
        log = str(output_dir / "slurm-%j.out")
        args = [
            f"--job-name={_job_name(spec)}",
            f"--comment={self.comment_prefix}{spec.key}",
            f"--nodes={len(names)}",
            f"--nodelist={','.join(names)}",
            "--ntasks-per-node=1",
            f"--cpus-per-task={max(1, math.ceil(spec.cpus_per_node))}",  # whole CPUs only
            f"--time={parse.walltime(spec.walltime_seconds)}",
            f"--output={log}",
            f"--error={log}",
            f"--chdir={spec.workdir or output_dir}",
            "--no-requeue",
            "--export=ALL",
        ]
        if owner is not None:
            args.append(f"--account={spec.account}")
        if gpus:
            args.append(f"--gres=gpu:{gres_type}:{gpus}" if gres_type else f"--gres=gpu:{gpus}")
        if spec.memory_mib_per_node > 0:
            args.append(f"--mem={spec.memory_mib_per_node}M")
        if self.partition:
            args.append(f"--partition={self.partition}")
        if spec.reservation:
            args.append(f"--reservation={spec.reservation}")
        # sbatch itself runs on the portal's host: it gets only our variables (a job's
        # LD_PRELOAD, say, must not load code into it; sudo would drop them anyway). The
        # job's own variables and ours are exported by the batch script, on the node.
        env = {"PATH": _JOB_PATH}
        # The first non-comment line ends sbatch's #SBATCH parsing, so directives in the
        # user's script cannot override the placement above. Scripts run with bash.
        ours = {**job_env(spec), **array_env(spec, "SLURM_")}
        exports = "".join(
            f"export {key}={shlex.quote(value)}\n" for key, value in [*sorted(spec.env.items()), *ours.items()]
        ) + self._apps_path(spec)
        # Without a workdir the job starts in the owner's output directory, shared by their
        # jobs: files it brings go into a directory of its own there.
        fresh = f"job-{spec.key}" if spec.files and not spec.workdir else ""
        body = prelude(spec.files, fresh_dir=fresh) + _ranks(spec.script or spec.command, len(names), spec.key)
        # With output files of its own (sbatch -o/-e), the script first runs itself again
        # with its output copied into them, as the owner, on the node (job_output.py).
        copying = copying_output(spec.output, '"$BASH" "$0"')
        script = f"#!/bin/bash\n: Quartermaster job {spec.key}\n{copying}{exports}{body}"
        return self._command_line(["sbatch", "--parsable", *args], owner), env, script, owner

    def _apps_path(self, spec: JobSpec) -> str:
        """The batch script's line that puts the apps' ``bin/`` first on a session's PATH,
        on the node ('' for other jobs, or without an ``apps_env``)."""
        if not (is_session(spec) and self.apps_env):
            return ""
        return f'export PATH={shlex.quote(apps_bin(self.apps_env))}:"$PATH"\n'

    @contextmanager
    def _key_lock(self, key: str) -> Iterator[bool]:
        """An exclusive lock per key for this host's workers (threads and processes).

        Yields whether the key was tried on this host before (its lock file existed).
        """
        path = self._lock_dir / f"{key}.lock"
        try:
            self._lock_dir.mkdir(parents=True, exist_ok=True)
            self.log_dir.mkdir(parents=True, exist_ok=True)
            try:
                fd, tried_before = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600), False
            except FileExistsError:
                fd, tried_before = os.open(path, os.O_RDWR), True
        except OSError as exc:
            raise self._error(f"cannot lock {key}: {exc}", permanent=False) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield tried_before
        finally:
            os.close(fd)

    def _find_by_key(self, spec: JobSpec, *, in_accounting: bool) -> str | None:
        """The id of a job submitted earlier for ``spec.key``, if Slurm still knows one.

        squeue (narrowed to the job's name) covers every job slurmctld remembers: live
        ones and those that ended within MinJobAge. Accounting (the last 7 days) is asked
        only on a retry from this host, since it costs more than the sbatch itself; a
        first attempt here can only duplicate a job another host submitted and that
        ended more than MinJobAge ago. A job submitted before comments named the instance
        (``qm:<key>``) is found too: keys are unique, so it is this job's.
        """
        comments = {self.comment_prefix + spec.key, parse.COMMENT_PREFIX + spec.key}
        out = self._run(
            ["squeue", "-h", "-a", "-t", "all", "-n", _job_name(spec), "-o", "%i|%k"], what="squeue (lookup by key)"
        )
        for line in out.splitlines():
            job_id, _, found = line.partition("|")
            if found.strip() in comments:
                return job_id.strip()
        if not (self.accounting and in_accounting):
            return None
        out = self._run(
            ["sacct", "-X", "-n", "-P", "-a", "-S", _ACCOUNTING_LOOKBACK, "-o", "JobIDRaw,Comment"],
            what="sacct (lookup by key)",
        )
        for line in out.splitlines():
            job_id, _, found = line.partition("|")
            if found.strip() in comments and job_id.isdigit():
                return job_id
        return None

    # -- poll helpers -------------------------------------------------------------------

    def _sacct(self, job_ids: list[str]) -> list[PollResult]:
        out = self._run(
            ["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobIDRaw,State,ExitCode,Start,End,Reason"],
            what="sacct",
            env={"SLURM_TIME_FORMAT": "%s"},
        )
        return [r for r in map(parse.from_sacct_line, out.splitlines()) if r is not None]

    # -- running Slurm's commands -------------------------------------------------------

    def _binary(self, name: str) -> str:
        return str(self.bin_dir / name) if self.bin_dir else name

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A clean environment for Slurm's tools: what sbatch sees is what the job gets."""
        env = {"PATH": _JOB_PATH, "LANG": "C.UTF-8", **(extra or {})}
        conf = self.slurm_conf or os.environ.get("SLURM_CONF")
        if conf:
            env["SLURM_CONF"] = str(conf)
        return env

    def _command_line(self, argv: list[str], owner: Owner | None) -> list[str]:
        """The full command line for ``argv`` (a Slurm tool or one of the owner-side
        helpers), prefixed with sudo to run as ``owner``."""
        command = [self._binary(argv[0]) if argv[0] in _SLURM_TOOLS else argv[0], *argv[1:]]
        if owner is None:
            return command
        return self.owners.argv(owner, command, keep_env=bool(self._env().get("SLURM_CONF")))

    def _run(
        self,
        argv: list[str],
        *,
        what: str,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        as_owner: Owner | None = None,
    ) -> str:
        """Run a Slurm command (as ``as_owner`` through sudo, if given); return its stdout
        or raise a BackendError with its stderr."""
        # Only a command that asks Slurm to *do* something can be refused for good.
        changes = argv[0] in ("sbatch", "scancel") or (argv[0] == "scontrol" and argv[1] != "show")
        return self._execute(self._command_line(argv, as_owner), what=what, changes=changes, stdin=stdin, env=env)

    def _execute(
        self,
        command: list[str],
        *,
        what: str,
        changes: bool,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Run a full command line; a failure of one that ``changes`` something is
        permanent unless Slurm's message says it is transient."""
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                env=self._env(env),
                timeout=self.command_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BackendError(
                f"slurm backend {self.name!r}: {what} timed out after {self.command_timeout:g}s", permanent=False
            ) from exc
        except OSError as exc:  # not installed, not executable: an admin can fix it, so retry later
            raise self._error(f"cannot run {Path(command[0]).name}: {exc}", permanent=False) from exc
        if done.returncode != 0:
            message = " ".join((done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").split())
            permanent = changes and not parse.is_transient(message)
            raise self._error(f"{what} failed: {message}", permanent=permanent)
        return done.stdout

    def _json(self, argv: list[str], *, what: str) -> dict[str, Any]:
        out = self._run(argv, what=what)
        try:
            data = json.loads(out)
        except ValueError as exc:
            raise self._error(f"{what} printed invalid JSON: {exc}", permanent=False) from exc
        # 22.05's --json tools exit 0 even when slurmctld is unreachable, with an empty
        # list and the failure in "errors": reading that as "no jobs" would fail them all.
        errors = data.get("errors") if isinstance(data, dict) else None
        if errors:
            described = "; ".join(
                " ".join(str(e.get(k, "")) for k in ("source", "error", "description")).strip()
                if isinstance(e, dict)
                else str(e)
                for e in errors
            )
            raise self._error(f"{what} reported errors: {described}", permanent=False)
        if not isinstance(data, dict):
            raise self._error(f"{what} printed {type(data).__name__}, not an object", permanent=False)
        return data

    def _scontrol_update(self, args: list[str], *, job: str | None = None) -> None:
        """``scontrol <args>``; about ``job``, as its owner when jobs run as their owners."""
        owner = self._job_owner(job) if job is not None else None
        if job is not None and self.requires_identity and owner is None:
            raise self._error(f"scontrol {args[0]} {job}: Slurm does not know the job", permanent=True)
        self._run(["scontrol", *args], what=f"scontrol {' '.join(args[:2])}", as_owner=owner)

    # -- running as the job's owner ---------------------------------------------------

    def _owner(self, spec: JobSpec) -> Owner | None:
        """The owner ``spec`` runs as (None when this cluster runs jobs as the portal)."""
        if not self.requires_identity:
            return None
        try:
            return self.owners.owner(spec.run_as)
        except OwnerError as exc:
            raise self._reject(spec, str(exc)) from None

    def _job_owner(self, external_id: str) -> Owner | None:
        """The owner of a job Slurm knows, as Slurm records it (squeue, else sacct); None
        when jobs run as the portal or Slurm has forgotten the job. Acting as the user
        Slurm names, not as the one the portal's row names, the portal can never act on
        one user's job as another."""
        if not self.requires_identity:
            return None
        user = self._job_users.get(external_id)
        if user is None:
            user = self._run(["squeue", "-h", "-j", external_id, "-o", "%u"], what="squeue (job user)").strip()
            if not user and self.accounting:
                out = self._run(["sacct", "-X", "-n", "-P", "-j", external_id, "-o", "User"], what="sacct (job user)")
                user = next((line.strip() for line in out.splitlines() if line.strip()), "")
            if not user:
                return None
            self._job_users[external_id] = user
        try:
            return self.owners.named(user)
        except OwnerError as exc:
            raise self._error(f"job {external_id}: {exc}", permanent=True) from None

    def _make_output_dir(self, owner: Owner) -> None:
        """Make the owner's output directory, as the owner, private to them (0700)."""
        directory = str(self.owners.output_dir(owner))
        self._run(["mkdir", "-p", "-m", "0700", "--", directory], what=f"mkdir {directory}", as_owner=owner)
        self.owners.output_dir_made(owner)


#: Rank 0's rendezvous port, from the job's id: 20000-29999, below Linux's default
#: ephemeral range (32768-60999), so no outgoing connection holds it by chance.
_MASTER_PORT = "$((20000 + SLURM_JOB_ID % 10000))"


def _ranks(body: str, nodes: int, key: str) -> str:
    """The batch script's tail: the job-environment contract (``job_env``) around the
    user's command or script. One node: the batch step is the job, rank 0, master on
    loopback. Several: ``srun`` starts one task per node, each taking its rank from
    ``SLURM_NODEID`` and the master from ``SLURM_LAUNCH_NODE_IPADDR`` (the batch host,
    node 0, where srun runs), and ``--kill-on-bad-exit`` ends every rank when one fails,
    as the others would otherwise wait for it forever in a collective. The tasks run the
    body from a file in the working directory (a multi-node job's working directory is on
    the cluster's shared storage), not as an argument, which may hold only 128 KiB."""
    port = f"export QM_MASTER_PORT={_MASTER_PORT} MASTER_PORT={_MASTER_PORT}\n"
    if nodes == 1:
        rank = "export QM_NODE_RANK=0 NODE_RANK=0 QM_MASTER_ADDR=127.0.0.1 MASTER_ADDR=127.0.0.1\n"
        return f"{port}{rank}{body}\n"
    rank = (
        "export QM_NODE_RANK=$SLURM_NODEID NODE_RANK=$SLURM_NODEID"
        " QM_MASTER_ADDR=$SLURM_LAUNCH_NODE_IPADDR MASTER_ADDR=$SLURM_LAUNCH_NODE_IPADDR; "
        'exec bash "$1"'
    )
    script = f"{RESERVED_PREFIX}job-{key}.sh"  # no job file may take it (job_files.name_problem)
    srun = "srun --ntasks-per-node=1 --kill-on-bad-exit=1"
    return f'{port}{prelude({script: body})}{srun} bash -c {shlex.quote(rank)} qm-rank "$PWD"/{shlex.quote(script)}\n'
