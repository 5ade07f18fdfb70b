"""Nothing is destroyed by one stray click: Cancel, Requeue, Revoke and Remove ask first,
and a "no" leaves everything as it was. And the pages carry an icon."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from people.models import ApiToken
from people.services import create_api_token
from scheduler.models import Job
from tests.builders import submit

pytestmark = [pytest.mark.slow]


def answer(page, yes: bool) -> list[str]:
    """Answer every confirmation with ``yes``; returns the questions asked."""
    asked: list[str] = []

    def respond(dialog) -> None:
        asked.append(dialog.message)
        dialog.accept() if yes else dialog.dismiss()

    page.on("dialog", respond)
    return asked


def test_cancel_asks_first_and_no_keeps_the_job(transactional_db, world, login):
    job = submit(world.alice, world.lab, name="keep-me")
    page = login("alice")
    page.goto(f"/jobs/{job.id}/")
    asked = answer(page, yes=False)
    page.click("button[value=cancel]")
    assert asked == [f"Cancel job {job.id} (keep-me)? If it runs, it is stopped now."]
    assert Job.objects.get(pk=job.pk).state == "PENDING"

    page2 = login("alice")  # a second window, whose answer is yes
    answer(page2, yes=True)
    page2.goto(f"/jobs/{job.id}/")
    page2.click("button[value=cancel]")
    expect(page2.locator("h1 .state")).to_have_text("CANCELLED")


def test_revoking_a_token_asks_first(transactional_db, world, login):
    token, _ = create_api_token(world.alice, "laptop")
    page = login("alice")
    page.goto("/tokens/")
    asked = answer(page, yes=False)
    page.click("#tokens button.danger")
    assert asked and "Revoke token laptop?" in asked[0]
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_pages_carry_an_icon(transactional_db, world, login, live_server):
    page = login("alice")
    icon = page.locator("link[rel=icon]").get_attribute("href")
    response = page.request.get(f"{live_server.url}{icon}")
    assert response.ok and response.headers["content-type"].startswith("image/svg")
