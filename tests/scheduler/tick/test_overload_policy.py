"""The overload policies on the live site: the same ``schedule()`` as the replay, fed
what the database knows of the past (ended runs, earlier attempts)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from quartermaster.env import env_levels
from scheduler.choices import JobState
from scheduler.config import current_policy
from scheduler.core.types import Snapshot
from scheduler.jobs.transitions import transition
from scheduler.models import Job
from scheduler.tick.history import load_attained_service, load_runtime_ratios
from scheduler.tick.snapshot import with_policy_inputs
from tests.builders import local_node_group, make_local_cluster, run_attempt, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_world(world):
    """One 2-GPU node."""
    world.cluster.delete()
    world.cluster = make_local_cluster("tiny", [local_node_group("t-01", gpus=2)])
    return world


def test_the_predictor_learns_from_runs_that_ended_on_their_own(world) -> None:
    now = timezone.now()
    for ran_min in (15, 45):  # a quarter and three quarters of the hour asked for
        run_attempt(submit(world.bob, world.lab), now - timedelta(hours=2), now - timedelta(hours=2, minutes=-ran_min))
    cut_short = submit(world.bob, world.lab)
    run_attempt(cut_short, now - timedelta(minutes=30), None)
    transition(cut_short.id, [JobState.RUNNING], JobState.CANCELLED, ended_at=now - timedelta(minutes=29))
    ratios = load_runtime_ratios()
    assert ratios == {("lab", "bob"): pytest.approx(0.5), ("lab", ""): pytest.approx(0.5)}


def test_the_tick_reads_the_history_only_for_a_policy_that_uses_it(world, settings) -> None:
    empty = Snapshot((), (), ())
    with CaptureQueriesContext(connection) as plain:
        assert with_policy_inputs(empty, current_policy(), dict).runtime_ratios == {}
    settings.PRIORITY_WEIGHT_SHORTNESS = 200_000
    run_attempt(submit(world.bob, world.lab), timezone.now() - timedelta(hours=1), timezone.now())
    policy = current_policy()
    assert policy.priority is not None and policy.priority.shortness == 200_000
    with CaptureQueriesContext(connection) as learning:
        ratios = with_policy_inputs(empty, policy, dict).runtime_ratios
    assert ratios[("lab", "bob")] == pytest.approx(1.0, abs=0.01)
    assert len(learning) == len(plain) + 1  # one query, however many jobs ended


def test_least_attained_service_evicts_a_long_runner_for_a_new_job(small_world, tick, settings) -> None:
    victim = submit(small_world.bob, small_world.lab, command="sleep 60", gpus_per_node=2)
    tick()
    Job.objects.filter(pk=victim.pk).update(started_at=timezone.now() - timedelta(hours=1))  # 7,200 GPU-s
    newcomer = submit(small_world.alice, small_world.lab, gpus_per_node=2)
    tick()
    newcomer.refresh_from_db()
    assert newcomer.state == JobState.PENDING  # service levels off: it waits its turn
    settings.SCHEDULER_SERVICE_LEVELS = (1800,)
    tick()
    newcomer.refresh_from_db()
    victim.refresh_from_db()
    assert (newcomer.state, victim.state) == (JobState.RUNNING, JobState.PENDING)
    assert "less service" in victim.events.get(kind="preempted").message
    # requeued, it carries the service it had: it will not evict the newcomer back
    assert load_attained_service()[victim.id] == pytest.approx(7_200, abs=120)
    tick()
    victim.refresh_from_db()
    assert victim.state == JobState.PENDING


def test_service_levels_are_ascending_whole_numbers(monkeypatch) -> None:
    monkeypatch.setenv("LEVELS", "1800, 86400")
    assert env_levels("LEVELS") == (1800, 86400)
    for bad in ("86400,1800", "0", "1h"):
        monkeypatch.setenv("LEVELS", bad)
        with pytest.raises(Exception, match="ascending whole numbers"):
            env_levels("LEVELS")
