"""The portal in a real Chromium: a researcher submits from a template, follows the job to
its end and opens its GPU charts; an admin changes a quota and sees the audit entry and
the cluster overview's charts; a researcher cannot open admin pages or another user's job."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agent.collectors.simulated import SimulatedGpu, simulate
from monitoring.efficiency import grace, record_efficiencies
from monitoring.queue import record_queue
from monitoring.services import ingest_batch, record_simulated_samples, rollup_recent
from scheduler.clusters.poll import poll_backends
from scheduler.models import Gpu, Job, Node
from scheduler.tick import estimates
from scheduler.tick.run import run_tick
from tests.builders import submit

pytestmark = [pytest.mark.slow]

SIMULATED_SECONDS = 3


def record_samples_of(job: Job, every: timedelta = timedelta(milliseconds=500)) -> None:
    """The simulated collector's readings of the job's GPUs (busy) over its lifetime, stored
    through the real ingest path, as a node agent would have posted them while it ran."""
    job.refresh_from_db()
    assert job.started_at and job.ended_at
    for allocation in job.allocations:
        node = Node.objects.get(name=allocation["node"])
        memory = dict(Gpu.objects.filter(node=node).values_list("index", "memory_mib"))
        gpus = [SimulatedGpu(i, memory[i], busy=True) for i in allocation["gpu_indices"]]
        payloads, at = [], job.started_at
        while at < job.ended_at:
            payloads += [reading.to_payload(at) for reading in simulate(gpus, at, seed=node.name)]
            at += every
        assert ingest_batch(node, payloads).accepted == len(payloads)


def drawn(page, chart: str) -> list[int]:
    """Waits until Plotly has drawn into ``#chart-<chart>``; returns each trace's point count."""
    page.wait_for_function(f"() => document.querySelector('#chart-{chart}')?.data?.length > 0")
    return page.evaluate(f"() => document.querySelector('#chart-{chart}').data.map(t => (t.z || t.y || []).length)")


@pytest.fixture
def site(transactional_db, world):
    world.cluster.config = {**world.cluster.config, "simulate": SIMULATED_SECONDS}
    world.cluster.save()
    return world


def test_researcher_submits_from_a_template_and_watches_the_job_finish(site, login, shot, console_errors):
    # Every H100 is busy with bob's gang job, so alice's job waits for it.
    blocker = submit(site.bob, site.lab, name="bobs-gang", nodes=2, gpus_per_node=8, gpu_model="H100-80GB")
    run_tick()
    blocker_started = time.monotonic()

    page = login("alice")
    errors = console_errors(page)
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

    run_tick()
    estimates.refresh_estimates()
    page.reload()
    expect(page.locator("h1 .state")).to_have_text("PENDING")
    expect(page.locator(".blocker").first).to_contain_text("Waiting for free GPUs")
    expect(page.locator("#estimate")).to_contain_text("Starts in about")
    shot(page, "03-job-pending")

    # Bob's job ends at the backend; the scheduler starts alice's on the freed GPUs.
    time.sleep(max(0.0, SIMULATED_SECONDS + 0.5 - (time.monotonic() - blocker_started)))
    poll_backends()
    assert Job.objects.get(pk=blocker.pk).state == "COMPLETED"
    run_tick()
    poll_backends()
    page.reload()
    expect(page.locator("h1 .state")).to_have_text(re.compile("RUNNING|DISPATCHING"))
    expect(page.locator("#placement")).to_contain_text("GPU 0, 1, 2, 3, 4, 5, 6, 7")
    shot(page, "04-job-running")

    # The page refreshes itself (static/js/job.js) when the job's state changes.
    time.sleep(SIMULATED_SECONDS + 0.5)
    poll_backends()
    expect(page.locator("h1 .state")).to_have_text("COMPLETED", timeout=20_000)
    expect(page.locator("#exit-code")).to_have_text("0")
    expect(page.locator(".timeline")).to_contain_text("submitted by alice")
    shot(page, "05-job-completed")
    assert Job.objects.get(pk=job.pk).state == "COMPLETED"

    # Its GPU charts: the samples its 8 GPUs reported while it ran, drawn by Plotly; and
    # its efficiency (seff), measured once its last samples can have arrived.
    record_samples_of(job)
    record_efficiencies(timezone.now() + grace())
    page.reload()
    expect(page.locator("#efficiency")).to_contain_text("GPU-hours")
    expect(page.locator("#efficiency")).to_contain_text("GPU utilization")
    points = drawn(page, "job-gpus")
    assert len(points) == 4 * 3 and all(n > 0 for n in points[0:3])  # utilization: max, min, mean
    expect(page.locator("#chart-job-gpus .main-svg").first).to_be_visible()
    page.locator("#job-gpu-charts").scroll_into_view_if_needed()
    shot(page, "05b-job-gpu-charts")
    assert errors == []

    page.click("text=Jobs")
    expect(page.locator("#jobs")).to_contain_text("browser-job")
    expect(page.locator("#jobs")).to_contain_text("%")  # its GPU utilization column
    shot(page, "06-job-list")
    page.click("header >> text=API tokens")
    page.fill("#id_name", "laptop")
    page.click("#token-form button")
    expect(page.locator("#token-secret")).to_contain_text("qm_")
    # The read-only box sits under its own label, above the button, not beside it.
    label, box = page.locator("label[for=id_read_only]").bounding_box(), page.locator("#id_read_only").bounding_box()
    button, secret = page.locator("#token-form button").bounding_box(), page.locator("#new-token").bounding_box()
    assert label and box and button and secret
    assert label["y"] < box["y"] < button["y"] and box["y"] + box["height"] <= button["y"]
    assert page.locator("#token-form").bounding_box()["y"] > secret["y"] + secret["height"]  # type: ignore[index]
    shot(page, "07-tokens")


