"""Start-time estimates: stored for every pending job, and asked for a job not yet submitted.

Both plan the whole queue with the tick's own policy and inputs
(:func:`planning_snapshot`) through the core's ``estimate_starts``:
nothing new arrives and every job runs to its walltime limit, so an estimate is a
latest start, as ``squeue --start`` gives.

- :func:`refresh_estimates` is the periodic pass (Celery task
  ``scheduler.refresh_estimates`` and ``run_scheduler``). It stores each pending job's
  estimate in ``Job.estimated_start_at``, and its calibrated p50 and p90 starts (the
  queue planned again with run times predicted from ended jobs, see
  ``scheduler.core.estimate.calibrated_starts``) in ``estimated_start_p50_at`` and
  ``estimated_start_p90_at``, so showing estimates never plans the queue per request.
  It is the only write in this module.
- :func:`what_if` answers "if I submitted this now, when would it start?" and writes
  nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from common.db.bulk import update_rows
from people.models import Account, Qos
from scheduler.choices import JobState
from scheduler.config import SchedulerConfig, current_config
from scheduler.core.cycle import schedule
from scheduler.core.estimate import calibrated_starts, estimate_starts
from scheduler.core.priority import PriorityBreakdown
from scheduler.core.reason_words import REASON_WORDS
from scheduler.core.types import PendingReason, Snapshot
from scheduler.jobs.admission import quota_refusals, tasks
from scheduler.jobs.array_spec import ArraySpec
from scheduler.jobs.blockers import blockers_to_json
from scheduler.jobs.request import pending_job
from scheduler.models import ESTIMATE_FIELDS, Job, no_estimates
from scheduler.tick.history import load_runtime_predictor
from scheduler.tick.snapshot import load_dependency_states, load_snapshot, with_policy_inputs
from scheduler.tick.usage import current_usage

#: The id the hypothetical job of a what-if has: no stored job has it (ids count up
#: from 1), and it loses every tie on submit time, as the next job submitted would.
WHAT_IF_ID = 2**63 - 1

#: Rows per ``UPDATE`` that clears estimates (bounds the statement's parameters).
BATCH = 500

#: Reasons under which the queue ahead of a job decides when it starts.
_QUEUE_WAITS = frozenset({PendingReason.RESOURCES, PendingReason.PRIORITY, PendingReason.CYCLE_LIMIT})


# --- What-if ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WhatIf:
    """When a job submitted now would start, and why not sooner."""

    #: Latest expected start; ``None`` when the queue alone does not decide it.
    estimated_start: datetime | None
    estimated_wait_seconds: int | None
    #: Whether the next tick would start it (possibly by preempting running jobs).
    would_start_now: bool
    #: The cycle's reason for it to wait, in ``Job.pending_reason``'s vocabulary; ``""``
    #: when it would start now.
    pending_reason: str
    #: The same, and what the estimate means, in sentences for people.
    reasons: list[str]
    #: Its multifactor priority and factors (``sprio``); ``None`` under FIFO ordering.
    priority: PriorityBreakdown | None
    #: Every blocker it would meet, with evidence, as a pending job's ``pending_blockers``.
    blockers: list[dict[str, Any]]


def what_if(
    *,
    owner: Any,
    account: Account,
    qos: Qos | None,
    now: datetime | None = None,
    array: ArraySpec | None = None,
    **fields: Any,
) -> WhatIf:
    """When a job with these fields, submitted by ``owner`` now, would start (for an
    array: its first task; quotas count all of its tasks). Writes nothing.

    Takes what :func:`scheduler.jobs.submit.submit_job` takes: a request that passed
    admission's standing rules (``scheduler.jobs.admission.admit``, asked by the API's
    serializer and the form for both), and raises the ``ValidationError`` (field ->
    message) submit would raise when a quota refuses the job.

    Steps:
    1. Ask admission's second stage, the quotas that depend on the queue, as submit
       does (without its locks).
    2. Build the job as an unsaved ``Job`` and view it as the snapshot views pending jobs.
    3. Add it, and the states of the jobs it depends on, to a fresh planning snapshot.
    4. Run the cycle (would it start now, else why it waits; its priority) and the
       estimate (when it starts at the latest).
    """
    if fields.pop("hold", False):
        raise ValidationError({"hold": "A held job starts only once released: ask for an estimate without hold."})
    now = now or timezone.now()
    refusals = quota_refusals(owner, account, int(fields["walltime_seconds"]), adding=tasks(array), qos=qos)
    if refusals:
        raise ValidationError(refusals)
    fields.pop("files", None)  # stored apart from the job (scheduler.jobs.files); no plan depends on them
    job = pending_job(Job(id=WHAT_IF_ID, owner=owner, account=account, qos=qos, submitted_at=now, **fields))
    config = current_config()
    policy = config.policy
    planned = planning_snapshot(now, config)
    snapshot = replace(
        planned,
        pending=(*planned.pending, job),
        dependency_states={**planned.dependency_states, **load_dependency_states([job])},
    )
    decisions = schedule(snapshot, replace(policy, estimates=True), now)
    start = decisions.estimates.get(WHAT_IF_ID)
    starts_now = any(s.job_id == WHAT_IF_ID for s in decisions.starts)
    reason = None if starts_now else decisions.pending_reasons.get(WHAT_IF_ID)
    preempts = sum(1 for e in decisions.evictions if e.by == WHAT_IF_ID)
    return WhatIf(
        estimated_start=start,
        estimated_wait_seconds=None if start is None else max(0, math.ceil((start - now).total_seconds())),
        would_start_now=starts_now,
        pending_reason=str(reason) if reason is not None else "",
        reasons=_explain(starts_now, reason, start is not None, preempts),
        priority=decisions.priorities.get(WHAT_IF_ID),
        blockers=blockers_to_json(decisions.blockers.get(WHAT_IF_ID, ())),
    )


def _explain(starts_now: bool, reason: PendingReason | None, estimated: bool, preempts: int) -> list[str]:
    if starts_now:
        said = ["It fits what is free now: the next scheduling tick would start it."]
        if preempts:
            said.append(f"It would preempt {preempts} running job{'s' if preempts > 1 else ''} to fit.")
        return said
    said = [REASON_WORDS[reason].sentence if reason else "It would wait."]
    if estimated:
        said.append("The estimate is a latest start: it assumes every job runs to its walltime limit.")
    elif reason in _QUEUE_WAITS:
        said.append("No estimate: more jobs wait ahead of it than the estimate plans.")
    else:
        said.append("No estimate: the queue alone does not decide when it starts.")
    return said


# --- Stored estimates -----------------------------------------------------------------------


def refresh_estimates(now: datetime | None = None) -> int:
    """Store every pending job's latest expected start and its p50 and p90 starts; clear
    every other stored one.

    Idempotent; returns the number of rows written. Queries do not grow with the queue
    (one ``UPDATE`` for the changed estimates, see ``common.db.bulk``; one per ``BATCH``
    cleared ones).

    Steps:
    1. Plan the queue on a fresh snapshot, outside any transaction (on SQLite a
       transaction holds the write lock, and planning must not stall the tick): once
       under walltimes, and twice more with run times predicted from the jobs that
       ended (:func:`calibrated_starts`).
    2. In one short transaction, read the stored estimates and write only the jobs whose
       estimates changed, in one ``UPDATE`` and only on jobs still PENDING (a job the
       tick started meanwhile keeps the ``NULL`` its claim wrote).
    3. In the same transaction, clear the estimates of jobs that have none now: they
       left the queue, or wait on a dependency, a quota or hardware.
    """
    now = now or timezone.now()
    config = current_config()
    snapshot = planning_snapshot(now, config)
    latest = estimate_starts(snapshot, config.policy, now)
    calibrated = calibrated_starts(snapshot, config.policy, now, load_runtime_predictor().samples)
    estimates = {job_id: (at, calibrated.p50.get(job_id), calibrated.p90.get(job_id)) for job_id, at in latest.items()}
    written = 0
    with transaction.atomic():
        stored = {
            row[0]: row[1:]
            for row in Job.objects.filter(estimated_start_at__isnull=False).values_list("id", *ESTIMATE_FIELDS)
        }
        changed = [(job_id, ats) for job_id, ats in sorted(estimates.items()) if stored.get(job_id) != ats]
        written += update_rows(
            Job,
            [job_id for job_id, _ in changed],
            {name: [ats[i] for _, ats in changed] for i, name in enumerate(ESTIMATE_FIELDS)},
            where={"state": JobState.PENDING},
        )
        for gone in _batches(sorted(set(stored) - set(estimates))):
            written += Job.objects.filter(pk__in=gone).update(**no_estimates())
    return written


T = TypeVar("T")


def _batches(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[i : i + BATCH] for i in range(0, len(items), BATCH)]


def planning_snapshot(now: datetime, config: SchedulerConfig) -> Snapshot:
    """The world as the tick would plan it at ``now``: the loaded snapshot plus the
    policy's inputs, with usage read (decayed to ``now``), not charged."""
    loaded = load_snapshot()
    return with_policy_inputs(
        loaded.snapshot, config.policy, lambda: current_usage(now, config.usage_half_life_days), loaded.tables
    )
