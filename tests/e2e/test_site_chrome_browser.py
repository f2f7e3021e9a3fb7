"""Item 9 of the README demo's issue in headless Chromium through daphne: no page of the demo's tour
asks for anything that answers 404 (the favicon was one on every page), the icon the page links loads,
and the main navigation has no link to the JSON health probe."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.conftest import clean_env, database_url_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def site(transactional_db, tmp_path, start_asgi_server):
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
        PODIUM_VAR_DIR=str(tmp_path / "var"), DEBUG="false", SECRET_KEY="site-chrome-browser-test-key",
    )  # fmt: skip
    return f"http://127.0.0.1:{start_asgi_server(env=env)}"


def test_no_page_asks_for_a_missing_file_and_the_icon_loads(site, browser):
    page = browser.new_page()
    missing = []
    page.on("response", lambda response: missing.append(response.url) if response.status >= 400 else None)
    for path in ("/", "/leaderboard/", "/leaderboard/arena/", "/admin/login/"):
        page.goto(site + path)
        page.wait_for_load_state("networkidle")
        if path != "/admin/login/":
            assert page.locator("header.site nav a", has_text="Health").count() == 0
            assert page.locator("footer a[href='/healthz']").count() == 1
            icon = page.evaluate(
                """async () => {
                    const link = document.querySelector("link[rel=icon][type='image/svg+xml']");
                    const r = await fetch(link.href);
                    return [r.status, r.headers.get("content-type")];
                }"""
            )
            assert icon[0] == 200 and icon[1].startswith("image/svg+xml"), icon
    fallback = page.evaluate(
        "async () => { const r = await fetch('/favicon.ico'); return [r.status, r.headers.get('content-type'), r.redirected]; }"
    )
    assert fallback[0] == 200 and fallback[2] and fallback[1].startswith("image/"), fallback
    assert missing == []
