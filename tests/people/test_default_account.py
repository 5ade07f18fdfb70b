"""A user in several accounts has a default one (Slurm's DefaultAccount): set on their
profile or with PATCH /api/v1/me/, else their first membership; a submission that names
no account goes there, so the README's examples work unchanged for such a user."""

from __future__ import annotations

import pytest
from django.test import Client

from people.models import AuditEntry, Membership
from scheduler.models import Job
from tests.builders import join, make_account

JOB = {"name": "x", "command": "true", "gpus_per_node": 1, "walltime_seconds": 600}


@pytest.fixture
def two_accounts(world):
    """Alice joined lab first, then nlp."""
    nlp = make_account("nlp")
    join(world.alice, nlp)
    return world.alice, world.lab, nlp


def submit_without_account(client) -> Job:
    response = client.post("/api/v1/jobs/", JOB, format="json")
    assert response.status_code == 201, response.json()
    return Job.objects.get(pk=response.json()["id"])


def test_without_a_choice_the_first_membership_is_the_default(two_accounts, client_for):
    alice, lab, _ = two_accounts
    client = client_for(alice)
    assert client.get("/api/v1/me/").json()["default_account"] == "lab"
    assert submit_without_account(client).account == lab


def test_the_default_set_through_the_api_takes_submissions_and_is_audited(two_accounts, client_for):
    alice, _, nlp = two_accounts
    client = client_for(alice)

    response = client.patch("/api/v1/me/", {"default_account": "nlp"}, format="json")

    assert response.status_code == 200 and response.json()["default_account"] == "nlp"
    assert submit_without_account(client).account == nlp
    assert client.post("/api/v1/jobs/", {**JOB, "account": "lab"}, format="json").json()["account"] == "lab"
    client.patch("/api/v1/me/", {"default_account": "lab"}, format="json")
    assert list(Membership.objects.filter(user=alice, is_default=True).values_list("account__name", flat=True)) == [
        "lab"
    ]
    assert AuditEntry.objects.filter(actor_name="alice", changes__is_default=[True, False]).exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"default_account": "other"}, "default_account", "not a member of account 'other'"),
        ({"default_account": ""}, "default_account", "may not be blank"),
        ({"default_acount": "nlp"}, "default_acount", "default_account"),
    ],
)
def test_a_default_that_is_not_yours_is_a_400_naming_the_field(two_accounts, client_for, body, field, words):
    response = client_for(two_accounts[0]).patch("/api/v1/me/", body, format="json")
    assert response.status_code == 400 and words in str(response.json()[field])
    assert not Membership.objects.filter(is_default=True).exists()


def test_a_user_in_no_account_is_told_why_they_cannot_submit(world, client_for):
    Membership.objects.filter(user=world.alice).delete()
    response = client_for(world.alice).post("/api/v1/jobs/", JOB, format="json")
    assert response.status_code == 400 and "belong to no account" in response.json()["account"][0]


def test_the_profile_page_sets_the_default_and_the_submit_form_starts_from_it(two_accounts):
    alice, _, nlp = two_accounts
    client = Client()
    client.force_login(alice)
    assert "selected>lab</option>" in client.get("/profile/").content.decode()

    response = client.post(
        "/profile/", {"form": "account", "default_account": Membership.objects.get(user=alice, account=nlp).pk}
    )

    assert response.status_code == 302
    assert Membership.objects.get(user=alice, is_default=True).account == nlp
    # The form leaves the account empty (a script's #SBATCH -A may name one) and says whose it is.
    assert '<option value="" selected>default (nlp)</option>' in client.get("/jobs/new/").content.decode()


def test_the_profile_page_refuses_someone_elses_membership(two_accounts, world):
    alice = two_accounts[0]
    client = Client()
    client.force_login(alice)
    charlies = Membership.objects.get(user=world.charlie)

    response = client.post("/profile/", {"form": "account", "default_account": charlies.pk})

    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not Membership.objects.filter(is_default=True).exists()
