"""A change to an account's shares or limits previewed on the site's own history: the
last days' jobs replayed as the accounts are and with the change, per account."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.choices import JobState
from scheduler.core.types import Limits
from scheduler.models import Job
from scheduler.previews import MIN_JOBS, TooLittleHistory, preview, site_history
from tests.builders import submit

pytestmark = pytest.mark.django_db


def history(world, per_account: int = 15) -> None:
    """Two accounts each submitting ``per_account`` 8-GPU, one-hour H100 jobs within a
    minute, two days ago, on a site of 16 H100s: they contend for the same GPUs."""
    start = timezone.now() - timedelta(days=2)
    for i in range(per_account):
        for owner, account in ((world.alice, world.lab), (world.charlie, world.other)):
            job = submit(owner, account, gpus_per_node=8, gpu_model="H100-80GB", walltime_seconds=2 * 3600)
            submitted = start + timedelta(seconds=2 * i + (account == world.other))
            Job.objects.filter(pk=job.pk).update(
                state=JobState.COMPLETED,
                submitted_at=submitted,
                started_at=submitted + timedelta(minutes=5),
                ended_at=submitted + timedelta(minutes=65),
            )


def test_the_history_is_the_jobs_that_ran_in_the_window_on_a_clock_from_the_first(world):
    history(world, per_account=2)
    old = submit(world.alice, world.lab, gpus_per_node=1)
    Job.objects.filter(pk=old.pk).update(submitted_at=timezone.now() - timedelta(days=40))
    submit(world.alice, world.lab, gpus_per_node=1)  # still waiting: did not run
    trace = site_history(timezone.now(), 7)
    assert len(trace) == 4 and trace[0].submit_s == 0
    assert {(j.gpus, j.duration_s, j.walltime_s) for j in trace} == {(8, 3600, 7200)}


def test_too_little_history_says_how_much_there_is(world):
    history(world, per_account=2)
    with pytest.raises(TooLittleHistory, match=f"4 jobs ran in the last 7 days; a preview needs at least {MIN_JOBS}"):
        preview("lab", shares=5, limits=None, days=7, now=timezone.now())


def test_more_shares_for_one_account_shorten_its_waits_at_the_others_expense(world):
    history(world)
    told: list[float] = []
    result = preview("other", shares=50, limits=None, days=7, now=timezone.now(), progress=told.append)
    assert told == [0.5, 1.0] and result.jobs == 30
    rows = {row.account: row for row in result.rows}
    assert rows["other"].proposed.avg_wait_s < rows["other"].today.avg_wait_s
    assert rows["lab"].proposed.avg_wait_s > rows["lab"].today.avg_wait_s
    for row in rows.values():  # every job still runs, as long as before
        assert (row.proposed.jobs, row.proposed.gpu_hours) == (row.today.jobs, row.today.gpu_hours) == (15, 120.0)


def test_a_tighter_quota_makes_the_account_wait_longer(world):
    history(world)
    result = preview("lab", shares=None, limits=Limits(max_gpus=8), days=7, now=timezone.now())
    rows = {row.account: row for row in result.rows}
    assert rows["lab"].wait_change_s > 0 and rows["other"].wait_change_s < 0
