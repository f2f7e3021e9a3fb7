"""Observability with the real services: /metrics adds up the web and worker processes' samples, and a
request id given to the battle view reaches the worker's JSON log lines (docs/operations.md)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
import redis
from django.db import connection
from django.test import Client, override_settings

from arena.catalogue.sync import catalogue_parse, catalogue_sync
from tests.arena_terms import agree
from tests.conftest import REPO_ROOT, clean_env, database_url_of
from tests.leaderboard.polling import wait_for_row

pytestmark = [pytest.mark.slow]

TRACE = "trace-battle-0042"


def _sample(text: str, name: str, **labels) -> float:
    """The value of one sample in a Prometheus text exposition (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(rf"{re.escape(name)}(?:\{{(.*)\}})? (\S+)", line)
        if match and all(part in (match.group(1) or "").split(",") for part in wanted.split(",") if part):
            total += float(match.group(2))
    return total


@pytest.fixture
def observed_site(transactional_db, redis_url, smollm2_dir, start_worker, start_asgi_server, processes, tmp_path):
    entries = catalogue_parse(REPO_ROOT / "config" / "arena_models.demo.yaml")
    for entry in entries:
        entry["generation"]["max_new_tokens"] = 6
    catalogue_sync(entries)
    redis.Redis.from_url(redis_url).flushdb()  # no task an earlier run left in this broker (a delayed refit)
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev",
        DATABASE_URL=database_url_of(connection),
        REDIS_URL=redis_url,
        PODIUM_MODELS_DIR=str(smollm2_dir.parent),
        DEBUG="false",
        SECRET_KEY="observability-test-secret-key",
        PODIUM_LOG_FORMAT="json",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        PODIUM_METRICS_DIR=str(tmp_path / "metrics"),
        METRICS_TOKEN="scrape-token-1",
    )
    (tmp_path / "metrics").mkdir()
    worker = start_worker(env=env, queues="generate,default", concurrency=2)
    port = start_asgi_server(env=env)
    yield {"base": f"http://127.0.0.1:{port}", "worker": worker}


def _battle_played(client: httpx.Client, worker_log) -> tuple[str, bool]:
    client.get("/arena/").raise_for_status()
    csrf = {"X-CSRFToken": client.cookies["csrftoken"], "X-Request-ID": TRACE, "Referer": str(client.base_url)}
    agree(client, headers=csrf)
    started = client.post("/arena/battles/", data={"prompt": "Name a colour."}, headers=csrf)
    assert started.status_code == 201, started.text
    assert started.headers["X-Request-ID"] == TRACE
    battle = started.json()["battle"]
    wait_for_row(
        lambda: client.get(f"/arena/battles/{battle}/").json()["turns"][0],
        lambda sides: all(sides[side]["status"] in {"done", "error"} for side in ("a", "b")),
        timeout=240, what="the battle's two answers", log=worker_log,
    )  # fmt: skip
    voted = client.post(f"/arena/battles/{battle}/vote/", data={"winner": "tie"}, headers=csrf)
    assert voted.status_code == 201, voted.text
    return battle, voted.json()["counted"]


def test_metrics_and_request_id_follow_a_battle(observed_site, processes):
    base, worker = observed_site["base"], observed_site["worker"]
    with httpx.Client(base_url=base, timeout=30) as client:
        battle, counted = _battle_played(client, lambda: processes.log_of(worker))
        # The vote asked for a live point fit (arena.ratings.live) on the default queue: the worker ran it. Wait for
        # a fit that covers the vote (high_water): a fit from before it (a refit's follow-up, a task another
        # test left in the broker) is not the one this vote asked for.
        live = wait_for_row(
            lambda: client.get("/api/ratings/live/"),
            lambda answer: answer.status_code == 200 and answer.json()["high_water"] >= 1,
            timeout=60, what="the live point fit", log=lambda: processes.log_of(worker)[-2000:],
        )  # fmt: skip
        # A sampled answer (temperature 0.9, no seed) may name its model: the vote is kept but not rated.
        assert live.json()["vote_count"] == int(counted) and live.json()["fitted_at"]

        refused = client.get("/metrics")
        assert refused.status_code == 403 and "token" in refused.json()["detail"]
        wrong = client.get("/metrics", headers={"Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 403
        scraped = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-1"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    # The vote was counted by the web process; the two sides' latencies by the worker's processes.
    assert _sample(text, "podium_votes_total") == 1
    assert _sample(text, "podium_battle_side_seconds_count", side="a") == 1
    assert _sample(text, "podium_battle_side_seconds_count", side="b") == 1
    assert _sample(text, "podium_task_seconds_count", task="arena.tasks.battle_generate") == 2
    assert _sample(text, "podium_live_fit_seconds_count") >= 1
    for queue in ("default", "generate", "evaluate", "judge"):
        assert re.search(rf'^podium_queue_depth{{queue="{queue}"}} (\d+)\.0$', text, re.M), text[-800:]

    # The worker's log lines about this battle are JSON and carry the id the view was given.
    lines = [json.loads(line) for line in processes.log_of(worker).splitlines() if line.startswith("{")]
    about_battle = [entry for entry in lines if battle in entry["message"]]
    assert len(about_battle) >= 2, lines[-10:]
    assert {entry["request_id"] for entry in about_battle} == {TRACE}


@pytest.mark.parametrize(
    "header",
    ["", "x" * 65, "bad id with spaces", "<script>", "a\u00e9b", "../../etc"],
)
def test_hostile_request_ids_are_replaced(db, header):
    response = Client(HTTP_HOST="127.0.0.1").get("/healthz", HTTP_X_REQUEST_ID=header)
    assigned = response["X-Request-ID"]
    assert assigned != header and re.fullmatch(r"[0-9a-f]{32}", assigned)


@override_settings(METRICS_TOKEN="")
def test_metrics_without_a_token_answer_loopback_only(db):
    assert Client(HTTP_HOST="127.0.0.1").get("/metrics").status_code == 200
    refused = Client(HTTP_HOST="127.0.0.1").get("/metrics", REMOTE_ADDR="203.0.113.9")
    assert refused.status_code == 403
    assert Client(HTTP_HOST="127.0.0.1").post("/metrics").status_code == 405
