"""Hourly GPU-hours per account (``AccountHour``), written as job attempts end.

An attempt's GPU time lands in the hours it ran, under its account, once: when the
conditional state change that ended it wins, in that change's transaction. A requeued
job's attempts each count once; news repeated about an end adds nothing; an end that
rolls back adds nothing; the migration's rebuild from stored jobs gives the same rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import transaction

from scheduler.clusters import reconcile
from scheduler.config import current_config
from scheduler.jobs import hours
from scheduler.jobs.verbs import cancel_job, requeue_job
from scheduler.models import AccountHour, Job
from tests.builders import end, start, submit

pytestmark = pytest.mark.django_db

H = timedelta(hours=1)
T = datetime(2026, 3, 1, 10, tzinfo=UTC)


def rows(account=None) -> dict[tuple[str, datetime], tuple[float, int, int]]:
    """(account, hour) -> (GPU-hours, carried, started) of every stored row."""
    stored = AccountHour.objects.all() if account is None else AccountHour.objects.filter(account=account)
    return {
        (r.account.name, r.hour): (round(r.gpu_seconds / 3600, 6), r.carried, r.started)
        for r in stored.select_related("account")
    }


def gpu_hours(account) -> float:
    return round(sum(r.gpu_seconds for r in AccountHour.objects.filter(account=account)) / 3600, 6)


def test_a_job_ending_writes_its_gpu_hours_into_the_hours_and_account_it_ran_in(world):
    job = start(submit(world.alice, world.lab, gpus_per_node=2), T + 30 * timedelta(minutes=1))
    assert AccountHour.objects.count() == 0  # running: nothing written yet
    assert end(job, T + 3 * H + timedelta(minutes=15))
    assert rows() == {
        ("lab", T): (1.0, 0, 1),  # 2 GPUs x 30 min; started here
        ("lab", T + H): (2.0, 1, 0),  # running at the hour's start
        ("lab", T + 2 * H): (2.0, 1, 0),
        ("lab", T + 3 * H): (0.5, 1, 0),  # 2 GPUs x 15 min
    }


def test_jobs_of_two_accounts_ending_in_the_same_hour_add_to_their_own_rows(world):
    end(start(submit(world.alice, world.lab), T), T + H)
    end(start(submit(world.bob, world.lab, gpu_share=0.5), T), T + H)
    end(start(submit(world.charlie, world.other, nodes=2, gpus_per_node=4), T), T + H)
    assert rows() == {("lab", T): (1.5, 0, 2), ("other", T): (8.0, 0, 1)}


def test_the_wait_of_an_attempt_is_counted_in_the_hour_it_started(world):
    end(start(submit(world.alice, world.lab), T + H, waited=timedelta(minutes=3)), T + 3 * H)
    row = AccountHour.objects.get(hour=T + H)
    assert [getattr(row, name) for name in hours.WAITED] == [0, 1, 0, 0, 0, 0, 0, 0]  # "1-5 min"
    assert sum(getattr(r, n) for r in AccountHour.objects.filter(hour=T + 2 * H) for n in hours.WAITED) == 0


def test_news_of_an_end_repeated_adds_nothing(world):
    job = start(submit(world.alice, world.lab), T)
    assert end(job, T + H)
    assert not end(job, T + H)  # a second poll with the same news: the job already moved
    assert rows() == {("lab", T): (1.0, 0, 1)}


def test_a_requeued_and_re_ended_job_counts_each_attempt_once(world):
    job = start(submit(world.alice, world.lab), T)
    end(job, T + H, state="FAILED")
    requeue_job(Job.objects.get(pk=job.pk), by="alice")  # an ended attempt: nothing more to add
    assert rows() == {("lab", T): (1.0, 0, 1)}
    end(start(job, T + 2 * H), T + 3 * H)
    assert rows() == {("lab", T): (1.0, 0, 1), ("lab", T + 2 * H): (1.0, 0, 1)}


def test_an_attempt_cut_short_by_a_node_failure_keeps_the_gpu_time_it_held(world, settings):
    settings.SCHEDULER_REQUEUE_ON_NODE_FAIL = True
    job = start(submit(world.alice, world.lab, gpus_per_node=4), T)
    with time_machine.travel(T + H / 2, tick=False):
        assert reconcile.lost(job.pk, "node h100-01 is down", T + H / 2, current_config())
    assert Job.objects.get(pk=job.pk).state == "PENDING"  # requeued: its start time is gone
    assert rows() == {("lab", T): (2.0, 0, 1)}  # but the 4 GPUs x 30 min it held are kept


def test_a_running_job_cancelled_by_its_owner_is_counted_to_the_cancel(world):
    job = start(submit(world.alice, world.lab), T)
    with time_machine.travel(T + 2 * H, tick=False):
        cancel_job(Job.objects.get(pk=job.pk), by="alice")
    assert gpu_hours(world.lab) == 2.0


def test_a_pending_job_cancelled_adds_nothing(world):
    cancel_job(submit(world.alice, world.lab), by="alice")
    assert AccountHour.objects.count() == 0


def test_an_end_that_rolls_back_adds_nothing(world):
    job = start(submit(world.alice, world.lab), T)
    with pytest.raises(RuntimeError), transaction.atomic():
        end(job, T + H)
        raise RuntimeError("the worker dies before its transaction commits")
    assert Job.objects.get(pk=job.pk).state == "RUNNING"
    assert AccountHour.objects.count() == 0
    assert end(job, T + H)  # the next poll brings the same news: counted now, once
    assert rows() == {("lab", T): (1.0, 0, 1)}


def test_rebuilding_from_the_stored_jobs_gives_the_rows_written_as_they_ended(world):
    end(start(submit(world.alice, world.lab, gpus_per_node=2), T + H / 4, waited=H), T + 5 * H)
    end(start(submit(world.charlie, world.other, gpu_share=0.25), T + 2 * H), T + 2 * H)  # ran no time
    end(start(submit(world.bob, world.lab), T + 3 * H + H / 3, waited=timedelta(days=2)), T + 4 * H)
    start(submit(world.alice, world.lab), T)  # still running: in no row

    def stored() -> list[tuple]:
        fields = ["account_id", "hour", "gpu_seconds", "carried", "started", *hours.WAITED]
        return sorted((a, h, round(s, 6), *rest) for a, h, s, *rest in AccountHour.objects.values_list(*fields))

    written = stored()
    assert hours.rebuild() == len(written)
    assert stored() == written
