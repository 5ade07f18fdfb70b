"""A waiting job's place in line on the pages: its job page and the dashboard's job list.

Personas (tests/conftest.py): alice and dora are members of lab, bob coordinates lab,
charlie is in other, admin is staff.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from scheduler.jobs.verbs import hold_job
from scheduler.models import Job
from tests.builders import queue_line, submit
from web.words import queue_position

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def place(job: Job, jobs_ahead: int, gpu_hours_ahead: float) -> None:
    """The place the last tick gave a waiting job (the only one in its line)."""
    queue_line({job.id: (jobs_ahead, gpu_hours_ahead)})


@pytest.mark.parametrize(
    "jobs,hours,words",
    [
        (None, None, ""),
        (0, 0.0, "next in line"),
        (1, 8.0, "1 job ahead (8 GPU-hours)"),
        (3, 12.5, "3 jobs ahead (12.5 GPU-hours)"),
        (1204, 61_947.25, "1,204 jobs ahead (61,947 GPU-hours)"),
    ],
)
def test_a_place_in_line_in_words(jobs, hours, words):
    assert queue_position(jobs, hours) == words


def test_the_job_page_says_how_many_jobs_and_gpu_hours_are_ahead(world):
    job = submit(world.alice, world.lab)
    place(job, 3, 12.5)
    html = logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert re.search(r'<p id="queue-position"><b>3 jobs ahead \(12\.5 GPU-hours\)</b>: they wait their turn', html)


def test_the_job_page_of_the_next_in_line(world):
    job = submit(world.alice, world.lab)
    place(job, 0, 0.0)
    html = logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert "<b>Next in line</b>: no job waits its turn ahead of it" in html


def test_a_held_job_has_no_place(world):
    job = submit(world.alice, world.lab)
    place(job, 3, 12.5)
    hold_job(job, by="alice")
    html = logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert "None while it is held" in html and "jobs ahead" not in html


def test_a_running_job_s_page_shows_no_place_even_if_one_was_left_stored(world):
    job = submit(world.alice, world.lab)
    place(job, 3, 12.5)
    Job.objects.filter(pk=job.pk).update(state="RUNNING")
    html = logged_in(world.alice).get(f"/jobs/{job.id}/").content.decode()
    assert 'id="queue-position"' not in html and "jobs ahead" not in html


@pytest.mark.parametrize("who,sees", [("alice", True), ("bob", True), ("dora", False), ("charlie", False)])
def test_only_those_who_may_see_the_job_see_its_page(world, who, sees):
    job = submit(world.alice, world.lab)
    place(job, 3, 12.5)
    response = logged_in(getattr(world, who)).get(f"/jobs/{job.id}/")
    assert response.status_code == (200 if sees else 404)
    assert ("3 jobs ahead" in response.content.decode()) is sees


def test_the_dashboard_job_list_shows_each_waiting_job_s_place(world):
    waiting, running = submit(world.alice, world.lab, name="waits"), submit(world.alice, world.lab, name="runs")
    queue_line({waiting.id: (3, 12.5), running.id: (1, 1.0)})
    Job.objects.filter(pk=running.pk).update(state="RUNNING")
    html = logged_in(world.alice).get("/").content.decode()
    assert "<th>In line</th>" in html
    assert re.search(rf">{waiting.id}</a></td><td>waits</td>.*?<td class=\"queue-position\">3 jobs ahead", html, re.S)
    assert re.search(rf">{running.id}</a></td><td>runs</td>.*?<td class=\"queue-position\"></td>", html, re.S)


@pytest.mark.parametrize("who,sees", [("bob", True), ("dora", False), ("charlie", False)])
def test_the_dashboard_shows_another_s_place_only_to_who_may_see_the_job(world, who, sees):
    job = submit(world.alice, world.lab, name="alices-waiting")
    place(job, 7, 70.0)
    html = logged_in(getattr(world, who)).get("/").content.decode()
    assert ("7 jobs ahead (70 GPU-hours)" in html) is sees
