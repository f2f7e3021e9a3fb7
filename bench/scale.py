"""Scale benchmark: how Podium's costs grow from 1M to 10M votes (issue 16, docs/PERFORMANCE.md).

    OMP_NUM_THREADS=1 .venv/bin/python bench/scale.py                       # 1M, 3M, 10M votes
    .venv/bin/python bench/scale.py --sizes 200000,500000 --submissions 2000  # a quick look

A fresh PostgreSQL database ``podium_scale`` (on postgres://postgres@127.0.0.1:5432 unless
``SCALE_ADMIN_URL`` names another server) gets 200 arena models and ``--submissions`` finished submissions,
then votes are added in SQL (bench/scale_data.py: skewed pair frequencies, Bradley-Terry outcomes, styles,
languages) up to each size in turn. At each size, in one run:

1. ``refit``: ``arena.ratings.refit.snapshots_refit`` as the worker runs it (every category; Bradley-Terry with
   1,000 bootstrap rounds, style control, Elo) from the database; wall time, its phases (read, fit,
   write), the CPU seconds of the process and of the processes it forks for the fits, and peak RSS;
2. ``csv``: ``GET /api/votes.csv`` through the production server (gunicorn, 2 sync workers) read to the
   end: rows per second and the serving process's peak RSS;
3. ``pages``: the arena board and the leaderboard page, 200 requests each in a closed loop on 4
   connections after warm-up: p50 and p99;
4. ``votes``: the vote path at ``--rate`` votes/s (open loop, bench/arena_load.py's) for ``--duration`` s
   with all those rows stored: p50, p99, and whether every accepted vote is a row;
5. ``refit_again``: the refit once more, after those votes, as the periodic refit runs in steady state
   (online Elo continues the last refit's replay when the earlier votes are unchanged, and the refit
   cache holds the votes the first refit read: only the newer ones come from PostgreSQL).

The first refit at each size starts without the refit cache's folder (it reads every vote and writes the
folder), as a worker's first refit does.

Targets (issue 16): refit under 30 s at 10M; CSV at least 200,000 rows/s with flat memory; pages p99 under
50 ms; votes p99 under 100 ms at 300/s. The machine's load average goes into the report. Writes
bench/out/scale.json and, with ``--chart``, docs/scale.html (plotly).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import arena_load, scale_data, web_servers  # noqa: E402

OUT = ROOT / "bench" / "out"
DB_NAME = "podium_scale"


def admin_url() -> str:
    return os.environ.get("SCALE_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def database_create(reuse: bool) -> tuple[str, bool]:
    """The bench database's URL, and whether it already holds the bench's models (``--reuse``)."""
    import psycopg

    url = admin_url().rsplit("/", 1)[0] + "/" + DB_NAME
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone()
        if reuse and exists:
            with psycopg.connect(url) as bench_db:
                seeded = bench_db.execute("SELECT to_regclass('scale_strength') IS NOT NULL").fetchone()[0]
            if seeded:
                return url, True
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    return url, False


def rss_peak_of(pid: int) -> float:
    """Peak resident memory (VmHWM) of a running process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def children_of(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def measure_refit(*, cold: bool = False) -> dict:
    """One refit as the worker runs it: wall seconds, its phases, and the CPU seconds of this process and
    of the processes it forked for the fits (PostgreSQL's own work is not in them). ``cold``: the refit
    cache's folder (arena.votes.cache) and the Elo and style snapshots are removed first, so every vote is
    read from PostgreSQL (the files written anew), Elo replays every vote and style fits start from plain
    BT, as on a first refit."""
    from django.conf import settings

    from arena.models import RatingSnapshot
    from arena.ratings import selectors as rating_selectors
    from arena.ratings.refit import snapshots_refit

    if cold:  # no cache folder, no Elo state, no style fit to start from: as a first refit
        if settings.ARENA_REFIT_CACHE_DIR is not None:
            shutil.rmtree(settings.ARENA_REFIT_CACHE_DIR, ignore_errors=True)
        RatingSnapshot.objects.filter(method__in=["elo", "style"]).delete()
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    began = time.monotonic()
    summary = snapshots_refit(rounds=1000, force=True)
    wall = time.monotonic() - began
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))
    elo = rating_selectors.snapshot_latest("elo", "overall")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 1),
        "phases": summary.get("phases"),
        "elo_resumed_after": elo.settings.get("resumed_after") if elo else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "snapshots": summary["written"],
    }


