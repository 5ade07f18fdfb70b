"""Right-sizing advice, the read: a user's ended jobs of one shape, what they used of what
they asked, the request that would have fitted them, and the sentence that says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduler.reads.advice import (
    Advice,
    Run,
    Suggestion,
    advice_words,
    runs_of,
    shape_of,
    suggest,
    suggested_gpus,
    suggested_walltime,
)
from tests.builders import T0, ended_job

HOUR = 3600


def runs(count: int, *, elapsed_s: int = HOUR, walltime_s: int = 12 * HOUR, gpus: int = 8, busy: int | None = 2):
    return [Run(i, walltime_s, elapsed_s, gpus, busy, T0) for i in range(count)]


@pytest.mark.parametrize(
    ("elapsed", "asked", "wanted"),
    [
        ([3600] * 20, 12 * HOUR, 4500),  # 1 h x 1.25 = 1 h 15 min, a quarter hour
        ([600, 700, 800], 12 * HOUR, 1800),  # p95 790 s x 1.25 = 988 s -> 30 min
        ([3 * HOUR] * 10 + [4 * HOUR], 24 * HOUR, 5 * HOUR),  # p95 3.5 h x 1.25 = 4.4 h -> 5 h
        ([11 * HOUR] * 5, 12 * HOUR, 12 * HOUR),  # never more than asked
    ],
    ids=["short runs, quarter hours", "minutes", "past 4 h, whole hours", "capped at the ask"],
)
def test_the_suggested_walltime_is_the_95th_percentile_with_a_margin_rounded_up(elapsed, asked, wanted):
    assert suggested_walltime(elapsed, asked) == wanted


@pytest.mark.parametrize(
    ("busy", "asked", "wanted"),
    [([2, 1, 2], 8, 2), ([3], 8, 4), ([0], 8, 1), ([5], 6, 6), ([], 8, 8)],
    ids=["two busy", "three round up to four", "idle is still one", "capped at the ask", "unmeasured keeps the ask"],
)
def test_the_suggested_gpus_are_the_most_kept_busy_rounded_up_to_a_power_of_two(busy, asked, wanted):
    assert suggested_gpus(busy, asked) == wanted


def test_fewer_jobs_than_the_minimum_say_nothing():
    assert suggest(runs(9), min_jobs=10) is None
    assert suggest([], min_jobs=1) is None
    assert suggest(runs(10), min_jobs=10) is not None


def test_jobs_that_used_a_fraction_of_their_ask_get_a_smaller_request():
    got = suggest(runs(20, elapsed_s=HOUR, walltime_s=4 * HOUR, busy=2), min_jobs=10)
    assert got == Suggestion(
        jobs=20,
        walltime_used=0.25,
        gpus_asked=8,
        gpus_used=2,
        walltime_asked_s=4 * HOUR,
        walltime_s=4500,
        gpus=2,
    )
    assert got.smaller


def test_the_words_say_what_was_used_and_what_asking_less_would_have_bought():
    suggestion = suggest(runs(20, elapsed_s=int(0.3 * 10 * HOUR), walltime_s=10 * HOUR, busy=2), min_jobs=10)
    assert suggestion is not None
    assert advice_words(Advice(suggestion, 2.1 * HOUR, 30)) == (
        "Your last 20 jobs of this shape used 30% of their walltime and 2 of 8 GPUs; "
        "asking 3 h 45 min and 2 GPUs would have started them 2.1 h sooner on average."
    )
    assert advice_words(Advice(suggestion, 10.0, 30)).endswith(
        "asking 3 h 45 min and 2 GPUs would not have started them sooner in a replay of this site's history."
    )


def test_jobs_that_used_what_they_asked_are_told_it_fits_and_unmeasured_gpus_are_not_guessed():
    suggestion = suggest(runs(10, elapsed_s=12 * HOUR, busy=None), min_jobs=10)
    assert suggestion is not None and not suggestion.smaller
    assert advice_words(Advice(suggestion, None)) == (
        "Your last 10 jobs of this shape used 100% of their walltime; what they asked for fits them."
    )


def test_a_shape_is_the_users_own_ended_jobs_of_the_same_gpus_model_and_walltime_band(world):
    now = timezone.now()
    when = now - timedelta(days=1)

    def past(owner=world.alice, **request):  # type: ignore[no-untyped-def]
        fields = {"gpus_per_node": 8, "walltime_seconds": 10 * HOUR, "submitted": when, "gpus_busy": 2, **request}
        return ended_job(owner, world.lab, **fields)

    same = [past(), past(walltime_seconds=5 * HOUR), past(state="TIMEOUT")]
    past(owner=world.bob)  # someone else's
    past(gpus_per_node=4)  # other GPU count
    past(gpu_model="H100-80GB")  # a model named
    past(walltime_seconds=2 * HOUR)  # another band
    past(state="FAILED")  # ended early for its own reasons
    past(submitted=now - timedelta(days=40))  # before the window

    found = runs_of(world.alice.id, shape_of(8, 12 * HOUR), since=now - timedelta(days=30), limit=20)
    assert sorted(run.job_id for run in found) == sorted(job.id for job in same)
    assert {(run.gpus, run.gpus_busy, run.elapsed_s) for run in found} == {(8, 2, HOUR)}


def test_the_cluster_counts_when_known_and_only_the_last_jobs_are_read(world):
    now = timezone.now()
    jobs = [
        ended_job(world.alice, world.lab, submitted=now - timedelta(hours=30 - i), cluster=world.cluster)
        for i in range(5)
    ]
    shape = shape_of(1, HOUR)
    since = now - timedelta(days=30)
    assert [run.job_id for run in runs_of(world.alice.id, shape, since=since, limit=3)] == [
        job.id for job in reversed(jobs[2:])
    ]
    elsewhere = shape_of(1, HOUR, cluster_id=world.cluster.id + 1)
    assert runs_of(world.alice.id, elsewhere, since=since, limit=3) == []
