"""Interactive apps as a researcher sees them: the apps, a launch form laid out field by
field with a mistake under its field, and the session's card turning from queued to
running with Connect by itself (its script asks the server's readiness), on the local
cluster where the session's server really runs."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.clusters.poll import poll_backends
from scheduler.models import InteractiveSession
from scheduler.tick.run import run_tick
from tests.browser.test_submit_form import assert_fields_laid_out

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]

SERVER = 'mkdir -p ".$QM_SESSION_BASE_URL" && exec python3 -m http.server "$QM_SESSION_PORT" --bind 127.0.0.1'


def test_alice_launches_a_web_server_and_its_card_shows_connect(transactional_db, world, login, shot, console_errors):
    page = login("alice")
    errors = console_errors(page)
    page.click("nav >> text=Interactive apps")
    expect(page.locator("#app-jupyterlab")).to_contain_text("JupyterLab")
    shot(page, "interactive-apps")

    page.click("#app-web-server >> text=Launch")
    page.fill("#id_walltime", "soon")
    page.click("#launch-form button[type=submit]")
    expect(page.locator("#field-walltime .errorlist")).to_contain_text("90m")
    assert_fields_laid_out(page, "#launch-form")
    shot(page, "interactive-launch")

    page.fill("#id_command", SERVER)
    page.fill("#id_walltime", "1h")
    page.click("#launch-form button[type=submit]")
    session = InteractiveSession.objects.get()
    card = page.locator(f"#session-{session.job_id}")
    expect(card).to_contain_text("Queued")

    run_tick()  # dispatched inline: the job starts on the local cluster
    poll_backends()
    expect(card.locator("a.connect")).to_have_attribute("href", f"/sessions/{session.job_id}/", timeout=90_000)
    expect(card).to_contain_text("left")
    shot(page, "interactive-running")

    page.on("dialog", lambda dialog: dialog.accept())
    card.locator("button.danger").click()  # Delete, confirmed
    expect(page.locator(f"#session-{session.job_id} .ended-why")).to_contain_text("deleted")
    assert errors == []
