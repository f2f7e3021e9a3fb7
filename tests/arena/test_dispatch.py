"""Enqueueing by name: the names arena.play.dispatch sends are the tasks arena.tasks registers, on the queues
they declare; through a real broker and real workers, a battle's two sides land on their models'
generation queues."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import redis
from django.db import connection

from arena.models import Battle, LanguageModel, Turn
from arena.play import dispatch
from tests.conftest import clean_env, database_url_of, run_manage
from workers.celery import app
from workers.queues import DEFAULT, GENERATE

SMALL = {"max_new_tokens": 8, "temperature": 0.0}


def test_every_name_dispatch_sends_is_a_task_declaring_that_queue():
    app.loader.import_default_modules()  # what a worker does at start: autodiscover every tasks.py
    registered = app.tasks
    assert registered[dispatch.BATTLE_GENERATE].declared_queue == GENERATE
    assert registered[dispatch.RATINGS_REFIT].declared_queue == DEFAULT
    assert registered[dispatch.RATINGS_LIVE].declared_queue == DEFAULT
    assert registered[dispatch.RELEASE_BUILD].declared_queue == DEFAULT
    beat = app.conf.beat_schedule
    assert {entry["task"] for entry in beat.values()} <= set(registered), "the beat names a task nobody defines"


def wait_for_side(turn: Turn, side: str, *, timeout: float, log) -> Turn:
    """Poll the database (the worker's only output) until ``side`` of ``turn`` finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turn.refresh_from_db()
        if getattr(turn, f"status_{side}") in (Turn.SideStatus.DONE, Turn.SideStatus.ERROR):
            return turn
        time.sleep(0.5)
    raise AssertionError(f"side {side} not finished within {timeout:.0f} s\n{log()}")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_web_process_sends_each_side_to_its_models_queue(redis_url, smollm2_dir, start_worker, processes, tmp_path):
    """The web side (``manage.py shell`` here) starts a battle; a worker serving only ``generate``
    answers the shared model's side, the other side waits on ``generate.<suffix>`` until its own
    worker comes up."""
    suffix = f"own-{uuid.uuid4().hex[:8]}"
    own_queue = f"generate.{suffix}"
    args = {"path": smollm2_dir.name}
    LanguageModel.objects.create(name="shared", backend="hf", model_args=args, generation=SMALL, in_arena=True)
    LanguageModel.objects.create(
        name="owned", backend="hf", model_args=args, generation=SMALL, in_arena=True, queue_suffix=suffix
    )
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=redis_url,
        PODIUM_VAR_DIR=str(tmp_path),
        PODIUM_MODELS_DIR=str(smollm2_dir.parent),
    )
    shared_worker = start_worker(env=env, queues=GENERATE, name="shared")
    script = (
        "from arena.play.battles import battle_create; "
        "print(battle_create(prompt='Name a colour.', session_hash='s', ip_hash='i').public_id)"
    )
    result = run_manage("shell", "-c", script, env=env, timeout=150)
    assert result.returncode == 0, result.stderr
    battle = Battle.objects.select_related("model_a", "model_b").get(public_id=result.stdout.split()[-1])
    turn = battle.turns.get()
    shared_side = "a" if battle.model_a.name == "shared" else "b"
    owned_side = "b" if shared_side == "a" else "a"

    turn = wait_for_side(turn, shared_side, timeout=240, log=lambda: processes.log_of(shared_worker))
    assert getattr(turn, f"status_{shared_side}") == Turn.SideStatus.DONE, processes.log_of(shared_worker)
    assert getattr(turn, f"status_{owned_side}") == Turn.SideStatus.PENDING
    broker = redis.Redis.from_url(redis_url)
    try:
        waiting = [json.loads(raw) for raw in broker.lrange(own_queue, 0, -1)]
    finally:
        broker.close()
    assert [m["headers"]["task"] for m in waiting] == ["arena.tasks.battle_generate"]
    assert waiting[0]["headers"]["argsrepr"] == repr((turn.pk, owned_side))

    own_worker = start_worker(env=env, queues=own_queue, name="own")
    turn = wait_for_side(turn, owned_side, timeout=240, log=lambda: processes.log_of(own_worker))
    assert getattr(turn, f"status_{owned_side}") == Turn.SideStatus.DONE, processes.log_of(own_worker)
    assert getattr(turn, f"answer_{owned_side}").strip()
