"""The arena leaderboard in headless Chromium through daphne: the three charts draw with the plotly.js
the site serves itself, and the page asks nothing of any other host (the machine is offline)."""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlsplit

import pytest
from django.db import connection

from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import votes_create
from tests.conftest import clean_env, database_url_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture
def rated_site(transactional_db, start_asgi_server):
    votes_create({"top": 1.0, "mid": 0.0, "mid-twin": 0.02, "low": -1.0}, 300, seed=1)
    snapshots_refit(rounds=30)
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        DEBUG="false",
        SECRET_KEY="arena-page-browser-test-key",
    )
    return f"http://127.0.0.1:{start_asgi_server(env=env)}"


@pytest.fixture
def browser(rated_site, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls beside Playwright's event loop
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def test_charts_draw_offline_from_the_local_plotly(rated_site, browser):
    page = browser.new_page()
    hosts, errors, failed = set(), [], []
    page.on("request", lambda request: hosts.add(urlsplit(request.url).hostname))
    page.on("pageerror", lambda error: errors.append(str(error)))  # uncaught script errors
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    for method in ("bt", "style"):
        page.goto(f"{rated_site}/leaderboard/arena/?method={method}")
        page.wait_for_function("document.querySelectorAll('.chart .main-svg').length >= 3", timeout=60_000)
        assert page.locator("#chart-ratings .errorbar").count() >= 1  # interval whiskers are drawn
        assert page.locator("#chart-predicted .hm, #chart-predicted image").count() >= 1  # the heatmap
        assert page.locator("table.arena-board tbody tr").count() == 4
        assert page.locator("tr.tied").count() >= 1
    assert page.locator("table.coefficients tbody tr").count() == 4  # the style page's coefficient table
    assert hosts == {"127.0.0.1"}, hosts
    assert not errors
    assert [url for url in failed if not url.endswith("/favicon.ico")] == []
