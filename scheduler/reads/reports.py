"""Read-only reports for people: ``sshare`` (fair-share tree) and ``sprio`` (why a job
has the priority it has). Both use the same pure functions and inputs as the tick, on
the stored usage decayed to now, and write nothing. And for staff, the latest backtest
of the calibrated start times."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from scheduler.config import current_config
from scheduler.core.fairshare import ShareRow, fair_tree_factors, sshare
from scheduler.core.priority import PriorityBreakdown, cluster_gpu_count, job_priority
from scheduler.jobs.request import pending_job
from scheduler.models import Job, StartBacktest
from scheduler.tick.history import load_runtime_ratios
from scheduler.tick.snapshot import load_fairshare_tree, load_nodes, load_qos_priorities
from scheduler.tick.usage import current_usage


def fairshare_report(now: datetime | None = None) -> list[ShareRow]:
    """The ``sshare`` rows of the whole tree, in tree order ([] if the tree is invalid)."""
    tree = load_fairshare_tree()
    return sshare(tree, current_usage(now or timezone.now(), current_config().usage_half_life_days)) if tree else []


def priority_of(job: Job, now: datetime | None = None) -> PriorityBreakdown | None:
    """The job's multifactor priority and its factors, or ``None`` under FIFO ordering."""
    weights = current_config().policy.priority
    if weights is None:
        return None
    now = now or timezone.now()
    tree = load_fairshare_tree()
    factors = fair_tree_factors(tree, current_usage(now, current_config().usage_half_life_days)) if tree else {}
    return job_priority(
        pending_job(job),
        now=now,
        weights=weights,
        fairshare=factors,
        qos_priorities=load_qos_priorities(),
        cluster_gpus=cluster_gpu_count(load_nodes()),
        runtime_ratios=load_runtime_ratios() if weights.expects_run_times else None,
    )


def latest_start_backtest() -> StartBacktest | None:
    """The newest backtest of the p50 and p90 starts (``scheduler.backtests``), if any ran."""
    return StartBacktest.objects.first()
