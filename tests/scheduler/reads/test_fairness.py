"""The fairness watch reads the GPU jobs that ended in the last 24 hours: each account's
mean bounded slowdown, Jain's index over them, the worst account against everyone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.models import Job
from scheduler.reads.fairness import WINDOW, read_fairness
from tests.builders import finished, submit

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_accounts_that_waited_alike_are_perfectly_fair(world):
    finished(world.alice, world.lab, NOW - HOUR, waited=HOUR, ran=HOUR)
    finished(world.charlie, world.other, NOW - HOUR, waited=2 * HOUR, ran=2 * HOUR)
    fairness = read_fairness(NOW)
    assert fairness.accounts == {"lab": 2.0, "other": 2.0}
    assert (fairness.jain, fairness.worst_ratio, fairness.jobs) == (1.0, 1.0, 2)


def test_an_account_that_waited_longer_for_what_it_ran_is_the_worst(world):
    finished(world.alice, world.lab, NOW - HOUR, waited=timedelta(0), ran=HOUR)
    finished(world.charlie, world.other, NOW - HOUR, waited=3 * HOUR, ran=HOUR)  # slowdown 4
    fairness = read_fairness(NOW)
    assert fairness.accounts == {"lab": 1.0, "other": 4.0}
    assert fairness.jain == pytest.approx(25 / 34)  # (1 + 4)^2 / (2 * (1 + 16))
    assert (fairness.worst_account, fairness.worst_ratio) == ("other", pytest.approx(4 / 2.5))


@pytest.mark.parametrize(
    ("ended", "counted"),
    [
        (NOW, True),
        (NOW - WINDOW + timedelta(seconds=1), True),
        (NOW - WINDOW, False),
        (NOW + timedelta(seconds=1), False),
    ],
    ids=["ended now", "ended just inside a day ago", "ended exactly a day ago", "ends after now"],
)
def test_the_window_is_the_last_24_hours_ends_included_start_excluded(world, ended, counted):
    finished(world.charlie, world.other, ended, waited=3 * HOUR, ran=HOUR)
    assert read_fairness(NOW).jobs == (1 if counted else 0)


def test_jobs_that_never_started_or_asked_no_gpu_are_not_measured(world):
    finished(world.alice, world.lab, NOW - HOUR, waited=HOUR, ran=HOUR, gpus_per_node=0)
    cancelled_waiting = submit(world.alice, world.lab)
    Job.objects.filter(pk=cancelled_waiting.pk).update(state="CANCELLED", ended_at=NOW - HOUR)
    assert read_fairness(NOW).jobs == 0
