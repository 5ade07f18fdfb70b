"""The fairness watch: when Jain's index over accounts' slowdowns of the last 24 h falls
below ``FAIRNESS_WATCH_BELOW``, staff are told which account is starving, once per
episode (not at every check), with a replay of the last week under another policy;
a recovery ends the episode and a relapse starts a new one, told again.

Personas (tests/conftest.py): admin is staff; alice (lab) and charlie (other) are not.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail

from monitoring.fairness import watch
from monitoring.models import FairnessEpisode
from notifications.models import Delivery, Event, Preference
from notifications.outbox import pump
from scheduler.models import Simulation
from tests.builders import finished, make_user

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _watched(settings):  # type: ignore[no-untyped-def]
    settings.FAIRNESS_WATCH_BELOW = 0.8
    settings.FAIRNESS_SWITCH_POLICY = "stretch-las-preempt"
    settings.NOTIFY_CONDITIONS_SECONDS = 1


def other_starves(world, at: datetime) -> None:
    """By ``at``, lab's job ran at once (slowdown 1) and other's waited 9 h for a 1-hour
    run (slowdown 10): Jain's index 121 / 202 = 0.60."""
    finished(world.alice, world.lab, at - HOUR, waited=timedelta(0), ran=HOUR)
    finished(world.charlie, world.other, at - HOUR, waited=9 * HOUR, ran=HOUR)


def told(user) -> list[Delivery]:
    return list(Delivery.objects.filter(user=user, event=Event.STARVING).order_by("id"))


def test_an_even_day_opens_no_episode(world):
    finished(world.alice, world.lab, T0 - HOUR, waited=HOUR, ran=HOUR)
    finished(world.charlie, world.other, T0 - HOUR, waited=HOUR, ran=HOUR)
    assert watch(T0) == "fair"
    assert not FairnessEpisode.objects.exists()


def test_a_level_of_zero_turns_the_watch_off(world, settings):
    settings.FAIRNESS_WATCH_BELOW = 0
    other_starves(world, T0)
    assert watch(T0) == "off"
    assert not FairnessEpisode.objects.exists()


def test_a_starving_account_opens_an_episode_with_a_replay_of_the_other_policy(world):
    other_starves(world, T0)
    assert watch(T0) == "opened"
    episode = FairnessEpisode.objects.get()
    assert (episode.account, episode.open, episode.started_at) == ("other", True, T0)
    assert episode.jain == pytest.approx(121 / 202)
    assert episode.worst_ratio == pytest.approx(10 / 5.5)
    assert episode.switch is not None
    assert (episode.switch.kind, episode.switch.params, episode.switch.days) == (
        Simulation.Kind.SWITCH,
        {"policy": "stretch-las-preempt"},
        7,
    )


def test_staff_are_told_once_per_episode_and_again_after_recovery_then_relapse(world):
    second_admin = make_user("root", staff=True)
    other_starves(world, T0)
    assert watch(T0) == "opened"
    pump(T0)
    first = told(world.admin)
    assert len(first) == 1 and len(told(second_admin)) == 1
    assert first[0].subject == "Fairness: other is starving"
    assert f"/manage/simulations/{FairnessEpisode.objects.get().switch_id}/" in first[0].body
    assert "0.60, below the level of 0.8" in first[0].body

    # Later checks still find it: the same episode, no new message.
    for minutes in (5, 10, 15):
        assert watch(T0 + timedelta(minutes=minutes)) == "ongoing"
        pump(T0 + timedelta(minutes=minutes))
    assert told(world.admin) == first

    # A day on, the starved jobs are out of the window: it recovers, nobody is told.
    recovered = T0 + 25 * HOUR
    assert watch(recovered) == "closed"
    pump(recovered)
    assert told(world.admin) == first
    assert FairnessEpisode.objects.get().ended_at == recovered

    # It starves again: a new episode, told again.
    relapse = recovered + 2 * HOUR
    other_starves(world, relapse)
    assert watch(relapse) == "opened"
    pump(relapse)
    assert len(told(world.admin)) == len(told(second_admin)) == 2
    assert FairnessEpisode.objects.count() == 2
    assert any("other is starving" in message.subject for message in mail.outbox)


def test_researchers_are_never_told(world):
    other_starves(world, T0)
    watch(T0)
    pump(T0)
    assert not Delivery.objects.filter(event=Event.STARVING).exclude(user=world.admin).exists()


def test_a_staff_member_who_unticked_it_is_not_told(world):
    Preference.objects.create(user=world.admin, events=[Event.ENDED])
    other_starves(world, T0)
    watch(T0)
    pump(T0)
    assert told(world.admin) == []


def test_the_api_gives_staff_the_figures_and_the_episode_and_researchers_a_403(world, client_for):
    other_starves(world, T0)
    with time_machine.travel(T0, tick=False):
        watch(T0)
        assert client_for(world.alice).get("/api/v1/monitoring/fairness/").status_code == 403
        body = client_for(world.admin).get("/api/v1/monitoring/fairness/").json()
    episode = FairnessEpisode.objects.get()
    assert body["accounts"] == {"lab": 1.0, "other": 10.0}
    assert (body["jobs"], body["worst_account"], body["window_hours"], body["level"]) == (2, "other", 24.0, 0.8)
    assert body["jain"] == pytest.approx(121 / 202)
    assert body["starving"]["account"] == "other" and body["starving"]["switch"] == episode.switch_id
