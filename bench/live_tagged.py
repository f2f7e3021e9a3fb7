"""Live board, tagged categories at scale (issue 31): what each tagging protocol's query costs a live fit.

    OMP_NUM_THREADS=1 .venv/bin/python bench/live_tagged.py                         # 1M then 10M votes
    .venv/bin/python bench/live_tagged.py --votes 1000000 --deltas 1000,10000,100000 --repeat 5

Tagged categories are live between refits: each live fit (``arena.ratings.live.live_refit``) adds the votes cast
after the last refit whose first prompt is tagged by now, one SQL aggregate per configured protocol
(``arena.categories.selectors.tagged_vote_groups``). This bench measures that query at scale, on
PostgreSQL, in a fresh database ``bench_live_<pid>`` (dropped at the end):

- ``--votes`` sizes (ascending; the table grows from one to the next): votes in SQL as bench/scale_data.py
  makes them (200 models, skewed pairs, prompts repeating with a long tail), each with its
  ``VoteCategorization`` (done; its prompt hash) and, for each of the five bundled protocols (hard
  prompts, coding, math, creative writing, instruction following), a ``PromptTag`` per distinct prompt,
  in the category for a fixed share of prompts (30, 20, 10, 10, 25%);
- for each ``--deltas`` size: the refit's high water put that many votes below the newest (the live fit
  adds exactly those), then, median of ``--repeat`` runs:
  * ``per_protocol_ms``: each protocol's query alone, as ``tagged_vote_groups`` runs it now;
  * ``all_protocols_ms``: ``tagged_vote_groups`` (every protocol: what one live fit pays for tags);
  * ``before_per_protocol_ms`` / ``before_all_ms``: the query as it was before issue 31's fix (one
    statement per protocol, a semi-join on every prompt the tagger put in the category, without the
    index ``prompttag_live_lookup`` of arena migration 0017), in the same run;
  * peers, same votes: ``untagged_ms``, the live board's own aggregate of the votes after the refit
    (``arena.ratings.live.delta_groups``: every untagged category in one statement), and ``refit_read_ms``, the
    refit's read of one protocol's tagged votes (``tagged_vote_ids``: every tagged vote, whatever the
    delta);
  * the plan of one protocol's query before and after (EXPLAIN ANALYZE): the tables it reads whole per
    request (sequential scans: before, every vote's categorisation once the delta is in the thousands),
    and its nodes.

Prints one JSON line per (votes, delta) and writes bench/out/live_tagged.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import scale_data  # noqa: E402
import web_servers  # noqa: E402 - bench/ is the script's directory

OUT = ROOT / "bench" / "out"
DB_NAME = f"bench_live_{os.getpid()}"
SHARES = {"hard_prompt": 0.30, "coding": 0.20, "math": 0.10, "creative_writing": 0.10, "instruction_following": 0.25}
TAGGER = {"backend": "hf", "model_args": {"path": "/bench/tagger"}}
OUTCOMES = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 3}


INDEX = "prompttag_live_lookup"  # arena migration 0017
INDEX_SQL = f"CREATE INDEX {INDEX} ON arena_prompttag (prompt_sha256, tagger_name, protocol_sha256) WHERE value"


def admin_url() -> str:
    return os.environ.get("SCALE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def database(action: str) -> str:
    import psycopg

    with psycopg.connect(admin_url(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        if action == "create":
            conn.execute(f"CREATE DATABASE {DB_NAME}")
    return admin_url().rsplit("/", 1)[0] + "/" + DB_NAME


def tags_add(cursor, after_id: int, protocols, tagger_name: str) -> float:
    """Every vote above ``after_id`` categorised (done), and each protocol's tag of every new distinct
    prompt (the live lookup index is dropped first: the bench times the query without it, then builds it)."""
    began = time.monotonic()
    cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
    cursor.execute(
        "INSERT INTO arena_votecategorization (vote_id, prompt_sha256, status, attempts, error, updated_at)"
        " SELECT id, prompt_hash, 'done', 1, '', now() FROM arena_vote WHERE id > %s",
        [after_id],
    )
    cursor.execute("DROP TABLE IF EXISTS bench_new_prompts")
    cursor.execute(
        "CREATE TEMP TABLE bench_new_prompts AS SELECT DISTINCT c.prompt_sha256 AS sha FROM arena_votecategorization c"
        " WHERE c.vote_id > %s AND NOT EXISTS (SELECT 1 FROM arena_prompttag t WHERE t.prompt_sha256 = c.prompt_sha256)",
        [after_id],
    )  # fmt: skip
    for p in protocols:
        share = SHARES.get(p.category, 0.2)
        cursor.execute(
            "INSERT INTO arena_prompttag (prompt_sha256, category, protocol, protocol_version, protocol_sha256,"
            " tagger, tagger_name, value, score, criteria, created_at)"
            " SELECT sha, %s, %s, %s, %s, %s, %s, ('x' || substr(md5(sha || %s), 1, 8))::bit(32)::bigint < %s, 0, '{}',"
            " now() FROM bench_new_prompts",
            [p.category, p.name, p.version, p.sha256, "bench-tagger-key", tagger_name, p.category,
             int(share * 2**32)],
        )  # fmt: skip
    cursor.execute("ANALYZE arena_votecategorization")
    cursor.execute("VACUUM ANALYZE arena_prompttag") if cursor.connection.autocommit else cursor.execute(
        "ANALYZE arena_prompttag"
    )
    return time.monotonic() - began


def before_queryset(after_id: int, protocol, tagger_name: str):
    from django.db.models import Count

    from arena.models import PromptTag, Vote

    prompts = PromptTag.objects.filter(protocol_sha256=protocol.sha256, tagger_name=tagger_name, value=True)
    return (
        Vote.objects.filter(counted=True, id__gt=after_id, categorization__prompt_sha256__in=prompts.values("prompt_sha256"))
        .values("model_a", "model_b", "winner").annotate(n=Count("id")).order_by()
        .values_list("model_a", "model_b", "winner", "n")
    )  # fmt: skip


def before_sql(after_id: int, protocol, tagger_name: str):
    return before_queryset(after_id, protocol, tagger_name).query.sql_with_params()


def groups_before(after_id: int, protocol, tagger_name: str):
    """The query as it was before the fix (issue 31): one statement per protocol, a semi-join on every
    prompt the tagger put in the category."""
    import numpy as np

    groups = before_queryset(after_id, protocol, tagger_name)
    return np.array([(a, b, OUTCOMES.get(w, 3), n) for a, b, w, n in groups], dtype=np.int64).reshape(-1, 4)


def median_ms(fn, repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - began)
    return round(1000 * statistics.median(walls), 2)


def plan(sql: str, params) -> dict:
    """EXPLAIN ANALYZE of one statement: total ms, the tables it reads whole (sequential scans), its nodes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        root = cursor.fetchone()[0]
    root = root[0] if isinstance(root, list) else json.loads(root)[0]
    nodes, found = [root["Plan"]], {"seq_scans": [], "nodes": []}
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        found["nodes"].append(node["Node Type"] + (f" {node['Relation Name']}" if "Relation Name" in node else ""))
        if node["Node Type"] == "Seq Scan":  # a whole table read, per request
            found["seq_scans"].append(node["Relation Name"])
    found["ms"] = round(root["Execution Time"], 2)
    found["nodes"] = sorted(set(found["nodes"]))
    return found


