"""The tick's fair-share usage: charged and written at most once per calc period
(Slurm's PriorityCalcPeriod); the ticks in between decay what is stored and write
nothing, and the next full update charges everything run since the last one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.choices import JobState
from scheduler.models import Job, TickState, Usage
from scheduler.tick.snapshot import load_nodes
from scheduler.tick.usage import update_usage, usage_policy
from tests.builders import submit

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 10, 12, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def charged(world, at: datetime) -> dict[tuple[str, str], float]:
    return update_usage(at, load_nodes(), usage_policy(7, None, None), period=MINUTE)


def stored() -> tuple[datetime | None, dict[tuple[str, str], float]]:
    as_of = TickState.objects.filter(pk=1).values_list("usage_as_of", flat=True).first()
    return as_of, {(a, u): v for a, u, v in Usage.objects.values_list("account__name", "user__username", "gpu_seconds")}


def test_usage_is_written_once_a_period_and_nothing_run_in_between_is_lost(world):
    charged(world, T0)  # the first tick starts the books
    job = submit(world.alice, world.lab)
    Job.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING,
        started_at=T0,
        cluster=world.cluster,
        allocations=[{"node": "h100-01", "gpu_indices": [0], "cpus": 1, "memory_mib": 0}],
    )

    within = charged(world, T0 + timedelta(seconds=30))
    assert within.get(("lab", "alice"), 0.0) == 0.0  # not charged yet ...
    assert stored() == (T0, {})  # ... and nothing written

    after = charged(world, T0 + timedelta(seconds=90))
    assert after[("lab", "alice")] == pytest.approx(90, rel=1e-3)  # all 90 s, the first 30 too
    assert stored()[0] == T0 + timedelta(seconds=90)
    assert stored()[1][("lab", "alice")] == pytest.approx(90, rel=1e-3)


def test_a_period_of_zero_charges_every_tick(world):
    update_usage(T0, load_nodes(), usage_policy(7, None, None))
    update_usage(T0 + MINUTE / 2, load_nodes(), usage_policy(7, None, None))
    assert stored()[0] == T0 + MINUTE / 2
