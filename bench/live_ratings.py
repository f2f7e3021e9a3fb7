"""Live board benchmark: the live point fit at 200 models, whatever the number of votes (issue 16).

    OMP_NUM_THREADS=1 .venv/bin/python bench/live_ratings.py                  # 300k base votes, scaled to 10M
    .venv/bin/python bench/live_ratings.py --base 1000000 --deltas 0,1000,10000,100000,300000

A fresh PostgreSQL database ``podium_bench_live`` gets 200 arena models and ``--base`` votes in SQL
(bench/scale_data.py: skewed pairs, 12 languages, three turn counts, long and short prompts). The refit's
read (``arena.ratings.inputs.refit_votes_read``: the packed column read, duplicate prompts once) and the base it
stores per category (``arena.ratings.live.base_store``) are timed; then every stored count is multiplied so the
base stands for ``--scale-to`` votes (10M by default): the counts are numbers in a table, so the live fit's
cost cannot depend on them, and the bench shows it. Then, for each ``--deltas`` size (votes cast after
the refit, added in SQL), ``arena.ratings.live.live_refit`` as the task runs it (base + the newer votes
aggregated in SQL, one Bradley-Terry point fit per category, the rows written) ``--repeat`` times: median
and max wall time, with the part spent in the fits alone (``arena.ratings.live.point_fit``, every category) and
in the overall category's fit. The peer is the full refit the live fit stands in for: its time comes from
bench/scale.py (docs/PERFORMANCE.md). Writes bench/out/live_ratings.json.
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
DB_NAME = "podium_bench_live"


def database_create() -> str:
    import psycopg

    admin = os.environ.get("SCALE_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    return admin.rsplit("/", 1)[0] + "/" + DB_NAME


def models_create(cursor, n: int, seed: int = 0) -> None:
    """``n`` arena models (through the ORM: every column has its default) and bench/scale_data.py's
    strength table, which its vote SQL reads."""
    import numpy as np

    from arena.models import LanguageModel

    strengths = np.random.default_rng(seed).normal(0, 1, n)
    made = LanguageModel.objects.bulk_create([LanguageModel(name=f"scale-{k:03d}", in_arena=True) for k in range(n)])
    cursor.execute("CREATE TABLE scale_strength (k int PRIMARY KEY, model_id bigint, s float8)")
    for k, (model, s) in enumerate(zip(made, strengths)):
        cursor.execute("INSERT INTO scale_strength VALUES (%s, %s, %s)", [k, model.pk, float(s)])


def vote_path_cost(n: int = 5000) -> dict:
    """What the vote path pays per vote to ask for a live fit while one is pending (one Redis SET NX),
    against the per-vote full-refit request it replaced (re-checked at most every 0.5 s per process)."""
    from django.core.cache import cache

    from arena.play import dispatch

    cache.set(dispatch.LIVE_PENDING_KEY, 1, timeout=600)
    cache.set(dispatch.REFIT_PENDING_KEY, 1, timeout=600)
    began = time.perf_counter()
    for _ in range(n):
        dispatch.ratings_live_schedule()
    live_us = 1e6 * (time.perf_counter() - began) / n
    recheck_after = 0.0
    began = time.perf_counter()
    for _ in range(n):  # the old arena.ratings.requests.refit_request
        now = time.monotonic()
        if now >= recheck_after:
            dispatch.ratings_refit_schedule()
            recheck_after = now + 0.5
    old_us = 1e6 * (time.perf_counter() - began) / n
    cache.delete_many([dispatch.LIVE_PENDING_KEY, dispatch.REFIT_PENDING_KEY])
    return {"live_request_us_per_vote": round(live_us, 1), "old_refit_request_us_per_vote": round(old_us, 2)}


def timed(fn, repeat: int) -> tuple[list[float], object]:
    walls, out = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - began)
    return walls, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=300_000, help="votes in the database before the refit")
    parser.add_argument("--scale-to", type=int, default=10_000_000, help="votes the stored base stands for")
    parser.add_argument("--deltas", default="0,1000,10000,100000", help="votes after the refit, cumulative")
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--recent", type=int, default=9000, help="newest votes dated now (30 s at 300/s)")
    args = parser.parse_args()
    deltas = sorted(int(d) for d in args.deltas.split(","))
    url = database_create()
    env = web_servers.server_env(url, web_servers.redis_url())
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECURE_SSL", "DEBUG",
                                            "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PODIUM_VAR_DIR")})  # fmt: skip
    import django
    from django.utils import timezone

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from arena.models import PairCountBase
    from arena.ratings import inputs as refit_read
    from arena.ratings import live

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        models_create(cursor, args.models)
        scale_data.votes_add(cursor, start=0, stop=args.base, n_models=args.models, progress=lambda s: None)
    report: dict = {"args": vars(args), "cores": os.cpu_count(), "load_before": os.getloadavg()}
    began = time.perf_counter()
    votes, integrity = refit_read.refit_votes_read(99.9)
    report["refit_read_s"] = round(time.perf_counter() - began, 3)
    began = time.perf_counter()
    categories = live.base_store(votes, high_water=integrity["vote_high_water"], refit_at=timezone.now())
    report["base_store_s"] = round(time.perf_counter() - began, 3)
    report["categories"] = categories
    factor = args.scale_to / max(len(votes), 1)
    for row in PairCountBase.objects.all():  # the base now stands for --scale-to votes
        row.cells = [[i, j, *(round(c * factor) for c in cells)] for i, j, *cells in row.cells]
        row.vote_count = round(row.vote_count * factor)
        row.save()
    report["rows"] = []
    done = 0
    for delta in deltas:
        if delta > done:
            with connection.cursor() as cursor:
                scale_data.votes_add(cursor, start=args.base + done, stop=args.base + delta, n_models=args.models,
                                     progress=lambda s: None)  # fmt: skip
            done = delta
            with connection.cursor() as cursor:  # the newest votes were cast just now: not settled yet
                cursor.execute("UPDATE arena_vote SET created_at = now() WHERE id > (SELECT max(id) FROM arena_vote) - %s",
                               [args.recent])  # fmt: skip
        live._SETTLED.clear()  # a worker process's first fit after the refit: every newer vote from SQL
        first, _ = timed(live.live_refit, 1)
        walls, summary = timed(live.live_refit, args.repeat)
        counts = live.live_counts().counts
        every = [c for c in counts.values() if c is not None]
        fits, _ = timed(lambda every=every: [live.point_fit(c) for c in every], args.repeat)
        overall, _ = timed(lambda c=counts["overall"]: live.point_fit(c), args.repeat)
        row = {
            "votes_after_refit": delta,
            "votes": summary["votes"],
            "categories": summary["categories"],
            "pairs_overall": counts["overall"].n_pairs,
            "first_fit_ms": round(1000 * first[0], 1),
            "live_refit_median_ms": round(1000 * statistics.median(walls), 1),
            "live_refit_max_ms": round(1000 * max(walls), 1),
            "fits_all_categories_ms": round(1000 * statistics.median(fits), 1),
            "fit_overall_ms": round(1000 * statistics.median(overall), 1),
        }
        report["rows"].append(row)
        print(json.dumps(row), flush=True)
    report["vote_path"] = vote_path_cost()
    print(json.dumps(report["vote_path"]), flush=True)
    report["load_after"] = os.getloadavg()
    OUT.mkdir(exist_ok=True)
    (OUT / "live_ratings.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}))


if __name__ == "__main__":
    main()
