"""The periodic backtest of calibrated start times on the site's own history: the task
replays the last days and stores how often jobs started before their p50 and p90."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler import tasks
from scheduler.backtests import run_backtest
from scheduler.choices import JobState
from scheduler.config import current_policy
from scheduler.models import Job, StartBacktest
from scheduler.previews import site_history
from scheduler.replay.backtest import backtest
from scheduler.tick.snapshot import load_accounts, load_hardware, load_limits
from tests.builders import submit

pytestmark = pytest.mark.django_db


def contended_history(world, jobs: int = 24) -> None:
    """Alice's and charlie's 8-GPU H100 jobs, two days ago, a minute apart, on a site of
    16 H100s: each asked for 2 h and ran 20 to 110 minutes, so most of them waited."""
    start = timezone.now() - timedelta(days=2)
    for i in range(jobs):
        owner, account = (world.alice, world.lab) if i % 2 else (world.charlie, world.other)
        job = submit(owner, account, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2 * 3600)
        submitted = start + timedelta(minutes=i)
        Job.objects.filter(pk=job.pk).update(
            state=JobState.COMPLETED,
            submitted_at=submitted,
            started_at=submitted,
            ended_at=submitted + timedelta(minutes=20 + (i * 37) % 90),
        )


def test_the_task_stores_what_a_backtest_of_the_last_days_reports(world, settings):
    contended_history(world)
    settings.SCHEDULER_BACKTEST_DAYS = 7
    assert tasks.backtest_starts.name == "scheduler.backtest_starts"
    row = StartBacktest.objects.get(pk=tasks.backtest_starts())
    policy = replace(current_policy(), explain=False, estimates=False)
    expected = backtest(site_history(row.ran_at, 7), load_hardware(), policy, load_limits()[0], load_accounts())
    assert (row.days, row.jobs, row.judged) == (7, 24, len(expected.checks)) and row.judged > 0
    assert (row.p50_coverage, row.p90_coverage, row.p50_error_s) == (
        expected.p50_coverage,
        expected.p90_coverage,
        expected.p50_error_s,
    )
    assert row.summary.startswith(f"{row.p90_coverage:.0%} of jobs started before their p90")
    assert "p50 error" in row.summary and row.wall_s > 0


def test_with_no_history_the_stored_backtest_says_nothing_was_judged(world):
    row = run_backtest(timezone.now(), 7)
    assert (row.jobs, row.judged) == (0, 0)
    assert row.summary == "No job waited for a start prediction in the 7 days replayed."


def test_only_the_last_days_are_replayed(world):
    contended_history(world)
    assert run_backtest(timezone.now(), 1).jobs == 0  # all of it two days ago
