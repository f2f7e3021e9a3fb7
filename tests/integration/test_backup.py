"""A pg_dump/pg_restore round trip with the real PostgreSQL: every table identical after restore, and
the ratings refitted from the restored votes equal the stored snapshots (docs/operations.md)."""

from __future__ import annotations

import uuid
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from arena.models import Vote
from arena.ratings.refit import snapshots_refit
from tests.arena.vote_data import votes_create
from tests.conftest import clean_env, database_url_of, run_manage
from tests.leaderboard import board_data

pytestmark = [pytest.mark.slow]


def _admin_url() -> str:
    settings = connection.settings_dict
    return database_url_of(connection).rsplit("/", 1)[0] + "/" + (settings.get("OPTIONS", {}).get("dbname") or "postgres")


@pytest.fixture
def empty_database():
    if connection.vendor != "postgresql":
        pytest.fail("the backup round trip needs PostgreSQL: run the suite with `make test`")
    name = f"podium_restore_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_admin_url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(_admin_url(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _url(name: str) -> str:
    return database_url_of(connection).rsplit("/", 1)[0] + "/" + name


def _env(url: str) -> dict[str, str]:
    return clean_env(DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=url, SECRET_KEY="backup-test-key")


def _fingerprints(url: str) -> dict[str, tuple[int, str]]:
    """Row count and an md5 of every row's text, in a fixed order, for every table."""
    with psycopg.connect(url) as db:
        tables = [row[0] for row in db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )]  # fmt: skip
        return {
            table: db.execute(
                f'SELECT count(*), coalesce(md5(string_agg(t::text, \'|\' ORDER BY t::text)), \'\') FROM "{table}" t'
            ).fetchone()
            for table in tables
        }


def _site_data() -> None:
    votes_create({"alpha": 1.0, "beta": 0.3, "gamma": -0.4, "delta": -1.0}, 240, seed=3)
    snapshots_refit(rounds=20, elo_orders=5, min_votes=10)
    owner = board_data.user("owner@example.org")
    board_data.entry(owner, "acme/one", gsm8k=board_data.pattern(20, 12))
    board_data.entry(owner, "acme/two", gsm8k=board_data.pattern(20, 7), mmlu={"anatomy": board_data.pattern(8, 5)})


def test_backup_restore_round_trip(transactional_db, tmp_path, empty_database):
    _site_data()
    source = database_url_of(connection)
    archive = tmp_path / "podium.dump"
    made = run_manage("podium_backup", str(archive), env=_env(source))
    assert made.returncode == 0, made.stderr
    assert archive.read_bytes()[:5] == b"PGDMP"

    restored = run_manage("podium_restore", str(archive), env=_env(_url(empty_database)))
    assert restored.returncode == 0, restored.stderr
    before, after = _fingerprints(source), _fingerprints(_url(empty_database))
    for table in ("arena_vote", "arena_battle", "arena_ratingsnapshot", "leaderboard_submission", "leaderboard_score"):
        assert before[table][0] > 0, f"{table} should hold data for the test to mean anything"
    assert after == before

    verified = run_manage("ratings_verify", env=_env(_url(empty_database)))
    assert verified.returncode == 0, verified.stderr
    assert "snapshot(s) equal a refit" in verified.stdout

    # The check can fail: change one restored vote and the refit no longer matches the snapshot.
    with psycopg.connect(_url(empty_database), autocommit=True) as db:
        vote_id = Vote.objects.filter(winner="model_a").order_by("id").values_list("id", flat=True).first()
        db.execute("UPDATE arena_vote SET winner = 'model_b' WHERE id = %s", [vote_id])
    changed = run_manage("ratings_verify", env=_env(_url(empty_database)))
    assert changed.returncode == 1 and "refitted" in changed.stderr


def _refused(*argv: str) -> str:
    with pytest.raises(CommandError) as refused:
        call_command(*argv)
    return str(refused.value)


def test_backup_and_restore_refuse_bad_input(transactional_db, tmp_path, empty_database):
    taken = tmp_path / "taken.dump"
    taken.write_text("keep me")
    assert "exists" in _refused("podium_backup", str(taken)) and taken.read_text() == "keep me"
    assert "does not exist" in _refused("podium_backup", str(tmp_path / "no" / "x.dump"))
    junk = tmp_path / "junk.dump"
    junk.write_bytes(b"\x00\xffnot an archive")
    assert "neither a pg_dump" in _refused("podium_restore", str(junk))
    assert "is not a file" in _refused("podium_restore", str(tmp_path / "missing.dump"))
    good = tmp_path / "good.dump"
    call_command("podium_backup", str(good), stdout=StringIO())
    # Into a database that has tables: refused without --replace.
    assert "--replace" in _refused("podium_restore", str(good))
    # A truncated archive: pg_restore fails in its single transaction and leaves the database empty.
    cut = tmp_path / "cut.dump"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    broken = run_manage("podium_restore", str(cut), env=_env(_url(empty_database)))
    assert broken.returncode == 1 and "pg_restore failed" in broken.stderr
    assert _fingerprints(_url(empty_database)) == {}
