"""The scheduler's configuration as one object: the core's ``Policy`` plus the operational
knobs of the tick, dispatch and reconciliation, built from Django settings.

Code that decides or reconciles reads :func:`current_config` (or :func:`current_policy`)
instead of reading settings inline, so what a tick runs under is one value that can be
logged, compared and passed on. It is built on every call (a handful of attribute
reads): tests and operators change settings without restarting anything. It sits
beside the models (not in ``scheduler.tick``) because reconciliation, one layer below
the tick, reads it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from scheduler.core.priority import PriorityWeights
from scheduler.core.types import PlacementStrategy, Policy


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """What one scheduling tick and one reconciliation pass run under."""

    policy: Policy
    #: Fair-share usage half-life and each GPU model's billing weight.
    usage_half_life_days: float
    #: Seconds between the ticks that charge and write usage (``tick.usage.update_usage``).
    usage_calc_period_seconds: float
    billing_weights: Mapping[str, float]
    #: The overhead charged on a share, by sharing mode or ``MODEL/mode``
    #: (``scheduler.core.fairshare.UsagePolicy.sharing_overheads``).
    sharing_overheads: Mapping[str, float]
    #: A preempted job is requeued (``"requeue"``) or ends PREEMPTED (``"cancel"``), with
    #: this many seconds between SIGTERM and SIGKILL.
    preempt_mode: str
    preempt_grace_seconds: int
    #: A job on a failed node is requeued up to ``max_requeues`` attempts.
    requeue_on_node_fail: bool
    max_requeues: int
    #: An UP node silent this long is marked DOWN; jobs on a node DOWN this long are lost.
    node_timeout_seconds: int
    node_down_grace_seconds: int
    #: Backend jobs with our key that no active job holds are cancelled.
    cancel_orphans: bool
    #: A job DISPATCHING this long is handed to its backend again.
    redispatch_seconds: int


def current_policy() -> Policy:
    """The scheduling policy the settings ask for."""
    return Policy(
        max_starts=settings.SCHEDULER_MAX_STARTS_PER_TICK,
        backfill=settings.SCHEDULER_BACKFILL,
        reservations=settings.SCHEDULER_RESERVATIONS,
        reservations_per_account=settings.SCHEDULER_RESERVATIONS_PER_ACCOUNT,
        service_levels=settings.SCHEDULER_SERVICE_LEVELS,
        placement=PlacementStrategy(settings.SCHEDULER_PLACEMENT),
        preemption=settings.SCHEDULER_PREEMPTION,
        preempt_min_runtime_seconds=settings.SCHEDULER_PREEMPT_MIN_RUNTIME_SECONDS,
        reclaim=settings.SCHEDULER_RECLAIM,
        priority=PriorityWeights(
            age=settings.PRIORITY_WEIGHT_AGE,
            fairshare=settings.PRIORITY_WEIGHT_FAIRSHARE,
            jobsize=settings.PRIORITY_WEIGHT_JOBSIZE,
            qos=settings.PRIORITY_WEIGHT_QOS,
            max_age=timedelta(days=settings.PRIORITY_MAX_AGE_DAYS),
            favor_small=settings.PRIORITY_FAVOR_SMALL,
            shortness=settings.PRIORITY_WEIGHT_SHORTNESS,
            stretch=settings.PRIORITY_WEIGHT_STRETCH,
            stretch_target=settings.PRIORITY_STRETCH_TARGET,
        )
        if settings.SCHEDULER_PRIORITY == "multifactor"
        else None,
    )


def current_config() -> SchedulerConfig:
    """The whole configuration the settings ask for."""
    return SchedulerConfig(
        policy=current_policy(),
        usage_half_life_days=settings.SCHEDULER_USAGE_HALF_LIFE_DAYS,
        usage_calc_period_seconds=settings.SCHEDULER_USAGE_CALC_PERIOD_SECONDS,
        billing_weights=settings.SCHEDULER_BILLING_WEIGHTS,
        sharing_overheads=settings.SCHEDULER_SHARING_OVERHEAD,
        preempt_mode=settings.SCHEDULER_PREEMPT_MODE,
        preempt_grace_seconds=settings.SCHEDULER_PREEMPT_GRACE_SECONDS,
        requeue_on_node_fail=settings.SCHEDULER_REQUEUE_ON_NODE_FAIL,
        max_requeues=settings.SCHEDULER_MAX_REQUEUES,
        node_timeout_seconds=settings.SCHEDULER_NODE_TIMEOUT_SECONDS,
        node_down_grace_seconds=settings.SCHEDULER_NODE_DOWN_GRACE_SECONDS,
        cancel_orphans=settings.SCHEDULER_CANCEL_ORPHANS,
        redispatch_seconds=settings.SCHEDULER_REDISPATCH_SECONDS,
    )
