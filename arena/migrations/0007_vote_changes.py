"""A log of changes to the votes table, read by the refit cache (arena.votes.cache).

Statement-level triggers add a row to ``arena_vote_changes`` for every UPDATE, DELETE and TRUNCATE of
``arena_vote``; a snapshot's count of those rows changes with every such statement committed after it
(a counter in one row would do the same, but two transactions changing votes could then deadlock on it).
Inserts add nothing (the vote path stays one statement): the cache finds new and late votes by their ids.
``arena_vote_cache_key`` holds a random token naming this database for the cache's key.
PostgreSQL only: elsewhere (SQLite, the demo) the refit reads through the ORM and keeps no cache.
"""

from django.db import migrations

FORWARD = """
CREATE TABLE arena_vote_changes (
    id bigserial PRIMARY KEY,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE arena_vote_cache_key (token uuid NOT NULL DEFAULT gen_random_uuid());
INSERT INTO arena_vote_cache_key DEFAULT VALUES;
CREATE FUNCTION arena_vote_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO arena_vote_changes DEFAULT VALUES;
    RETURN NULL;
END $$;
CREATE TRIGGER arena_vote_changed_rows AFTER UPDATE OR DELETE ON arena_vote
    FOR EACH STATEMENT EXECUTE FUNCTION arena_vote_changed();
CREATE TRIGGER arena_vote_changed_truncate AFTER TRUNCATE ON arena_vote
    FOR EACH STATEMENT EXECUTE FUNCTION arena_vote_changed();
"""
BACKWARD = """
DROP TRIGGER IF EXISTS arena_vote_changed_truncate ON arena_vote;
DROP TRIGGER IF EXISTS arena_vote_changed_rows ON arena_vote;
DROP FUNCTION IF EXISTS arena_vote_changed();
DROP TABLE IF EXISTS arena_vote_changes;
DROP TABLE IF EXISTS arena_vote_cache_key;
"""


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("arena", "0006_vote_refit_indexes")]

    operations = [migrations.RunPython(_on_postgresql(FORWARD), _on_postgresql(BACKWARD))]
