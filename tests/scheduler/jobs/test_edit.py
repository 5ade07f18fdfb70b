"""Editing a waiting job (``PATCH /api/v1/jobs/{id}/``, ``scontrol update``): the fields
Slurm lets a user change, validated as a submission, only while the job waits; every
edit in the job's events."""

from __future__ import annotations

import pytest

from people.models import Qos
from scheduler.choices import JobState
from scheduler.models import Job, JobEvent
from tests.builders import submit


@pytest.fixture
def waiting(world):
    return submit(world.alice, world.lab, name="first", walltime_seconds=3600, gpus_per_node=1)


def patch(client, job, body):
    return client.patch(f"/api/v1/jobs/{job.id}/", body, format="json")


def test_a_waiting_job_takes_the_editable_fields_and_the_event_says_what_changed(world, client_for, waiting):
    other = submit(world.alice, world.lab, name="before")
    body = {
        "name": "renamed",
        "walltime_seconds": 1800,
        "nice": 10,
        "dependencies": [{"type": "afterok", "job": other.id}],
        "node_labels": {},
        "gpu_model": "H100-80GB",
    }

    response = patch(client_for(world.alice), waiting, body)

    assert response.status_code == 200, response.json()
    waiting.refresh_from_db()
    assert (waiting.name, waiting.walltime_seconds, waiting.nice, waiting.gpu_model) == (
        "renamed",
        1800,
        10,
        "H100-80GB",
    )
    assert waiting.dependencies == [{"type": "afterok", "job": other.id}]
    event = JobEvent.objects.get(job=waiting, kind="edited")
    assert event.message.startswith("edited by alice: name, walltime")
    assert event.data["changes"]["walltime_seconds"] == [3600, 1800]


def test_a_held_job_may_be_edited_and_a_started_one_is_a_409(world, client_for, waiting):
    client = client_for(world.alice)
    Job.objects.filter(pk=waiting.pk).update(state=JobState.HELD)
    assert patch(client, waiting, {"name": "held-edit"}).status_code == 200
    Job.objects.filter(pk=waiting.pk).update(state=JobState.RUNNING)

    response = patch(client, waiting, {"name": "too-late"})

    assert response.status_code == 409 and "only PENDING or HELD" in response.json()["detail"]
    assert Job.objects.get(pk=waiting.pk).name == "held-edit"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"walltime_seconds": 7200}, "walltime_seconds", "Only staff may raise"),
        ({"gpus_per_node": 2}, "gpus_per_node", "Cannot change once submitted"),
        ({"command": "other"}, "command", "Cannot change once submitted"),
        ({"nmae": "x"}, "nmae", "name"),
        ({"gpu_model": "Z9000"}, "gpu_model", ""),
        ({"nice": -5}, "nice", "Only staff"),
        ({"qos": "platinum"}, "qos", "does not exist"),
        ({"node_labels": {"rack": "r9"}}, "node_labels", "No node has the labels rack=r9"),
        ({"name": "\u202eevil"}, "name", ""),
    ],
)
def test_a_bad_edit_is_a_400_naming_the_field_and_changes_nothing(world, client_for, waiting, body, field, words):
    response = patch(client_for(world.alice), waiting, body)

    assert response.status_code == 400 and words in str(response.json()[field])
    assert Job.objects.get(pk=waiting.pk).name == "first"
    assert not JobEvent.objects.filter(job=waiting, kind="edited").exists()


def test_a_job_cannot_depend_on_itself(world, client_for, waiting):
    response = patch(client_for(world.alice), waiting, {"dependencies": [{"type": "afterany", "job": waiting.id}]})
    assert response.status_code == 400 and "itself" in response.json()["dependencies"]


def test_staff_may_raise_the_walltime_and_give_a_negative_nice(world, client_for, waiting):
    response = patch(client_for(world.admin), waiting, {"walltime_seconds": 7200, "nice": -100})
    assert response.status_code == 200, response.json()
    waiting.refresh_from_db()
    assert (waiting.walltime_seconds, waiting.nice) == (7200, -100)
    # The owner's later edit of something else keeps staff's nice.
    assert patch(client_for(world.alice), waiting, {"name": "mine"}).status_code == 200
    assert Job.objects.get(pk=waiting.pk).nice == -100


def test_the_qos_is_checked_against_the_accounts_list(world, client_for, waiting):
    Qos.objects.get_or_create(name="high")
    world.lab.allowed_qos.set(Qos.objects.filter(name="normal"))
    response = patch(client_for(world.alice), waiting, {"qos": "high"})
    assert response.status_code == 400 and "may not use QOS 'high'" in response.json()["qos"][0]


def test_others_cannot_edit_and_coordinators_can(world, client_for, waiting):
    assert patch(client_for(world.charlie), waiting, {"name": "x"}).status_code == 404
    assert patch(client_for(world.bob), waiting, {"name": "by-coordinator"}).status_code == 200


def test_put_is_not_an_edit(world, client_for, waiting):
    response = client_for(world.alice).put(f"/api/v1/jobs/{waiting.id}/", {"name": "x"}, format="json")
    assert response.status_code == 405


@pytest.mark.parametrize("content_type", ["multipart", "urlencoded"])
def test_an_edit_may_come_as_a_form_as_a_submission_may(world, client_for, waiting, content_type):
    """The schema offers form and multipart bodies for PATCH as for POST; a form's field
    is its value, not a list of values (it was "Not a valid string.")."""
    Qos.objects.get_or_create(name="normal")
    body = {"name": "from-a-form", "walltime_seconds": "1800", "qos": "normal"}
    url = f"/api/v1/jobs/{waiting.id}/"
    client = client_for(world.alice)
    if content_type == "multipart":
        response = client.patch(url, body, format="multipart")
    else:
        form = "&".join(f"{name}={value}" for name, value in body.items())
        response = client.patch(url, form, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 200, response.json()
    waiting.refresh_from_db()
    assert (waiting.name, waiting.walltime_seconds, waiting.qos.name) == ("from-a-form", 1800, "normal")


def test_a_form_edit_is_checked_as_a_json_one(world, client_for, waiting):
    """Staff's negative nice counts as a number from a form too; its range still holds."""
    url = f"/api/v1/jobs/{waiting.id}/"
    owner, staff = client_for(world.alice), client_for(world.admin)

    assert "Only staff" in str(owner.patch(url, {"nice": "-5"}, format="multipart").json()["nice"])
    assert "Cannot change" in str(owner.patch(url, {"command": "x"}, format="multipart").json()["command"])
    assert staff.patch(url, {"nice": "-100001"}, format="multipart").status_code == 400
    assert staff.patch(url, {"nice": "-5"}, format="multipart").status_code == 200
    assert Job.objects.get(pk=waiting.pk).nice == -5
