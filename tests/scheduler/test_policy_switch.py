"""What switching the site's policy would change for fairness, on the site's own last
week: each account's mean slowdown and Jain's index under the site's policy and under
the other, as a stored simulation the admin opens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from scheduler.models import Simulation
from scheduler.policy_switch import policy_switch
from scheduler.previews import MIN_JOBS, TooLittleHistory
from scheduler.replay.trace import SimulationError
from scheduler.simulations import start_switch
from tests.builders import finished

pytestmark = pytest.mark.django_db


def starved_history(world, now) -> None:
    """Two days ago on the site's 16 H100s: lab filled both nodes with twelve 4-hour
    8-GPU jobs, and from two hours later other asked for an 8-GPU 10-minute job every
    10 minutes; each waited for lab's running jobs to end (fair-share then put other's
    first, two at a time)."""
    start = now - timedelta(days=2)
    for i in range(12):
        finished(
            world.alice,
            world.lab,
            start + timedelta(hours=4 * (i // 2 + 1), seconds=i),
            waited=timedelta(hours=4 * (i // 2)),
            ran=timedelta(hours=4),
            gpus_per_node=8,
            walltime_seconds=5 * 3600,
        )
    for i in range(8):
        submitted = start + timedelta(hours=2, minutes=10 * i)
        ended = start + timedelta(hours=4, minutes=10 * (i // 2 + 1))
        finished(
            world.charlie,
            world.other,
            ended,
            waited=ended - timedelta(minutes=10) - submitted,
            ran=timedelta(minutes=10),
            gpus_per_node=8,
            walltime_seconds=900,
        )


def slowdowns(row: Any) -> tuple[float, float]:
    """An account's mean slowdown today and under the other policy (it ran jobs under both)."""
    assert row.today is not None and row.switched is not None
    return row.today, row.switched


def test_switching_to_stretch_las_preempt_would_spare_the_starved_account(world):
    now = timezone.now()
    starved_history(world, now)
    told: list[float] = []
    switch = policy_switch("stretch-las-preempt", days=7, now=now, progress=told.append)
    assert told == [0.5, 1.0]
    assert (switch.jobs, switch.policy, switch.days) == (20, "stretch-las-preempt", 7)
    rows = {row.account: row for row in switch.rows}
    assert (rows["lab"].jobs, rows["other"].jobs) == (12, 8)
    # other's jobs evict lab's that ran 2 h (least attained service) instead of waiting
    # for them to end; lab pays a little
    lab, other = (slowdowns(rows[name]) for name in ("lab", "other"))
    assert other[1] < other[0] / 2
    assert lab[1] > lab[0]
    assert switch.jain_switched > switch.jain_today
    assert switch.worst_ratio_switched < switch.worst_ratio_today


def test_the_comparison_is_a_stored_simulation_with_its_figures(world, django_capture_on_commit_callbacks):
    starved_history(world, timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        row = start_switch(None, policy="stretch-las-preempt", days=7)
    row.refresh_from_db()
    assert row.result is not None
    assert (row.kind, row.state, row.progress) == (Simulation.Kind.SWITCH, Simulation.State.DONE, 1.0)
    assert row.result["policy"] == "stretch-las-preempt" and row.result["jobs"] == 20
    assert {r["account"] for r in row.result["rows"]} == {"lab", "other"}


def test_an_unknown_policy_is_named_with_the_known_ones(world):
    with pytest.raises(SimulationError, match="unknown policy 'nope'; known policies: fairshare-backfill"):
        policy_switch("nope", days=7, now=timezone.now())


def test_too_little_history_says_how_much_there_is(world):
    with pytest.raises(
        TooLittleHistory, match=f"0 jobs ran in the last 7 days; a comparison needs at least {MIN_JOBS}"
    ):
        policy_switch("stretch-las-preempt", days=7, now=timezone.now())
