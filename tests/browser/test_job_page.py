"""A job's page as its owner watches it: while the job waits, the page follows what the
scheduler says of it (its state, why it waits, when it should start) without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.jobs.verbs import hold_job
from scheduler.tick import estimates
from scheduler.tick.run import run_tick
from tests.builders import submit

pytestmark = [pytest.mark.slow]


def test_the_page_of_a_waiting_job_follows_its_estimate_and_state(transactional_db, world, login, shot):
    submit(world.bob, world.lab, name="bobs-gang", nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()
    job = submit(world.alice, world.lab, name="waiter", gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()
    page = login("alice")
    page.goto(f"/jobs/{job.id}/")
    expect(page.locator("#estimate")).to_contain_text("No estimate")
    estimates.refresh_estimates()
    expect(page.locator("#estimate")).to_contain_text("Starts in about")
    hold_job(job, by="alice")
    expect(page.locator("h1 .state")).to_have_text("HELD")
    shot(page, "job-page-held")
