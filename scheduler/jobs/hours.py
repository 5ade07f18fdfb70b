"""GPU-hours and waits per account and hour (``AccountHour``): written as attempts give
their GPUs back, rebuilt from stored jobs, and read over a range with the running
attempts added live. The arithmetic is ``scheduler.core.hours``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Case, DateTimeField, F, FloatField, IntegerField, Q, Sum, Value, When

from scheduler.choices import ACTIVE_STATES, TERMINAL_STATES
from scheduler.core.hours import WAIT_BINS, add_up, ceil_hour, floor_hour, job_gpus, split_attempt, wait_bin
from scheduler.models import AccountHour, Job

#: The wait counters of ``AccountHour``, one per bin of ``WAIT_BINS``.
WAITED = tuple(f"waited_{i}" for i in range(len(WAIT_BINS)))
ZERO = timedelta(0)

#: What :func:`record_attempt` needs of a job, read before its state change clears it.
ATTEMPT_FIELDS = ("state", "account_id", "started_at", "submitted_at", "nodes", "gpus_per_node", "gpu_share")


def record_attempt(job: Mapping[str, Any], ended: datetime) -> int:
    """Add one attempt that gave its GPUs back at ``ended`` to its account's hour rows;
    ``job`` holds ``ATTEMPT_FIELDS`` as they were while it ran. Returns the hours touched
    (0 for an attempt that never started).

    Not idempotent on its own: call it once per attempt, inside the transaction of the
    conditional state change that ended the attempt and only when that change won (as
    ``scheduler.jobs.transitions.transition`` does). Two queries whatever the hours spanned:
    create the missing rows, then add to all of them in one ``UPDATE`` (a ``CASE`` picks
    each hour's share; the full hours between the first and last share one value).
    """
    started = job["started_at"]
    if started is None:
        return 0
    gpus = job_gpus(job["nodes"], job["gpus_per_node"], job["gpu_share"])
    shares = split_attempt(started, ended, gpus, job["submitted_at"])
    account = job["account_id"]
    AccountHour.objects.bulk_create(
        [AccountHour(account_id=account, hour=s.hour) for s in shares], ignore_conflicts=True, batch_size=500
    )
    columns: dict[str, dict[datetime, float | int]] = {
        "gpu_seconds": {s.hour: s.gpu_seconds for s in shares},
        "carried": {s.hour: s.carried for s in shares},
        "started": {s.hour: s.started for s in shares},
    }
    first = shares[0]
    if first.waited is not None:
        columns[WAITED[first.waited]] = {first.hour: 1}
    updates = {name: _plus(name, values, len(shares)) for name, values in columns.items() if any(values.values())}
    if updates:
        AccountHour.objects.filter(account_id=account, hour__gte=first.hour, hour__lte=shares[-1].hour).update(
            **updates
        )
    return len(shares)


def _plus(column: str, values: dict[datetime, float | int], hours: int) -> Any:
    """``column + <this hour's value>``: the most common value as the default, the rest
    (the first and last hours) by a ``CASE`` on the hour; hours not in ``values`` add 0."""
    common = Counter(values.values()).most_common(1)[0][0] if len(values) == hours else 0
    output = FloatField() if column == "gpu_seconds" else IntegerField()
    whens = [When(hour=hour, then=Value(v, output_field=output)) for hour, v in values.items() if v != common]
    added = Case(*whens, default=Value(common, output_field=output), output_field=output) if whens else Value(common)
    return F(column) + added


def rebuild(job_model: Any = Job, hour_model: Any = AccountHour) -> int:
    """Replace every row with what the stored jobs add up to: each ended job's last
    attempt (a requeue clears an attempt's times from the job, so earlier attempts are
    kept only by :func:`record_attempt`). For a site upgraded to these rollups (its
    migration passes its historical models) and for bulk-loaded jobs. Returns the rows
    written.
    """
    hour_model.objects.all().delete()
    rows = (
        job_model.objects.filter(state__in=TERMINAL_STATES, started_at__isnull=False, ended_at__isnull=False)
        .values_list("account_id", "started_at", "ended_at", "nodes", "gpus_per_node", "gpu_share", "submitted_at")
        .order_by()
    )
    totals = add_up(
        (account, started, ended, job_gpus(nodes, per_node, share), submitted)
        for account, started, ended, nodes, per_node, share, submitted in rows.iterator(chunk_size=5000)
    )
    objects = []
    for (account, hour), t in totals.items():
        waited = dict(zip(WAITED, t.waited or [0] * len(WAITED), strict=True))
        objects.append(
            hour_model(
                account_id=account, hour=hour, gpu_seconds=t.gpu_seconds, carried=t.carried, started=t.started, **waited
            )
        )
    hour_model.objects.bulk_create(objects, batch_size=1000)
    return len(objects)


@dataclass(frozen=True, slots=True)
class RangeTotals:
    #: account name -> (GPU-seconds within the range, attempts that ran in it)
    accounts: dict[str, tuple[float, int]]
    #: attempts that started in the range, per bin of ``WAIT_BINS``
    waits: list[int]


def totals_in_range(start: datetime, end: datetime, now: datetime) -> RangeTotals:
    """GPU-seconds and attempts per account with time in ``[start, end)``, and the waits
    of the attempts that started in it; ended attempts from the hour rows, running ones
    (up to ``now``) from the active jobs. The range is taken as whole hours (``start``
    floored, ``end`` rounded up). Two queries, neither growing with the ended jobs.
    """
    start, end = floor_hour(start), ceil_hour(end)
    sums: dict[str, Any] = {f: Sum(f) for f in WAITED}
    rows: Any = (
        AccountHour.objects.filter(hour__gte=start, hour__lt=end)
        .values("account__name")
        .annotate(seconds=Sum("gpu_seconds"), ran=Sum("started"), carried=Sum("carried", filter=Q(hour=start)), **sums)
        .order_by()
    )
    accounts: dict[str, list[float]] = {}
    waits = [0] * len(WAIT_BINS)
    for row in rows:
        accounts[row["account__name"]] = [row["seconds"] or 0.0, (row["ran"] or 0) + (row["carried"] or 0)]
        for i, name in enumerate(WAITED):
            waits[i] += row[name] or 0
    # The database subtracts the times: a duration loads several times faster than the
    # two time zone-aware datetimes it replaces (6 ms of 8 for 750 running jobs).
    running: Any = (
        Job.objects.filter(state__in=ACTIVE_STATES, started_at__isnull=False, started_at__lt=end)
        .annotate(
            after_start=F("started_at") - Value(start, output_field=DateTimeField()),
            waited=F("started_at") - F("submitted_at"),
        )
        .values_list("account__name", "after_start", "nodes", "gpus_per_node", "gpu_share", "waited")
    )
    until = min(now, end) - start  # from the range's start
    for account, after_start, nodes, per_node, share, waited in running:
        # A running attempt's share of the range, directly (what its hour rows will sum
        # to): from its start, or the range's if it started before, until now or the end.
        seconds = (until - max(after_start, ZERO)).total_seconds()
        totals = accounts.setdefault(account, [0.0, 0])
        if seconds > 0:
            totals[0] += job_gpus(nodes, per_node, share) * seconds
            totals[1] += 1
        if after_start >= ZERO:  # started in the range
            waits[wait_bin(waited)] += 1
    return RangeTotals({a: (s, int(n)) for a, (s, n) in accounts.items()}, waits)