async def _csv_read(port: int) -> tuple[int, int]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /api/votes.csv HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split()[1])
    newlines = 0
    while chunk := await reader.read(1 << 20):
        newlines += chunk.count(b"\n")
    writer.close()
    return status, newlines


def measure_csv(port: int, server_pids: list[int], votes: int) -> dict:
    """Read the whole export; rows per second count the rows that arrived (a cut stream says so)."""
    began = time.monotonic()
    status, newlines = asyncio.run(_csv_read(port))
    wall = time.monotonic() - began
    rows = max(0, newlines - 1)  # the header line (chunked framing has CRLF lines too: counted as rows)
    return {
        "status": status,
        "wall_s": round(wall, 2),
        "rows_read": rows,
        "rows_expected": votes,
        "complete": rows >= votes,
        "rows_per_s": round(rows / wall),
        "server_peak_rss_mb": round(max(rss_peak_of(p) for p in server_pids), 1),
    }


def measure_page(port: int, path: str, n: int = 200) -> dict:
    raw = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    warm: list = []
    asyncio.run(arena_load.closed_loop(port, lambda k: raw, 2, 3, 0, 20, warm))
    results: list = []
    began = time.perf_counter()
    asyncio.run(arena_load.closed_loop(port, lambda k: raw, 4, 120, 0, n, results))
    return arena_load.summary(results, time.perf_counter() - began)


def _pairs(rng, m: int, n: int) -> list[tuple[int, int]]:
    """``n`` random pairs of distinct models among ``m``."""
    a = rng.integers(0, m, size=n)
    b = (a + 1 + rng.integers(0, m - 1, size=n)) % m
    return list(zip(a.tolist(), b.tolist()))


def votes_targets(n: int) -> tuple[list[tuple[str, str]], list[int]]:
    """``n`` finished, unvoted battles with their voters' sessions (created as the server reads them)."""
    from importlib import import_module

    from django.conf import settings

    from arena.models import Battle, LanguageModel, Turn
    from arena.play.identity import salted_hash
    from arena.publication.consent import consent_give, terms_version
    from common.public_ids import battle_id

    store_class = import_module(settings.SESSION_ENGINE).SessionStore
    sessions = []
    for _ in range(200):
        store = store_class()
        store["arena"] = True
        consent_give(store, terms_version())  # the voter agreed to the arena's terms: votes without it are refused
        store.create()
        sessions.append(store.session_key)
    models = list(LanguageModel.objects.filter(name__startswith="scale-").order_by("id")[:20])
    rng = np.random.default_rng(5)
    battles = Battle.objects.bulk_create(
        [
            Battle(model_a=models[a], model_b=models[b], session_hash=salted_hash(sessions[k % 200], purpose="session"),
                   ip_hash="scale", status=Battle.Status.ACTIVE)  # fmt: skip
            for k, (a, b) in enumerate(_pairs(rng, len(models), n))
        ],
        batch_size=5000,
    )
    Turn.objects.bulk_create(
        [Turn(battle=b, index=0, prompt="Explain tides.", answer_a="## Tides\n- moon", answer_b="Gravity.",
              status_a=Turn.SideStatus.DONE, status_b=Turn.SideStatus.DONE) for b in battles],  # fmt: skip
        batch_size=5000,
    )
    keys = {salted_hash(k, purpose="session"): k for k in sessions}
    return [(battle_id(b.public_id), keys[b.session_hash]) for b in battles], [b.pk for b in battles]


