"""Refit, tagged categories at scale (issue 31): what the refit's read of every protocol's tag masks costs.

    OMP_NUM_THREADS=1 .venv/bin/python bench/refit_tagged.py --votes 1000000 --repeat 3

The full refit (``arena.ratings.refit``) masks the votes it read by each configured tagged category
(``arena.categories.selectors.tag_masks``). This bench measures that read on PostgreSQL, in a fresh
database ``bench_refit_<pid>`` (dropped at the end), with votes as bench/scale_data.py makes them and tags
as bench/live_tagged.py makes them (the five bundled protocols, a tag per distinct prompt and protocol,
in the category for 30, 20, 10, 10, 25% of prompts), the counted votes read as the refit reads them
(``votes_counted_columns``), then, in the same run, median of ``--repeat`` (alternating):

- ``before_ms``: the masks as before issue 31, one semi-join per protocol (``tagged_vote_ids``, every id
  into numpy, then ``np.isin``), with ``before_per_protocol_ms`` for the first protocol alone;
- ``after_ms``: ``tag_masks`` now (one statement for every protocol, a bitmask per tagged vote, read as
  two packed ``bytea`` values, looked up with ``np.searchsorted``), and ``after_read_ms``, its statement alone;
- ``same_masks``: both give every category's mask identically; the plan of the new statement.

Prints one JSON line per size and writes bench/out/refit_tagged.json.
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
import live_tagged  # noqa: E402
import scale_data  # noqa: E402

OUT = ROOT / "bench" / "out"
live_tagged.DB_NAME = f"bench_refit_{os.getpid()}"


def masks_before(votes, protocols, name):
    import numpy as np

    from arena.categories.selectors import tagged_vote_ids

    return {p.category: np.isin(votes.vote_id, tagged_vote_ids(p.sha256, name)) for p in protocols}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", default="1000000", help="vote table sizes, ascending")
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database (default: dropped)")
    args = parser.parse_args()
    sizes = sorted(int(v) for v in args.votes.split(","))
    url = live_tagged.database("create")
    live_tagged.django_setup(url)
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from live_ratings import models_create

    from arena.categories import selectors as selectors_categories
    from arena.categories import tagger as categories
    from arena.ratings import inputs as refit_read
    from arena.votes.selectors import votes_counted_columns

    settings.ARENA_CATEGORY_TAGGER = live_tagged.TAGGER
    protocols = categories.category_protocols()
    name = categories.tagger_name()
    shas = [p.sha256 for p in protocols]
    report: dict = {"args": vars(args), "cores": os.cpu_count(), "load_before": os.getloadavg(),
                    "protocols": [p.category for p in protocols], "rows": []}  # fmt: skip
    try:
        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            models_create(cursor, args.models)
        made = 0
        for size in sizes:
            with connection.cursor() as cursor:
                seconds = scale_data.votes_add(
                    cursor, start=made, stop=size, n_models=args.models, progress=lambda s: None
                )
                top = refit_read.vote_high_water()
                tag_s = live_tagged.tags_add(cursor, top - (size - made), protocols, name)
                cursor.execute(live_tagged.INDEX_SQL)  # arena migration 0017's index, as deployed
                cursor.execute("ANALYZE arena_prompttag")
                cursor.execute("SELECT count(*) FROM arena_prompttag")
                tags = cursor.fetchone()[0]
            made = size
            votes = votes_counted_columns()
            row = {"votes": size, "counted": len(votes.vote_id), "prompt_tags": tags,
                   "votes_add_s": round(seconds, 1), "tags_add_s": round(tag_s, 1)}  # fmt: skip
            walls: dict[str, list] = {"before": [], "after": [], "after_read": [], "before_one": []}
            for _ in range(args.repeat):  # alternating: a cache warmed by one is warm for the other
                for key, fn in (
                    ("before", lambda votes=votes: masks_before(votes, protocols, name)),
                    ("after", lambda votes=votes: selectors_categories.tag_masks(votes)),
                    ("after_read", lambda: selectors_categories.tagged_vote_masks(shas, name)),
                    ("before_one", lambda: selectors_categories.tagged_vote_ids(shas[0], name)),
                ):
                    began = time.perf_counter()
                    fn()
                    walls[key].append(time.perf_counter() - began)
            ms = {k: round(1000 * statistics.median(v), 1) for k, v in walls.items()}
            row.update({"before_ms": ms["before"], "before_per_protocol_ms": ms["before_one"],
                        "after_ms": ms["after"], "after_read_ms": ms["after_read"],
                        "walls_s": {k: [round(w, 3) for w in v] for k, v in walls.items()}})  # fmt: skip
            before, after = masks_before(votes, protocols, name), selectors_categories.tag_masks(votes)[0]
            row["same_masks"] = set(before) == set(after) and all(
                (before[c] == after[c]).all() for c in before
            )
            row["tagged_votes"] = {c: int(m.sum()) for c, m in after.items()}
            row["ratio_before_over_after"] = round(ms["before"] / max(ms["after"], 1e-3), 2)
            row["plan_after"] = live_tagged.plan(
                *selectors_categories.tagged_masks_sql(shas, name, vendor="postgresql")
            )
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
    finally:
        connection.close()
        if not args.keep:
            live_tagged.database("drop")
    report["load_after"] = os.getloadavg()
    OUT.mkdir(exist_ok=True)
    (OUT / "refit_tagged.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
