"""Password guessing is throttled (django-axes): a user and address pair is locked out
after AXES_FAILURE_LIMIT wrong passwords, and the page says what to do."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def login(client: Client, username: str, password: str, address: str = "10.9.8.7") -> Any:
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_after_too_many_wrong_passwords_even_the_right_one_is_refused_from_that_address(world, settings):
    limit = settings.AXES_FAILURE_LIMIT
    guesser = Client()
    for _ in range(limit - 1):
        assert login(guesser, "alice", "wrong").status_code == 200  # the form again, with its error
    assert login(guesser, "alice", "wrong").status_code == 429  # the last one allowed locks the pair

    locked = login(guesser, "alice", "pw-alice")

    assert locked.status_code == 429
    page = html.unescape(locked.content.decode())
    assert "Too many failed logins" in page and "ask the cluster's staff" in page
    assert "_auth_user_id" not in guesser.session
    # The lock is on the pair: alice from her own address, and others from this one, get in.
    assert login(Client(), "alice", "pw-alice", address="10.1.1.1").status_code == 302
    assert login(Client(), "bob", "pw-bob").status_code == 302


def test_a_good_login_clears_the_failures(world, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login(client, "alice", "wrong")
    assert login(client, "alice", "pw-alice").status_code == 302
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login(Client(), "alice", "wrong")

    assert login(Client(), "alice", "pw-alice").status_code == 302
