"""A job array as a person sees it: the job list folds its waiting tasks into one row
that leads to each task, and a task's page shows the array's task counts with buttons
for the whole array, laid out without overlap."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.jobs.array_spec import parse_array
from scheduler.jobs.submit import submit_job
from scheduler.tick.run import run_tick
from tests.browser.test_submit_form import box, overlap

pytestmark = [pytest.mark.slow]


def test_an_arrays_rows_and_page(transactional_db, world, login, shot):
    first = submit_job(
        owner=world.alice,
        account=world.lab,
        qos=None,
        array=parse_array("0-19%4", max_size=10001),
        name="sweep",
        command="sleep 30",
        walltime_seconds=600,
    )
    run_tick()
    page = login("alice")

    page.goto("/jobs/")
    folded = page.locator(f"#jobs a:text-is('{first.id}_[4-19]')")
    expect(folded).to_have_count(1)
    expect(page.locator(f"#jobs a:text-is('{first.id}_0')")).to_have_count(1)
    shot(page, "job-list-array")

    folded.click()
    expect(page.locator("h1")).to_contain_text(f"tasks of array {first.id}")
    expect(page.locator("#jobs tbody tr")).to_have_count(16)

    page.goto(f"/jobs/{first.id}/")
    expect(page.locator("#array h2")).to_contain_text("0-19%4, 20 tasks, at most 4 at once")
    expect(page.locator("#array")).to_contain_text("16 pending")
    buttons = [box(page.locator(f"#array form:nth-of-type({i}) button")) for i in range(1, 5)]
    throttle = box(page.locator("#throttle"))
    for i, a in enumerate([*buttons, throttle]):
        for b in [*buttons, throttle][i + 1 :]:
            assert not overlap(a, b, slack=0)
    shot(page, "job-array-task")
