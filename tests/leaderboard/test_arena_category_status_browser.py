"""In headless Chromium through daphne: a configured category below its minimum is in the selector with
its votes, choosing it shows a 200 page that says why there are no ratings yet (once); the board's
downloads fetch (votes and the ratings CSV); Swagger UI at /api/docs/ draws the API from the site's own
files, asking no other host. Tags are written directly (no tagger model is loaded)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from urllib.parse import urlsplit

import pytest
from django.db import connection

from arena.categories import tagger as categories
from arena.ratings import live
from arena.ratings.api import RATINGS_CSV_COLUMNS
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import votes_create
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.test_arena_category_status import STRENGTHS, tag
from tests.leaderboard.test_arena_page_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TAGGER = {"backend": "hf", "model_args": {"path": "/nowhere/tagger", "dtype": "float32"}}


@pytest.fixture
def site(transactional_db, settings, start_asgi_server):
    settings.ARENA_CATEGORY_TAGGER = TAGGER
    settings.ARENA_CATEGORY_PROTOCOLS = ["coding", "math"]
    live._SETTLED.clear()
    protocols = {p.category: p for p in categories.category_protocols()}
    votes = votes_create(STRENGTHS, 14, seed=11)
    tag(votes, protocols["coding"], inside=3)
    snapshots_refit(rounds=10)
    live.live_refit()
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection), DEBUG="false",
        SECRET_KEY="arena-category-status-browser-key", ARENA_CATEGORY_TAGGER=json.dumps(TAGGER),
        ARENA_CATEGORY_PROTOCOLS="coding,math",
    )  # fmt: skip
    return f"http://127.0.0.1:{start_asgi_server(env=env)}"


def test_a_category_without_ratings_the_downloads_and_the_api_docs(site, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(accept_downloads=True)
            hosts, errors = set(), []
            page.on("request", lambda request: hosts.add(urlsplit(request.url).hostname))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{site}/leaderboard/arena/")
            options = page.locator("select[name=category] option")
            labels = dict(zip(options.evaluate_all("os => os.map(o => o.value)"), options.all_inner_texts()))
            assert labels["overall"] == "Overall (14 votes)"
            assert labels["coding"] == "Coding (3 votes; ratings from 50)"
            assert labels["math"] == "Math (0 votes; ratings from 50)"

            with page.expect_download() as fetched:  # the ratings shown, as CSV
                page.locator("#download-ratings-csv").click()
            rows = list(csv.reader(io.StringIO(open(fetched.value.path(), encoding="utf-8").read())))
            assert rows[0] == RATINGS_CSV_COLUMNS and len(rows) == 1 + 4
            with page.expect_download() as fetched:
                page.locator("#arena-downloads a", has_text="votes.csv").click()
            assert len(open(fetched.value.path(), encoding="utf-8").read().splitlines()) == 1 + 14

            page.locator("select[name=category]").select_option("coding")
            with page.expect_response(re.compile(r".*category=coding.*")) as answered:
                page.locator("form.board-controls button[type=submit]").click()
            assert answered.value.status == 200
            status = page.locator("#arena-empty").inner_text()
            assert "No ratings yet for coding: too few votes. 3 counted votes so far" in status
            assert "ratings appear from 50 (47 more)" in status
            assert page.locator("body").inner_text().count("too few votes") == 1
            assert page.locator("#arena-live").count() == 0
            assert page.locator("#arena-downloads a", has_text="votes.jsonl").count() == 1

            response = page.goto(f"{site}/leaderboard/arena/?category=nosuch")
            assert response.status == 404
            assert "There is no category “nosuch”" in page.locator("#arena-unknown-category").inner_text()

            page.goto(f"{site}/api/docs/")
            page.wait_for_selector(".swagger-ui .opblock", timeout=60_000)
            assert page.locator(".opblock-summary-path", has_text="/api/ratings/").count() >= 1
            assert hosts - {None} == {"127.0.0.1"}, hosts  # None: data: URLs (Swagger UI's icons), no host
            assert not errors, errors
        finally:
            browser.close()
