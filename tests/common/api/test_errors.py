"""What a person or a script sees when a request goes wrong: a styled page that says what
to do, or JSON under /api/; never Django's technical page. And names that cannot lie."""

from __future__ import annotations

import html
from typing import Any

import pytest
from rest_framework.test import APIClient

from people.services import create_api_token
from scheduler.models import Job

pytestmark = pytest.mark.django_db

JOB = {"name": "train", "command": "true", "walltime_seconds": 600}


TOO_LARGE = {
    "detail": "Too large: What you sent is larger than the portal accepts (0.01 MB).",
    "limit_bytes": 10_000,
}


@pytest.fixture(params=[False, True], ids=["production", "DEBUG (the demo)"])
def debug(request, settings):
    """Both ways the portal runs: Django answers an escaped error with its handlers in
    production and with its technical page under DEBUG, so each answer is made before that."""
    settings.DEBUG = request.param
    return request.param


@pytest.mark.parametrize("body_format", ["json", "multipart"])
@pytest.mark.parametrize("auth", ["session", "token"])
def test_an_api_body_over_the_limit_is_a_json_413_saying_the_limit(
    world, client_for, settings, debug, body_format, auth
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    if auth == "token":
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(world.alice, 'cli')[1]}")
    else:
        client = client_for(world.alice)
    response = client.post("/api/v1/jobs/", {**JOB, "script": "x" * 20_000}, format=body_format)

    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    assert response.json() == TOO_LARGE
    assert not Job.objects.exists()


def test_a_form_over_the_limit_is_a_styled_413_page_that_says_what_to_do(world, client, settings, debug):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    client.force_login(world.alice)
    response = client.post("/jobs/new/", {"name": "big", "script": "x" * 20_000})

    assert response.status_code == 413
    page = response.content.decode()
    assert 'id="error"' in page and "Too large" in page and "Shorten the script" in page
    assert 'class="brand"' in page  # the portal's own layout, not Django's technical page


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/jobs/999999/", 404, "find the job in your job list"),
        ("/manage/accounts/", 403, "ask your account's coordinator or the cluster's staff"),
    ],
    ids=["someone else's or no job", "a staff page"],
)
def test_403_and_404_pages_are_styled_and_say_what_to_do(world, client, path, status, says):
    client.force_login(world.alice)
    response = client.get(path)

    assert response.status_code == status
    page = html.unescape(response.content.decode())
    assert 'id="error"' in page and says in page and 'class="brand"' in page


def test_api_404s_stay_json(world, client_for):
    response = client_for(world.alice).get("/api/v1/no-such-thing/")
    assert response.status_code == 404 and response.json()["detail"].startswith("Not found")


@pytest.mark.parametrize(
    "name",
    ["\u202eevil", "a\u2066b", "line\nbreak", "tab\there", "bell\x07", "mark\u200f"],
    ids=["right-to-left override", "isolate", "newline", "tab", "control", "direction mark"],
)
def test_names_others_read_refuse_control_and_direction_characters(world, client_for, name: str) -> None:
    alice: Any = client_for(world.alice)

    job = alice.post("/api/v1/jobs/", {**JOB, "name": name}, format="json")
    token = alice.post("/api/v1/tokens/", {"name": name}, format="json")

    assert job.status_code == 400 and "names must be plain text" in job.json()["name"][0]
    assert token.status_code == 400 and "names must be plain text" in token.json()["name"][0]
    assert alice.post("/api/v1/jobs/", {**JOB, "name": "ünïcode ✓ 训练"}, format="json").status_code == 201