def django_setup(url: str) -> None:
    """Django on the bench's database ``url``, with the settings a server would get (bench/arena_load.py)."""
    env = web_servers.server_env(url, web_servers.redis_url())
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECURE_SSL", "DEBUG",
                                            "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PODIUM_VAR_DIR")})  # fmt: skip
    import django

    django.setup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", default="1000000,10000000", help="vote table sizes, ascending")
    parser.add_argument("--deltas", default="1000,10000,100000", help="votes after the refit")
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database (default: dropped)")
    args = parser.parse_args()
    sizes = sorted(int(v) for v in args.votes.split(","))
    deltas = sorted(int(d) for d in args.deltas.split(","))
    url = database("create")
    django_setup(url)
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from live_ratings import models_create

    from arena.categories import selectors as selectors_categories
    from arena.categories import tagger as categories
    from arena.ratings import inputs as refit_read
    from arena.ratings import live

    settings.ARENA_CATEGORY_TAGGER = TAGGER
    protocols = categories.category_protocols()
    name = categories.tagger_name()
    report: dict = {"args": vars(args), "cores": os.cpu_count(), "load_before": os.getloadavg(),
                    "protocols": [p.category for p in protocols], "rows": []}  # fmt: skip
    try:
        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            models_create(cursor, args.models)
        made, expected = 0, {}
        for size in sizes:
            with connection.cursor() as cursor:
                seconds = scale_data.votes_add(cursor, start=made, stop=size, n_models=args.models, progress=lambda s: None)
                top = refit_read.vote_high_water()
                tag_s = tags_add(cursor, top - (size - made), protocols, name)
                cursor.execute("SELECT count(*) FROM arena_prompttag")
                tags = cursor.fetchone()[0]
            made = size
            print(json.dumps({"votes": size, "votes_add_s": round(seconds, 1), "tags_add_s": round(tag_s, 1),
                              "prompt_tags": tags}), flush=True)  # fmt: skip
            rows = {delta: {"votes": size, "prompt_tags": tags, "votes_after_refit": delta} for delta in deltas}
            with connection.cursor() as cursor:  # before: the schema as it was (no live lookup index)
                cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
            for delta in deltas:
                after, row = top - delta, rows[delta]
                row["before_per_protocol_ms"] = {
                    p.category: median_ms(lambda p=p, after=after: groups_before(after, p, name), args.repeat) for p in protocols
                }
                row["before_all_ms"] = round(sum(row["before_per_protocol_ms"].values()), 2)
                row["plan_before"] = plan(*before_sql(after, protocols[0], name))
                row["untagged_ms"] = median_ms(lambda after=after: live.delta_groups(after), args.repeat)
                expected[delta] = {p.category: groups_before(after, p, name) for p in protocols}
            row_refit = median_ms(lambda: selectors_categories.tagged_vote_ids(protocols[0].sha256, name), 1)
            began = time.monotonic()
            with connection.cursor() as cursor:
                cursor.execute(INDEX_SQL)
                cursor.execute("ANALYZE arena_prompttag")
            index_s = round(time.monotonic() - began, 1)
            for delta in deltas:
                after, row = top - delta, rows[delta]
                row["refit_read_one_protocol_ms"], row["index_build_s"] = row_refit, index_s
                row["per_protocol_ms"] = {}
                for p in protocols:
                    settings.ARENA_CATEGORY_PROTOCOLS = [p.name]
                    row["per_protocol_ms"][p.category] = median_ms(
                        lambda after=after: selectors_categories.tagged_vote_groups(after, OUTCOMES, 3), args.repeat
                    )
                settings.ARENA_CATEGORY_PROTOCOLS = [p.name for p in protocols]
                row["all_protocols_ms"] = median_ms(
                    lambda after=after: selectors_categories.tagged_vote_groups(after, OUTCOMES, 3), args.repeat
                )
                now = selectors_categories.tagged_vote_groups(after, OUTCOMES, 3)
                row["same_groups"] = all(
                    sorted(map(tuple, expected[delta][p.category].tolist())) == sorted(map(tuple, now[p.category].tolist()))
                    for p in protocols
                )  # fmt: skip
                row["plan_after"] = plan(*selectors_categories.tagged_groups_sql(after, [protocols[0].sha256], name))
                row["ratio_before_over_after"] = round(row["before_all_ms"] / max(row["all_protocols_ms"], 1e-3), 2)
                row["ratio_after_over_untagged"] = round(row["all_protocols_ms"] / max(row["untagged_ms"], 1e-3), 2)
                report["rows"].append(row)
                print(json.dumps(row), flush=True)
    finally:
        connection.close()
        if not args.keep:
            database("drop")
    report["load_after"] = os.getloadavg()
    OUT.mkdir(exist_ok=True)
    (OUT / "live_tagged.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
