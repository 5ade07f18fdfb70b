"""The GPU-hours page as a person sees it: the stacked chart is drawn, above the table,
neither covering the other."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from monitoring.models import JobEfficiency
from tests.builders import run_attempt, submit

pytestmark = [pytest.mark.slow]


def test_the_usage_chart_is_drawn_above_its_table(transactional_db, world, login, shot, console_errors):
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    for days, user, gpus in [(3, world.alice, 2), (2, world.bob, 4), (1, world.alice, 1)]:
        job = submit(user, world.lab, gpus_per_node=gpus)
        run_attempt(job, now - timedelta(days=days), now - timedelta(days=days) + timedelta(hours=6), gpus=gpus)
        if user is world.bob:  # measured: its GPU-hours split into used and idle
            JobEfficiency.objects.create(
                job=job, attempt=0, gpu_hours=24, elapsed_seconds=21600, samples=360, gpu_util_mean=60, computed_at=now
            )
    page = login("bob")  # coordinator of lab: sees alice's too
    errors = console_errors(page)

    page.goto("/usage/?group_by=user&bucket=day")

    expect(page.locator("#chart-usage .main-svg").first).to_be_visible()
    chart, table = page.locator("#chart-usage").bounding_box(), page.locator("#usage").bounding_box()
    assert chart and table and chart["y"] + chart["height"] <= table["y"]
    viewport = page.viewport_size
    assert viewport and table["x"] + table["width"] <= viewport["width"]  # the chargeback columns fit
    expect(page.locator("#usage tbody tr")).to_have_count(2)
    expect(page.locator("#usage tbody tr").first).to_contain_text("60%")
    assert errors == []
    shot(page, "usage-page")
