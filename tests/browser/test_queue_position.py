"""A waiting job's place in line as its owner sees it: on the job's page, and in the
dashboard's list of jobs, which still fits a desktop window (1400 px) with the column."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.tick.run import run_tick
from tests.builders import submit

pytestmark = [pytest.mark.slow]


def test_a_waiting_job_shows_its_place_on_its_page_and_in_the_dashboard(transactional_db, world, login, shot):
    submit(world.alice, world.lab, name="gang", nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()  # every H100 is busy
    submit(world.alice, world.lab, name="first", gpus_per_node=8, gpu_model="H100-80GB")
    waiter = submit(world.alice, world.lab, name="waiter", gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()
    page = login("alice")
    page.goto(f"/jobs/{waiter.id}/")
    expect(page.locator("#queue-position")).to_contain_text("1 job ahead (8 GPU-hours): they wait their turn")
    shot(page, "job-page-place-in-line")

    page.goto("/")
    row = page.locator("#recent tbody tr", has_text="waiter")
    expect(row.locator("td.queue-position")).to_have_text("1 job ahead (8 GPU-hours)")
    expect(page.locator("#recent tbody tr", has_text="gang").locator("td.queue-position")).to_have_text("")
    shot(page, "dashboard-in-line")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
