"""Read-only reports for people: ``sshare`` (fair-share tree) and ``sprio`` (why a job
has the priority it has), and the snapshot start-time estimates plan on. All use the
same pure functions and inputs as the tick, on the stored usage decayed to now, and
write nothing."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from scheduler.core.fairshare import ShareRow, UsageKey, decay_usage, fair_tree_factors, sshare
from scheduler.core.priority import PriorityBreakdown, cluster_gpu_count, job_priority
from scheduler.core.types import Policy, Snapshot
from scheduler.models import Job, Usage
from scheduler.services import current_policy
from scheduler.snapshot import (
    load_fairshare_tree,
    load_nodes,
    load_qos_priorities,
    load_snapshot,
    pending_job,
    with_policy_inputs,
)


def current_usage(now: datetime) -> dict[UsageKey, float]:
    """Stored usage, each row decayed from when it was written to ``now``."""
    half_life = timedelta(days=settings.SCHEDULER_USAGE_HALF_LIFE_DAYS)
    return {
        (account, user): decay_usage(value, as_of, max(now, as_of), half_life)
        for account, user, value, as_of in Usage.objects.values_list(
            "account__name", "user__username", "gpu_seconds", "as_of"
        )
    }


def fairshare_report(now: datetime | None = None) -> list[ShareRow]:
    """The ``sshare`` rows of the whole tree, in tree order ([] if the tree is invalid)."""
    tree = load_fairshare_tree()
    return sshare(tree, current_usage(now or timezone.now())) if tree else []


def priority_of(job: Job, now: datetime | None = None) -> PriorityBreakdown | None:
    """The job's multifactor priority and its factors, or ``None`` under FIFO ordering."""
    weights = current_policy().priority
    if weights is None:
        return None
    now = now or timezone.now()
    tree = load_fairshare_tree()
    factors = fair_tree_factors(tree, current_usage(now)) if tree else {}
    return job_priority(
        pending_job(job),
        now=now,
        weights=weights,
        fairshare=factors,
        qos_priorities=load_qos_priorities(),
        cluster_gpus=cluster_gpu_count(load_nodes()),
    )


def planning_snapshot(now: datetime, policy: Policy) -> Snapshot:
    """The world as the tick would plan it at ``now``: the loaded snapshot plus the
    policy's inputs, with usage read (decayed to ``now``), not charged."""
    return with_policy_inputs(load_snapshot().snapshot, policy, lambda: current_usage(now))
