"""Submission: a new PENDING job, after the quotas that depend on the queue.

Every rule is ``scheduler.jobs.admission``'s: the standing ones are asked when the
request is validated (the API's serializer, the form); the quotas, which depend on the
queue at the moment of submission, are asked here, under row locks.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from common.db.sql import Inserts, quoted_table
from people.models import Account, Qos
from scheduler.choices import EventKind, JobState
from scheduler.jobs.admission import quota_refusals, tasks
from scheduler.jobs.array_spec import ArraySpec
from scheduler.jobs.files import store_files
from scheduler.jobs.transitions import EVENTS, record_event
from scheduler.jobs.verbs import held_fields
from scheduler.models import Job, JobEvent

_JOBS = Inserts(Job)
#: What a job submitted held says in its submitted event.
HELD_WORDS = ", held until released (sbatch --hold)"


def submit_job(
    *,
    owner: Any,
    account: Account,
    qos: Qos | None,
    array: ArraySpec | None = None,
    hold: bool = False,
    now: datetime | None = None,
    **fields: Any,
) -> Job:
    """Create a PENDING job (or, with ``array``, one PENDING job per task; with ``hold``,
    HELD ones, as ``sbatch --hold``, until released) after checking
    the quotas that depend on the queue: admission's second stage. The first, the
    standing rules (``scheduler.jobs.admission.admit``), is the caller's: the API's
    serializer and the submit form ask it before they call this.

    Raises ``ValidationError`` (field -> message) and writes nothing when a quota refuses
    the job (:func:`scheduler.jobs.admission.quota_refusals`, asked here with its
    quotas' row locks) or its ``files`` would pass the owner's cap (``scheduler.jobs.files``: stored once, however
    many tasks run them). Returns the job, or an array's first task, whose id is the
    array's. ``now``: when it is submitted (its ``submitted_at`` and its event); now,
    unless the caller writes a submission of the past (the demo's history).
    """
    now = now or timezone.now()
    files = fields.pop("files", None) or {}
    with transaction.atomic():
        errors = quota_refusals(
            owner, account, int(fields["walltime_seconds"]), lock=True, adding=tasks(array), qos=qos
        )
        if errors:
            raise ValidationError(errors)
        if files:
            fields["file_set"] = store_files(owner, files, now)
        if hold:
            fields.update(state=JobState.HELD, **held_fields(str(owner)))
        if array is not None:
            return _create_array(array, owner=owner, account=account, qos=qos, submitted_at=now, **fields)
        job = Job(owner=owner, account=account, qos=qos, submitted_at=now, **fields)
        event = JobEvent(
            at=now,
            kind=EventKind.SUBMITTED,
            message=f"submitted by {owner}{HELD_WORDS if hold else ''}",
            data={"total_gpus": job.total_gpus},
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
        f"submitted by {owner} as array {first.pk} of {array.count} tasks ({array.text})"
        + (HELD_WORDS if first.state == JobState.HELD else ""),
        {"total_gpus": first.total_gpus, "array_job": first.pk, "tasks": array.count},
        at=fields["submitted_at"],
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
