"""A generation worker SIGKILLed in the middle of an answer: the reaper fails the side within a bounded
time, so no battle shows "answering" forever, and the voter starts a new round.

Real worker processes on a Redis of the test's own (the killed worker's message stays unacknowledged
in it), the test's PostgreSQL and the real SmolLM2. The kill lands at a known point: once the side is
streaming and its first text is in the database.
"""

from __future__ import annotations

import os
import signal

import pytest
from celery import Celery
from django.db import connection
from django.test import Client

from arena.models import Battle, Turn
from arena.tasks import battle_generate
from tests.arena_terms import agree
from tests.conftest import clean_env, database_url_of
from tests.faults.conftest import arena_models
from tests.leaderboard.polling import wait_for_row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROMPT = "Count from 1 to 300, one number per line."


@pytest.mark.django_db(transaction=True)
def test_killed_generation_worker_leaves_a_failed_side_not_a_stuck_battle(
    smollm2_dir, private_redis, start_worker, processes, tmp_path, django_capture_on_commit_callbacks
):
    arena_models(smollm2_dir, max_new_tokens=400)
    voter = Client()
    voter.get("/arena/")
    agree(voter)
    with django_capture_on_commit_callbacks(execute=False):  # sent below through Redis, as the web would
        created = voter.post("/arena/battles/", {"prompt": PROMPT})
    assert created.status_code == 201, created.content
    battle = Battle.objects.get(public_id=created.json()["battle"])
    turn = battle.turns.get()
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        REDIS_URL=private_redis.url,
        PODIUM_MODELS_DIR=str(smollm2_dir.parent),
        PODIUM_VAR_DIR=str(tmp_path / "var"),
        DEBUG="false",
        ARENA_SIDE_STALE_S="5",
        PODIUM_REAP_INTERVAL_S="1",
    )
    generator = start_worker(env=env, queues="generate", name="generator")
    sender = Celery("podium-test-sender", broker=private_redis.url, set_as_current=False)
    try:
        for side in ("a", "b"):
            sender.send_task("arena.tasks.battle_generate", args=[turn.pk, side], queue="generate")
    finally:
        sender.close()
    streaming = wait_for_row(
        lambda: Turn.objects.get(pk=turn.pk),
        lambda t: "streaming" in (t.status_a, t.status_b) and (t.answer_a or t.answer_b),
        timeout=240, what="a side to stream its first text", log=lambda: processes.log_of(generator),
    )  # fmt: skip
    side = "a" if streaming.status_a == "streaming" else "b"
    os.killpg(generator.pid, signal.SIGKILL)
    generator.wait(timeout=10)
    partial = getattr(Turn.objects.get(pk=turn.pk), f"answer_{side}")

    # Nothing answers it now: still "streaming" until the reaper, run by celery beat on another worker.
    assert getattr(Turn.objects.get(pk=turn.pk), f"status_{side}") == "streaming"
    reaper = start_worker(env=env, queues="default", name="reaper", beat_schedule=tmp_path / "beat")
    failed = wait_for_row(
        lambda: Turn.objects.get(pk=turn.pk),
        lambda t: t.status_a == "error" and t.status_b == "error",
        timeout=120, what="the reaper to fail both sides", log=lambda: processes.log_of(reaper),
    )  # fmt: skip
    assert "no answer within 5 s" in getattr(failed, f"error_{side}")
    assert getattr(failed, f"answer_{side}").startswith(partial)  # the text it had is kept, not erased
    assert Battle.objects.get(pk=battle.pk).status == "failed"

    # The voter's page shows the failure; the vote is refused with a reason; a new round starts.
    state = voter.get(f"/arena/battles/{battle.public_id.hex}/").json()
    assert [t["a"]["status"] for t in state["turns"]] == ["error"]
    assert [t["b"]["status"] for t in state["turns"]] == ["error"]
    vote = voter.post(f"/arena/battles/{battle.public_id.hex}/vote/", {"winner": "model_a"})
    assert vote.status_code == 409 and "failed to answer" in vote.json()["error"]
    with django_capture_on_commit_callbacks(execute=False):
        assert voter.post("/arena/battles/", {"prompt": "Hello again"}).status_code == 201

    # The killed worker's message, delivered again later, finds the side over and changes nothing.
    assert battle_generate(turn.pk, side) == "already finished"
    assert getattr(Turn.objects.get(pk=turn.pk), f"status_{side}") == "error"
