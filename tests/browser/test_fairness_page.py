"""The fairness watch as an admin sees it: the cluster overview names the starving
account beside the last day's figures and links to the replay of another policy, whose
page lists each account's slowdown under both."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from monitoring.fairness import watch
from scheduler.models import Simulation
from tests.builders import finished
from tests.scheduler.test_policy_switch import starved_history

pytestmark = [pytest.mark.slow]


def test_a_starving_account_is_named_and_the_switch_replay_is_one_click_away(
    transactional_db, world, login, shot, console_errors, settings
):
    settings.FAIRNESS_WATCH_BELOW = 0.8
    now = timezone.now()
    starved_history(world, now - timedelta(days=1))  # the week replayed, out of the last day
    hour = timedelta(hours=1)
    finished(world.alice, world.lab, now - hour, waited=timedelta(0), ran=hour, gpus_per_node=8)
    finished(world.charlie, world.other, now - hour, waited=9 * hour, ran=hour, gpus_per_node=8)
    assert watch(now) == "opened"

    page = login("admin")
    page.set_viewport_size({"width": 1400, "height": 1000})
    errors = console_errors(page)
    page.goto("/manage/cluster/")
    section = page.locator("#fairness")
    section.scroll_into_view_if_needed()
    expect(page.locator("#starving")).to_contain_text("Account other is starving")
    expect(page.locator("#account-slowdowns tbody tr")).to_have_count(2)
    shot(page, "fairness-watch")

    page.click("#switch-link")
    expect(page.locator("h1")).to_have_text("Switching to stretch-las-preempt")
    # Without a broker the replay ran when the watch asked for it (after its commit).
    assert Simulation.objects.get(kind="switch").state == "done"
    expect(page.locator("#simulation-table")).to_be_visible()
    expect(page.locator("#row-other")).to_be_visible()
    shot(page, "fairness-switch")
    assert errors == []
