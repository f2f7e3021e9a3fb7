"""The judge pages in headless Chromium through daphne, on judgments the real SmolLM2 made: from the
board's judge cell to the model's judgments (question, both answers, both verdicts), and the judge's
protocol page with its audit saying plainly that a 4-pair audit cannot tell it from chance."""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlsplit

import pytest
from django.db import connection

import leaderboard.tasks  # noqa: F401 - registers the tasks, so eager sends run them in place
from leaderboard.judging.services import (
    judge_audit_request,
    judge_run_request,
    judge_runs_request_for_submission,
)
from leaderboard.models import JudgeRun, Submission
from tests.conftest import celery_eager_tasks, clean_env, database_url_of
from tests.leaderboard import board_data as bd
from tests.leaderboard.judging_data import INSTRUCTIONS, judge_setup

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture
def judged_site(transactional_db, smollm2_dir, start_asgi_server):
    setup = judge_setup(smollm2_dir)
    sub = bd.entry(bd.user("owner@example.org"), "acme/smol-sub", gsm8k=bd.pattern(20, 12))
    Submission.objects.filter(pk=sub.pk).update(storage_path=str(smollm2_dir), precision="float32")
    with celery_eager_tasks():  # each request commits at once here: its task runs in place
        judge_runs_request_for_submission(sub.pk)
        judge_run_request(setup["config"], setup["terse"])
        judge_audit_request(setup["config"], limit=4)
    assert JudgeRun.objects.filter(status="FINISHED").count() == 2, list(JudgeRun.objects.values("status", "failure_reason"))
    env = clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
                    DEBUG="false", SECRET_KEY="judge-pages-browser-test-key")  # fmt: skip
    return {**setup, "sub": sub, "url": f"http://127.0.0.1:{start_asgi_server(env=env)}"}


@pytest.fixture
def browser(judged_site, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def test_from_the_board_to_the_judgments_and_the_judge_page(judged_site, browser):
    site, sub = judged_site["url"], judged_site["sub"]
    page = browser.new_page()
    hosts, errors, failed = set(), [], []
    page.on("request", lambda request: hosts.add(urlsplit(request.url).hostname))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)

    page.goto(f"{site}/leaderboard/")
    cell = page.locator(f'tr[data-submission="{sub.public_id}"] td.judge')
    assert cell.locator(".ci").count() == 1  # the judge score carries its interval
    cell.locator("a").click()
    page.wait_for_selector("article.judgment")
    assert page.locator("article.judgment").count() == len(INSTRUCTIONS)
    first = page.locator("article.judgment").first
    assert first.locator("pre.question").inner_text().strip() == INSTRUCTIONS[0]
    assert first.locator(".answers pre").count() == 2 and all(
        t.strip() for t in first.locator(".answers pre").all_inner_texts()
    )  # both answers
    assert first.locator("tr[data-order='ab'] td.num").inner_text().startswith("0.")
    assert first.locator("tr[data-order='ba'] td.num").inner_text().startswith("0.")
    assert "P(acme/smol-sub better)" in first.locator(".preference").inner_text()

    page.locator("nav a", has_text="Judges").click()
    page.locator("#judges a", has_text="smol-judge").click()
    page.wait_for_selector("#judge-facts")
    assert page.locator("#judge-chance").is_visible()
    assert "no better than chance" in page.locator("#judge-chance").inner_text()
    assert page.locator("#judge-audit tr[data-figure='first_position_rate']").count() == 1
    assert "{answer_a}" in page.locator("#judge-template").inner_text()
    assert len(page.locator("#judge-key").inner_text()) > 20
    assert page.locator("#judge-scores tbody tr").count() == 3  # two judged models and the baseline
    assert hosts == {"127.0.0.1"}, hosts
    assert not errors
    assert [url for url in failed if not url.endswith("/favicon.ico")] == []
