"""Issue 31 §3 in headless Chromium through daphne: the board's catalogue filters (organisation, licence,
open weights) and the retired toggle, as a visitor uses them, and the model page's rating-history chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from arena.models import LanguageModel
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import T0, votes_create
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.test_arena_page_browser import browser  # noqa: F401  (the Chromium fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def rated_site(transactional_db, start_asgi_server):
    votes_create({"alpha": 1.0, "beta": 0.3, "gamma": -0.2, "delta": -0.8, "unreleased-x9": 0.0}, 600, seed=2)
    LanguageModel.objects.filter(name="alpha").update(
        organisation="HuggingFace", licence="apache-2.0", open_weights=True
    )
    LanguageModel.objects.filter(name="beta").update(organisation="Acme", licence="proprietary")
    LanguageModel.objects.filter(name="gamma").update(
        organisation="Acme", licence="mit", open_weights=True,
        retired_at=datetime(2026, 11, 30, tzinfo=UTC), retired_reason="withdrawn by its owner",
    )  # fmt: skip
    LanguageModel.objects.filter(name="delta").update(organisation="Solo", licence="mit", open_weights=True)
    LanguageModel.objects.filter(name="unreleased-x9").update(organisation="Acme", public=False)
    snapshots_refit(rounds=30)
    votes_create({"alpha": 1.0, "beta": 0.3}, 50, seed=3, start=T0 + timedelta(days=1))
    snapshots_refit(rounds=30)  # two refits: two points on the history chart
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection), DEBUG="false",
        SECRET_KEY="arena-filters-browser-test-key",
    )  # fmt: skip
    return f"http://127.0.0.1:{start_asgi_server(env=env)}"


def shown(page) -> list[str]:
    return page.locator("table.arena-board tbody tr").evaluate_all("rows => rows.map(r => r.dataset.model)")


def test_filters_and_the_retired_toggle(rated_site, browser):  # noqa: F811
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{rated_site}/leaderboard/arena/")
    assert sorted(shown(page)) == [
        "alpha",
        "beta",
        "delta",
    ]  # gamma retired (hidden), unreleased-x9 never shown
    assert "1 retired model hidden" in page.locator("#arena-shown").inner_text()
    # The retired toggle.
    page.check("#filter-retired")
    page.click("form.board-controls button[type=submit]")
    page.wait_for_selector('tr[data-model="gamma"]')
    assert sorted(shown(page)) == ["alpha", "beta", "delta", "gamma"]
    mark = page.locator('tr[data-model="gamma"] .retired-mark').inner_text()
    assert mark == "retired 2026-11-30: withdrawn by its owner"
    # Organisation, with retired models still shown.
    page.select_option("#filter-organisation", "Acme")
    page.click("form.board-controls button[type=submit]")
    page.wait_for_url("**organisation=Acme**")
    assert sorted(shown(page)) == ["beta", "gamma"]
    assert page.locator("#filter-retired").is_checked()  # the form keeps the choices made
    # Open weights only, any organisation, retired hidden again.
    page.select_option("#filter-organisation", "")
    page.select_option("#filter-open-weights", "yes")
    page.uncheck("#filter-retired")
    page.click("form.board-controls button[type=submit]")
    page.wait_for_url("**open_weights=yes**")
    assert sorted(shown(page)) == ["alpha", "delta"]
    # Licence.
    page.select_option("#filter-open-weights", "")
    page.select_option("#filter-licence", "mit")
    page.click("form.board-controls button[type=submit]")
    page.wait_for_url("**licence=mit**")
    assert shown(page) == ["delta"]
    organisations = page.locator("#filter-organisation option").evaluate_all("o => o.map(x => x.value)")
    assert "Solo" in organisations and "unreleased-x9" not in page.content()
    # A model's page: its history chart draws.
    page.click('tr[data-model="delta"] td a')
    page.wait_for_function(
        "document.querySelectorAll('#chart-history .main-svg').length >= 1", timeout=60_000
    )
    assert page.locator("#chart-history .errorbar").count() >= 1
    assert page.locator("table.arena-history tbody tr").count() == 2
    assert not errors
