"""Pure translations between Slurm's words and ours, for :mod:`scheduler.backends.slurm`.

Everything here is a function of text Slurm printed (``squeue -O``, ``sinfo --json``,
``sacct -P``, an error message): no processes, no I/O, so every mapping is tested plainly
in ``tests/contract/test_slurm_backend.py`` without a cluster.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.backends.base import GpuInfo, NodeInfo, PollResult, RemoteState

#: Slurm's base job states (``squeue``/``sacct``) -> ours. ``COMPLETING`` is a flag that
#: ``squeue`` prints instead of the final state while the job's processes are
#: being cleaned up; the final state follows within KillWait, so it reads as running.
JOB_STATES: dict[str, RemoteState] = {
    "PENDING": RemoteState.PENDING,
    "REQUEUED": RemoteState.PENDING,
    "REQUEUE_HOLD": RemoteState.PENDING,
    "REQUEUE_FED": RemoteState.PENDING,
    "CONFIGURING": RemoteState.PENDING,
    "RUNNING": RemoteState.RUNNING,
    "COMPLETING": RemoteState.RUNNING,
    "SUSPENDED": RemoteState.RUNNING,
    "STOPPED": RemoteState.RUNNING,
    "SIGNALING": RemoteState.RUNNING,
    "STAGE_OUT": RemoteState.RUNNING,
    "RESIZING": RemoteState.RUNNING,
    "COMPLETED": RemoteState.COMPLETED,
    "FAILED": RemoteState.FAILED,
    "OUT_OF_MEMORY": RemoteState.FAILED,
    "SPECIAL_EXIT": RemoteState.FAILED,
    "BOOT_FAIL": RemoteState.NODE_FAIL,
    "NODE_FAIL": RemoteState.NODE_FAIL,
    "CANCELLED": RemoteState.CANCELLED,
    "REVOKED": RemoteState.CANCELLED,
    "DEADLINE": RemoteState.TIMEOUT,
    "TIMEOUT": RemoteState.TIMEOUT,
    "PREEMPTED": RemoteState.PREEMPTED,
}

#: Reasons worth showing for states whose name alone says too little.
_STATE_REASONS = {
    "OUT_OF_MEMORY": "out of memory (Slurm OUT_OF_MEMORY)",
    "BOOT_FAIL": "node failed to boot (Slurm BOOT_FAIL)",
    "DEADLINE": "deadline reached (Slurm DEADLINE)",
    "SPECIAL_EXIT": "special exit (Slurm SPECIAL_EXIT)",
    "REVOKED": "revoked by a sibling cluster (Slurm REVOKED)",
    "COMPLETING": "completing",
    "SUSPENDED": "suspended",
}

#: Fragments of Slurm errors that a later retry can get past: the controller or the
#: database is busy, restarting or unreachable. Anything else that Slurm *refused*
#: ("Batch job submission failed: ...") is permanent.
TRANSIENT_MARKERS = (
    "unable to contact slurm controller",
    "socket timed out",
    "slurm temporarily unable",
    "resource temporarily unavailable",
    "connection refused",
    "connection timed out",
    "communication connection failure",
    "slurmctld is not responding",
    "slurmdbd",
    "too many pending jobs",
    # Submit limits of the portal's own Slurm user (QOS/association MaxSubmitJobs): jobs
    # end and the limit frees up, so waiting is right; failing users' jobs is not.
    "job submit limit",
    "maxsubmitjob",
    "assocmaxsubmit",
    "job submission is disabled",
    "zero bytes were transmitted or received",
    "munge",
    "try again",
)

#: The comment on every job we submit: ``qm:<JobSpec.key>`` (how a retried submit and
#: reconciliation find it).
COMMENT_PREFIX = "qm:"
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)")
_UUID_NAMESPACE = uuid.UUID("0b5e1a9c-8d0e-5a44-9b7e-5f1d2c3a4b60")


def is_transient(message: str) -> bool:
    """Whether a Slurm error message describes a failure that a retry may get past."""
    lowered = message.lower()
    return any(marker in lowered for marker in TRANSIENT_MARKERS)


def exit_code_from_status(status: int) -> int:
    """``squeue``'s ``exit_code`` is a raw wait status: 768 is ``exit 3``, 9 is
    SIGKILL. Signals map to 128 + signal, as a shell reports them."""
    signal = status & 0x7F
    return 128 + signal if signal else (status >> 8) & 0xFF


def exit_code_from_pair(text: str) -> int | None:
    """``sacct``'s ``ExitCode`` is ``code:signal`` (``3:0``, ``0:9``)."""
    code, _, signal = text.partition(":")
    try:
        return 128 + int(signal) if signal and int(signal) else int(code)
    except ValueError:
        return None


