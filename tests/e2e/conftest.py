"""Browser tests: Playwright driving Debian's Chromium against a real ASGI server and worker."""

from __future__ import annotations

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make between
# browser steps are ordinary blocking calls, which Django would otherwise refuse there.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed: `make test` installs it (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        # ORM calls made while Playwright's loop runs get connections of their own context (asgiref's
        # Local), which pytest-django's teardown never sees: close them here, or the test database
        # cannot be dropped at the end of the session ("accessed by other users").
        from django.db import connections

        connections.close_all()
        browser.close()
