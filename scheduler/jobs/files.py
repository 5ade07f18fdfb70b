"""The files jobs bring, as stored: once per submission, counted per owner, dropped some
time after the jobs that run them ended.

1. Stored once (:func:`store_files`): a submission's files are one ``JobFiles`` row; a job
   refers to it, and an array's tasks all refer to the same one (they copy the reference
   with the rest of the first task, ``scheduler.jobs.submit``). Dispatch reads the row
   through the job (``Job.files``).
2. Counted (:func:`cap_problem`): what one owner's stored files hold, expired ones aside,
   may not pass ``JOB_FILES_MAX_BYTES_PER_USER``; a submission that would pass it is
   refused on ``files``, saying the cap and what is stored.
3. Expired (:func:`expire_files`, periodic): ``JOB_FILES_RETENTION_DAYS`` after the last
   job that runs them ended, the content is dropped; the names and the moment stay, so
   the job's page and the API say the files expired, and a requeue is refused
   (:func:`refuse_if_expired`). A row no job refers to any more (its jobs were deleted)
   is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, Q, QuerySet, Sum

from scheduler.jobs.transitions import JobStateConflict
from scheduler.models import Job, JobFiles


def files_size(files: Mapping[str, str]) -> int:
    """The bytes ``files`` hold as the limits count them: their content's UTF-8."""
    return sum(len(text.encode("utf-8")) for text in files.values())


def stored_bytes(owner: Any) -> int:
    """What ``owner``'s stored job files hold (bytes), expired ones aside."""
    total = JobFiles.objects.filter(owner=owner, expired_at__isnull=True).aggregate(total=Sum("size_bytes"))
    return int(total["total"] or 0)


def cap_problem(owner: Any, adding: int) -> str | None:
    """Why ``owner`` may not store ``adding`` more bytes of job files, or None."""
    cap = settings.JOB_FILES_MAX_BYTES_PER_USER
    if not adding:
        return None
    stored = stored_bytes(owner)
    if stored + adding <= cap:
        return None
    days = settings.JOB_FILES_RETENTION_DAYS
    return (
        f"Your jobs' files already hold {stored} bytes and these add {adding}; at most {cap} may be stored per user "
        f"(JOB_FILES_MAX_BYTES_PER_USER; files are dropped {days} days after their jobs end). Put larger data on "
        "the cluster's storage and give its path."
    )


def store_files(owner: Any, files: Mapping[str, str], now: datetime) -> JobFiles | None:
    """A new row holding ``files`` for ``owner`` (None when there are none), after the
    per-user cap. Call inside the submission's transaction: the owner's row is locked
    (``FOR UPDATE``) from here to the commit, so two submissions of one owner count
    each other's files. Raises ``ValidationError`` on ``files``, writing nothing."""
    if not files:
        return None
    size = files_size(files)
    list(get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk"))
    problem = cap_problem(owner, size)
    if problem:
        raise ValidationError({"files": problem})
    return JobFiles.objects.create(owner=owner, files=dict(files), names=sorted(files), size_bytes=size, created_at=now)


def expire_files(now: datetime) -> dict[str, int]:
    """Drop the content of every file set whose jobs all ended more than
    ``JOB_FILES_RETENTION_DAYS`` before ``now`` (one statement; a job still waiting,
    running or requeued keeps its files), and delete the rows no job refers to. Returns
    how many of each. Idempotent."""
    cutoff = now - timedelta(days=settings.JOB_FILES_RETENTION_DAYS)
    jobs = Job.objects.filter(file_set=OuterRef("pk"))
    in_use = jobs.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=cutoff))
    expired = (
        JobFiles.objects.filter(expired_at__isnull=True, created_at__lte=cutoff)
        .filter(Exists(jobs), ~Exists(in_use))
        .update(files={}, expired_at=now)
    )
    orphans, _ = JobFiles.objects.filter(created_at__lte=cutoff).filter(~Exists(jobs)).delete()
    return {"expired": expired, "deleted": orphans}


def refuse_if_expired(jobs: QuerySet[Job], what: str) -> None:
    """Raise ``JobStateConflict`` (409) when the files of ``jobs`` (a job, or an array's
    tasks, which share theirs) expired: run again without them, the job would fail or,
    worse, run on whatever lies in its directory."""
    at = JobFiles.objects.filter(jobs__in=jobs, expired_at__isnull=False).values_list("expired_at", flat=True).first()
    if at is not None:
        raise JobStateConflict(
            f"{what}'s files expired on {at:%Y-%m-%d} ({settings.JOB_FILES_RETENTION_DAYS} days after it ended): "
            "it cannot run again; resubmit it with its files."
        )
