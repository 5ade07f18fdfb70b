"""Staff set a user's own quota from the Users page, in a form laid out field by field."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from people.models import Quota
from tests.browser.test_submit_form import assert_fields_laid_out

pytestmark = [pytest.mark.slow]


def test_staff_set_a_users_quota_from_the_users_page(transactional_db, world, login, shot):
    page = login("admin")
    page.click("header >> text=Users")
    expect(page.locator("#users")).to_contain_text("alice")
    page.locator("#users tr", has_text="alice").locator("text=Set a quota").click()
    assert assert_fields_laid_out(page, "#quota-form") >= 5
    page.fill("#id_max_gpus", "4")
    page.fill("#id_max_running_jobs", "2")
    page.click("#quota-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Quota of alice saved.")
    shot(page, "user-quota")
    quota = Quota.objects.get(user=world.alice)
    assert (quota.max_gpus, quota.max_running_jobs) == (4, 2)
    page.click("text=← Users")
    expect(page.locator("#users")).to_contain_text("4 GPUs · 2 running")
