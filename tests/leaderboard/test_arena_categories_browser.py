"""The board's category selector in headless Chromium through daphne: a category tagged by the real
SmolLM2 appears with its vote count, choosing it shows that category's fit with the tagger's protocol
and its (not yet checked) agreement with staff; a configured category below the minimum is offered with
its vote count and from how many votes its ratings appear."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml
from django.db import connection

from arena.models import RatingSnapshot
from arena.ratings.refit import snapshots_refit
from tests.arena.test_categories import Loader, drain, votes_with_prompts
from tests.conftest import clean_env, database_url_of
from tests.evalcore.categories.conftest import MIXED
from tests.evalcore.models._shared import smollm2_backend
from tests.leaderboard.test_arena_page_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def tagged_site(transactional_db, settings, smollm2_dir, tmp_path, start_asgi_server):
    protocol = tmp_path / "mentions-code.yaml"
    protocol.write_text(yaml.safe_dump(MIXED), encoding="utf-8")
    tagger = {"backend": "hf", "model_args": {"path": str(smollm2_dir), "dtype": "float32"}}
    settings.ARENA_CATEGORY_TAGGER = tagger
    settings.ARENA_CATEGORY_PROTOCOLS = [str(protocol), "coding"]
    votes_with_prompts(120, seed=4)
    drain(Loader(smollm2_backend(str(smollm2_dir))), batch=64)
    snapshots_refit(rounds=30, min_category_votes=10)
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        DEBUG="false",
        SECRET_KEY="arena-categories-browser-test-key",
        ARENA_CATEGORY_TAGGER=json.dumps(tagger),
        ARENA_CATEGORY_PROTOCOLS=f"{protocol},coding",
    )
    return f"http://127.0.0.1:{start_asgi_server(env=env)}"


def test_the_category_selector_offers_tagged_categories_with_their_votes(tagged_site, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls beside Playwright's event loop
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    tagged = RatingSnapshot.objects.get(method="bt", category="mentions_code").vote_count
    overall = RatingSnapshot.objects.get(method="bt", category="overall").vote_count
    assert 10 <= tagged < overall == 120
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{tagged_site}/leaderboard/arena/")
            select = page.locator("select[name=category]")
            options = dict(zip(select.locator("option").evaluate_all("os => os.map(o => o.value)"),
                               select.locator("option").all_inner_texts()))  # fmt: skip
            assert options["overall"] == "Overall (120 votes)"
            assert options["mentions_code"] == f"Mentions code ({tagged} votes)"
            # Configured, below the refit's minimum (10 here): offered with its votes and the minimum.
            assert re.fullmatch(r"Coding \(\d+ votes?; ratings from 10\)", options["coding"]), options["coding"]
            assert page.locator("#category-check").count() == 0  # overall is not a tagged category

            select.select_option("mentions_code")
            page.locator("form.board-controls button[type=submit]").click()
            page.wait_for_url(re.compile(r".*category=mentions_code.*"))
            assert page.locator("select[name=category]").input_value() == "mentions_code"
            summary = page.locator("p.summary").inner_text()
            assert f"mentions code: {tagged} votes" in summary
            assert page.locator("table.arena-board tbody tr").count() == 3
            check = page.locator("#category-check").inner_text()
            assert "protocol mentions-code version test-1" in check
            assert "No tag of this category has been checked by staff yet" in check
        finally:
            browser.close()
