"""A submission's page in headless Chromium through daphne and PostgreSQL: while it runs, the progress
the worker stores (tasks done of total, the stage, the bar) appears without reloading the page; once it
finishes, the page shows the board's own average, interval and rank, the per-task tables folded away,
and a link that opens the board at its row."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from django.db import connection
from django.utils import timezone

from leaderboard.board.selectors import board_table
from leaderboard.models import Submission
from tests.conftest import clean_env, database_url_of
from tests.leaderboard import board_data as bd

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def progress(done: int, current: str | None) -> dict:
    tasks = {f"mmlu_s{k:02d}": ("finished" if k < done else "waiting") for k in range(58)}
    return {"suite": "podium v3", "tasks_total": 58, "tasks_done": done, "current_task": current, "tasks": tasks,
            "requests": {"done": 10, "total": 40} if current else None}  # fmt: skip


@pytest.fixture
def site(transactional_db, start_asgi_server, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    owner = bd.user("owner@example.org")
    for k in range(3):
        bd.entry(owner, f"acme/other-{k}", gsm8k=bd.pattern(20, 6 + 5 * k), mmlu={"anatomy": bd.pattern(12, 4 + 2 * k)})
    live = bd.entry(owner, "acme/live", gsm8k=bd.pattern(20, 13), mmlu={"anatomy": bd.pattern(12, 7)},
                    status="RUNNING")  # fmt: skip
    Submission.objects.filter(pk=live.pk).update(progress=progress(3, "mmlu_s03"), started_at=timezone.now())
    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
                    DEBUG="false", SECRET_KEY="submission-page-browser-test-key")  # fmt: skip
    base = f"http://127.0.0.1:{start_asgi_server(env=env)}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield {"base": base, "page": browser.new_page(), "live": live}
        from django.db import connections

        connections.close_all()
        browser.close()


def test_progress_updates_in_place_then_the_finished_page_links_to_the_board_row(site):
    page, live, base = site["page"], site["live"], site["base"]
    page.goto(f"{base}/leaderboard/submissions/{live.public_id}/")
    assert "3 of 58 tasks done (podium v3)" in page.inner_text("#run-tasks")
    assert page.inner_text("#run-stage") == "Evaluating mmlu_s03."
    page.evaluate("window.sameDocument = true")  # gone if the page were loaded again

    Submission.objects.filter(pk=live.pk).update(progress=progress(58, "memorisation probe: gsm8k"))
    page.wait_for_function("document.getElementById('run-tasks').textContent.startsWith('58 of 58')", timeout=30_000)
    assert page.evaluate("window.sameDocument") is True
    assert page.evaluate("[document.getElementById('run-progress').value, document.getElementById('run-progress').max]") == [58, 58]
    assert page.inner_text("#run-stage") == "Memorisation probe on gsm8k (a contamination check)."
    assert "gsm8k" in page.inner_text("#run-requests")

    Submission.objects.filter(pk=live.pk).update(status="FINISHED", finished_at=timezone.now())
    page.wait_for_selector("#board-summary", timeout=30_000)  # settled: the page loaded once more
    row = {r["public_id"]: r for r in board_table()["rows"]}[live.public_id]
    summary = page.inner_text("#board-summary")
    average = re.search(r"Board average ([\d.]+) \(95% interval ([\d.]+)–([\d.]+)\)", summary)
    assert average, summary
    assert [float(x) for x in average.groups()] == [
        pytest.approx(round(row["avg"][k], 1), abs=1e-4) for k in ("value", "ci_low", "ci_high")
    ]
    assert f"Rank {row['rank']}" in summary and "of 4 on the board" in summary
    # The per-task tables are folded away: one closed group per benchmark, opened on a click.
    assert page.evaluate("[...document.querySelectorAll('details.benchmark-group')].map(d => d.open)") == [False, False]
    assert not page.is_visible("details.benchmark-group table")
    page.click("details[data-benchmark=mmlu] > summary")
    assert page.is_visible("details[data-benchmark=mmlu] table")

    page.click("#board-row-link")
    page.wait_for_url(re.compile(r"/leaderboard/#entry-"))
    assert page.evaluate("document.querySelector(':target').dataset.submission") == live.public_id
    assert page.inner_text(f"#entry-{live.public_id} td.model a") == "acme/live"
