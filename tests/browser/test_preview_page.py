"""A preview as an admin sees it: asked for on the account's page, a progress bar while
it runs (the page follows it through the API and shows the figures once done), then the
chart above the table, neither covering the other."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.models import Simulation
from scheduler.simulations import run_simulation
from tests.browser.test_submit_form import box, overlap
from tests.scheduler.test_previews import history

pytestmark = [pytest.mark.slow]


def test_a_preview_runs_behind_a_progress_bar_and_ends_in_a_chart_and_a_table(
    transactional_db, world, login, shot, console_errors
):
    history(world)
    page = login("admin")
    page.set_viewport_size({"width": 1400, "height": 1000})
    errors = console_errors(page)
    page.goto(f"/manage/accounts/{world.other.pk}/")
    expect(page.locator("#preview-form")).to_be_visible()

    queued = Simulation.objects.create(
        kind="preview", account=world.other, days=7, params={"shares": 50, "limits": None}
    )
    page.goto(f"/manage/simulations/{queued.pk}/")
    expect(page.locator("#simulation-progress")).to_be_visible()
    shot(page, "preview-running")
    run_simulation(queued.pk)  # what the worker does; the page sees it through the API and reloads

    expect(page.locator("#simulation-table")).to_be_visible(timeout=15_000)
    expect(page.locator("#chart-simulation .main-svg").first).to_be_visible()
    chart, table = box(page.locator("#chart-simulation")), box(page.locator("#simulation-table"))
    assert not overlap(chart, table) and chart["y"] < table["y"]
    expect(page.locator("#row-other")).to_be_visible()
    shot(page, "preview-done")
    assert errors == []


def test_the_simulator_replays_an_uploaded_trace_into_a_chart_and_a_table(
    transactional_db, world, login, shot, console_errors, tmp_path
):
    from tests.browser.test_submit_form import assert_fields_laid_out
    from tests.scheduler.test_previews import TRACE

    trace = tmp_path / "month.csv"
    trace.write_text(TRACE)
    page = login("admin")
    page.set_viewport_size({"width": 1400, "height": 1000})
    errors = console_errors(page)
    page.goto("/manage/simulator/")
    assert_fields_laid_out(page, "#simulator-form")
    shot(page, "simulator")

    page.set_input_files("#id_trace", str(trace))
    page.fill("#id_nodes", "2")
    page.click("#simulator-form button[type=submit]")

    expect(page.locator("#simulation-table")).to_be_visible()
    expect(page.locator("#chart-simulation .main-svg").first).to_be_visible()
    chart, table = box(page.locator("#chart-simulation")), box(page.locator("#simulation-table"))
    assert not overlap(chart, table) and chart["y"] < table["y"]
    expect(page.locator("#row-fairshare-backfill")).to_be_visible()
    shot(page, "simulator-replay")
    assert errors == []
