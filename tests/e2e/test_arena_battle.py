"""A whole battle in headless Chromium: real ASGI server (daphne), real Celery worker, Redis for the
broker and the channel layer, PostgreSQL, and the demo's real SmolLM2 models."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.db import connection

from arena.catalogue.sync import catalogue_parse, catalogue_sync
from arena.models import Battle, BattleHold, LanguageModel, Turn, Vote
from tests.conftest import REPO_ROOT, clean_env, database_url_of
from tests.e2e.arena_page import VOTES_ENABLED, battle_ask

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The demo's three models, with shorter answers so the test stays quick on two cores.
MAX_NEW_TOKENS = 40


def demo_site(redis_url, smollm2_dir, *, max_new_tokens: int, queue_suffix: str = "") -> tuple[list, dict]:
    """The demo's three models in the catalogue (shorter answers, optionally on generate.<suffix>) and
    the environment of the site's processes: (catalogue entries, env)."""
    entries = catalogue_parse(REPO_ROOT / "config" / "arena_models.demo.yaml")
    for entry in entries:
        entry["generation"]["max_new_tokens"] = max_new_tokens
        entry["queue_suffix"] = queue_suffix
    catalogue_sync(entries)
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        REDIS_URL=redis_url,
        PODIUM_MODELS_DIR=str(smollm2_dir.parent),
        DEBUG="false",
        SECRET_KEY="e2e-test-secret-key",
    )
    return entries, env


@pytest.fixture
def arena_site(transactional_db, redis_url, smollm2_dir, start_worker, start_asgi_server, processes):
    entries, env = demo_site(redis_url, smollm2_dir, max_new_tokens=MAX_NEW_TOKENS)
    worker = start_worker(env=env, queues="generate,default", concurrency=2)
    port = start_asgi_server(env=env)
    yield {"base": f"http://127.0.0.1:{port}", "names": [e["name"] for e in entries], "worker": worker}


def test_a_voter_plays_a_whole_battle(arena_site, browser, processes):
    base, names = arena_site["base"], arena_site["names"]
    page = browser.new_page()
    responses, frames, dialogs = [], [], []
    page.on("response", lambda response: responses.append(response))
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))

    # The terms come first: Send stays off until the voter agrees, and the page says why.
    page.goto(f"{base}/arena/")
    assert page.is_visible("#terms") and "what is published" in page.inner_text("#terms").lower()
    page.fill("#prompt", "Hello?")
    assert page.is_disabled("#send") and "agree" in page.inner_text("#status")
    assert "0 hours" not in page.inner_text("#terms")
    assert Battle.objects.count() == 0
    battle_ask(page, base, "Give me three tips for learning to cook.", timeout_s=240,
               log=lambda: processes.log_of(arena_site["worker"]))  # fmt: skip
    assert not page.is_visible("#terms")
    answers = [page.inner_text(f"#pane-{side} .answer") for side in ("a", "b")]
    assert all(answer.strip() for answer in answers), answers
    assert page.inner_text("#pane-a h2") == "Model A" and page.inner_text("#pane-b h2") == "Model B"

    # Anonymity: every byte the browser received before the vote, scanned for every model name.
    received = [page.content()]
    for response in responses:
        try:
            received.append(response.body().decode("utf-8", "replace"))
        except Exception:  # a response without a body (redirects)
            continue
    received += [frame if isinstance(frame, str) else frame.decode("utf-8", "replace") for frame in frames]
    assert len(frames) > 4, "the answers should have streamed in several messages"
    everything = "\n".join(received).lower()
    for name in names:
        assert name.lower() not in everything, f"{name} was sent to the browser before the vote"
    assert "smollm2" not in everything and "hf" not in json.dumps([f for f in frames if isinstance(f, str)][:3])

    page.click("button.vote[data-winner='model_a']")
    page.wait_for_selector("#reveal:not([hidden])")
    reveal = page.inner_text("#reveal")
    shown = [name for name in names if name in reveal]
    assert len(shown) == 2, reveal
    assert page.inner_text("#pane-a h2").startswith("Model A: ")
    vote = Vote.objects.get()
    assert vote.consent_version == settings.ARENA_TERMS_VERSION and vote.consent_at is not None
    assert vote.winner == "model_a" and vote.model_a.name in page.inner_text("#pane-a h2")

    # Voting again is refused; the buttons stay disabled after the vote.
    assert page.locator("button.vote:enabled").count() == 0
    assert not dialogs


