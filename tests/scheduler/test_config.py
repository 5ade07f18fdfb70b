"""The tick and reconciliation run under one SchedulerConfig, read from settings each time."""

from __future__ import annotations

from scheduler.config import current_config, current_policy
from scheduler.core.types import PlacementStrategy


def test_the_config_follows_the_settings_without_a_restart(settings) -> None:
    settings.SCHEDULER_PLACEMENT = "spread"
    settings.SCHEDULER_MAX_REQUEUES = 7
    settings.SCHEDULER_PREEMPT_MODE = "cancel"
    config = current_config()
    assert config.policy.placement is PlacementStrategy.SPREAD
    assert (config.max_requeues, config.preempt_mode) == (7, "cancel")
    settings.SCHEDULER_MAX_REQUEUES = 1
    assert current_config().max_requeues == 1


def test_fifo_ordering_is_a_policy_without_priority_weights(settings) -> None:
    settings.SCHEDULER_PRIORITY = "fifo"
    assert current_policy().priority is None
    settings.SCHEDULER_PRIORITY = "multifactor"
    assert current_policy().priority is not None
