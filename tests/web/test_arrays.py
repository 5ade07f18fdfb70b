"""Job arrays in the pages: submitted from the form, one row per array's waiting tasks in
the job list (as squeue shows them) with a drill-down to each task, the job page's task
counts and whole-array buttons."""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.choices import JobState
from scheduler.models import Job

pytestmark = pytest.mark.django_db

FORM = {"name": "sweep", "account": "lab", "gpus_per_node": "1", "walltime_seconds": "1h", "command": "true"}


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_form_submits_an_array_and_lands_on_its_first_task(world):
    response = logged_in(world.alice).post("/jobs/new/", {**FORM, "array": "0-9%4"}, follow=True)

    first = Job.objects.get(array_task_id=0)
    assert Job.objects.filter(array_job=first).count() == 10
    html = response.content.decode()
    assert f"Array job {first.id} submitted: 10 tasks." in html
    assert f"Job {first.id}_0: sweep" in html
    assert "0-9%4, 10 tasks, at most 4 at once" in html
    assert f'href="/jobs/?array={first.id}&amp;state=PENDING">10 pending</a>' in html


def test_a_bad_array_is_a_form_error_under_its_field(world):
    form = logged_in(world.alice).post("/jobs/new/", {**FORM, "array": "5-1"}).context["form"]

    assert form.errors["array"] == ["In '5-1' the range ends before it starts."]
    assert not Job.objects.exists()


def test_the_list_folds_waiting_tasks_and_the_drill_down_shows_each(world, tick):
    client = logged_in(world.alice)
    client.post("/jobs/new/", {**FORM, "array": "0-5%2"})
    first = Job.objects.get(array_task_id=0).id
    tick()

    folded = client.get("/jobs/").content.decode()
    assert f"{first}_[2-5]</a>" in folded and f">{first}_0</a>" in folded and f">{first}_3</a>" not in folded

    every = client.get("/jobs/", {"array": first}).content.decode()
    assert all(f">{first}_{i}</a>" in every for i in range(6))
    assert f"tasks of array {first}" in every


def test_the_whole_array_buttons_and_the_throttle(world):
    client = logged_in(world.alice)
    client.post("/jobs/new/", {**FORM, "array": "0-3"})
    first = Job.objects.get(array_task_id=0).id

    held = client.post(f"/arrays/{first}/hold/", follow=True).content.decode()
    assert f"Array {first}: 4 tasks held." in held
    client.post(f"/arrays/{first}/throttle/", {"throttle": "2"})
    assert set(Job.objects.filter(array_job_id=first).values_list("state", "array_throttle")) == {(JobState.HELD, 2)}
    refused = client.post(f"/arrays/{first}/throttle/", {"throttle": "-1"}, follow=True).content.decode()
    assert "Throttle: give a number of tasks" in refused
    assert logged_in(world.charlie).post(f"/arrays/{first}/cancel/").status_code == 404
    cancelled = client.post(f"/arrays/{first}/cancel/", follow=True).content.decode()
    assert f"Array {first}: 4 tasks cancelled." in cancelled
