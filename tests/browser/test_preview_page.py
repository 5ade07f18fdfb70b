"""A preview as an admin sees it: asked for on the account's page, a progress bar while
it runs (the page follows it through the API and shows the figures once done), then the
chart above the table, neither covering the other."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.models import AccountPreview
from scheduler.previews import run_preview
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

    queued = AccountPreview.objects.create(account=world.other, days=7, proposal={"shares": 50, "limits": None})
    page.goto(f"/manage/previews/{queued.pk}/")
    expect(page.locator("#preview-progress")).to_be_visible()
    shot(page, "preview-running")
    run_preview(queued.pk)  # what the worker does; the page sees it through the API and reloads

    expect(page.locator("#preview-table")).to_be_visible(timeout=15_000)
    expect(page.locator("#chart-preview .main-svg").first).to_be_visible()
    chart, table = box(page.locator("#chart-preview")), box(page.locator("#preview-table"))
    assert not overlap(chart, table) and chart["y"] < table["y"]
    expect(page.locator("#preview-other")).to_be_visible()
    shot(page, "preview-done")
    assert errors == []
