"""Admission: every rule a job submission must pass, in one place.

The API (a job, an array, a job edit), the submit form and the what-if all ask here;
serializers and forms only shape a request (types, parsing, a field's own limits) and
show the problems this module finds against the fields they name, with its messages.

The rules come in two stages, because the second depends on the queue at the moment:

1. :func:`admit`, the standing rules: what to run, who pays (the account, the QOS it
   may use, that QOS's walltime ceiling and the limits no single job may pass), what an
   array may hold, the reservation, fractional GPUs, the hardware (could any node ever
   hold it), the owner's cluster identity. It also says which account and QOS an
   omitted one means.
2. :func:`quota_refusals`, the quotas: pending jobs (an array's tasks count one each),
   the quota walltime, and the jobs a user may have submitted in the QOS. A submission
   asks inside its own transaction with the quota rows locked
   (:func:`scheduler.jobs.submit.submit_job`); the what-if asks without.

:func:`admission_problems` is both, as one answer: the standing problems, else the
quota refusals (so a request shows the quotas' word only once it is otherwise
admissible, as the API has always answered). Callers that validate a request before
acting on it (the serializer, the form) ask stage 1 and leave stage 2 to the action, so
that no submission reads its quotas twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import connection

from common.db.sql import JoinedRows, prepared_cursor, quoted_table
from people.access import default_account, may_submit_to, usable_qos
from people.models import Account, Qos, Quota
from scheduler.backends.job_files import name_problem
from scheduler.choices import QUEUED_STATES, TERMINAL_STATES
from scheduler.core.hours import gpu_count
from scheduler.core.limits import duration_text
from scheduler.core.types import CPU_MILLIS, PendingJob, cpu_text
from scheduler.jobs.array_spec import ArraySpec
from scheduler.jobs.files import files_size
from scheduler.jobs.identity import cluster_username, clusters_requiring_identity, has_cluster_identity
from scheduler.jobs.output_paths import DISCARD, placement_problem
from scheduler.jobs.request import pending_request
from scheduler.jobs.workdir import workdir_bounds
from scheduler.models import Job, Reservation

#: Field -> the problems found with it, as a 400 names them (``{"qos": ["..."]}``).
Problems = dict[str, list[str]]


class Hardware(Protocol):
    """What the clusters could ever offer: ``scheduler.reads.inventory.Inventory``,
    which callers pass in (it is read, and kept per process, above this layer)."""

    def check(self, job: PendingJob) -> dict[str, str]:
        """Field -> message for every part of ``job`` that no node can satisfy."""
        ...


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer of the standing rules: the problems by field (empty: admissible), and
    the account and QOS the job is charged to, an omitted one replaced by its default
    (``None`` where there is none)."""

    problems: Problems
    account: Account | None
    qos: Qos | None


def tasks(array: ArraySpec | None) -> int:
    """How many jobs a request makes, as the quotas count them: an array's tasks, else 1."""
    return array.count if array is not None else 1


def admission_problems(
    values: Mapping[str, Any],
    *,
    owner: Any,
    account: Account | None,
    qos: Qos | None,
    hardware: Hardware,
    now: datetime,
) -> Problems:
    """Every problem by field that keeps the request ``values`` (shaped as the API's
    serializer leaves them: every request field, ``array`` an ``ArraySpec`` or ``None``)
    of ``owner``, charged to ``account`` under ``qos`` (``None``: the defaults), from
    being submitted at ``now``; ``{}`` when it would be accepted. Reads only.

    Steps:
    1. The standing rules (:func:`admit`).
    2. Only when they find nothing: the quotas, counting the queue now without locks
       (:func:`quota_refusals`).
    """
    admission = admit(values, owner=owner, account=account, qos=qos, hardware=hardware, now=now)
    if admission.problems or admission.account is None:
        return admission.problems
    refusals = quota_refusals(
        owner,
        admission.account,
        int(values["walltime_seconds"]),
        adding=tasks(values.get("array")),
        qos=admission.qos,
    )
    return {field: [message] for field, message in refusals.items()}


