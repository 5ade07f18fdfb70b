"""The fairness watch: every few minutes, how evenly accounts' jobs were treated over
the last 24 h (``scheduler.reads.fairness``), kept as episodes (``FairnessEpisode``).

An episode opens when Jain's index over accounts' mean slowdowns falls below
``FAIRNESS_WATCH_BELOW``, naming the worst-treated account, and asks for a replay of the
site's last ``FAIRNESS_SWITCH_DAYS`` under its own policy and under
``FAIRNESS_SWITCH_POLICY`` (``scheduler.policy_switch``); it closes when the index is
back at the level or above. Staff hear of each episode once, from the notifier
(``notifications.facts.starving``), not of every check that still finds it.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction

from monitoring.models import FairnessEpisode
from scheduler.reads.fairness import read_fairness
from scheduler.simulations import start_switch


def watch(now: datetime) -> str:
    """One check at ``now``; returns what it found: ``off`` (the level is 0), ``fair``,
    ``opened`` (a new episode, and its replay asked for), ``ongoing`` or ``closed``.
    Idempotent: a second check with nothing changed finds the episode ``ongoing``.

    1. Read the fairness of the last 24 h.
    2. At or above the level: close the open episode, if any.
    3. Below it: keep the open episode, or open one with its replay (an open one that a
       concurrent check made counts as ongoing).
    """
    level = settings.FAIRNESS_WATCH_BELOW
    if level <= 0:
        return "off"
    fairness = read_fairness(now)
    if fairness.jain >= level or fairness.worst_account is None:
        closed = FairnessEpisode.objects.filter(open=True).update(open=False, ended_at=now)
        return "closed" if closed else "fair"
    if FairnessEpisode.objects.filter(open=True).exists():
        return "ongoing"
    try:
        with transaction.atomic():
            episode = FairnessEpisode.objects.create(
                started_at=now, account=fairness.worst_account, jain=fairness.jain, worst_ratio=fairness.worst_ratio
            )
            switch = start_switch(None, policy=settings.FAIRNESS_SWITCH_POLICY, days=settings.FAIRNESS_SWITCH_DAYS)
            FairnessEpisode.objects.filter(pk=episode.pk).update(switch=switch)
    except IntegrityError:
        return "ongoing"
    return "opened"


def open_episode() -> FairnessEpisode | None:
    """The episode under way, if any, with its replay."""
    return FairnessEpisode.objects.select_related("switch").filter(open=True).first()
