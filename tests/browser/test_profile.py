"""The profile page: a user chooses what they are told and how, and sees what was sent."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from notifications.models import Preference
from tests.browser.test_submit_form import assert_fields_laid_out

pytestmark = [pytest.mark.slow]


def test_notification_choices_are_saved_and_laid_out_field_by_field(transactional_db, world, login, shot):
    page = login("alice")
    page.click("header .who")
    expect(page.locator("h1")).to_have_text("alice")
    page.check("input[name=events][value=preempted]")
    page.fill("#id_webhook_url", "https://hooks.example.org/qm")
    page.select_option("#id_webhook_format", "slack")
    page.click("#notify-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Notification settings saved.")
    assert assert_fields_laid_out(page, "#notify-form") == 4
    expect(page.locator("#webhook-secret")).not_to_be_empty()
    shot(page, "profile-notifications")
    pref = Preference.objects.get(user=world.alice)
    assert "preempted" in pref.events and pref.webhook_format == "slack"
