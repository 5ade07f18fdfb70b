"""The portal in a real Chromium: a researcher submits from a template and follows the job
to its end; an admin changes a quota and sees the audit entry; a researcher cannot open
admin pages or another user's job."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from scheduler import estimates, services
from scheduler.models import Job
from tests.builders import submit

pytestmark = [pytest.mark.slow]

SIMULATED_SECONDS = 3


@pytest.fixture
def site(transactional_db, world):
    world.cluster.config = {**world.cluster.config, "simulate": SIMULATED_SECONDS}
    world.cluster.save()
    return world


def test_researcher_submits_from_a_template_and_watches_the_job_finish(site, login, shot):
    # Every H100 is busy with bob's gang job, so alice's job waits for it.
    blocker = submit(site.bob, site.lab, name="bobs-gang", nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    services.run_tick()
    blocker_started = time.monotonic()

    page = login("alice")
    expect(page.locator("h1")).to_have_text("Dashboard")
    shot(page, "01-dashboard")

    page.click("text=Submit")
    page.click("[data-template=script]")
    expect(page.locator("#id_name")).to_have_value("script")
    page.fill("#id_name", "browser-job")
    page.fill("#id_gpus_per_node", "8")
    page.fill("#id_gpu_model", "H100-80GB")
    page.click("button[value=estimate]")
    expect(page.locator("#what-if .headline")).to_contain_text("Would start in about")
    expect(page.locator("#what-if .headline")).to_contain_text("1 node x 8 H100-80GB GPUs")
    shot(page, "02-submit-estimate")
    page.click("button[value=submit]")
    expect(page.locator("h1")).to_contain_text("browser-job")
    job = Job.objects.get(name="browser-job")

    services.run_tick()
    estimates.refresh_estimates()
    page.reload()
    expect(page.locator("h1 .state")).to_have_text("PENDING")
    expect(page.locator(".blocker").first).to_contain_text("Waiting for free GPUs")
    expect(page.locator("#estimate")).to_contain_text("Starts in about")
    shot(page, "03-job-pending")

    # Bob's job ends at the backend; the scheduler starts alice's on the freed GPUs.
    time.sleep(max(0.0, SIMULATED_SECONDS + 0.5 - (time.monotonic() - blocker_started)))
    services.poll_backends()
    assert Job.objects.get(pk=blocker.pk).state == "COMPLETED"
    services.run_tick()
    services.poll_backends()
    page.reload()
    expect(page.locator("h1 .state")).to_have_text(re.compile("RUNNING|DISPATCHING"))
    expect(page.locator("#placement")).to_contain_text("GPU 0, 1, 2, 3, 4, 5, 6, 7")
    shot(page, "04-job-running")

    # The page refreshes itself (static/js/job.js) when the job's state changes.
    time.sleep(SIMULATED_SECONDS + 0.5)
    services.poll_backends()
    expect(page.locator("h1 .state")).to_have_text("COMPLETED", timeout=20_000)
    expect(page.locator("#exit-code")).to_have_text("0")
    expect(page.locator(".timeline")).to_contain_text("submitted by alice")
    shot(page, "05-job-completed")
    assert Job.objects.get(pk=job.pk).state == "COMPLETED"

    page.click("text=Jobs")
    expect(page.locator("#jobs")).to_contain_text("browser-job")
    shot(page, "06-job-list")
    page.click("header >> text=API tokens")
    page.fill("#id_name", "laptop")
    page.click("#token-form button")
    expect(page.locator("#token-secret")).to_contain_text("qm_")
    shot(page, "07-tokens")


def test_admin_changes_a_quota_and_sees_the_audit_entry(site, login, shot):
    page = login("admin")
    page.click("header >> text=Accounts")
    shot(page, "10-admin-accounts")
    page.click("#account-tree >> text=lab")
    page.fill("#quota-form #id_max_gpus", "24")
    page.get_by_label("Max H100-80GB GPUs").fill("16")
    page.click("#quota-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Quota of lab saved.")
    expect(page.locator(".audit")).to_contain_text("quota for lab")
    expect(page.locator(".audit")).to_contain_text("max_gpus")
    shot(page, "11-admin-account-quota")
    page.click("header >> text=Audit log")
    expect(page.locator("#audit-log")).to_contain_text("admin")
    expect(page.locator("#audit-log")).to_contain_text("create quota")
    shot(page, "12-admin-audit-log")
    page.click("header >> text=Nodes")
    page.fill("[aria-label='reason to drain h100-01']", "reseat GPU 2")
    page.click("#node-h100-01 button")
    expect(page.locator("#node-h100-01")).to_contain_text("reseat GPU 2")
    shot(page, "13-admin-nodes")
    page.click("header >> text=Cluster")
    expect(page.locator("#gpu-hours")).to_be_visible()
    shot(page, "14-admin-cluster")


def test_researcher_cannot_open_admin_pages_or_another_users_job(site, login, live_server):
    theirs = submit(site.charlie, site.other, name="charlies-job")
    page = login("alice")
    assert page.goto("/manage/accounts/").status == 403
    assert page.goto("/manage/nodes/").status == 403
    assert page.goto(f"/jobs/{theirs.id}/").status == 404
    expect(page.locator("body")).not_to_contain_text("charlies-job")
    page.goto("/jobs/")
    expect(page.locator("#jobs")).not_to_contain_text("charlies-job")
