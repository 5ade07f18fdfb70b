"""The profile's e-mail: a user sets, changes and clears their address (validated,
audited); the page says when e-mail cannot reach them (no address, a site whose mail goes
to no inbox, a send that failed), and that a directory user's address is the directory's."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.utils import timezone

from notifications.models import Channel, Delivery, Preference, Status
from people.choices import IdentitySource
from people.models import AuditEntry, ClusterIdentity

pytestmark = pytest.mark.django_db

SMTP = "django.core.mail.backends.smtp.EmailBackend"


@pytest.fixture
def alice(world, settings):
    """Alice without an address, on a site that sends mail by SMTP."""
    settings.EMAIL_BACKEND = SMTP
    world.alice.email = ""
    world.alice.save(update_fields=["email"])
    return world.alice


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_of(client: Client) -> str:
    return html.unescape(client.get("/profile/").content.decode())


def set_address(client: Client, address: str):
    return client.post("/profile/", {"form": "email", "address": address})


def test_without_an_address_the_page_says_no_email_is_sent_and_by_email_is_inactive(alice):
    page = page_of(logged_in(alice))

    assert 'id="no-address"' in page and "you get no e-mail" in page and "Add an address above" in page
    assert 'id="email-form"' in page
    assert "Inactive: you have no e-mail address" in page
    assert '<input type="checkbox" name="email" disabled' in page


def test_an_address_set_on_the_page_is_stored_audited_and_makes_by_email_active(alice):
    client = logged_in(alice)

    response = set_address(client, "  Alice@Example.ORG ")

    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.email == "Alice@example.org"  # the domain in lower case, as Django stores it
    entry = AuditEntry.objects.get(target_type="user", changes__has_key="email")
    assert (entry.actor_name, entry.action, entry.changes) == ("alice", "update", {"email": ["", "Alice@example.org"]})
    page = page_of(client)
    assert "Your notifications by e-mail now go to Alice@example.org." in page
    assert 'id="no-address"' not in page and "To Alice@example.org." in page
    assert 'value="Alice@example.org"' in page


def test_an_address_is_changed_and_cleared_and_each_change_audited(alice):
    client = logged_in(alice)
    set_address(client, "alice@lab.example")
    set_address(client, "a.smith@lab.example")

    assert set_address(client, "").status_code == 302

    alice.refresh_from_db()
    assert alice.email == ""
    changes = [e.changes["email"] for e in AuditEntry.objects.filter(changes__has_key="email").order_by("id")]
    assert changes == [
        ["", "alice@lab.example"],
        ["alice@lab.example", "a.smith@lab.example"],
        ["a.smith@lab.example", ""],
    ]
    assert 'id="no-address"' in page_of(client)


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("not-an-address", "Enter a valid email address."),
        ("alice@", "Enter a valid email address."),
        ("alice@example.org\r\nBcc: everyone@example.org", "(U+000D) is a control or text-direction character"),
        ('"a\x01b"@example.org', "(U+0001) is a control or text-direction character"),
        ("alice@exa\u202emple.org", "(U+202E) is a control or text-direction character"),
        ("alice\x00@example.org", "E-mail address may not contain a NUL character (\\x00)."),
        ("a" * 250 + "@example.org", "at most 254 characters"),
    ],
    ids=["no-at", "no-domain", "header-injection", "quoted-control", "bidi-domain", "nul", "too-long"],
)
def test_a_bad_address_is_a_form_error_and_nothing_changes(alice, address, words):
    response = set_address(logged_in(alice), address)

    assert response.status_code == 200
    assert words in html.unescape(response.content.decode())
    alice.refresh_from_db()
    assert alice.email == "" and not AuditEntry.objects.filter(changes__has_key="email").exists()


def test_by_email_cannot_be_ticked_without_an_address(alice):
    client = logged_in(alice)
    Preference.objects.create(user=alice, email=False)

    client.post("/profile/", {"form": "notify", "events": ["started"], "email": "on", "webhook_format": "json"})

    assert Preference.objects.get(user=alice).email is False


@pytest.mark.parametrize(
    ("backend", "words"),
    [
        ("django.core.mail.backends.console.EmailBackend", "This site's e-mail is printed on the portal's console"),
        ("django.core.mail.backends.filebased.EmailBackend", "This site's e-mail is written to files in /srv/mail"),
        ("django.core.mail.backends.dummy.EmailBackend", "This site's e-mail is thrown away"),
    ],
)
def test_a_site_whose_mail_goes_to_no_inbox_says_so(world, settings, backend, words):
    settings.EMAIL_BACKEND, settings.EMAIL_FILE_PATH = backend, "/srv/mail"

    page = page_of(logged_in(world.alice))

    assert words in page and "not sent to inboxes" in page
    assert 'id="no-address"' not in page  # alice has an address: that is not the problem


def test_a_site_that_sends_by_smtp_says_nothing_of_it_until_a_send_fails(world, settings):
    settings.EMAIL_BACKEND = SMTP
    client = logged_in(world.alice)
    assert 'id="email-warnings"' not in page_of(client)

    Delivery.objects.create(
        user=world.alice,
        key="k1",
        channel=Channel.EMAIL,
        event="started",
        subject="s",
        body="b",
        status=Status.PENDING,
        attempts=2,
        created_at=timezone.now(),
        next_attempt_at=timezone.now(),
        last_error="SMTP: [Errno 111] Connection refused",
    )

    assert "The last e-mail to you could not be sent: SMTP: [Errno 111] Connection refused." in page_of(client)


@pytest.mark.parametrize(
    ("source", "setting", "words"),
    [
        (IdentitySource.LDAP, ("LDAP_SERVER_URI", "ldap://ldap.example"), "your organisation's directory (LDAP)"),
        (IdentitySource.OIDC, ("OIDC_ENABLED", True), "your organisation's sign-in (Keycloak)"),
    ],
)
def test_a_directory_users_address_is_read_only_and_says_where_it_comes_from(world, settings, source, setting, words):
    setattr(settings, *setting)
    settings.OIDC_PROVIDER_NAME = "Keycloak"
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, source=source)
    client = logged_in(world.alice)

    page = page_of(client)
    refused = set_address(client, "mine@example.org")

    assert "<strong>alice@example.org</strong>" in page
    assert f"comes from {words} each time you sign in, so it is changed there, not here" in page
    assert 'id="email-form"' not in page
    assert refused.status_code == 200
    assert f"Your address comes from {words} each time you sign in; change it there." in html.unescape(
        refused.content.decode()
    )
    world.alice.refresh_from_db()
    assert world.alice.email == "alice@example.org"


def test_a_directory_off_now_leaves_the_address_to_the_user(world, settings):
    settings.LDAP_SERVER_URI = ""
    ClusterIdentity.objects.create(user=world.alice, username="alice", uid=20001, source=IdentitySource.LDAP)

    assert set_address(logged_in(world.alice), "mine@example.org").status_code == 302


def test_the_gpu_process_audits_notices_are_offered_and_on_by_default_to_staff_only(world):
    staff_page, researcher_page = page_of(logged_in(world.admin)), page_of(logged_in(world.bob))
    label = "(staff) a GPU runs a process no job accounts for"
    assert label in staff_page and label not in researcher_page
    [box] = re.findall(r'<input[^>]*value="gpu_process"[^>]*>', staff_page)
    assert "checked" in box  # told by default: staff made no choice
