"""Issue 48 in the browser: a voter types a cloud credential, a password and their full name into a real
battle (Chromium, daphne, a Celery worker, the demo's SmolLM2 models asked to repeat it all), votes, and
the battle is published. Neither the credential nor the name is in the battles API (list and detail, as
the browser loads them), the data release's Parquet, or the staff page that checks the prompt tagger."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from arena.catalogue.sync import catalogue_parse, catalogue_sync
from arena.categories import tagger as categories
from arena.models import Battle, PromptTag, Turn, VoteCategorization
from arena.tasks import ratings_refit
from evalcore.categories import prompt_sha256
from tests.conftest import REPO_ROOT, clean_env, database_url_of
from tests.e2e.arena_page import battle_ask

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEY_ID, SECRET = "AKIAQX7V3MBD2KRW6YTN", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PASSWORD, NAME = "Lindqvist-Falcon-77", "Ingrid Lindqvist"
PROMPT = (f"Repeat this back to me word for word: My name is {NAME}. My AWS key id is {KEY_ID} and my "
          f"secret access key is {SECRET}; my password is {PASSWORD}.")  # fmt: skip
PIECES = (KEY_ID, SECRET, SECRET[:20], PASSWORD, NAME, "Lindqvist")
STAFF_PASSWORD = "a-long-passphrase-48"


@pytest.fixture
def site(transactional_db, redis_url, smollm2_dir, start_worker, start_asgi_server, processes, settings):
    entries = catalogue_parse(REPO_ROOT / "config" / "arena_models.demo.yaml")
    for entry in entries:
        entry["generation"]["max_new_tokens"] = 60
    catalogue_sync(entries)
    settings.ARENA_PUBLISH_DELAY_S = 0  # this process: the refit, the release
    settings.ARENA_REFIT_MIN_VOTES = 1
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection), REDIS_URL=redis_url,
        PODIUM_MODELS_DIR=str(smollm2_dir.parent), DEBUG="false", SECRET_KEY="e2e-redaction-key",
        ARENA_PUBLISH_DELAY_S="0", ARENA_REFIT_MIN_VOTES="1",
    )  # fmt: skip
    worker = start_worker(env=env, queues="generate,default", concurrency=2)
    return {"base": f"http://127.0.0.1:{start_asgi_server(env=env)}", "worker": worker}


def test_a_typed_credential_and_name_are_published_nowhere(site, browser, processes, tmp_path, settings):
    base = site["base"]
    voter = browser.new_page()
    battle_ask(voter, base, PROMPT, timeout_s=240, log=lambda: processes.log_of(site["worker"]))
    voter.click("button.vote[data-winner='model_a']")
    voter.wait_for_selector("#reveal:not([hidden])")
    battle = Battle.objects.get()
    turn = Turn.objects.get(battle=battle)
    assert turn.prompt == PROMPT  # stored as typed
    echoed = [piece for piece in PIECES if piece in turn.answer_a + turn.answer_b]

    ratings_refit()  # publishes: the snapshot covers the vote, and stores the redaction
    assert Turn.objects.get(pk=turn.pk).redacted["found"].get("SECRET", 0) >= 3

    seen = {}
    for path in ("/api/battles/?limit=100", f"/api/battles/{battle.public_id.hex}/"):
        response = voter.goto(f"{base}{path}")
        assert response.status == 200
        seen[path] = response.text()
    assert battle.public_id.hex in seen["/api/battles/?limit=100"]
    assert "&lt;SECRET&gt;" in voter.content() or "<SECRET>" in seen[path]

    call_command("arena_release", "--out", str(tmp_path))
    (parquet,) = tmp_path.glob("*/data/battles.parquet")
    seen["release"] = str(pq.read_table(parquet).to_pylist())

    # The staff page where the prompt tagger is checked shows the prompt as the public sees it.
    protocol = categories.category_protocols()[0]
    digest = prompt_sha256(PROMPT)
    VoteCategorization.objects.create(vote=battle.vote, prompt_sha256=digest, status="done")
    PromptTag.objects.create(prompt_sha256=digest, category=protocol.category, protocol=protocol.name,
                             protocol_version=protocol.version, protocol_sha256=protocol.sha256, tagger="hf:e2e",
                             tagger_name=categories.tagger_name(), value=True, score=1)  # fmt: skip
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's (dev settings)
    get_user_model().objects.create_user("staff@example.org", "staff@example.org", STAFF_PASSWORD, is_staff=True)
    staff = browser.new_context().new_page()
    staff.goto(f"{base}/leaderboard/accounts/login/")
    staff.fill("#id_username", "staff@example.org")
    staff.fill("#id_password", STAFF_PASSWORD)
    staff.click("form.account button[type=submit]")
    staff.wait_for_url(lambda url: "/accounts/login/" not in url)
    staff.goto(f"{base}/leaderboard/review/categories/?category={protocol.category}&seed=1")
    page = staff.content()
    assert "Repeat this back to me" in page, page[:2000]
    seen["staff"] = page

    for where, text in seen.items():
        for piece in PIECES:
            assert piece not in text, (where, piece, echoed)
