"""A job's page as its owner watches it: while the job waits, the page follows what the
scheduler says of it (its state, why it waits, when it should start) without a reload;
while it runs, the log she picks (a rank's stderr) grows on the page as the job writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from scheduler.clusters.logs import read_job_log
from scheduler.clusters.poll import poll_backends
from scheduler.jobs.verbs import hold_job
from scheduler.models import Job
from scheduler.tick import estimates
from scheduler.tick.run import run_tick
from tests.builders import submit
from tests.scheduler.tick.waiting import wait_for

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


def test_a_rank_s_log_is_picked_followed_live_and_downloaded_whole(transactional_db, world, login, shot):
    """alice's two-rank job says where its home is, and each rank a line on stderr; it then
    waits for a file there. She picks rank 1's stderr: its line shows; the file made,
    rank 1's last line appears without a reload; the download is that log, whole."""
    command = (
        'echo "home=$HOME"; echo "rank $QM_NODE_RANK starts" >&2; '
        'while [ ! -e "$HOME/go" ]; do sleep 0.05; done; echo "rank $QM_NODE_RANK ends" >&2'
    )
    job = submit(
        world.alice, world.lab, nodes=2, gpus_per_node=1, gpu_model="H100-80GB", command=command, walltime_seconds=120
    )
    run_tick()
    job.refresh_from_db()
    home = wait_for(lambda: re.search(r"home=(\S+)", read_job_log(job)), what="the job's home").group(1)
    page = login("alice")
    page.goto(f"/jobs/{job.id}/")

    page.select_option("#log-source", label="rank 1 stderr, followed from its start")
    expect(page.locator("#log")).to_have_text("rank 1 starts\n")
    expect(page.locator("#log-status")).to_contain_text("following")
    (Path(home) / "go").touch()
    expect(page.locator("#log")).to_have_text("rank 1 starts\nrank 1 ends\n")
    shot(page, "job-page-rank-log")

    wait_for(lambda: poll_backends() or Job.objects.get(pk=job.pk).state == "COMPLETED", what="the job's end")
    expect(page.locator("h1 .state")).to_have_text("COMPLETED")  # reloaded, the pick kept
    expect(page.locator("#log-source")).to_have_value("stream=stderr&rank=1")
    expect(page.locator("#log-status")).to_contain_text("whole: 26 bytes")
    with page.expect_download() as downloading:
        page.locator("#log-downloads a", has_text="rank 1 stderr").click()
    assert downloading.value.suggested_filename == f"job-{job.id}-rank1-stderr.log"
    assert Path(downloading.value.path()).read_bytes() == b"rank 1 starts\nrank 1 ends\n"
