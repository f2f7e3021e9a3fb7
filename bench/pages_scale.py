"""Pages and exports at scale (issue 16 §3): the arena board, the leaderboard page and /api/votes.csv
through the production HTTP server, against an existing database (read only), before and after.

    OMP_NUM_THREADS=1 .venv/bin/python bench/pages_scale.py                      # this tree
    OMP_NUM_THREADS=1 .venv/bin/python bench/pages_scale.py --tree /path/to/old  # another checkout

The database is ``SCALE_DB_URL`` (default postgres://postgres@127.0.0.1:5432/podium_scale, as
bench/scale.py leaves it: votes among 200 models, 10,000 finished submissions); nothing is written to it.
gunicorn (2 sync workers, production settings, ``--timeout 600``) serves the tree given (default: this
one) from its own directory. For each page: the first request (the worker renders and keeps it), then
``--requests`` requests in a closed loop on 4 connections after warm-up: p50 and p99. Then
``GET /api/votes.csv`` read to the end (or ``--csv-limit-s``): rows per second and the workers' peak RSS.
The machine's load average goes into the report. Writes bench/out/pages_scale[_<label>].json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench import arena_load, web_servers  # noqa: E402

OUT = ROOT / "bench" / "out"
PAGES = ["/leaderboard/arena/", "/leaderboard/", "/leaderboard/?sort=model&page=37", "/leaderboard/?q=scale&page=2"]


def serve(tree: Path, env: dict) -> tuple[int, subprocess.Popen]:
    sock, port = web_servers.listening_socket()
    log = open(OUT / "pages_scale_server.log", "w")  # noqa: SIM115 - lives as long as the server
    server = subprocess.Popen(
        web_servers.gunicorn_command(sock.fileno(), 2, "sync"), cwd=tree, env={**env, "PYTHONPATH": str(tree)},
        pass_fds=[sock.fileno()], stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    sock.close()
    web_servers.wait_answering(port, f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode(),
                               b"HTTP/1.1", "gunicorn (see bench/out/pages_scale_server.log)")  # fmt: skip
    return port, server


def request(port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


def measure_page(port: int, path: str, n: int) -> dict:
    raw = request(port, path)
    first: list = []
    asyncio.run(arena_load.closed_loop(port, lambda k: raw, 2, 900, 0, 2, first))  # one per worker: cold
    warm: list = []
    asyncio.run(arena_load.closed_loop(port, lambda k: raw, 2, 30, 0, 20, warm))
    results: list = []
    began = time.perf_counter()
    asyncio.run(arena_load.closed_loop(port, lambda k: raw, 4, 300, 0, n, results))
    row = arena_load.summary(results, time.perf_counter() - began)
    row["first_s"] = [round(lat, 2) for _, _, lat in first]
    row["first_statuses"] = [status for _, status, _ in first]
    return row


async def _csv_read(port: int, limit_s: float) -> tuple[int, int, int, bool]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /api/votes.csv HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    stop = time.monotonic() + limit_s
    newlines = size = 0
    cut = False
    while chunk := await reader.read(1 << 20):
        newlines += chunk.count(b"\n")
        size += len(chunk)
        if time.monotonic() > stop:
            cut = True
            break
    writer.close()
    return int(head.split()[1]), newlines, size, cut


def rss_peak_of(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure_csv(port: int, server: subprocess.Popen, votes: int, limit_s: float) -> dict:
    workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True,
                                                 text=True).stdout.split()]  # fmt: skip
    rss_before = max(rss_peak_of(p) for p in workers)
    began = time.monotonic()
    status, newlines, size, cut = asyncio.run(_csv_read(port, limit_s))
    wall = time.monotonic() - began
    rows = max(0, newlines - 1)  # the header; chunked-encoding size lines add a few (one per chunk)
    return {
        "status": status, "wall_s": round(wall, 2), "rows_read_approx": rows, "votes": votes,
        "complete": not cut, "rows_per_s": round(rows / wall), "mb": round(size / 2**20, 1),
        "worker_peak_rss_mb_before": round(rss_before, 1),
        "worker_peak_rss_mb_after": round(max(rss_peak_of(p) for p in workers), 1),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout to serve (default: this one)")
    parser.add_argument("--label", default="", help="suffix of the output file")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--pages", default=",".join(PAGES))
    parser.add_argument("--csv-limit-s", type=float, default=300)
    parser.add_argument("--no-csv", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    db_url = os.environ.get("SCALE_DB_URL", "postgres://postgres@127.0.0.1:5432/podium_scale")
    env = web_servers.server_env(db_url, web_servers.redis_url())

    with psycopg.connect(db_url) as db:
        votes = db.execute("SELECT count(*) FROM arena_vote WHERE counted").fetchone()[0]
        subs = db.execute("SELECT count(*) FROM leaderboard_submission WHERE status = 'FINISHED'").fetchone()[0]
    report = {"tree": str(args.tree), "votes": votes, "submissions": subs, "load_before": os.getloadavg()}
    print(f"{votes:,} counted votes, {subs:,} finished submissions; serving {args.tree}", flush=True)
    port, server = serve(args.tree, env)
    try:
        report["pages"] = {}
        for path in args.pages.split(","):
            row = measure_page(port, path, args.requests)
            report["pages"][path] = row
            print(f"{path}: first {row['first_s']} s, p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms "
                  f"({row['statuses']})", flush=True)  # fmt: skip
        if not args.no_csv:
            report["csv"] = measure_csv(port, server, votes, args.csv_limit_s)
            print(f"votes.csv: {report['csv']}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report["load_after"] = os.getloadavg()
    name = f"pages_scale_{args.label}.json" if args.label else "pages_scale.json"
    (OUT / name).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
