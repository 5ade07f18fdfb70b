"""A job's trail reads in the order it happened: by sequence, not by stamps that tie or disagree."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.choices import EventKind
from scheduler.tick.run import run_tick
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_a_tick_schedules_a_job_no_earlier_than_it_was_submitted(world):
    """The tick reads ``now`` after its snapshot, so a job it sees was submitted first."""
    job = submit(world.alice, world.lab)
    assert run_tick().started == [job.id]
    submitted, scheduled = job.events.order_by("id")
    assert (submitted.kind, scheduled.kind) == (EventKind.SUBMITTED, EventKind.STARTED)
    assert scheduled.at >= submitted.at


def test_a_trail_is_in_the_order_written_even_where_stamps_disagree(world, client_for):
    """Stamps come from the clocks of different processes (web, tick, worker) and can
    tie or run backwards; the trail that pages and the API show follows the sequence."""
    job = submit(world.alice, world.lab)
    run_tick()
    submitted = job.events.get(kind=EventKind.SUBMITTED)
    job.events.filter(kind=EventKind.STARTED).update(at=submitted.at - timedelta(seconds=1))
    trail = ["submitted", "scheduled"]
    assert [e.kind for e in job.events.all()] == trail
    response = client_for(world.alice).get(f"/api/v1/jobs/{job.id}/events/")
    assert [e["kind"] for e in response.json()["results"]] == trail
