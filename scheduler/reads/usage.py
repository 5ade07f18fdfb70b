"""GPU-hours over a period (``sreport``): every attempt that held GPUs in it, clipped to
it, summed by account, user, GPU model or QOS, raw and billing-weighted.

Ended attempts come from ``JobAttempt`` (one row each, written when they ended); running
ones from their jobs, up to ``now``. Billing-weighted is what the fair-share charges: the
GPUs times the model's billing weight times the QOS's usage factor (``UsagePolicy.rate``).
Each attempt's figures are exact (seconds of overlap times GPUs), so a group's sum is the
sum of its attempts' (a test recomputes them).

Utilization-weighted chargeback: an attempt whose GPUs were measured (its efficiency,
``monitoring.efficiency``, written shortly after the job ends) used its GPU-hours times
its mean utilization and left the rest idle; an attempt without samples (no agent, a
job still running, an earlier attempt of a requeued job) is unmeasured, counted apart,
never as 0% or 100%. Clipped to a period, an attempt keeps its whole run's mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from monitoring.utilization import measured_utilization
from people.access import coordinated_account_ids
from people.models import Account
from scheduler.choices import ACTIVE_STATES
from scheduler.core.hours import job_gpus
from scheduler.jobs.attempts import first_gpu, gpu_models
from scheduler.models import Job, JobAttempt
from scheduler.tick.usage import usage_policy

GROUPS = ("account", "user", "gpu_model", "qos")
#: How a period is cut for the chart over time.
BUCKETS = ("day", "week", "month")


@dataclass(frozen=True)
class Held:
    """One attempt's hold on GPUs (ended or still running)."""

    job_id: int
    account: str
    user: str
    gpu_model: str
    qos: str
    gpus: float
    started_at: datetime
    ended_at: datetime
    attempt: int = 0
    #: Mean utilization of its GPUs over the attempt, %; ``None``: unmeasured.
    utilization_pct: float | None = None


@dataclass(frozen=True)
class UsageRow:
    group: str
    attempts: int
    gpu_hours: float
    billed_gpu_hours: float
    #: Of ``gpu_hours``, those of measured attempts, and what they used of them.
    measured_gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0

    @property
    def idle_gpu_hours(self) -> float:
        """Measured GPU-hours the GPUs sat idle (allocated, not used)."""
        return self.measured_gpu_hours - self.used_gpu_hours

    @property
    def unmeasured_gpu_hours(self) -> float:
        return self.gpu_hours - self.measured_gpu_hours

    @property
    def efficiency_pct(self) -> float | None:
        """Used of measured, %; ``None`` when nothing was measured."""
        return 100 * self.used_gpu_hours / self.measured_gpu_hours if self.measured_gpu_hours else None


def attempts_in(start: datetime, end: datetime, now: datetime, scope: Q | None = None) -> list[Held]:
    """Every attempt that held GPUs for some of ``[start, end)``, ``scope`` a filter on
    their jobs (``job__...`` lookups for ended attempts are derived from it)."""
    ended = JobAttempt.objects.filter(started_at__lt=end, ended_at__gt=start).filter(
        Q(job__in=Job.objects.filter(scope)) if scope is not None else Q()
    )
    held = [
        Held(job, account, user, model, qos, gpus, started, stopped, attempt)
        for job, account, user, model, qos, gpus, started, stopped, attempt in ended.values_list(
            "job_id",
            "account__name",
            "owner__username",
            "gpu_model",
            "qos",
            "gpus",
            "started_at",
            "ended_at",
            "attempt",
        )
    ]
    running = Job.objects.filter(state__in=ACTIVE_STATES, started_at__lt=end, started_at__isnull=False)
    if scope is not None:
        running = running.filter(scope)
    rows = list(
        running.values_list(
            "id", "account__name", "owner__username", "qos__name", "allocations", "nodes", "gpus_per_node",
            "gpu_share", "started_at", "attempt",
        )
    )  # fmt: skip
    models = gpu_models(first_gpu(allocations) for *_, allocations, _, _, _, _, _ in rows)
    for job, account, user, qos, allocations, nodes, per_node, share, started, attempt in rows:
        if started is None:  # excluded by the query; keeps the types honest
            continue
        first = first_gpu(allocations)
        gpus = job_gpus(nodes, per_node, share)
        model = models.get(first, "") if first else ""
        held.append(Held(job, account, user, model, qos or "", gpus, started, now, attempt))
    return with_utilization(held)


def with_utilization(held: list[Held]) -> list[Held]:
    """The attempts with the mean utilization measured for them, where it was (one
    query: a job's efficiency is of its last ended attempt; one without samples, 0,
    stays unmeasured)."""
    measured = measured_utilization(h.job_id for h in held)
    return [
        replace(h, utilization_pct=measured[h.job_id, h.attempt]) if (h.job_id, h.attempt) in measured else h
        for h in held
    ]


def seconds_in(held: Held, start: datetime, end: datetime) -> float:
    return max(0.0, (min(end, held.ended_at) - max(start, held.started_at)).total_seconds())


