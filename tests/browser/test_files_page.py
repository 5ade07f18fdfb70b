"""The Files page in a real Chromium: alice goes from the navigation to her folder,
uploads a file through the form, sees it listed, downloads it, and deletes it after
saying yes; each control is found by its label, and the forms sit clear of the table."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.test_chart_layout import boxes_overlap
from tests.scheduler.files.homes import homes_the_portal_reaches

pytestmark = [pytest.mark.slow]


@pytest.fixture
def homes(passable_tmp, settings, world):  # type: ignore[no-untyped-def]
    return homes_the_portal_reaches(passable_tmp, settings, world)


def test_alice_uploads_downloads_and_deletes_in_her_folder(transactional_db, world, login, shot, homes):
    homes.put(homes.alice / "train.py", "print('hi')\n")
    homes.folder(homes.alice / "runs")

    page = login("alice")
    page.click("header nav >> text=Files")
    page.locator("#roots a", has_text=str(homes.alice)).click()
    expect(page.locator("#files")).to_contain_text("train.py")
    page.get_by_label("Files").set_input_files({"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# notes"})
    page.click("#upload-form button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Uploaded notes.md.")
    expect(page.locator("#files")).to_contain_text("notes.md")
    assert (homes.alice / "notes.md").read_bytes() == b"# notes"
    shot(page, "files")

    table, upload = page.locator("#files").bounding_box(), page.locator("#upload-form").bounding_box()
    assert not boxes_overlap(table, upload)
    row = page.locator("#files tr", has_text="notes.md")
    with page.expect_download() as downloading:
        row.get_by_role("link", name="Download").click()
    assert Path(downloading.value.path()).read_bytes() == b"# notes"

    page.on("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete").click()
    expect(page.locator(".messages")).to_contain_text("Deleted the file notes.md.")
    assert not (homes.alice / "notes.md").exists()
    page.get_by_label("Name").fill("data")
    page.click("#mkdir-form button[type=submit]")
    expect(page.locator("#files")).to_contain_text("data")
    assert (homes.alice / "data").is_dir()
