"""Submission: a new PENDING job, after the quotas that depend on the queue.

Static checks (fields, access, feasibility) are the serializer's; what depends on the
queue at the moment of submission is checked here, under row locks.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.models import Account, Qos, Quota
from scheduler.choices import QUEUED_STATES, EventKind
from scheduler.jobs.transitions import record_event
from scheduler.models import Job


def _check_quota(quota: Quota | None, queued: int, walltime_seconds: int, field: str, who: str) -> dict[str, str]:
    errors: dict[str, str] = {}
    if quota is None:
        return errors
    if quota.max_pending_jobs is not None and queued >= quota.max_pending_jobs:
        errors[field] = f"{who} already has {queued} pending jobs; the quota allows {quota.max_pending_jobs}."
    if quota.max_walltime_seconds is not None and walltime_seconds > quota.max_walltime_seconds:
        errors["walltime_seconds"] = (
            f"{walltime_seconds}s exceeds the {who} quota maximum of {quota.max_walltime_seconds}s."
        )
    return errors


def _queued(quota: Quota, jobs: Any) -> int:
    """Queued jobs, counted only when the quota limits them."""
    return int(jobs.filter(state__in=QUEUED_STATES).count()) if quota.max_pending_jobs is not None else 0


def quota_refusals(owner: Any, account: Account, walltime_seconds: int, *, lock: bool = False) -> dict[str, str]:
    """Field -> message for every quota that would refuse one more job of ``owner`` in
    ``account`` with this walltime; ``{}`` when none would. Reads only.

    With ``lock`` (inside a transaction, as :func:`submit_job` calls it), when a
    pending-jobs quota applies the user's and the account's rows are locked
    (``SELECT ... FOR UPDATE``) while the queue is counted, so concurrent submissions
    cannot overshoot it. A what-if asks without locking: it submits nothing.
    """
    applying = Quota.objects.filter(Q(account=account) | Q(user_id=owner.pk))
    quotas = {("account" if q.account_id else "user"): q for q in applying}
    if lock and any(q.max_pending_jobs is not None for q in quotas.values()):
        # Serialise only the submissions that count the queue.
        get_user_model().objects.select_for_update().filter(pk=owner.pk).exists()
        Account.objects.select_for_update().filter(pk=account.pk).exists()
    errors: dict[str, str] = {}
    if "account" in quotas:
        queued = _queued(quotas["account"], Job.objects.filter(account=account))
        errors.update(_check_quota(quotas["account"], queued, walltime_seconds, "account", f"Account {account.name}"))
    if "user" in quotas:
        queued = _queued(quotas["user"], Job.objects.filter(owner_id=owner.pk))
        errors.update(_check_quota(quotas["user"], queued, walltime_seconds, "account", f"User {owner}"))
    return errors


def submit_job(*, owner: Any, account: Account, qos: Qos | None, **fields: Any) -> Job:
    """Create a PENDING job after checking the quotas that depend on the queue.

    Raises ``ValidationError`` (field -> message) and writes nothing when a quota refuses
    the job (see :func:`quota_refusals`, called here with its row locks).
    """
    now = timezone.now()
    with transaction.atomic():
        errors = quota_refusals(owner, account, int(fields["walltime_seconds"]), lock=True)
        if errors:
            raise ValidationError(errors)
        job = Job.objects.create(owner=owner, account=account, qos=qos, submitted_at=now, **fields)
        record_event(job.id, EventKind.SUBMITTED, f"submitted by {owner}", {"total_gpus": job.total_gpus})
    return job