def usage(held: Iterable[Held], start: datetime, end: datetime, group_by: str) -> list[UsageRow]:
    """The attempts' GPU-hours in ``[start, end)`` by ``group_by`` (one of ``GROUPS``),
    largest first."""
    policy = usage_policy(settings.SCHEDULER_USAGE_HALF_LIFE_DAYS, None, settings.SCHEDULER_BILLING_WEIGHTS)
    raw: dict[str, float] = defaultdict(float)
    billed: dict[str, float] = defaultdict(float)
    measured: dict[str, float] = defaultdict(float)
    used: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for attempt in held:
        seconds = seconds_in(attempt, start, end)
        if seconds <= 0:
            continue
        key = _group_of(attempt, group_by)
        hours = attempt.gpus * seconds / 3600
        raw[key] += hours
        billed[key] += policy.rate(attempt.gpus, attempt.gpu_model, attempt.qos) * seconds / 3600
        if attempt.utilization_pct is not None:
            measured[key] += hours
            used[key] += hours * attempt.utilization_pct / 100
        count[key] += 1
    return sorted(
        (UsageRow(key, count[key], raw[key], billed[key], measured[key], used[key]) for key in raw),
        key=lambda row: (-row.gpu_hours, row.group),
    )


def subtree_ids(account: Account) -> list[int]:
    """The account and every account under it."""
    parents: dict[int | None, list[int]] = {}
    for pk, parent in Account.objects.values_list("pk", "parent_id"):
        parents.setdefault(parent, []).append(pk)
    found, todo = [], [account.pk]
    while todo:
        pk = todo.pop()
        found.append(pk)
        todo += parents.get(pk, [])
    return found


def usage_scope(reader: Any, account: Account | None = None, owner: str = "") -> Q:
    """The jobs whose GPU-hours ``reader`` may see, as the job list: staff every job,
    others their own and those of the accounts they coordinate; narrowed to ``account``
    with its subtree and to one ``owner`` when given."""
    scope = Q()
    if not reader.is_staff:
        scope &= Q(owner_id=reader.pk) | Q(account_id__in=coordinated_account_ids(reader))
    if account is not None:
        scope &= Q(account_id__in=subtree_ids(account))
    if owner:
        scope &= Q(owner__username=owner)
    return scope


#: The longest period one question may cover.
MAX_DAYS = 400


def usage_period(first: date | None, last: date | None) -> tuple[date, date]:
    """The days a question covers: ``last`` defaults to today (UTC), ``first`` to 30 days
    before it. Raises ``ValueError`` saying what is wrong with ``first`` (the API and
    the page report it against that field)."""
    last = last or datetime.now(UTC).date()
    first = first or last - timedelta(days=29)
    if first > last:
        raise ValueError("Must not be after the last day.")
    if (last - first).days >= MAX_DAYS:
        raise ValueError(f"At most {MAX_DAYS} days at once.")
    return first, last


def day_span(first: date, last: date) -> tuple[datetime, datetime]:
    """``[first 00:00, the day after last 00:00)`` in UTC: whole days, ``last`` included."""
    return datetime.combine(first, time.min, tzinfo=UTC), datetime.combine(
        last + timedelta(days=1), time.min, tzinfo=UTC
    )


def period_starts(start: datetime, end: datetime, bucket: str) -> list[datetime]:
    """The starts of the days, ISO weeks (Mondays) or months that meet ``[start, end)``."""
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    if bucket == "week":
        day -= timedelta(days=day.weekday())
    elif bucket == "month":
        day = day.replace(day=1)
    starts = []
    while day < end:
        starts.append(day)
        if bucket == "day":
            day += timedelta(days=1)
        elif bucket == "week":
            day += timedelta(days=7)
        else:
            day = (day + timedelta(days=32)).replace(day=1)
    return starts


def usage_over_time(
    held: Iterable[Held], start: datetime, end: datetime, group_by: str, bucket: str
) -> tuple[list[datetime], dict[str, list[float]]]:
    """GPU-hours per period (``bucket``) and group, each period clipped to ``[start,
    end)``: the periods' starts and, per group, one figure per period. Each group's
    figures add up to its total from :func:`usage` (the same overlaps, cut at period
    boundaries)."""
    starts = period_starts(start, end, bucket)
    bounds = [(max(p, start), min(starts[i + 1] if i + 1 < len(starts) else end, end)) for i, p in enumerate(starts)]
    series: dict[str, list[float]] = {}
    for attempt in held:
        key = _group_of(attempt, group_by)
        for i, (lo, hi) in enumerate(bounds):
            seconds = seconds_in(attempt, lo, hi)
            if seconds > 0:
                series.setdefault(key, [0.0] * len(bounds))[i] += attempt.gpus * seconds / 3600
    return starts, series


def _group_of(attempt: Held, group_by: str) -> str:
    return {"account": attempt.account, "user": attempt.user, "gpu_model": attempt.gpu_model, "qos": attempt.qos}[
        group_by
    ]