def test_admin_changes_a_quota_and_sees_the_audit_entry(site, login, shot, console_errors):
    submit(site.alice, site.lab, gpus_per_node=4, gpu_model="H100-80GB")
    submit(site.charlie, site.other, nodes=3, gpus_per_node=8)  # never fits: waits
    run_tick()
    record_simulated_samples()
    rollup_recent(timezone.now() + timedelta(minutes=1))
    record_queue()
    page = login("admin")
    errors = console_errors(page)
    page.click("header >> text=Accounts")
    assert drawn(page, "fairshare") == [2, 2]  # lab and other: shares and usage
    shot(page, "10-admin-accounts")
    page.click("#account-tree >> text=lab")
    page.fill("#quota-form #id_max_gpus", "24")
    page.get_by_label("Max H100-80GB GPUs").fill("16")
    page.click("#quota-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Quota of lab saved.")
    expect(page.locator(".audit")).to_contain_text("quota for lab")
    expect(page.locator(".audit")).to_contain_text("max GPUs")
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
    for chart in ("gpu-heatmap", "allocated-utilization", "utilization", "queue", "waits", "gpu-hours"):
        assert drawn(page, chart), chart
    assert drawn(page, "gpu-heatmap") == [8]  # GPU indices 0-7 down, nodes across
    assert drawn(page, "queue") == [1, 1, 1, 1]  # lab and other, pending and running, one minute
    shot(page, "14-admin-cluster")
    assert errors == []


def test_researcher_cannot_open_admin_pages_or_another_users_job(site, login, live_server, shot):
    theirs = submit(site.charlie, site.other, name="charlies-job")
    page = login("alice")
    assert page.goto("/manage/accounts/").status == 403
    expect(page.locator("#error h1")).to_have_text("Not allowed")
    expect(page.locator("#error")).to_contain_text("ask your account's coordinator")
    below_the_header(page)
    shot(page, "15-forbidden")
    assert page.goto("/manage/nodes/").status == 403
    assert page.goto(f"/jobs/{theirs.id}/").status == 404
    expect(page.locator("#error h1")).to_have_text("Not found")
    below_the_header(page)
    shot(page, "16-not-found")
    expect(page.locator("body")).not_to_contain_text("charlies-job")
    page.goto("/jobs/")
    expect(page.locator("#jobs")).not_to_contain_text("charlies-job")


def below_the_header(page) -> None:
    """The error message sits in the page's own layout: below the header, inside the
    viewport's width, not hidden under or beside anything."""
    header, message = page.locator("header").bounding_box(), page.locator("#error").bounding_box()
    assert header is not None and message is not None
    assert message["y"] >= header["y"] + header["height"]
    assert message["x"] >= 0 and message["x"] + message["width"] <= page.viewport_size["width"]