def test_model_output_is_rendered_as_text_not_markup(arena_site, browser):
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{arena_site['base']}/arena/")
    hostile = "# Hi\n<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n**bold** [x](javascript:alert(3))"
    page.evaluate(
        "(text) => { const d = document.createElement('div'); d.id = 'probe';"
        " d.innerHTML = window.podiumArena.renderMarkdown(text); document.body.appendChild(d); }",
        hostile,
    )
    page.wait_for_timeout(300)
    assert page.locator("#probe script, #probe img, #probe a").count() == 0
    assert page.locator("#probe strong").inner_text() == "bold"
    assert "<script>alert(1)</script>" in page.inner_text("#probe")
    # A numbered list broken by blank lines (as SmolLM2 writes them) keeps its numbers.
    numbered = page.evaluate("() => window.podiumArena.renderMarkdown('1. Start small.\\n\\n2. Practise daily.')")
    assert numbered == '<ol start="1"><li>Start small.</li></ol><ol start="2"><li>Practise daily.</li></ol>', numbered
    assert not dialogs


QUEUED = "later"  # a generation queue no worker serves until the test starts one
CUT_AT = 12


@pytest.fixture
def queued_site(transactional_db, redis_url, smollm2_dir, start_asgi_server, processes):
    _, env = demo_site(redis_url, smollm2_dir, max_new_tokens=CUT_AT, queue_suffix=QUEUED)  # a story is cut
    port = start_asgi_server(env=env)
    yield {"base": f"http://127.0.0.1:{port}", "env": env}


def test_a_waiting_voter_is_told_the_queue_then_the_answers_stream(queued_site, browser, start_worker, processes):
    """Queued (with the answers ahead), next in line, then answering: the page tells the truth while a
    battle waits for a worker; the report dialog holds the battle back."""
    base = queued_site["base"]
    models = list(LanguageModel.objects.filter(in_arena=True)[:2])
    earlier = Battle.objects.create(model_a=models[0], model_b=models[1], session_hash="other", ip_hash="other")
    earlier_turn = Turn.objects.create(battle=earlier, index=0, prompt="an earlier voter's prompt")

    page = browser.new_page()
    page.goto(f"{base}/arena/")
    assert page.is_disabled("#send")
    page.click("#agree")
    page.wait_for_selector("#terms", state="hidden")
    page.fill("#prompt", "Write a long story about a dragon who learns to bake bread.")
    page.click("#send")
    page.wait_for_function("document.getElementById('status').textContent.includes('2 answers ahead')")
    notes = [page.inner_text(f"#pane-{side} .queue-note") for side in ("a", "b")]
    assert notes == ["Queued: 2 answers ahead of it."] * 2, notes
    assert page.locator(".answer.streaming").count() == 0  # no blinking cursor while nothing is answered

    # The earlier battle's sides are taken by a worker: this one is next (the page asks every 2 s).
    Turn.objects.filter(pk=earlier_turn.pk).update(status_a="streaming", status_b="streaming")
    page.wait_for_function("document.getElementById('status').textContent.includes('next in line')")

    env = {**queued_site["env"], "ARENA_WORKER_PRELOAD": "true"}  # as make demo's arena worker
    worker = start_worker(env=env, queues=f"generate.{QUEUED}", concurrency=2, name="arena")
    try:
        page.wait_for_function(VOTES_ENABLED, timeout=240_000)
    except Exception:
        raise AssertionError(processes.log_of(worker)) from None
    assert all(page.inner_text(f"#pane-{side} .answer").strip() for side in ("a", "b"))
    assert page.locator(".queue-note").count() == 0
    # Both answers stopped at the token limit: the database says so, and the page marks each one.
    turn = Turn.objects.exclude(pk=earlier_turn.pk).get()
    assert turn.cut_a and turn.cut_b
    assert [page.inner_text(f"#pane-{side} .cut-mark") for side in ("a", "b")] == ["(cut at the token limit)"] * 2
    preloaded = LanguageModel.objects.filter(in_arena=True, retired_at__isnull=True).count()
    assert processes.log_of(worker).count(f"preloaded {preloaded} arena models for generate.{QUEUED}") == 2  # each slot

    # Report: an in-page dialog, not the browser's prompt; an empty reason is refused in place.
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.click("#report")
    page.wait_for_selector("#report-dialog[open]")
    page.click("#report-form button[type=submit]")
    assert page.is_visible("#report-dialog[open]")  # the textarea's own check: nothing was sent
    page.fill("#report-reason", "An answer repeats my e-mail address.")
    page.click("#report-form button[type=submit]")
    page.wait_for_function("document.getElementById('status').textContent.includes('Reported')")
    assert not page.is_visible("#report-dialog[open]") and page.is_disabled("#report")
    battle = Battle.objects.exclude(pk=earlier.pk).get()
    assert BattleHold.objects.get(battle=battle).reason == "report" and not dialogs