def admit(
    values: Mapping[str, Any],
    *,
    owner: Any,
    account: Account | None,
    qos: Qos | None,
    hardware: Hardware,
    now: datetime,
) -> Admission:
    """The standing rules (stage 1, see the module's note) over ``values``, with the
    account and QOS the job is charged to. At most one problem per field: where two
    rules speak of one field, the first in this order has the word.

    Steps:
    1. What to run: a command or a script, not both.
    2. Who pays: ``account`` (omitted: the owner's default), which the owner must
       belong to; ``qos`` (omitted: the account's default), one the account may use
       (staff may use any), whose walltime ceiling the job must keep, and whose limits
       on what one user (or the whole QOS) may run it must not pass alone
       (:func:`qos_problems`).
    3. An array's tasks, their commands and scripts and the files, within
       ``JOB_ARRAY_MAX_BYTES``.
    4. The reservation exists and admits the owner or the account, and its span holds
       the walltime.
    5. A fractional GPU is a share of one GPU per node; only it reserves GPU memory.
    6. The hardware could hold it (``hardware.check``).
    7. The owner has a cluster identity where a cluster runs jobs as their owners.
    8. Its own output files (``sbatch -o/-e``) lie where the owner's jobs may write:
       under their roots, outside the portal's files; without a workdir, a file name in
       the job's own fresh directory (``scheduler.jobs.output_paths``).
    """
    found: dict[str, str] = {}

    def problem(field: str, message: str) -> None:
        found.setdefault(field, message)

    # 1.
    if not values.get("command") and not values.get("script"):
        problem("command", "Give a command or a script.")
    elif values.get("command") and values.get("script"):
        problem("script", "Give a command or a script, not both.")
    # 2.
    account, qos = _who_pays(owner, account, qos, problem)
    walltime = int(values["walltime_seconds"])
    if qos is not None and qos.max_walltime_seconds and walltime > qos.max_walltime_seconds:
        problem(
            "walltime_seconds",
            f"{duration_text(walltime)} exceeds the maximum of QOS {qos.name!r} "
            f"({duration_text(qos.max_walltime_seconds)}).",
        )
    request = pending_request(values)
    if qos is not None:
        for field, refusal in qos_problems(qos, request).items():
            problem(field, refusal)
    # 3.
    if (message := _array_too_large(values)) is not None:
        problem("array", message)
    # 4.
    reservation = values.get("reservation")
    if reservation and "account" not in found:  # whom it admits depends on the account
        message = reservation_problem(reservation, owner, account, walltime, now)
        if message is not None:
            problem("reservation", message)
    # 5.
    for field, message in _share_problems(values).items():
        problem(field, message)
    # 6.
    for field, message in hardware.check(request).items():
        problem(field, message)
    # 7.
    if not has_cluster_identity(owner) and (needing := clusters_requiring_identity()):
        problem(
            "cluster_identity",
            f"You have no cluster identity (the POSIX user your jobs run as), and cluster "
            f"{', '.join(needing)} runs every job as its owner: ask staff to set yours.",
        )
    # 8.
    for field, message in _output_problems(values, owner).items():
        problem(field, message)
    return Admission({field: [message] for field, message in found.items()}, account, qos)


def qos_problems(qos: Qos, request: PendingJob) -> dict[str, str]:
    """Field -> why ``request`` could never run under ``qos``'s limits, whatever else
    runs: it asks alone for more GPUs or CPUs than the QOS allows one user (or all its
    jobs together), or the QOS lets a user run no job at all. Slurm refuses such a job
    at submission with the same reason word (``QOSMaxGRESPerUser``, ...) rather than
    queue it forever."""
    found: dict[str, str] = {}
    gpus = request.gpu_amount
    name = qos.name
    if qos.max_gpus_per_user is not None and gpus > qos.max_gpus_per_user:
        found["gpus_per_node"] = (
            f"This job asks for {gpu_count(gpus)} GPUs; QOS {name!r} allows one user at most "
            f"{qos.max_gpus_per_user} at once (QOSMaxGRESPerUser)."
        )
    elif qos.max_gpus is not None and gpus > qos.max_gpus:
        found["gpus_per_node"] = (
            f"This job asks for {gpu_count(gpus)} GPUs; QOS {name!r} allows all its jobs together at most "
            f"{qos.max_gpus} at once (QOSGrpGRES)."
        )
    cpus = request.nodes * request.cpu_millis_per_node
    if qos.max_cpus_per_user is not None and cpus > qos.max_cpus_per_user * CPU_MILLIS:
        found["cpus_per_node"] = (
            f"This job asks for {cpu_text(cpus)} CPUs; QOS {name!r} allows one user at most "
            f"{qos.max_cpus_per_user} at once (QOSMaxCpuPerUserLimit)."
        )
    if qos.max_running_jobs_per_user == 0:
        found["qos"] = f"QOS {name!r} lets no user run a job (QOSMaxJobsPerUserLimit is 0)."
    return found


