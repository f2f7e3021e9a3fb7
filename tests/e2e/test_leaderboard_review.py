"""An admin in headless Chromium approves a flagged variant: an owner with four private finished
variants of one base model publishes a fifth, which waits in the review queue; the admin logs in,
approves it with a comment, and the entry appears on /leaderboard/ with its "best of K variants"
badge and the audit log on its page. Served by a real daphne against PostgreSQL."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from leaderboard.models import ReviewAction, Submission
from leaderboard.submissions.services import submission_publish
from tests.conftest import clean_env, database_url_of
from tests.leaderboard import board_data as bd

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
PASSWORD = "a-long-passphrase-42"  # board_data.user's


@pytest.fixture
def site(transactional_db, tmp_path, start_asgi_server):
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        PODIUM_VAR_DIR=str(tmp_path / "var"),
        LEADERBOARD_PRIVATE_VARIANTS_LIMIT="3",
        DEBUG="false",
        SECRET_KEY="e2e-test-secret-key",
    )
    return f"http://127.0.0.1:{start_asgi_server(env=env)}"


@pytest.fixture
def flagged_variant(transactional_db, settings):
    settings.LEADERBOARD_PRIVATE_VARIANTS_LIMIT = 3
    owner = bd.user("owner@example.org")
    for i in range(4):
        bd.entry(owner, f"acme/tune-{i}", gsm8k=bd.pattern(30, 12 + i), private=True, model_type="fine-tuned",
                 base_model="acme/base-1b")  # fmt: skip
    best = bd.entry(owner, "acme/tune-best", gsm8k=bd.pattern(30, 22), private=True, model_type="fine-tuned",
                    base_model="acme/base-1b")  # fmt: skip
    submission_publish(submission_id=best.pk, owner=owner)  # the owner publishes the best one
    best.refresh_from_db()
    assert best.review_state == "flagged" and "4 private variants of acme/base-1b" in best.review_reason
    # The server runs the dev settings, whose hashers do not include the test settings' fast MD5.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    bd.user("admin@example.org", staff=True)
    return best


def test_admin_approves_a_flagged_variant(site, flagged_variant, browser):
    base, best = site, flagged_variant
    page = browser.new_page()
    page.goto(f"{base}/leaderboard/")
    assert f'data-submission="{best.public_id}"' not in page.content()  # waiting for review: not on the board

    page.goto(f"{base}/leaderboard/review/")
    page.wait_for_url(re.compile(r".*/leaderboard/accounts/login/\?next=/leaderboard/review/$"))
    page.fill("#id_username", "admin@example.org")
    page.fill("#id_password", PASSWORD)
    page.click("form.account button[type=submit]")
    page.wait_for_url(f"{base}/leaderboard/review/")
    entry = page.locator(f'section.review[data-submission="{best.public_id}"]')
    assert "4 private variants of acme/base-1b evaluated (more than 3)" in entry.inner_text()

    entry.locator("button[value=approve]").click()  # no comment: refused, nothing recorded
    page.wait_for_selector("ul.errorlist")
    assert "A comment is required" in page.inner_text("main")
    assert not ReviewAction.objects.exists()

    page.fill(f"#id_comment_{best.pk}", "Owner disclosed the four private variants; approved with the badge.")
    page.click("button[value=approve]")
    page.wait_for_url(f"{base}/leaderboard/review/")
    assert "acme/tune-best: approve recorded." in page.inner_text("main")
    assert Submission.objects.get(pk=best.pk).review_state == "approved"

    page.goto(f"{base}/leaderboard/")
    row = page.locator(f'tr[data-submission="{best.public_id}"]')
    assert "acme/tune-best" in row.inner_text()
    assert re.search(r"best of 5 variants \(\+\d+\.\d expected\)", row.locator(".tag-bestof").inner_text())

    row.locator("a", has_text="acme/tune-best").first.click()
    page.wait_for_url(f"{base}/leaderboard/submissions/{best.public_id}/")
    log = page.locator("table.review-log").inner_text()
    assert "Approve" in log and "Owner disclosed the four private variants" in log
    assert "Approved" in page.inner_text(".review-state")
