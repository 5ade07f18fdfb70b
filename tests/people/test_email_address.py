"""A user's e-mail address through the API: GET /api/v1/me/ shows it, PATCH sets,
changes or clears it (Django's EmailField rules, no control characters, audited), unless
the site's directory sets it at each sign-in, which then overwrites it."""

from __future__ import annotations

import pytest

from people.choices import IdentitySource
from people.models import AuditEntry, ClusterIdentity, Membership
from people.oidc import apply_claims

pytestmark = pytest.mark.django_db


def patch_me(client, body):
    return client.patch("/api/v1/me/", body, format="json")


def test_me_shows_the_address_and_a_patch_sets_it_audited(world, client_for):
    client = client_for(world.alice)
    assert client.get("/api/v1/me/").json()["email"] == "alice@example.org"

    response = patch_me(client, {"email": "a.smith@Lab.Example"})

    assert response.status_code == 200 and response.json()["email"] == "a.smith@lab.example"
    world.alice.refresh_from_db()
    assert world.alice.email == "a.smith@lab.example"
    entry = AuditEntry.objects.get(changes__has_key="email")
    assert (entry.actor_name, entry.target_type, entry.target_repr) == ("alice", "user", "alice")
    assert entry.changes == {"email": ["alice@example.org", "a.smith@lab.example"]}


def test_an_empty_address_clears_it_and_the_same_address_again_records_nothing(world, client_for):
    client = client_for(world.alice)

    assert patch_me(client, {"email": ""}).json()["email"] == ""
    assert patch_me(client, {"email": ""}).status_code == 200

    assert [e.changes for e in AuditEntry.objects.filter(changes__has_key="email")] == [
        {"email": ["alice@example.org", ""]}
    ]


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("not-an-address", "Enter a valid email address."),
        ("alice@example.org\nBcc: all@example.org", "(U+000A) is a control or text-direction character"),
        ('"a\x7fb"@example.org', "(U+007F) is a control or text-direction character"),
        ("alice@exa\u2066mple.org", "(U+2066) is a control or text-direction character"),
        ("alice\x00@example.org", "email may not contain a NUL character"),
        ("a" * 250 + "@example.org", "no more than 254 characters"),
        (5, "Enter a valid email address."),
    ],
    ids=["no-at", "header-injection", "quoted-control", "bidi-domain", "nul", "too-long", "number"],
)
def test_a_bad_address_is_a_400_naming_the_field(world, client_for, address, words):
    response = patch_me(client_for(world.alice), {"email": address})

    assert response.status_code == 400 and words in str(response.json()["email"])
    world.alice.refresh_from_db()
    assert world.alice.email == "alice@example.org"


def test_a_patch_with_nothing_to_change_is_a_400(world, client_for):
    response = patch_me(client_for(world.alice), {})
    assert response.status_code == 400 and "Send default_account, email or both." in str(response.json())


def test_a_patch_sets_the_default_account_and_the_address_together_or_neither(world, client_for):
    client = client_for(world.alice)

    refused = patch_me(client, {"default_account": "lab", "email": "bad"})
    assert refused.status_code == 400 and not Membership.objects.filter(is_default=True).exists()

    both = patch_me(client, {"default_account": "lab", "email": "alice@lab.example"})
    assert both.status_code == 200 and both.json()["email"] == "alice@lab.example"
    assert both.json()["default_account"] == "lab"
    assert Membership.objects.get(user=world.alice, is_default=True).account == world.lab


@pytest.mark.parametrize(
    ("source", "setting", "words"),
    [
        (IdentitySource.LDAP, ("LDAP_SERVER_URI", "ldap://ldap.example"), "your organisation's directory (LDAP)"),
        (IdentitySource.OIDC, ("OIDC_ENABLED", True), "your organisation's sign-in"),
    ],
)
def test_a_directory_users_address_is_refused_naming_the_directory(world, client_for, settings, source, setting, words):
    setattr(settings, *setting)
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, source=source)

    response = patch_me(client_for(world.alice), {"email": "mine@example.org"})

    assert response.status_code == 400 and f"comes from {words}" in response.json()["email"][0]
    world.alice.refresh_from_db()
    assert world.alice.email == "alice@example.org"


def test_why_a_directory_user_may_not_set_it_the_next_sign_in_overwrites_it(world, settings):
    """The decision the refusal stands on: the provider's address wins at each sign-in."""
    settings.OIDC_ACCOUNT_GROUPS = {}
    world.alice.email = "typed-on-the-portal@example.org"
    world.alice.save(update_fields=["email"])

    apply_claims(world.alice, {"preferred_username": "alice", "email": "alice@corp.example"})

    world.alice.refresh_from_db()
    assert world.alice.email == "alice@corp.example"
