"""A tagging worker SIGKILLed between batches: nothing it stored is lost or recomputed, and the next run
(here sent again, as the next vote's or beat's would be) tags every remaining vote at once (no lock is
left behind to wait for).

Real worker processes on a Redis of the test's own, the test's PostgreSQL and the real SmolLM2 as the
tagger. The kill lands at a known point: once the first batch's tags are in the database.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import yaml
from celery import Celery
from django.db import connection

from arena.models import PromptTag, Turn, VoteCategorization
from tests.arena.vote_data import votes_create
from tests.conftest import clean_env, database_url_of
from tests.evalcore.categories.conftest import MIXED, PROMPTS
from tests.leaderboard.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VOTES = 24  # distinct prompts, four to a batch: six batches, one stored before the kill


def send_tagging(redis_url: str) -> None:
    sender = Celery("podium-test-sender", broker=redis_url, set_as_current=False)
    try:
        sender.send_task("arena.tasks.categories_tag", queue="judge")
    finally:
        sender.close()


@pytest.mark.django_db(transaction=True)
def test_a_killed_tagging_worker_loses_nothing_and_the_next_run_finishes(
    smollm2_dir, private_redis, start_worker, processes, tmp_path
):
    votes = votes_create({"a": 0.3, "b": 0.0, "c": -0.3}, VOTES, seed=5)
    Turn.objects.bulk_create(
        Turn(battle_id=v.battle_id, index=0, prompt=f"{PROMPTS[k % len(PROMPTS)]} (variant {k})",
             status_a=Turn.SideStatus.DONE, status_b=Turn.SideStatus.DONE)
        for k, v in enumerate(votes)
    )  # fmt: skip
    protocol = tmp_path / "mentions-code.yaml"
    protocol.write_text(yaml.safe_dump(MIXED), encoding="utf-8")
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        REDIS_URL=private_redis.url,
        PODIUM_MODELS_DIR=str(smollm2_dir.parent),
        PODIUM_VAR_DIR=str(tmp_path / "var"),
        DEBUG="false",
        ARENA_CATEGORY_TAGGER=json.dumps(
            {"backend": "hf", "model_args": {"path": smollm2_dir.name, "dtype": "float32"}}
        ),
        ARENA_CATEGORY_PROTOCOLS=f"{protocol},coding",
        ARENA_CATEGORY_BATCH="4",
    )
    first = start_worker(env=env, queues="judge", name="tagger")
    send_tagging(private_redis.url)
    wait_until(lambda: PromptTag.objects.count() >= 8, timeout=300, what="the first batch's tags",
               log=lambda: processes.log_of(first))  # fmt: skip
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)

    kept = dict(PromptTag.objects.values_list("id", "created_at"))
    assert 8 <= len(kept) < 2 * VOTES, "the worker finished before the kill: the test proves nothing"
    assert VoteCategorization.objects.filter(status="pending").exists()

    second = start_worker(env=env, queues="judge", name="tagger-again")
    send_tagging(private_redis.url)
    wait_until(lambda: VoteCategorization.objects.filter(status="done").count() == VOTES, timeout=600,
               what="every vote tagged", log=lambda: processes.log_of(second))  # fmt: skip
    tags = PromptTag.objects.all()
    assert tags.count() == 2 * VOTES  # one tag per prompt and protocol: nothing tagged twice
    assert {pk: created for pk, created in tags.values_list("id", "created_at") if pk in kept} == kept
    assert set(tags.values_list("category", flat=True)) == {"mentions_code", "coding"}
    assert not VoteCategorization.objects.exclude(status="done").exists()
    # The batch the kill interrupted was claimed twice; no vote was claimed more often.
    assert max(VoteCategorization.objects.values_list("attempts", flat=True)) <= 2
