"""Redis (cache, sessions, channel layer and broker at once) killed in the middle of a battle and started
again, empty: the vote path keeps answering (rate limits counted in the database), a new battle gets a
503 with Retry-After while the broker is gone, the answer that was streaming is finished from the
database, a side whose queued task Redis lost is failed by the reaper, and the voter starts a new round.

Real daphne, a real worker with celery beat, the real SmolLM2, the test's PostgreSQL and a Redis of
the test's own (the suite's shared one is never restarted).
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from websockets.sync.client import connect as ws_connect

from arena.models import Battle, Turn, Vote
from arena.play import generation
from tests.arena_terms import agree
from tests.conftest import clean_env, database_url_of
from tests.faults.conftest import arena_models, wait_until
from tests.leaderboard.polling import wait_for_row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FINAL = ("done", "error")


class Socket:
    """A battle's WebSocket as the page holds it, read in a thread until the server closes it."""

    def __init__(self, port: int, public_id: str, cookies: str):
        self.ws = ws_connect(f"ws://127.0.0.1:{port}/ws/arena/battles/{public_id}/",
                             origin=f"http://127.0.0.1:{port}", additional_headers={"Cookie": cookies})  # fmt: skip
        self.ws.__enter__()  # a context manager held across the test; close() leaves it
        self.events: list[dict] = []
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                self.events.append(json.loads(self.ws.recv()))
        except Exception:  # noqa: BLE001 - a reset connection ends the reading like a close
            pass
        self.closed.set()

    def snapshot(self, timeout: float = 30) -> dict:
        """Ask for a snapshot (the page's "sync") and return it."""
        before = len(self.events)
        self.ws.send(json.dumps({"type": "sync"}))
        deadline = threading.Event()
        for _ in range(int(timeout * 10)):
            fresh = [e for e in self.events[before:] if e["type"] == "snapshot"]
            if fresh:
                return fresh[-1]
            deadline.wait(0.1)
        raise AssertionError(f"no snapshot within {timeout} s: {self.events[-5:]}")

    def close(self) -> None:
        self.ws.close()


def sides(turn: Turn) -> dict:
    """Each side as the voter's snapshot has it once the side ended (a waiting side also carries its
    place in the queue)."""
    return {side: {"text": getattr(turn, f"answer_{side}"), "status": getattr(turn, f"status_{side}"),
                   "cut": getattr(turn, f"cut_{side}")} for side in ("a", "b")}  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_redis_killed_mid_battle(smollm2_dir, private_redis, start_worker, start_asgi_server, processes,
                                 browser_at, tmp_path):  # fmt: skip
    arena_models(smollm2_dir, max_new_tokens=64)
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
        REDIS_URL=private_redis.url, PODIUM_MODELS_DIR=str(smollm2_dir.parent), PODIUM_VAR_DIR=str(tmp_path / "var"),
        DEBUG="false", SECRET_KEY="faults-test-secret-key", ARENA_SIDE_STALE_S="20", PODIUM_REAP_INTERVAL_S="1",
    )  # fmt: skip
    port = start_asgi_server(env=env)
    voter = browser_at(f"http://127.0.0.1:{port}")
    seen: list[int] = []

    def post(path, data):
        response = voter.post(path, data)
        seen.append(response.status_code)
        return response

    assert voter.get("/arena/").status_code == 200
    agree(voter)
    first = post("/arena/battles/", {"prompt": "What is the capital of France?"})
    assert first.status_code == 201, first.text
    first_id = first.json()["battle"]
    for side in ("a", "b"):  # answered already: this battle waits only for its vote
        generation.turn_side_finish(Turn.objects.get(battle__public_id=first_id).pk, side, "Paris.")
    worker = start_worker(env=env, queues="generate,default", name="worker", beat_schedule=tmp_path / "beat")
    wait_until(lambda: " ready." in processes.log_of(worker), timeout=120, what="the worker to start")
    second = post("/arena/battles/", {"prompt": "Count from 1 to 300, one number per line."})
    assert second.status_code == 201, second.text
    second_id = second.json()["battle"]
    turn = Turn.objects.get(battle__public_id=second_id)
    cookies = "; ".join(f"{k}={v}" for k, v in voter.http.cookies.items())
    socket = Socket(port, second_id, cookies)
    wait_for_row(lambda: Turn.objects.get(pk=turn.pk),
                 lambda t: "streaming" in (t.status_a, t.status_b) and (t.answer_a or t.answer_b),
                 timeout=240, what="a side to stream", log=lambda: processes.log_of(worker))  # fmt: skip

    private_redis.kill()
    # Redis is gone: the vote is still taken (limits counted in PostgreSQL), a new battle is refused
    # for now with Retry-After (nothing could answer it), and the battle's state still reads.
    vote = post(f"/arena/battles/{first_id}/vote/", {"winner": "model_a"})
    assert vote.status_code == 201, vote.text
    assert Vote.objects.filter(battle__public_id=first_id).count() == 1
    refused = post("/arena/battles/", {"prompt": "Another one"})
    assert refused.status_code == 503, refused.text
    assert int(refused.headers["Retry-After"]) > 0 and "try again" in refused.json()["error"]
    unqueued = Battle.objects.order_by("-pk").first()
    assert unqueued.status == "failed"  # nothing is left waiting for an answer that was never queued
    assert voter.get(f"/arena/battles/{second_id}/").status_code == 200

    private_redis.start()  # empty: the queued task of the other side is lost with it
    final = wait_for_row(lambda: Turn.objects.get(pk=turn.pk),
                         lambda t: t.status_a in FINAL and t.status_b in FINAL,
                         timeout=240, what="both sides to end", log=lambda: processes.log_of(worker))  # fmt: skip
    assert any(final_side["text"] for final_side in sides(final).values())
    # What the page shows after the outage is the database's state: by a sync on its socket if the
    # server kept it, else on the socket it opens again (arena.js reconnects while a side is busy).
    if socket.closed.wait(1):
        socket = Socket(port, second_id, cookies)
    snapshot = socket.snapshot()
    assert snapshot["turns"][0]["a"] == sides(final)["a"] and snapshot["turns"][0]["b"] == sides(final)["b"]
    socket.close()

    if final.status_a == final.status_b == "done":
        assert post(f"/arena/battles/{second_id}/vote/", {"winner": "tie"}).status_code == 201
    else:
        refusal = post(f"/arena/battles/{second_id}/vote/", {"winner": "tie"})
        assert refusal.status_code == 409 and "failed to answer" in refusal.json()["error"]
    again = post("/arena/battles/", {"prompt": "And now?"})
    assert again.status_code == 201, again.text
    assert 500 not in seen