def _output_problems(values: Mapping[str, Any], owner: Any) -> dict[str, str]:
    """Where each output file named lies, checked as text (step 8)."""
    paths = {field: values.get(field) or "" for field in ("output_path", "error_path")}
    if not any(paths.values()):
        return {}
    user = cluster_username(owner)
    bounds = workdir_bounds(user)
    refused = [str(Path(tree).resolve()) for tree in bounds.refused]
    workdir = str(values.get("workdir") or "")
    found: dict[str, str] = {}
    for field, path in paths.items():
        if not path:
            continue
        problem = placement_problem(path, workdir=workdir, user=user, roots=bounds.roots, refused=refused)
        if problem is None and not workdir and not path.startswith("/") and path != DISCARD:
            problem = name_problem(path)  # a name in the job's own directory: none of the portal's files there
        if problem:
            found[field] = problem[0].upper() + problem[1:]
    return found


def _who_pays(
    owner: Any, account: Account | None, qos: Qos | None, problem: Callable[[str, str], None]
) -> tuple[Account | None, Qos | None]:
    """Step 2's account and QOS: the owner's default account when none is given (they
    must belong to the one given), the account's default QOS when none is given (one the
    account may use; staff may use any). Tells ``problem`` what does not hold."""
    if account is None:
        account = default_account(owner)
        if account is None:
            problem("account", "This field is required (you belong to no account: ask staff to add you to one).")
    elif not may_submit_to(owner, account):
        problem("account", f"You are not a member of account {account.name!r}.")
    if account is not None:
        allowed, default = usable_qos(account)
        if qos is None:
            qos = default
        elif qos not in allowed and not owner.is_staff:
            names = ", ".join(q.name for q in allowed) or "none"
            problem("qos", f"Account {account.name!r} may not use QOS {qos.name!r} (it may use: {names}).")
    return account, qos


def _share_problems(values: Mapping[str, Any]) -> dict[str, str]:
    """Step 5: a fractional GPU is a share of one GPU per node; only it reserves memory."""
    found = {}
    if values["gpu_share"] and values["gpus_per_node"] != 1:
        found["gpus_per_node"] = "A fractional job (gpu_share) takes a share of 1 GPU per node."
    if values["gpu_memory_mib_share"] and not values["gpu_share"]:
        found["gpu_memory_mib_share"] = "Only a fractional job (gpu_share) reserves a share of GPU memory."
    return found


def _array_too_large(values: Mapping[str, Any]) -> str | None:
    """Why an array holds too much, or ``None``. Each task stores its command and
    script; the files are stored once for all."""
    array = values.get("array")
    if array is None:
        return None
    each = sum(len((values.get(f) or "").encode("utf-8")) for f in ("command", "script"))
    files = files_size(values.get("files") or {})
    if each * array.count + files <= settings.JOB_ARRAY_MAX_BYTES:
        return None
    return (
        f"{array.count} tasks of {each} bytes (command and script) each, and {files} bytes of files, exceed the "
        f"{settings.JOB_ARRAY_MAX_BYTES} bytes an array may hold; put the inputs on the cluster's storage and read "
        "them by $QM_ARRAY_TASK_ID."
    )


def reservation_problem(name: str, user: Any, account: Any, walltime_seconds: int, now: datetime) -> str | None:
    """Why a job of ``user`` in ``account`` may not ask for reservation ``name``, or
    ``None`` when it may: the reservation exists, has not ended, admits them, and is
    long enough to hold the walltime (a job never runs past its reservation's end)."""
    reservation = Reservation.objects.filter(name=name).first()
    if reservation is None or reservation.end_at <= now:
        return f"There is no reservation {name!r} (or it has ended)."
    if reservation.kind == Reservation.Kind.MAINTENANCE:
        return f"{name!r} is a maintenance window: no job runs in it."
    admitted = (account is not None and reservation.accounts.filter(pk=account.pk).exists()) or (
        reservation.users.filter(pk=user.pk).exists()
    )
    if not admitted:
        return f"Reservation {name!r} is not for you or account {getattr(account, 'name', '?')!r}."
    span = (reservation.end_at - max(reservation.start_at, now)).total_seconds()
    if walltime_seconds > span:
        return (
            f"Reservation {name!r} lasts {duration_text(int(span))} more; "
            f"the walltime ({duration_text(walltime_seconds)}) must fit inside it."
        )
    return None


# --- Stage 2: the quotas -----------------------------------------------------------------

_QUOTAS = JoinedRows(Quota)


