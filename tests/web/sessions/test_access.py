"""Who may pass: the decision cache's bounds, the activity gate, the reachable rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.builders import interactive_session, make_interactive_app
from tests.web.sessions.conftest import Clock
from web.sessions.access import (
    ActivityGate,
    Decision,
    DecisionCache,
    Verdict,
    decide,
    reachable,
    touch_activity,
)

PASS = Decision(Verdict.PASS)


def test_a_cached_decision_lasts_its_seconds_and_no_longer() -> None:
    clock = Clock()
    cache = DecisionCache(seconds=5, size=10, clock=clock)
    cache.put(("cookie", 1), PASS)

    clock.advance(4.9)
    assert cache.get(("cookie", 1)) == PASS
    clock.advance(0.1)
    assert cache.get(("cookie", 1)) is None


def test_the_cache_keeps_at_most_its_size_dropping_the_least_recently_used() -> None:
    cache = DecisionCache(seconds=5, size=2, clock=Clock())
    cache.put("a", PASS)
    cache.put("b", PASS)
    cache.get("a")
    cache.put("c", PASS)

    assert (len(cache), cache.get("a"), cache.get("b")) == (2, PASS, None)


def test_the_activity_gate_opens_once_a_minute_per_session() -> None:
    clock = Clock()
    gate = ActivityGate(every=timedelta(minutes=1), clock=clock)

    assert [gate.due(1), gate.due(1), gate.due(2)] == [True, False, True]
    clock.advance(60)
    assert gate.due(1)


@pytest.mark.parametrize(
    ("host", "port", "ok"),
    [
        ("127.0.0.1", 20000, True),
        ("gpu-node-01.cluster.local", 29999, True),
        ("fd00::1", 20000, True),
        ("127.0.0.1", 19999, False),
        ("127.0.0.1", 5432, False),
        ("", 20000, False),
        ("node@evil", 20000, False),
        ("node/path", 20000, False),
        ("node:5432", 20000, False),
    ],
)
def test_only_a_plain_host_and_a_session_port_are_reachable(host: str, port: int, ok: bool) -> None:
    assert reachable(host, port) is ok


def test_activity_is_written_at_most_once_a_minute_whatever_the_process(transactional_db: None, world: Any) -> None:
    session = interactive_session(world.alice, world.lab, make_interactive_app())
    from django.utils import timezone

    now = timezone.now()

    assert touch_activity(session.pk, now)
    assert not touch_activity(session.pk, now + timedelta(seconds=59))
    assert touch_activity(session.pk, now + timedelta(seconds=61))


def test_a_forged_or_empty_session_key_is_no_login(transactional_db: None, world: Any) -> None:
    session = interactive_session(world.alice, world.lab, make_interactive_app())

    assert decide("not-a-real-session-key", session.pk).verdict is Verdict.LOGIN
    assert decide("", session.pk).verdict is Verdict.LOGIN
