"""Submission: a new PENDING job, after the quotas that depend on the queue.

Static checks (fields, access, feasibility) are the serializer's; what depends on the
queue at the moment of submission is checked here, under row locks.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from common.db.sql import Inserts, JoinedRows, prepared_cursor, quoted_table
from people.models import Account, Qos, Quota
from scheduler.choices import QUEUED_STATES, EventKind
from scheduler.jobs.array_spec import ArraySpec
from scheduler.jobs.files import store_files
from scheduler.jobs.transitions import EVENTS, record_event
from scheduler.models import Job, JobEvent

_QUOTAS = JoinedRows(Quota)
_JOBS = Inserts(Job)


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
            f"{walltime_seconds}s exceeds the {who} quota maximum of {quota.max_walltime_seconds}s."
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
    owner: Any, account: Account, walltime_seconds: int, *, lock: bool = False, adding: int = 1
) -> dict[str, str]:
    """Field -> message for every quota that would refuse ``adding`` more jobs (the tasks
    of an array count one each) of ``owner`` in ``account`` with this walltime; ``{}``
    when none would. Reads only.

    With ``lock`` (inside a transaction, as :func:`submit_job` calls it), the quota rows
    that apply are read ``FOR UPDATE``: submissions under the same quota take turns from
    here to their commit (~1 ms), so each counts the queue with the others' jobs in it
    and none can overshoot it (the count is its own statement, which sees what committed
    while it waited). The read and the lock are one statement, so a quota without a
    pending-jobs limit is taken in turn too; submissions under no quota never wait.
    SQLite writes one transaction at a time anyway. A what-if asks without locking: it
    submits nothing.
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
    return errors


def submit_job(*, owner: Any, account: Account, qos: Qos | None, array: ArraySpec | None = None, **fields: Any) -> Job:
    """Create a PENDING job (or, with ``array``, one PENDING job per task) after checking
    the quotas that depend on the queue.

    Raises ``ValidationError`` (field -> message) and writes nothing when a quota refuses
    the job (see :func:`quota_refusals`, called here with its quotas' row locks) or its
    ``files`` would pass the owner's cap (``scheduler.jobs.files``: stored once, however
    many tasks run them). Returns the job, or an array's first task, whose id is the
    array's.
    """
    now = timezone.now()
    files = fields.pop("files", None) or {}
    with transaction.atomic():
        errors = quota_refusals(
            owner, account, int(fields["walltime_seconds"]), lock=True, adding=array.count if array else 1
        )
        if errors:
            raise ValidationError(errors)
        if files:
            fields["file_set"] = store_files(owner, files, now)
        if array is not None:
            return _create_array(array, owner=owner, account=account, qos=qos, submitted_at=now, **fields)
        job = Job(owner=owner, account=account, qos=qos, submitted_at=now, **fields)
        event = JobEvent(
            at=now, kind=EventKind.SUBMITTED, message=f"submitted by {owner}", data={"total_gpus": job.total_gpus}
        )
        return _JOBS.save_with(job, EVENTS, event, "job")


def _create_array(array: ArraySpec, **fields: Any) -> Job:
    """Every task of ``array`` as a job, in index order (so ids and the FIFO order follow
    the indices). The first task is saved as any job; the others are copied from it by
    the database in one ``INSERT ... SELECT`` (:func:`_copy_tasks`): a 10,000-task array
    is a handful of statements, not 10,000 saves, and nothing of the tasks travels
    between Python and the database. The first task's id names the array; its
    ``array_job`` is itself, and its submitted event is the array's (as Slurm records
    one submission): 10,000 more event rows cost seconds at commit, where PostgreSQL
    checks each one's reference to its job, and tell nothing the array's does not."""
    first = _JOBS.save(
        Job(
            array_task_id=array.indices[0],
            array_task_count=array.count,
            array_throttle=array.throttle,
            array_spec=array.text,
            **fields,
        )
    )
    Job.objects.filter(pk=first.pk).update(array_job=first)
    first.array_job_id = first.pk
    _copy_tasks(first, array.indices[1:])
    owner = fields["owner"]
    record_event(
        first.pk,
        EventKind.SUBMITTED,
        f"submitted by {owner} as array {first.pk} of {array.count} tasks ({array.text})",
        {"total_gpus": first.total_gpus, "array_job": first.pk, "tasks": array.count},
    )
    return first


def _dialect(indices: tuple[int, ...]) -> tuple[str, list[int] | str, str]:
    """This database's way to list ``indices`` from one parameter (the SQL and the
    parameter) and to make a UUID."""
    if connection.vendor == "postgresql":
        return "SELECT unnest(%s::integer[]) AS idx", list(indices), "gen_random_uuid()"
    # SQLite (the embedded default): a JSON list; Django keeps a UUID there as 32 hex digits.
    return "SELECT value AS idx FROM json_each(%s)", json.dumps(list(indices)), "lower(hex(randomblob(16)))"


def _copy_tasks(first: Job, indices: tuple[int, ...]) -> None:
    """Insert one job per index, each a copy of ``first`` but for its own id, uuid and
    index, in index order."""
    if not indices:
        return
    table = quoted_table(Job)
    columns = [str(f.column) for f in Job._meta.concrete_fields if f.column not in ("id", "uuid", "array_task_id")]
    quoted = [connection.ops.quote_name(c) for c in columns]
    listing, indices_param, new_uuid = _dialect(indices)
    uuid_column, task_column = connection.ops.quote_name("uuid"), connection.ops.quote_name("array_task_id")
    sql = (
        f"INSERT INTO {table} ({uuid_column}, {task_column}, {', '.join(quoted)}) "  # our table and columns
        f"SELECT {new_uuid}, t.idx, {', '.join('f.' + c for c in quoted)} "
        f"FROM {table} f, ({listing}) t WHERE f.id = %s ORDER BY t.idx"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [indices_param, first.pk])