def epoch(value: Any) -> datetime | None:
    """Slurm's epoch seconds (0 or a non-number: unset) as an aware datetime."""
    try:
        seconds = int(value)
    except (TypeError, ValueError):
        return None
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds > 0 else None


def poll_result(
    external_id: str, slurm_state: str, exit_code: int | None, reason: str, start: Any, end: Any
) -> PollResult:
    """One job's state in our terms.

    ``slurm_state`` may carry sacct's suffix (``CANCELLED by 0``). A cancelled job gets
    no exit code: ``squeue`` reports the signal and ``sacct`` reports 0, so leaving it out
    keeps two polls of the same job equal whichever source answered.
    """
    base = slurm_state.split(" ", 1)[0].upper()
    # A state this code does not know is not taken for an end: judging a live job ended
    # would fail it and then sweep it as an orphan. It stays RUNNING, with the reason.
    state = JOB_STATES.get(base, RemoteState.RUNNING)
    if reason in ("None", "(null)"):
        reason = ""
    reason = _STATE_REASONS.get(base, reason)
    if base not in JOB_STATES:
        reason = f"unrecognised Slurm state {slurm_state!r}"
    started = epoch(start) if state is not RemoteState.PENDING else None
    ended = epoch(end) if state.is_terminal else None
    return PollResult(
        external_id,
        state,
        exit_code=exit_code if state.is_terminal and state is not RemoteState.CANCELLED else None,
        reason=reason,
        started_at=started,
        ended_at=ended,
    )


#: ``squeue -O`` fields for a poll, ``|``-separated, unpadded (size 0). Not ``--json``:
#: that prints every job slurmctld remembers in full whatever ``-j`` asks (0.65 s and
#: 15 MB for 4,300 jobs on the dev cluster, against 0.05 s for these six fields).
SQUEUE_POLL_FORMAT = "JobID:|,State:|,Reason:|,StartTime:|,EndTime:|,exit_code:"


def from_squeue_line(line: str) -> PollResult | None:
    """A line of ``squeue -h -O SQUEUE_POLL_FORMAT`` with ``SLURM_TIME_FORMAT=%s``; None
    for a line that is not one. ``exit_code`` is the raw wait status, as ``--json`` has
    it (768 is ``exit 3``); a time Slurm has not set reads ``NONE`` or ``N/A``."""
    fields = line.strip().split("|", 2)
    if len(fields) < 3 or not fields[0].isdigit():
        return None
    job_id, state, rest = fields
    parts = rest.rsplit("|", 3)
    if len(parts) < 4:
        return None
    reason, start, end, status = parts
    exit_code = exit_code_from_status(int(status)) if status.isdigit() else None
    return poll_result(job_id, state, exit_code, reason, start, end)


def from_sacct_line(line: str) -> PollResult | None:
    """A line of ``sacct -X -n -P -o JobIDRaw,State,ExitCode,Start,End,Reason`` with
    ``SLURM_TIME_FORMAT=%s``; None for a line that is not one."""
    fields = line.split("|")
    if len(fields) < 6 or not fields[0].isdigit():
        return None
    job_id, state, exit_code, start, end, reason = fields[:6]
    return poll_result(job_id, state, exit_code_from_pair(exit_code), reason, start, end)