def measure_votes(port: int, rate: float, duration: float) -> dict:
    from arena.models import Vote
    from common.public_ids import battle_id

    targets, battle_ids = votes_targets(int(rate * duration) + 50)
    rng = random.Random(3)

    def vote(k: int) -> bytes:
        public_id, key = targets[k]
        return arena_load.vote_request(port, public_id, key, rng.choice(arena_load.WINNERS))

    results: list = []
    began = time.perf_counter()
    asyncio.run(arena_load.open_loop(port, vote, rate, duration, 48, results))
    report = arena_load.summary(results, time.perf_counter() - began)
    accepted = {targets[k][0] for k, status, _ in results if status == 201}
    if not accepted:  # a figure of 0 votes/s is the bench failing, not the vote path being slow
        raise SystemExit(f"the vote phase had no vote accepted (statuses {report['statuses']})")
    rows = {battle_id(p) for p in Vote.objects.filter(battle_id__in=battle_ids).values_list("battle__public_id", flat=True)}
    report["lost"], report["unexpected"] = len(accepted - rows), len(rows - accepted)
    return report


def one_size(size: int, env: dict, args) -> dict:
    row: dict = {"votes": size, "load_average_before": os.getloadavg()}
    print(f"[{size:,}] refit...", flush=True)
    row["refit"] = measure_refit(cold=True)
    print(f"[{size:,}] refit {row['refit']}", flush=True)
    port, servers = web_servers.start_servers(env, 2, "gunicorn")
    try:
        workers = children_of(servers[0].pid)
        row["csv"] = measure_csv(port, workers, size)
        print(f"[{size:,}] csv {row['csv']}", flush=True)
        row["arena_page"] = measure_page(port, "/leaderboard/arena/")
        row["leaderboard_page"] = measure_page(port, "/leaderboard/")
        print(f"[{size:,}] pages {row['arena_page']['p99_ms']} / {row['leaderboard_page']['p99_ms']} ms p99", flush=True)
        row["votes_phase"] = measure_votes(port, args.rate, args.duration)
        print(f"[{size:,}] votes {row['votes_phase']}", flush=True)
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
    print(f"[{size:,}] refit again (after the votes phase: Elo continues the last refit's replay)...", flush=True)
    row["refit_again"] = measure_refit()
    print(f"[{size:,}] refit again {row['refit_again']}", flush=True)
    row["load_average_after"] = os.getloadavg()
    return row


FIGURES = [  # (label, path into a size's row, unit, target)
    ("refit from the database, cold: no cache, no earlier fits (s)", ("refit", "wall_s"), "s", "< 30 s at 10M"),
    ("refit after 3,000 more votes: cache and Elo continued (s)", ("refit_again", "wall_s"), "s", "< 30 s at 10M"),
    ("refit CPU, this process and its fits (s)", ("refit", "cpu_s"), "s", ""),
    ("votes.csv (rows/s)", ("csv", "rows_per_s"), "rows/s", ">= 200,000"),
    ("votes.csv server peak RSS (MB)", ("csv", "server_peak_rss_mb"), "MB", "flat"),
    ("arena board p99 (ms)", ("arena_page", "p99_ms"), "ms", "< 50 ms"),
    ("leaderboard page p99 (ms)", ("leaderboard_page", "p99_ms"), "ms", "< 50 ms"),
    ("vote path p99 at --rate (ms)", ("votes_phase", "p99_ms"), "ms", "< 100 ms at 300/s"),
    ("vote path served (votes/s)", ("votes_phase", "per_s"), "votes/s", "300"),
]


def _figure(row: dict, path: tuple[str, str]):
    value = row.get(path[0], {}).get(path[1])
    return value if isinstance(value, (int, float)) else None


