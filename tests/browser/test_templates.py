"""Every built-in template, as a newcomer uses it in Chromium: one click on the template,
Submit, and the job runs to COMPLETED on the local cluster doing what its title says; a
template whose program the nodes lack says so on the page before anything is sent."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.clusters.logs import read_job_log
from scheduler.models import Job
from tests.builders import run_until_ended
from web.jobs.presets import PRESETS

pytestmark = [pytest.mark.slow]

#: What each runnable template's job prints when it did its work.
SAYS = {
    "ddp": "rank 0: wrote checkpoint.json",
    "batch-inference": "200 inputs -> predictions/predictions-0.jsonl",
    "script": "working directory:",
}


def test_the_runnable_templates_are_all_covered():
    assert set(SAYS) == {p.slug for p in PRESETS if not p.requires}


def boxes_do_not_overlap(page, *selectors: str) -> None:
    placed = [(s, page.locator(s).bounding_box()) for s in selectors]
    for i, (a, box_a) in enumerate(placed):
        assert box_a is not None, f"{a} is not shown"
        for b, box_b in placed[i + 1 :]:
            assert box_b is not None, f"{b} is not shown"
            apart = (
                box_a["y"] + box_a["height"] <= box_b["y"]
                or box_b["y"] + box_b["height"] <= box_a["y"]
                or box_a["x"] + box_a["width"] <= box_b["x"]
                or box_b["x"] + box_b["width"] <= box_a["x"]
            )
            assert apart, f"{a} overlaps {b}"


@pytest.mark.parametrize("slug", sorted(SAYS))
def test_a_template_clicked_and_submitted_completes(transactional_db, world, login, shot, console_errors, slug):
    page = login("alice")
    errors = console_errors(page)
    page.goto("/jobs/new/")
    page.click(f"[data-template={slug}]")
    expect(page.locator("#template-about")).to_be_visible()
    boxes_do_not_overlap(page, "section.templates", "#submit-form")
    shot(page, f"template-{slug}-form")
    page.click("button[value=submit]")
    expect(page.locator(".messages")).to_contain_text("submitted")
    job = run_until_ended(Job.objects.latest("id"))
    assert job.state == "COMPLETED", read_job_log(job)
    page.reload()
    expect(page.locator("h1 .state")).to_have_text("COMPLETED")
    expect(page.locator("#log")).to_contain_text(SAYS[slug])
    shot(page, f"template-{slug}-completed")
    assert errors == []


def test_a_template_whose_program_the_nodes_lack_says_so_before_submit(
    transactional_db, world, login, monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # the local cluster's jobs inherit this PATH
    page = login("alice")
    page.goto("/jobs/new/")
    page.click("[data-template=interactive]")
    expect(page.locator("#template-missing")).to_contain_text("do not find jupyter on their PATH")
    boxes_do_not_overlap(page, "#template-about", "#submit-form")
