"""Right-sizing advice measured on the site's own history: the smaller request's saving is
what a replay of the last days with it says, and the replay runs once per jobs read."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from scheduler import advice as advisor
from scheduler.advice import advise, measure, replay_window
from scheduler.models import AdviceMeasurement
from scheduler.reads.advice import advice_words, hours_text, runs_of, shape_of
from tests.builders import ended_job

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def empty_cache():  # type: ignore[no-untyped-def]
    cache.clear()
    yield
    cache.clear()


def crowded_history(world, *, jobs: int = 12, busy: int | None = 2) -> None:
    """Two days ago on the test site (two 8-GPU H100 nodes, a 4-GPU L4 node): charlie's two
    6-GPU jobs hold each H100 node for 10 h; a minute later alice asks ``jobs`` times for
    8 GPUs for 12 h, runs for an hour and keeps ``busy`` GPUs busy. Her 8-GPU asks wait
    for charlie's jobs to end; 2-GPU asks fit beside them at once."""
    start = timezone.now() - timedelta(days=2)
    for i in range(2):
        ended_job(
            world.charlie,
            world.other,
            submitted=start + timedelta(seconds=i),
            ran=10 * HOUR,
            gpus_per_node=6,
            walltime_seconds=12 * 3600,
        )
    for i in range(jobs):
        ended_job(
            world.alice,
            world.lab,
            submitted=start + timedelta(minutes=1, seconds=i),
            waited=10 * HOUR,
            ran=HOUR,
            gpus_busy=busy,
            gpus_per_node=8,
            walltime_seconds=12 * 3600,
        )


EIGHT_FOR_HALF_A_DAY = shape_of(8, 12 * 3600)


def measured_history(world) -> None:
    """:func:`crowded_history` with alice's advice measured, as the task leaves it."""
    crowded_history(world)
    advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, timezone.now(), wait=True)


def test_asking_what_the_jobs_used_would_have_started_them_hours_sooner_in_the_replay(world):
    crowded_history(world)
    got = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, timezone.now(), wait=True)
    assert got is not None
    s = got.suggestion
    assert (s.jobs, s.gpus_used, s.gpus, s.walltime_s) == (12, 2, 2, 4500)
    # As they ran, they waited 10 h for charlie's jobs and then went two at a time; asking
    # 2 GPUs, four at a time started at once beside his (three waves of an hour).
    assert got.sooner_s is not None and got.sooner_s > 9 * 3600
    assert advice_words(got).endswith(
        "asking 1 h 15 min and 2 GPUs would have started them " + hours_text(got.sooner_s) + " sooner on average."
    )


def test_the_replay_covers_from_a_day_before_the_first_job_read_to_now_at_most_the_setting(world, settings):
    crowded_history(world)  # alice's jobs came two days ago
    now = timezone.now()
    runs = runs_of(world.alice.id, EIGHT_FOR_HALF_A_DAY, since=now - timedelta(days=30), limit=20)
    first = min(run.submitted_at for run in runs)
    assert replay_window(runs, now, 30) == pytest.approx((now - first) / timedelta(days=1) + 1)
    assert replay_window(runs, now, 2) == 2.0
    got = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now, wait=True)
    assert got is not None and got.replayed_days == pytest.approx(3.0, abs=0.01)


def test_the_saving_is_the_replays_and_nothing_else(world, monkeypatch):
    """With the replay answering that the smaller asks start no sooner, no saving is shown."""
    crowded_history(world)
    monkeypatch.setattr(advisor, "resized", lambda job, suggestion: job)  # the "smaller" trace is the same
    got = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, timezone.now(), wait=True)
    assert got is not None and got.sooner_s == 0.0


def test_fewer_jobs_of_the_shape_than_the_setting_give_no_advice_and_replay_nothing(
    world, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.ADVICE_MIN_JOBS = 13
    crowded_history(world)
    monkeypatch.setattr(advisor, "started_sooner", lambda *a: pytest.fail("replayed"))
    with django_capture_on_commit_callbacks() as asked:
        assert advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, timezone.now()) is None
        assert advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, timezone.now(), wait=True) is None
    assert asked == []
    settings.ADVICE_MIN_JOBS = 12
    monkeypatch.undo()
    assert advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, timezone.now(), wait=True) is not None


def test_jobs_that_used_what_they_asked_are_not_replayed(world, monkeypatch):
    crowded_history(world, busy=8)
    for job in world.alice.jobs.all():
        job.walltime_seconds = 4500
        job.save(update_fields=["walltime_seconds"])
    monkeypatch.setattr(advisor, "started_sooner", lambda *a: pytest.fail("replayed"))
    got = advise(world.alice.id, shape_of(8, 4500), timezone.now())
    assert got is not None and not got.suggestion.smaller and got.sooner_s is None


def test_the_replay_runs_once_for_the_same_jobs_and_again_when_another_ends(world, monkeypatch):
    crowded_history(world)
    calls: list[int] = []
    real = advisor.started_sooner

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(advisor, "started_sooner", counted)
    now = timezone.now()
    first = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now, wait=True)
    assert advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now, wait=True) == first and len(calls) == 1
    ended_job(
        world.alice,
        world.lab,
        submitted=now - HOUR * 3,
        gpus_busy=2,
        gpus_per_node=8,
        walltime_seconds=12 * 3600,
    )
    advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now, wait=True)
    assert len(calls) == 2


def test_a_read_never_replays_it_asks_the_task_once_and_shows_the_suggestion_meanwhile(
    world, django_capture_on_commit_callbacks
):
    crowded_history(world)
    now = timezone.now()
    with django_capture_on_commit_callbacks() as asked:
        first = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now)
        again = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now)
    assert len(asked) == 1  # the second read finds it asked
    assert first == again and first is not None and first.pending and first.sooner_s is None
    assert first.suggestion.gpus == 2
    assert "the replay of this site's history that says how much is under way" in advice_words(first)
    asked[0]()  # the task (inline without a broker)
    measured = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now)
    assert (
        measured is not None and not measured.pending and measured.sooner_s is not None and measured.sooner_s > 9 * 3600
    )


def test_what_the_task_measured_is_read_by_every_web_process_until_it_is_stale(world, settings):
    """The task runs in a Celery worker: its answer is a row, not an entry in its own
    process's cache, so a web process with an empty cache reads it, until it is older
    than ADVICE_CACHE_SECONDS."""
    crowded_history(world)
    measure({"owner_id": world.alice.id, **asdict(EIGHT_FOR_HALF_A_DAY)})  # the task's work
    cache.clear()  # another process
    now = timezone.now()
    read = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now)
    assert read is not None and not read.pending and read.sooner_s is not None and read.sooner_s > 9 * 3600
    later = now + timedelta(seconds=settings.ADVICE_CACHE_SECONDS + 1)
    stale = advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, later)
    assert stale is not None and stale.pending


def test_a_new_measurement_of_a_shape_replaces_the_older_one(world):
    crowded_history(world)
    now = timezone.now()
    advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now, wait=True)
    ended_job(
        world.alice, world.lab, submitted=now - HOUR * 3, gpus_busy=2, gpus_per_node=8, walltime_seconds=12 * 3600
    )
    advise(world.alice.id, EIGHT_FOR_HALF_A_DAY, now, wait=True)
    [row] = AdviceMeasurement.objects.filter(owner=world.alice)
    assert row.key.split(":")[-3] == str(world.alice.jobs.order_by("-ended_at", "-id").first().id)
