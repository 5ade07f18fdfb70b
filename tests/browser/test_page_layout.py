"""Tables as a person sees them at a desktop width (1400 px): every column on the screen,
one line per row where a value is short (a date), measured from the boxes Chromium lays out."""

from __future__ import annotations

import pytest

from tests.builders import submit

pytestmark = [pytest.mark.slow]


def test_the_admins_job_list_fits_the_window(transactional_db, world, login, shot):
    from scheduler.tick.run import run_tick

    world.admin.__class__.objects.create_superuser("root", "root@example.org", "pw-root")
    for n in range(3):
        submit(world.alice, world.lab, name=f"a-rather-long-job-name-for-training-run-{n}", gpus_per_node=8, nodes=4)
    run_tick()  # they wait, each with its pending reason
    page = login("root")
    page.goto("/admin/scheduler/job/")
    shot(page, "admin-job-list")
    # The admin scrolls a wide table inside its own box: every column shows only when
    # the table is no wider than that box (and the box within the window).
    table = page.locator("#result_list").bounding_box()
    frame = page.locator("#changelist .results").bounding_box()
    assert table["x"] + table["width"] <= frame["x"] + frame["width"] + 0.5, (table, frame)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
