"""PostgreSQL killed (``pg_ctl stop -m immediate``, as a crash) and started again during a stream of votes:
the voter's requests get 503 with Retry-After while it is down and are retried, and afterwards every vote
the voter saw accepted is a row, no battle has two, and nothing else was stored.

A cluster of the test's own (the suite's PostgreSQL is never restarted), served by a real daphne.
"""

from __future__ import annotations

import json
import threading

import httpx
import psycopg
import pytest
from django.db import connection

from tests.arena_terms import agree
from tests.conftest import clean_env, database_url_of, run_manage
from tests.faults.conftest import Browser

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BATTLES = 40


def seed_models(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as db:
        for name in ("model-north", "model-south"):
            db.execute(
                "INSERT INTO arena_languagemodel (name, family, backend, model_args, generation, system_prompt, weight,"
                " queue_suffix, in_arena, created_at, aliases, maker)"
                " VALUES (%s, %s, 'hf', '{}', '{}', '', 1, '', true, now(), '[]', '')",
                [name, name],
            )


class VoteStream(threading.Thread):
    """Votes on each battle in turn, as a patient client: a 503 (or a reset connection) is retried."""

    def __init__(self, browser: Browser, battles: list[str]):
        super().__init__(daemon=True)
        self.browser, self.battles = browser, battles
        self.accepted: set[str] = set()  # 201: the client saw its vote taken
        self.already: set[str] = set()  # 409 "already has a vote" after a retry: taken, reply lost
        self.unavailable = 0
        self.unexpected: list[str] = []
        self.down = threading.Event()  # set at the first 503
        self.quarter = threading.Event()  # a quarter of the battles voted: the test stops PostgreSQL...
        self.go_on = threading.Event()  # ...and lets the stream go on (however fast the machine is)

    def run(self) -> None:
        for n, public_id in enumerate(self.battles):
            if n == len(self.battles) // 4:
                self.quarter.set()
                self.go_on.wait(120)
            for _attempt in range(600):
                try:
                    response = self.browser.post(f"/arena/battles/{public_id}/vote/", {"winner": "model_a"})
                except httpx.TransportError:
                    continue
                if response.status_code == 201:
                    self.accepted.add(public_id)
                elif response.status_code == 409 and "already has a vote" in response.text:
                    self.already.add(public_id)
                elif response.status_code == 503 and int(response.headers.get("Retry-After", "0")) > 0:
                    self.unavailable += 1
                    self.down.set()
                    threading.Event().wait(0.2)  # shorter than Retry-After: the test has no time to lose
                    continue
                else:
                    self.unexpected.append(f"{response.status_code} {response.text[:200]}")
                break


@pytest.mark.django_db  # only to read the test database's schema: the votes go to a cluster of its own
def test_postgres_restarted_during_a_stream_of_votes(private_postgres, start_asgi_server, tmp_path):
    private_postgres.init("votes")
    dsn = private_postgres.url("votes")
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=dsn, PODIUM_VAR_DIR=str(tmp_path / "var"),
        DEBUG="false", SECRET_KEY="faults-test-secret-key",
        ARENA_BATTLES_PER_MINUTE="100000", ARENA_VOTES_PER_MINUTE="100000",
    )  # fmt: skip
    if not private_postgres.copy_schema(database_url_of(connection), "votes"):
        migrated = run_manage("migrate", "--no-input", env=env)
        assert migrated.returncode == 0, migrated.stderr
    seed_models(dsn)
    port = start_asgi_server(env=env)
    voter = Browser(f"http://127.0.0.1:{port}")
    assert voter.get("/arena/").status_code == 200
    agree(voter)
    battles = []
    for n in range(BATTLES):
        created = voter.post("/arena/battles/", {"prompt": f"Question {n}?"})
        assert created.status_code == 201, created.text
        battles.append(created.json()["battle"])
    with psycopg.connect(dsn, autocommit=True) as db:  # both answers in: every battle may be voted on
        db.execute("UPDATE arena_turn SET status_a = 'done', status_b = 'done', answer_a = 'Yes.', answer_b = 'No.'")

    stream = VoteStream(voter, battles)
    stream.start()
    assert stream.quarter.wait(120), "the vote stream did not get going"
    private_postgres.stop("immediate")
    stream.go_on.set()
    assert stream.down.wait(120), "no request met the stopped database"
    private_postgres.start()
    stream.join(timeout=300)
    assert not stream.is_alive(), "the vote stream did not finish"
    voter.close()

    assert stream.unexpected == [], stream.unexpected
    assert stream.unavailable >= 1
    with psycopg.connect(dsn, autocommit=True) as db:
        rows = db.execute(
            "SELECT replace(b.public_id::text, '-', ''), count(*) FROM arena_vote v JOIN arena_battle b ON b.id = v.battle_id"
            " GROUP BY b.public_id"
        ).fetchall()
        total = db.execute("SELECT count(*) FROM arena_vote").fetchone()[0]
        voted_battles = db.execute("SELECT count(*) FROM arena_battle WHERE status = 'voted'").fetchone()[0]
    per_battle = dict(rows)
    assert total == len(per_battle) == voted_battles  # no vote stored twice, none without its battle marked
    assert set(per_battle) == stream.accepted | stream.already == set(battles)  # every accepted vote is a row
    assert all(count == 1 for count in per_battle.values()), json.dumps(per_battle)
    assert not stream.accepted & stream.already
