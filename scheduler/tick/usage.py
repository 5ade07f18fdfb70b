"""Usage accounting for fair-share: charge what ran since the last tick, decay the rest.

:func:`update_usage` runs inside the tick's transaction, under its lock: the usage rows and
``TickState.usage_as_of`` move together, so a crash mid-tick charges nothing twice
and loses nothing (the next tick charges from the old ``usage_as_of``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import Q

from people.models import Account, Qos
from scheduler.choices import ACTIVE_STATES
from scheduler.core.fairshare import (
    UsageInterval,
    UsageKey,
    UsagePolicy,
    charge,
    decay_usage,
    decay_usage_map,
    gpu_map,
)
from scheduler.core.types import NodeView
from scheduler.jobs import allocations
from scheduler.models import Job, TickState, Usage


def usage_policy(
    half_life_days: float,
    sharing_overheads: Mapping[str, float] | None = None,
    billing_weights: Mapping[str, float] | None = None,
) -> UsagePolicy:
    """The usage rules: the half-life, each GPU model's billing weight (the tick passes
    ``SchedulerConfig.billing_weights``), each QOS's usage factor from the database, and
    the overhead charged on shares by sharing mode (``SchedulerConfig.sharing_overheads``)."""
    factors = {name: float(f) for name, f in Qos.objects.values_list("name", "usage_factor")}
    return UsagePolicy(
        half_life=timedelta(days=half_life_days),
        billing_weights=dict(billing_weights or {}),
        qos_usage_factors=factors,
        sharing_overheads=dict(sharing_overheads or {}),
    )


def intervals_since(since: datetime, nodes: tuple[NodeView, ...], policy: UsagePolicy) -> list[UsageInterval]:
    """One interval per job and GPU model for every job that held GPUs after ``since``."""
    gpu_at = gpu_map(nodes)
    rows = (
        Job.objects.filter(started_at__isnull=False)
        .filter(Q(state__in=ACTIVE_STATES) | Q(ended_at__gt=since))
        .values("account__name", "owner__username", "qos__name", "started_at", "ended_at", "allocations")
    )
    intervals = []
    for row in rows:
        started_at: datetime | None = row["started_at"]
        if started_at is None:  # excluded by the query; keeps the types honest
            continue
        per_model: dict[str, float] = defaultdict(float)
        for allocation in allocations.decode(row["allocations"]):
            for index in allocation.gpu_indices:
                gpu = gpu_at.get((allocation.node, index))
                per_model[gpu.model if gpu is not None else ""] += policy.gpus_charged(allocation, gpu)
        for model, gpus in sorted(per_model.items()):
            intervals.append(
                UsageInterval(
                    row["account__name"],
                    row["owner__username"],
                    started_at,
                    row["ended_at"],
                    gpus,
                    model,
                    row["qos__name"] or "",
                )
            )
    return intervals


def update_usage(
    now: datetime, nodes: tuple[NodeView, ...], policy: UsagePolicy, *, period: timedelta = timedelta(0)
) -> dict[UsageKey, float]:
    """The usage at ``now``; charged and stored once ``period`` has passed since it last
    was (Slurm's PriorityCalcPeriod).

    Steps:
    1. Read the stored usage and when it was last brought forward (``usage_as_of``).
    2. Decay it to ``now``. Within ``period`` of ``usage_as_of``, that is the answer:
       nothing is written, and the spans run since are charged by the next full
       update, which charges from ``usage_as_of`` (so none is lost, only later).
    3. Otherwise charge every job span in ``(usage_as_of, now]``, upsert the rows and
       advance ``usage_as_of`` (same transaction as the caller).
    """
    since = TickState.objects.filter(pk=1).values_list("usage_as_of", flat=True).first()
    stored = {(a, u): v for a, u, v in Usage.objects.values_list("account__name", "user__username", "gpu_seconds")}
    usage: dict[UsageKey, float] = decay_usage_map(stored, since, now, policy.half_life) if since else stored
    if since is not None and now < since + period:
        return usage
    if since is not None:
        for interval in intervals_since(since, nodes, policy):
            usage = charge(usage, interval, now, policy, since)
    _save(usage, now)
    TickState.objects.update_or_create(pk=1, defaults={"usage_as_of": now})
    return usage


def _save(usage: dict[UsageKey, float], now: datetime) -> None:
    if not usage:
        return
    accounts = dict(Account.objects.filter(name__in={a for a, _ in usage}).values_list("name", "id"))
    users = dict(get_user_model().objects.filter(username__in={u for _, u in usage}).values_list("username", "id"))
    rows = [
        Usage(account_id=accounts[a], user_id=users[u], gpu_seconds=v, as_of=now)
        for (a, u), v in usage.items()
        if a in accounts and u in users
    ]
    Usage.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["account", "user"], update_fields=["gpu_seconds", "as_of"]
    )


def current_usage(now: datetime, half_life_days: float) -> dict[UsageKey, float]:
    """Stored usage, each row decayed from when it was written to ``now``. Reads only."""
    half_life = timedelta(days=half_life_days)
    return {
        (account, user): decay_usage(value, as_of, max(now, as_of), half_life)
        for account, user, value, as_of in Usage.objects.values_list(
            "account__name", "user__username", "gpu_seconds", "as_of"
        )
    }