def _check_quota(
    quota: Quota | None, queued: int, walltime_seconds: int, field: str, who: str, adding: int
) -> dict[str, str]:
    errors: dict[str, str] = {}
    if quota is None:
        return errors
    if quota.max_pending_jobs is not None and queued + adding > quota.max_pending_jobs:
        asked = "" if adding == 1 else f" and the array adds {adding} tasks"
        errors[field] = f"{who} already has {queued} pending jobs{asked}; the quota allows {quota.max_pending_jobs}."
    if quota.max_walltime_seconds is not None and walltime_seconds > quota.max_walltime_seconds:
        errors["walltime_seconds"] = (
            f"{duration_text(walltime_seconds)} exceeds the {who} quota maximum of "
            f"{duration_text(quota.max_walltime_seconds)}."
        )
    return errors


def _queued(quota: Quota, column: str, value: int) -> int:
    """Queued jobs whose ``column`` (``account_id`` or ``owner_id``) is ``value``, counted
    only when the quota limits them (SQL written once: every submission asks)."""
    if quota.max_pending_jobs is None:
        return 0
    states = sorted(QUEUED_STATES)
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {quoted_table(Job)} WHERE {connection.ops.quote_name(column)} = %s "  # ours
            f"AND state IN ({', '.join(['%s'] * len(states))})",
            [value, *states],
        )
        return int(cursor.fetchone()[0])


def quota_refusals(
    owner: Any,
    account: Account,
    walltime_seconds: int,
    *,
    lock: bool = False,
    adding: int = 1,
    qos: Qos | None = None,
) -> dict[str, str]:
    """Field -> message for every quota that would refuse ``adding`` more jobs (the tasks
    of an array count one each) of ``owner`` in ``account`` with this walltime, and for
    ``qos`` when it allows a user fewer submitted jobs (:func:`_qos_submit_refusal`);
    ``{}`` when none would. Reads only.

    With ``lock`` (inside a transaction, as :func:`scheduler.jobs.submit.submit_job`
    calls it), the quota rows that apply are read ``FOR UPDATE``: submissions under the
    same quota take turns from here to their commit (~1 ms), so each counts the queue
    with the others' jobs in it and none can overshoot it (the count is its own
    statement, which sees what committed while it waited). The read and the lock are one
    statement, so a quota without a pending-jobs limit is taken in turn too; submissions
    under no quota never wait. SQLite writes one transaction at a time anyway. A what-if
    asks without locking: it submits nothing.
    """
    locking = "FOR UPDATE" if lock and connection.features.has_select_for_update else ""
    applying = _QUOTAS.read("t0.account_id = %s OR t0.user_id = %s", [account.pk, owner.pk], locking)
    quotas = {("account" if q.account_id else "user"): q for q in applying}
    errors: dict[str, str] = {}
    if "account" in quotas:
        queued = _queued(quotas["account"], "account_id", account.pk)
        errors.update(
            _check_quota(quotas["account"], queued, walltime_seconds, "account", f"Account {account.name}", adding)
        )
    if "user" in quotas:
        queued = _queued(quotas["user"], "owner_id", owner.pk)
        errors.update(_check_quota(quotas["user"], queued, walltime_seconds, "account", f"User {owner}", adding))
    if qos is not None and qos.max_submitted_jobs_per_user is not None:
        refusal = _qos_submit_refusal(owner, qos, lock=lock, adding=adding)
        if refusal is not None:
            errors["qos"] = refusal
    return errors


def _qos_submit_refusal(owner: Any, qos: Qos, *, lock: bool, adding: int) -> str | None:
    """Why ``qos`` refuses ``adding`` more jobs of ``owner``: their jobs in it that have
    not ended (pending, held or running; Slurm's ``MaxSubmitJobsPerUser``) and these
    would pass its limit. With ``lock``, the QOS row is read ``FOR UPDATE`` (its limit
    afresh), so that submissions under it take turns as under a quota's."""
    limit = qos.max_submitted_jobs_per_user
    if lock and connection.features.has_select_for_update:
        locked = Qos.objects.select_for_update().filter(pk=qos.pk)
        limit = locked.values_list("max_submitted_jobs_per_user", flat=True).first()
    if limit is None:
        return None
    submitted = Job.objects.filter(owner=owner, qos=qos).exclude(state__in=TERMINAL_STATES).count()
    if submitted + adding <= limit:
        return None
    asked = "" if adding == 1 else f" and the array adds {adding} tasks"
    return (
        f"User {owner} already has {submitted} jobs pending or running in QOS {qos.name!r}{asked}; "
        f"it allows {limit} per user (QOSMaxSubmitJobPerUserLimit)."
    )
