"""The idle-GPU rule: a running job whose GPUs stay under a utilization for a while is
flagged, its owner is told, and later, if the account asks for it, it is requeued or
cancelled, so that GPUs someone holds without using go back to the queue.

Per account (``Account.idle_*``; empty: the site's ``IDLE_*`` settings). Each pass:

1. A running job that has run at least ``minutes`` and whose GPUs' measured samples of
   the last ``minutes`` average under ``below`` gets an ``idle`` event (once per attempt),
   which the notifier turns into a message to its owner.
2. A job flagged at least ``action_minutes`` ago that is still idle now is requeued or
   cancelled (``action``; ``none`` by default), through the same verbs a person uses, so
   the event says so ("requeued by idle policy").

Only measured samples count: a GPU the driver does not report (MIG through NVML) is
never idle, and a job without samples is never flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Sum
from django.utils import timezone

from monitoring.models import GpuSample
from monitoring.readings import jobs_gpu_ids
from people.models import Account
from scheduler.choices import EventKind, JobState
from scheduler.jobs import verbs
from scheduler.jobs.transitions import JobStateConflict, record_event
from scheduler.models import Job, JobEvent

#: Who the verbs name in the job's events.
ACTOR = "idle policy"


@dataclass(frozen=True)
class IdleRule:
    below_pct: float
    minutes: int
    action: str
    action_minutes: int


def rule_of(account: Account) -> IdleRule:
    return IdleRule(
        below_pct=account.idle_below_pct if account.idle_below_pct is not None else settings.IDLE_BELOW_PCT,
        minutes=account.idle_minutes or settings.IDLE_MINUTES,
        action=account.idle_action or settings.IDLE_ACTION,
        action_minutes=account.idle_action_minutes or settings.IDLE_ACTION_MINUTES,
    )


def measured_means(jobs: list[Job], gpus: dict[int, list[int]], start: datetime, end: datetime) -> dict[int, float]:
    """Each job's GPUs' mean utilization over ``[start, end]`` from measured samples, for
    the jobs that have some: one query grouped by GPU for all of them."""
    wanted = {gpu for job in jobs for gpu in gpus.get(job.id, [])}
    per_gpu = {
        gpu: (total or 0.0, n)
        for gpu, total, n in GpuSample.objects.filter(gpu_id__in=wanted, at__gte=start, at__lte=end)
        .values("gpu_id")
        .annotate(total=Sum("utilization_pct"), n=Count("utilization_pct"))
        .order_by()
        .values_list("gpu_id", "total", "n")
    }
    means = {}
    for job in jobs:
        seen = [per_gpu[g] for g in gpus.get(job.id, []) if g in per_gpu]
        count = sum(n for _, n in seen)
        if count:
            means[job.id] = sum(total for total, _ in seen) / count
    return means


def enforce(now: datetime | None = None) -> dict[str, int]:
    """One pass of the rule over every running job; returns how many were flagged and
    acted on."""
    now = now or timezone.now()
    running = list(Job.objects.filter(state=JobState.RUNNING, started_at__isnull=False).select_related("account"))
    flags = {
        (job_id, data.get("attempt")): at
        for job_id, at, data in JobEvent.objects.filter(job__in=running, kind=EventKind.IDLE).values_list(
            "job_id", "at", "data"
        )
    }
    counts = {"flagged": 0, "acted": 0}
    gpus = jobs_gpu_ids(running)
    rules = {job.id: rule_of(job.account) for job in running}
    judged = [
        job for job in running if job.started_at and job.started_at <= now - timedelta(minutes=rules[job.id].minutes)
    ]
    means: dict[int, float] = {}
    for minutes in {rules[job.id].minutes for job in judged}:  # one query per window length in use
        group = [job for job in judged if rules[job.id].minutes == minutes]
        means |= measured_means(group, gpus, now - timedelta(minutes=minutes), now)
    for job in judged:
        rule = rules[job.id]
        mean = means.get(job.id)
        if mean is None or mean >= rule.below_pct:
            continue
        flagged_at = flags.get((job.id, job.attempt))
        if flagged_at is None:
            action = (
                f"; it will be {rule.action}d in {rule.action_minutes} min if still idle"
                if rule.action != "none"
                else ""
            )
            record_event(
                job.id,
                EventKind.IDLE,
                f"its GPUs averaged {mean:.1f}% over the last {rule.minutes} min (under {rule.below_pct:g}%){action}",
                {"attempt": job.attempt, "utilization_pct": round(mean, 1), "action": rule.action},
            )
            counts["flagged"] += 1
        elif rule.action != "none" and now >= flagged_at + timedelta(minutes=rule.action_minutes):
            try:
                (verbs.requeue_job if rule.action == "requeue" else verbs.cancel_job)(job, by=ACTOR)
            except JobStateConflict:
                continue  # it ended or moved meanwhile
            counts["acted"] += 1
    return counts
