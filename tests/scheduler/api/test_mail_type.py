"""A script's ``--mail-type`` is its job's own choice of messages, kept on the job and
shown with it; ``--mail-user`` is taken only as its owner's own address. A value the
portal does not apply is a 400 naming the field and the option as written.

Personas (tests/conftest.py): alice (alice@example.org) is a member of lab.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from scheduler.models import Job

pytestmark = pytest.mark.django_db


def script(*directives: str) -> str:
    return "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in directives) + "python3 train.py\n"


def submit(client, **body: Any):
    return client.post("/api/v1/jobs/", {"walltime_seconds": 600, **body}, format="json")


def test_a_scripts_mail_type_is_kept_on_its_job_and_shown_with_it(world, client_for):
    client = client_for(world.alice)
    response = submit(client, script=script("--mail-type=end,FAIL"))

    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.mail_events == ["END", "FAIL"]
    assert response.json()["mail_type"] == ["END", "FAIL"]
    assert client.get(f"/api/v1/jobs/{job.id}/").json()["mail_type"] == ["END", "FAIL"]


@pytest.mark.parametrize(
    ("body", "stored"),
    [
        ({"command": "true"}, None),
        ({"command": "true", "mail_type": None}, None),
        ({"command": "true", "mail_type": "BEGIN,END"}, ["BEGIN", "END"]),
        ({"command": "true", "mail_type": ["requeue", "ALL"]}, ["REQUEUE", "ALL"]),
        ({"command": "true", "mail_type": "NONE"}, []),
        ({"command": "true", "sbatch_options": ["--mail-type", "END"]}, ["END"]),
        ({"script": script("--mail-type=BEGIN"), "sbatch_options": ["--mail-type=NONE"]}, []),  # options win
        ({"script": script("--mail-type=BEGIN"), "mail_type": ["FAIL"]}, ["FAIL"]),  # the field wins
    ],
    ids=["omitted", "null", "text", "list", "NONE", "option", "option over script", "field over script"],
)
def test_the_mail_type_comes_from_the_field_the_options_or_the_script(world, client_for, body, stored):
    response = submit(client_for(world.alice), **body)

    assert response.status_code == 201, response.json()
    assert Job.objects.get().mail_events == stored and response.json()["mail_type"] == stored


def test_every_task_of_an_array_has_its_scripts_mail_type(world, client_for):
    response = submit(client_for(world.alice), script=script("--array=0-2", "--mail-type=END,ARRAY_TASKS"))

    assert response.status_code == 201, response.json()
    assert [t.mail_events for t in Job.objects.all()] == [["END", "ARRAY_TASKS"]] * 3


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"script": script("-J x", "--mail-type=END,TIME_LIMIT_90")},
            "--mail-type=END,TIME_LIMIT_90 (#SBATCH line 3): TIME_LIMIT_90 is not supported: the portal sends no "
            "warning before a job's time limit",
        ),
        (
            {"command": "true", "sbatch_options": ["--mail-type=STAGE_OUT"]},
            "--mail-type=STAGE_OUT: STAGE_OUT is not supported: there are no burst buffers here",
        ),
        ({"command": "true", "mail_type": "INVALID_DEPEND"}, "DependencyNeverSatisfied"),
        ({"command": "true", "mail_type": "EVERYTHING"}, "'EVERYTHING' is not a mail type: give NONE, BEGIN"),
        ({"command": "true", "mail_type": ["END", 7]}, "Give the types as sbatch does"),
        ({"command": "true", "mail_type": ""}, "give one or more of NONE, BEGIN"),
        ({"command": "true", "mail_type": ",".join(["END"] * 40)}, "At most 32 types"),
    ],
    ids=["TIME_LIMIT_90 in the script", "STAGE_OUT option", "INVALID_DEPEND", "unknown", "not text", "empty", "long"],
)
def test_a_mail_type_the_portal_does_not_apply_is_a_400_naming_it(world, client_for, body, words):
    response = submit(client_for(world.alice), **body)

    assert response.status_code == 400
    assert any(words in line for line in response.json()["mail_type"]), response.json()
    assert not Job.objects.exists()


def test_a_mail_type_given_as_a_field_and_an_option_is_refused(world, client_for):
    response = submit(client_for(world.alice), command="true", mail_type="END", sbatch_options=["--mail-type=FAIL"])

    assert response.status_code == 400
    [said] = response.json()["sbatch_options"]
    assert "--mail-type=FAIL says mail_type, which this body gives as a field too" in said


@pytest.mark.parametrize(
    "mail_user", ["--mail-user=alice@example.org", "--mail-user=Alice@Example.ORG", "--mail-user=alice"]
)
def test_mail_user_is_taken_as_the_owners_own_address_or_name(world, client_for, mail_user):
    response = submit(client_for(world.alice), script=script("--mail-type=END", mail_user))

    assert response.status_code == 201, response.json()
    assert Job.objects.get().mail_events == ["END"] and "mail_user" not in response.json()


def test_mail_user_naming_anyone_else_is_a_400_saying_where_the_address_is_set(world, client_for):
    response = submit(client_for(world.alice), script=script("--mail-type=END", "--mail-user=bob@example.org"))

    assert response.status_code == 400
    [said] = response.json()["mail_user"]
    assert said.startswith("--mail-user=bob@example.org (#SBATCH line 3): mail-user: ")
    assert "go only to the e-mail address on your profile (yours is alice@example.org); set it there" in said
    assert not Job.objects.exists()


@pytest.mark.parametrize("mail_user", ["bob@example.org", "bob", ""])
def test_mail_user_as_a_field_is_checked_as_well(world, client_for, mail_user):
    response = submit(client_for(world.alice), command="true", mail_user=mail_user)

    assert response.status_code == 400 and "mail_user" in response.json()


def test_mail_user_of_someone_without_an_address_says_to_set_one(world, client_for):
    world.alice.email = ""
    world.alice.save(update_fields=["email"])
    response = submit(client_for(world.alice), command="true", sbatch_options=["--mail-user=alice@example.org"])

    assert response.status_code == 400
    assert "(you have none yet); set it there (/profile/" in response.json()["mail_user"][0]


def test_the_submit_form_takes_the_scripts_mail_type_and_refuses_another_mail_user(world):
    client = Client()
    client.force_login(world.alice)

    taken = client.post("/jobs/new/", {"account": "lab", "script": script("-t 10", "--mail-type=FAIL")})
    refused = client.post(
        "/jobs/new/", {"account": "lab", "script": script("-t 10"), "sbatch_options": "--mail-user=x@example.org"}
    )

    assert taken.status_code == 302, taken.context["form"].errors
    assert Job.objects.get().mail_events == ["FAIL"]
    assert refused.status_code == 200 and Job.objects.count() == 1
    assert "--mail-user=x@example.org: mail-user: " in " ".join(refused.context["form"].non_field_errors())


def test_the_jobs_page_shows_its_mail_type_and_a_copy_keeps_it(world):
    client = Client()
    client.force_login(world.alice)
    plain = submit_via_api(world, command="true")
    chosen = submit_via_api(world, command="true", mail_type="BEGIN,FAIL")

    page = client.get(f"/jobs/{chosen.id}/").content.decode()
    assert 'id="mail-type"' in page and "<code>BEGIN,FAIL</code>" in page
    assert "a message of its start, an end that failed" in page
    assert 'id="mail-type"' not in client.get(f"/jobs/{plain.id}/").content.decode()
    copy = client.get(f"/jobs/new/?copy={chosen.id}").context["form"]
    assert copy.initial["sbatch_options"] == "--mail-type=BEGIN,FAIL"


def test_a_copy_of_a_job_whose_script_gave_its_mail_type_leaves_it_to_the_script(world):
    """The script's line is the one to edit in the copy: an option would override it."""
    client = Client()
    client.force_login(world.alice)
    job = submit_via_api(world, script=script("--mail-type=end"))

    copy = client.get(f"/jobs/new/?copy={job.id}").context["form"]

    assert copy.initial["sbatch_options"] == "" and "--mail-type=end" in copy.initial["script"]


def submit_via_api(world, **body: Any) -> Job:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(world.alice)
    response = submit(client, **body)
    assert response.status_code == 201, response.json()
    return Job.objects.get(pk=response.json()["id"])


def test_a_waiting_jobs_mail_type_cannot_be_edited_but_its_other_fields_can(world, client_for):
    client = client_for(world.alice)
    job = submit_via_api(world, script=script("--mail-type=END", "--mail-user=alice@example.org"))

    refused = client.patch(f"/api/v1/jobs/{job.id}/", {"mail_type": "BEGIN"}, format="json")
    edited = client.patch(f"/api/v1/jobs/{job.id}/", {"name": "renamed"}, format="json")

    assert refused.status_code == 400 and "Cannot change once submitted" in refused.json()["mail_type"][0]
    assert edited.status_code == 200, edited.json()
    assert Job.objects.get().mail_events == ["END"]
