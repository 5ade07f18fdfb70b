"""The idle rule: a running session nobody used for SESSION_IDLE_MINUTES is cancelled
with the reason, and its owner is told why; one in use, one still starting, or any when
the rule is off (0) is left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from notifications.facts import from_events
from quartermaster.periodic import periodic_jobs
from scheduler.choices import EventKind, JobState
from scheduler.models import InteractiveSession, JobEvent
from scheduler.reads.sessions import ended_why
from scheduler.sessions.idle import end_idle_sessions
from scheduler.tasks import end_idle_sessions as end_idle_sessions_task
from tests.builders import launch, start

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)


def session_used(world, *, ready_ago: timedelta | None, used_ago: timedelta | None = None) -> InteractiveSession:
    """A running JupyterLab of alice's, ready and last used so long before NOW."""
    session = launch(world.alice, "jupyterlab")
    start(session.job, NOW - timedelta(hours=3))
    InteractiveSession.objects.filter(pk=session.pk).update(
        ready_at=NOW - ready_ago if ready_ago is not None else None,
        last_activity_at=NOW - used_ago if used_ago is not None else None,
    )
    return InteractiveSession.objects.select_related("job", "app").get(pk=session.pk)


@pytest.mark.parametrize(
    ("ready_ago", "used_ago", "ended"),
    [
        pytest.param(timedelta(hours=2, minutes=1), None, True, id="ready and never used for longer than the limit"),
        pytest.param(timedelta(hours=3), timedelta(hours=2, minutes=1), True, id="last used longer ago"),
        pytest.param(timedelta(hours=3), timedelta(minutes=5), False, id="used a while ago"),
        pytest.param(timedelta(minutes=30), None, False, id="ready not long ago"),
        pytest.param(None, None, False, id="still starting"),
    ],
)
def test_a_session_idle_for_the_limit_is_ended(world, settings, ready_ago, used_ago, ended):
    settings.SESSION_IDLE_MINUTES = 120
    session = session_used(world, ready_ago=ready_ago, used_ago=used_ago)

    with time_machine.travel(NOW, tick=False):
        assert end_idle_sessions_task() == int(ended)

    session.job.refresh_from_db()
    assert (session.job.state == JobState.CANCELLED) == ended


def test_the_owner_is_told_the_session_was_ended_for_being_idle(world, settings):
    settings.SESSION_IDLE_MINUTES = 120
    session = session_used(world, ready_ago=timedelta(hours=3))

    assert end_idle_sessions(NOW) == [session.job_id]

    session.job.refresh_from_db()
    assert session.job.state_reason == "idle for 120 minutes"
    assert ended_why(session) == "idle for 120 minutes"
    cancelled = JobEvent.objects.filter(job_id=session.job_id, kind=EventKind.CANCELLED)
    (message,) = from_events(cancelled)
    assert message.user_id == world.alice.pk
    assert "idle for 120 minutes" in message.body and message.subject.startswith("Cancelled")


def test_no_session_is_ended_when_the_rule_is_off(world, settings):
    settings.SESSION_IDLE_MINUTES = 0
    session_used(world, ready_ago=timedelta(days=2))

    assert end_idle_sessions(NOW) == []


def test_the_rule_runs_every_minute(settings):
    assert ("scheduler.end_idle_sessions", 60.0) in {(job.task, job.every_seconds) for job in periodic_jobs(settings)}
