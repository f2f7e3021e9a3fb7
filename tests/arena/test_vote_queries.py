"""The vote path's database round trips, pinned: two on PostgreSQL (an unlocked read of the battle, its
models and turns; one statement that claims the battle and inserts the vote); on SQLite the same read
and two writes between BEGIN IMMEDIATE and COMMIT (one transaction holding the write lock). A change that adds a query to the
arena's hottest path fails here."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from arena.models import Battle, LanguageModel, Turn, Vote
from arena.play import base
from arena.votes import casting
from tests.conftest import clean_env, run_manage


@pytest.fixture
def finished_battle(transactional_db):
    cache.clear()
    a = LanguageModel.objects.create(name="model-one", in_arena=True)
    b = LanguageModel.objects.create(name="model-two", in_arena=True)

    def make() -> Battle:
        battle = Battle.objects.create(model_a=a, model_b=b, session_hash="s", ip_hash="i")
        for index in range(2):
            Turn.objects.create(battle=battle, index=index, prompt=f"p{index}", answer_a="## x", answer_b="y",
                                status_a="done", status_b="done")  # fmt: skip
        return battle

    yield make
    cache.clear()


def test_a_vote_is_two_round_trips_on_postgresql(finished_battle):
    assert connection.vendor == "postgresql" and connection.get_autocommit()
    battle = finished_battle()
    with CaptureQueriesContext(connection) as queries:
        cast = casting.vote_cast(public_id=battle.public_id, winner="model_a", session_hash="s", ip_hash="i")
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 2, "\n".join(statements)
    assert statements[0].startswith("SELECT") and "FOR UPDATE" not in statements[0]
    assert statements[1].startswith("WITH claimed AS (UPDATE") and "INSERT INTO" in statements[1]
    assert Vote.objects.get(pk=cast.id).turn_count == 2  # both statements did their work


def test_a_refused_vote_is_one_round_trip_on_postgresql(finished_battle, django_assert_num_queries):
    battle = finished_battle()
    casting.vote_cast(public_id=battle.public_id, winner="tie", session_hash="s", ip_hash="i")
    with django_assert_num_queries(1), pytest.raises(base.ArenaError, match="already has a vote"):
        casting.vote_cast(public_id=battle.public_id, winner="tie", session_hash="s", ip_hash="i")
    with django_assert_num_queries(1), pytest.raises(base.ArenaError, match="No such battle"):
        casting.vote_cast(public_id=battle.public_id, winner="tie", session_hash="stranger", ip_hash="i")
    with django_assert_num_queries(0), pytest.raises(base.ArenaError, match="Unknown vote"):
        casting.vote_cast(public_id=battle.public_id, winner="nobody", session_hash="s", ip_hash="i")


SQLITE_SCRIPT = """
import json
from django.db import connection
from django.test.utils import CaptureQueriesContext

from arena.models import Battle, LanguageModel, Turn
from arena.votes import casting
a = LanguageModel.objects.create(name="model-one", in_arena=True)
b = LanguageModel.objects.create(name="model-two", in_arena=True)
battle = Battle.objects.create(model_a=a, model_b=b, session_hash="s", ip_hash="i")
for index in range(2):
    Turn.objects.create(battle=battle, index=index, prompt="p", answer_a="x", answer_b="y",
                        status_a="done", status_b="done")
with CaptureQueriesContext(connection) as queries:
    casting.vote_cast(public_id=battle.public_id, winner="tie", session_hash="s", ip_hash="i")
print(json.dumps({"vendor": connection.vendor, "sql": [q["sql"] for q in queries.captured_queries]}))
"""


def test_a_vote_is_three_statements_in_one_transaction_on_sqlite(sqlite_var_dir):
    env = clean_env(PODIUM_VAR_DIR=str(sqlite_var_dir))
    result = run_manage("shell", "-c", SQLITE_SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["vendor"] == "sqlite"
    kinds = [sql.split()[0] for sql in out["sql"]]
    assert kinds == ["BEGIN", "SELECT", "INSERT", "UPDATE", "COMMIT"], "\n".join(out["sql"])
    assert out["sql"][0] == "BEGIN IMMEDIATE"  # the write lock is taken before the read


def test_the_refit_fingerprint_is_answered_from_an_index_alone(finished_battle):
    """count, max and sum of the counted votes' ids come from the partial index on counted ids (an
    index-only scan: 0.9 s at 10M votes where a scan of the table took 2.4 s)."""
    from arena.votes.selectors import votes_counted_fingerprint

    for _ in range(3):
        casting.vote_cast(public_id=finished_battle().public_id, winner="tie", session_hash="s", ip_hash="i")
    with CaptureQueriesContext(connection) as queries:
        fingerprint = votes_counted_fingerprint()
    ids = sorted(Vote.objects.filter(counted=True).values_list("id", flat=True))
    assert fingerprint == f"{len(ids)}:{ids[-1]}:{sum(ids)}"
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) arena_vote")  # the visibility map an index-only scan relies on
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN " + queries.captured_queries[0]["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")
    assert "Index Only Scan using arena_vote_counted_id" in plan, plan