def table(report: dict) -> str:
    """The figures by size, as a markdown table (docs/PERFORMANCE.md)."""
    rows = sorted(report["sizes"], key=lambda r: r["votes"])
    head = "| figure | target | " + " | ".join(f"{r['votes'] / 1e6:g}M votes" for r in rows) + " |"
    lines = [head, "|" + "---|" * (len(rows) + 2)]
    for label, path, _, target in FIGURES:
        cells = [_figure(r, path) for r in rows]
        lines.append(f"| {label} | {target} | " + " | ".join("-" if c is None else f"{c:,.1f}" for c in cells) + " |")
    loads = " | ".join(f"{r['load_average_before'][0]:.1f} -> {r['load_average_after'][0]:.1f}" for r in rows)
    lines.append(f"| load average (1 min) before -> after | | {loads} |")
    return "\n".join(lines)


def chart(report: dict, path: Path) -> None:
    """docs/scale.html: each figure against the vote count (log axis), one panel per figure."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = sorted(report["sizes"], key=lambda r: r["votes"])
    votes = [r["votes"] for r in rows]
    fig = make_subplots(rows=len(FIGURES), cols=1, subplot_titles=[f[0] for f in FIGURES], vertical_spacing=0.04)
    for k, (label, fpath, unit, _) in enumerate(FIGURES, start=1):
        fig.add_trace(go.Scatter(x=votes, y=[_figure(r, fpath) for r in rows], mode="lines+markers", name=label), row=k, col=1)
        fig.update_xaxes(type="log", title_text="votes stored", row=k, col=1)
        fig.update_yaxes(title_text=unit, row=k, col=1)
    fig.update_layout(height=260 * len(FIGURES), showlegend=False, title="Podium at 1M-10M votes (bench/scale.py)")
    path.write_text(fig.to_html(include_plotlyjs="cdn", full_html=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,3000000,10000000")
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--chart", action="store_true", help="write docs/scale.html")
    parser.add_argument("--report", type=Path, help="only print the table (and --chart) of an earlier scale.json")
    parser.add_argument("--reuse", action="store_true", help="keep the votes of an earlier run and add to them")
    args = parser.parse_args()
    if args.report:
        report = json.loads(args.report.read_text())
        print(table(report))
        if args.chart:
            chart(report, ROOT / "docs" / "scale.html")
        return 0
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.reuse:  # a reused database already past some sizes: measure those on the way down
        sizes = sizes[::-1]
    if not sizes or sizes[0] < 1000 or sizes[-1] > 20_000_000 or not 2 <= args.models <= 1000:
        raise SystemExit("sizes between 1,000 and 20,000,000 votes; 2 to 1,000 models")
    OUT.mkdir(exist_ok=True)
    url, seeded = database_create(args.reuse)
    env = web_servers.server_env(url, web_servers.redis_url())
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECURE_SSL", "DEBUG",
                                            "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PODIUM_VAR_DIR")})  # fmt: skip
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    report: dict = {"args": vars(args), "cores": os.cpu_count(), "sizes": []}
    if not seeded:
        with connection.cursor() as cursor:
            scale_data.models_create(cursor, args.models)
        began = time.monotonic()
        scale_data.submissions_create(args.submissions)
        report["submissions_seed_s"] = round(time.monotonic() - began, 1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM leaderboard_submission")
        submissions = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM arena_battle WHERE ip_hash <> 'scale'")
        have = cursor.fetchone()[0]
    if submissions < args.submissions:  # a reused database made with fewer
        scale_data.submissions_create(args.submissions - submissions, start=submissions)
    for size in sizes:
        with connection.cursor() as cursor:
            if size >= have:
                report.setdefault("generation_s", {})[size] = round(
                    scale_data.votes_add(cursor, start=have, stop=size, n_models=args.models), 1
                )
            else:
                report.setdefault("shrink_s", {})[size] = round(scale_data.votes_keep(cursor, size), 1)
        have = size
        report["sizes"].append(one_size(size, env, args))
        (OUT / "scale.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str))
    print(table(report))
    if args.chart:
        chart(report, ROOT / "docs" / "scale.html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
