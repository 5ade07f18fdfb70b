"""Browser tests: Playwright's Python package driving Debian's Chromium (``/usr/bin/chromium``,
installed by ``.ci/run`` with apt-get; never a downloaded browser).

Without Chromium or Playwright these tests skip here and FAIL in CI
(``QM_REQUIRE_SERVICES=1``). Screenshots of the main pages go to ``var/screenshots/``
(``QM_SCREENSHOT_DIR`` to change), which CI keeps as artifacts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _missing

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between browser steps (the scheduler tick) are synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("QM_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("QM_SCREENSHOT_DIR", Path(__file__).resolve().parents[2] / "var" / "screenshots"))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the browser tests need Playwright's Python package (pip install -r requirements-dev.txt)")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _missing(f"the browser tests need Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        yield browser
        browser.close()


@pytest.fixture
def fresh_page(browser: Any, live_server: Any) -> Iterator[Callable[[], Any]]:
    """``fresh_page()`` -> a page in a new browser context (no cookies: nobody logged in)
    on the live server, at a desktop size; closed at the end of the test."""
    contexts: list[Any] = []

    def open_page() -> Any:
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=live_server.url)
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def login(fresh_page: Callable[[], Any], live_server: Any) -> Callable[[str], Any]:
    """``login("alice")`` -> a Playwright page logged in through the real login form."""

    def open_as(username: str) -> Any:
        page = fresh_page()
        page.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", f"pw-{username}")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    return open_as


@pytest.fixture
def shot() -> Callable[[Any, str], None]:
    """``shot(page, "dashboard")`` keeps a full-page screenshot for the CI artifacts."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str) -> None:
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    return take


@pytest.fixture
def console_errors() -> Callable[[Any], list[str]]:
    """``errors = console_errors(page)``: a list that collects the page's console errors
    and uncaught exceptions from then on (across reloads and navigations)."""

    def watch(page: Any) -> list[str]:
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        return errors

    return watch