@dataclass(frozen=True, slots=True)
class GpuModel:
    """What a GRES type means as hardware (Slurm only knows the type's name)."""

    model: str
    memory_mib: int = 0
    compute_capability: str = ""


def gres_gpus(gres: str) -> tuple[str, int]:
    """``gpu:a100:8(S:0-1)`` -> ("a100", 8); ``gpu:4`` -> ("", 4); no GPUs -> ("", 0).
    Several GPU types on one node are summed under the first type."""
    matches = list(_GRES_GPU.finditer(gres or ""))
    if not matches:
        return "", 0
    return matches[0]["type"] or "", sum(int(m["count"]) for m in matches)


def node_state(slurm_state: str, flags: list[str]) -> str:
    """Slurm's node state and flags -> "up", "drain" or "down".

    Down and failed nodes are down (the portal requeues their jobs after a grace). A
    drained or draining node is drained, and so is one that is not responding or in an
    unknown state: Slurm itself keeps its jobs until ``SlurmdTimeout``, so the portal
    places nothing new there but does not give up on its jobs. A powered-down node (power
    saving, ``idle~``) is up: Slurm powers it on for the jobs sent to it.
    """
    words = {slurm_state.upper(), *(f.upper() for f in flags)}
    if words & {"DOWN", "FAIL", "FAILING", "FUTURE", "INVALID"}:
        return "down"
    if words & {"DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "UNKNOWN"}:
        return "drain"
    return "up"


def node_from_sinfo(node: Mapping[str, Any], cluster: str, models: Mapping[str, GpuModel]) -> NodeInfo:
    """A node of ``sinfo --json`` (22.05). GPUs are numbered 0..n-1 as Slurm numbers the
    GRES devices; their uuids are stable names derived from cluster, node and index."""
    name = str(node["name"])
    gres_type, count = gres_gpus(str(node.get("gres") or ""))
    hardware = models.get(gres_type, GpuModel(model=gres_type or "gpu"))
    flags = [str(f) for f in node.get("state_flags") or []]
    slurm_state = str(node.get("state") or "unknown")
    gpus = tuple(
        GpuInfo(
            index=i,
            model=hardware.model,
            memory_mib=hardware.memory_mib,
            compute_capability=hardware.compute_capability,
            uuid="GPU-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{cluster}/{name}/{i}")),
        )
        for i in range(count)
    )
    labels = {"slurm_state": "+".join([slurm_state, *flags]).lower(), "gres_type": gres_type}
    if node.get("features"):
        labels["features"] = str(node["features"])
    if node.get("partitions"):
        labels["partitions"] = ",".join(str(p) for p in node["partitions"])
    return NodeInfo(
        name=name,
        cpus=int(node.get("cpus") or 0),
        memory_mib=int(node.get("real_memory") or 0),
        gpus=gpus,
        state=node_state(slurm_state, flags),
        reason=str(node.get("reason") or ""),
        labels=labels,
    )


def walltime(seconds: int) -> str:
    """``--time`` as ``D-HH:MM:SS``. Slurm keeps limits in whole minutes and rounds up."""
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    return f"{days}-{hrs:02d}:{mins:02d}:{secs:02d}"


def batch_host(text: str) -> str | None:
    """The node a job's batch script runs on, from ``squeue -h -o %B`` (None before it
    starts: squeue prints ``n/a`` or nothing)."""
    host = text.strip().splitlines()[0].strip() if text.strip() else ""
    return None if host in ("", "n/a", "(null)") else host


def node_address(text: str) -> str | None:
    """``NodeAddr`` from ``scontrol show node NAME`` (``Key=value`` words), where
    the node answers on the network (its name need not resolve from the portal's host);
    None when Slurm printed none."""
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key == "NodeAddr" and value and value != "(null)":
            return value
    return None
