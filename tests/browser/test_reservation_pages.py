"""The reservation page as an admin sees it: the list over the form, every field of the
form laid out in its own box, a mistake shown under its field; the nodes page names the
reservation on its nodes' rows without pushing the table off the screen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.browser.test_submit_form import assert_fields_laid_out, box, overlap

pytestmark = [pytest.mark.slow]


def typed(hours: float) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M")


def test_an_admin_makes_a_maintenance_window_and_sees_it_on_the_nodes(
    transactional_db, world, login, shot, console_errors
):
    page = login("admin")
    page.set_viewport_size({"width": 1400, "height": 1000})
    errors = console_errors(page)
    page.goto("/manage/reservations/")
    assert_fields_laid_out(page, "#reservation-form")

    page.fill("#id_name", "fw-upgrade")
    page.select_option("#id_kind", "maintenance")
    page.fill("#id_start_at", typed(6))
    page.fill("#id_end_at", typed(2))  # before the start: the API's rule, under its field
    page.fill("#id_nodes", "h100-01")
    page.click("#reservation-form button[value=save]")
    expect(page.locator("#reservation-form .errorlist")).to_contain_text("after start_at")
    assert_fields_laid_out(page, "#reservation-form")

    page.fill("#id_end_at", typed(10))
    earliest = typed(4)
    page.fill("#id_suggest_from", earliest)
    page.fill("#id_suggest_until", typed(8))
    page.click("#reservation-form button[value=preview]")  # nothing saved: the cost under the form
    expect(page.locator("#cost-summary")).to_contain_text("GPU-hours displaced")
    expect(page.locator("#cost-suggestion")).to_contain_text("the one that displaces least")
    assert not overlap(box(page.locator("#reservation-form")), box(page.locator("#reservation-cost")))
    assert_fields_laid_out(page, "#reservation-form")
    shot(page, "reservation-cost")
    page.click("#use-suggestion button")  # the earliest start: nothing is in the way
    expect(page.locator("#id_start_at")).to_have_value(earliest)

    page.click("#reservation-form button[value=save]")
    expect(page.locator("#reservation-fw-upgrade")).to_be_visible()
    table, form = box(page.locator("#reservations")), box(page.locator("#reservation-form"))
    assert not overlap(table, form) and table["y"] < form["y"]
    shot(page, "reservations")

    page.goto("/manage/nodes/")
    row = page.locator("#node-h100-01")
    expect(row).to_contain_text("fw-upgrade (maintenance)")
    viewport = page.viewport_size
    assert viewport and box(page.locator("#nodes"))["x"] + box(page.locator("#nodes"))["width"] <= viewport["width"]
    shot(page, "nodes-with-reservation")
    assert errors == []
