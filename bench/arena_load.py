"""Arena load benchmark: vote submissions per second and the arena leaderboard page, over loopback.

    OMP_NUM_THREADS=1 .venv/bin/python bench/arena_load.py                 # 300 votes/s for 20 s
    .venv/bin/python bench/arena_load.py --rate 500 --duration 30 --web-procs 3
    .venv/bin/python bench/arena_load.py --server uvicorn --web-procs 4     # ASGI, for comparison

Setup (through the ORM, not timed): a PostgreSQL database (``DATABASE_URL``, else it creates
``podium_bench`` on postgres://postgres@127.0.0.1:5432), 6 arena models, 200 voter sessions, finished
battles (one per vote to be cast) and 3,000 earlier votes refitted into snapshots (1,000 rounds) so the
leaderboard page has a full table and charts. Then the web server (``--server``: gunicorn with
``--web-procs`` sync workers, production's HTTP server, or that many uvicorn/daphne processes;
production settings, DEBUG off, a psycopg pool per process) serves one loopback socket, with Redis
(``REDIS_URL``, default redis://127.0.0.1:6379/14) for sessions and the cache that holds rate limits
and the refit debounce. Refit tasks go
to an in-process broker that nothing consumes: the bench measures the web tier, not the fits.

Phases, each an open loop (requests start on a fixed schedule whether or not earlier ones finished, and
latency counts from the scheduled start, so a stalled server cannot hide its queue):
1. ``page``: GET /leaderboard/arena/ at ``--page-rate`` for 10 s, alone;
2. ``votes``: POST /arena/battles/<id>/vote/ (the voter's session cookie and CSRF token, a random
   winner) at ``--rate`` for ``--duration`` s, with the page fetched at 5/s alongside;
3. ``saturation``: votes in a closed loop on 16 connections for 10 s (the ceiling).
Pages are fetched for 3 s before timing (each process imports plotly and renders the board once).
The machine's load average before and after goes into the report: other work on the same cores skews
every figure; so does the votes phase's p99 for each second (where a slow stretch sits). Then every accepted vote (HTTP 201) must be a row and every row an accepted vote. Rate limits are
raised for the run (ARENA_VOTES_PER_MINUTE): a bench is one IP address. Prints a table and writes
bench/out/arena_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.web_servers import database_url, page_request, redis_url, server_env, start_servers  # noqa: E402

MODELS = ["bench-alpha", "bench-beta", "bench-gamma", "bench-delta", "bench-epsilon", "bench-zeta"]
WINNERS = ["model_a", "model_b", "tie", "tie (bothbad)"]
GRACE_S = 10.0  # an open-loop phase stops sending this long after its last scheduled start


def seed(n_battles: int) -> dict:
    """Models, sessions, finished battles awaiting a vote, earlier votes and their snapshots."""
    import django

    django.setup()
    from importlib import import_module

    from django.conf import settings
    from django.core.management import call_command

    from arena.models import Battle, LanguageModel, Turn, Vote
    from arena.play.identity import salted_hash
    from arena.publication.consent import consent_give, terms_version
    from arena.ratings.refit import snapshots_refit
    from common.public_ids import battle_id

    call_command("migrate", verbosity=0)
    models = [LanguageModel.objects.create(name=n, in_arena=True) for n in MODELS]
    SessionStore = import_module(settings.SESSION_ENGINE).SessionStore  # the servers' engine  # noqa: N806
    sessions = []
    for _ in range(200):
        store = SessionStore()
        store["arena"] = True
        consent_give(store, terms_version())  # the voter agreed to the arena's terms (arena/publication/consent.py)
        store.create()
        sessions.append(store.session_key)
    rng = np.random.default_rng(0)
    strength = rng.normal(0, 0.5, len(models))

    def battles(n: int, voted: bool) -> list[Battle]:
        out = []
        for k in range(n):
            a, b = rng.choice(len(models), size=2, replace=False)
            key = sessions[k % len(sessions)]
            out.append(
                Battle(
                    model_a=models[a],
                    model_b=models[b],
                    session_hash=salted_hash(key, purpose="session"),
                    ip_hash="bench",
                    status=Battle.Status.VOTED if voted else Battle.Status.ACTIVE,
                )  # fmt: skip
            )
        return Battle.objects.bulk_create(out, batch_size=2000)

    answer = "## Answer\n\n- first point\n- second point\n\nSome **bold** prose. " * 3
    fresh = battles(n_battles, voted=False)
    Turn.objects.bulk_create(
        [
            Turn(battle=b, index=0, prompt="Explain rainbows.", answer_a=answer, answer_b=answer[:120],
                 status_a=Turn.SideStatus.DONE, status_b=Turn.SideStatus.DONE)
            for b in fresh
        ],
        batch_size=2000,
    )  # fmt: skip
    earlier = battles(3000, voted=True)
    votes = []
    for battle in earlier:
        a, b = models.index(battle.model_a), models.index(battle.model_b)
        p = 1 / (1 + np.exp(strength[b] - strength[a]))
        votes.append(
            Vote(
                battle=battle,
                model_a=battle.model_a,
                model_b=battle.model_b,
                winner=WINNERS[0 if rng.random() < p else 1],
                model_a_position="left",
                turn_count=1,
                battle_started_at=battle.created_at,
                language="en",
                style_a={"tokens": int(rng.integers(50, 400)), "headers": 1, "list_items": 2, "bold": 1},
                style_b={"tokens": int(rng.integers(50, 400)), "headers": 0, "list_items": 0, "bold": 0},
                prompt_tokens=5,
                session_hash="earlier",
                ip_hash="earlier",
            )  # fmt: skip
        )
    Vote.objects.bulk_create(votes, batch_size=2000)
    started = time.monotonic()
    refit = snapshots_refit(rounds=1000)
    refit["wall_s"] = round(time.monotonic() - started, 2)
    targets = [(battle_id(b.public_id), sessions[k % len(sessions)]) for k, b in enumerate(fresh)]
    return {"targets": targets, "refit": refit, "battle_ids": [b.pk for b in fresh]}


class Conn:
    """One keep-alive HTTP/1.1 connection with just enough parsing for Django's responses."""

    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None

    async def request(self, raw: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if "content-length" in headers:
            await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            while size := int((await self.reader.readline()).strip(), 16):
                await self.reader.readexactly(size + 2)
            await self.reader.readline()
        if headers.get("connection", "").lower() == "close":
            self.writer.close()
            self.writer = None
        return status


def vote_request(port: int, public_id: str, session_key: str, winner: str) -> bytes:
    token = secrets.token_hex(16)  # 32 characters: a valid CSRF secret, sent as cookie and header
    body = f"winner={winner.replace(' ', '+').replace('(', '%28').replace(')', '%29')}".encode()
    return (
        f"POST /arena/battles/{public_id}/vote/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Cookie: sessionid={session_key}; csrftoken={token}\r\nX-CSRFToken: {token}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def open_loop(port: int, make, rate: float, duration: float, pool_size: int, results: list) -> None:
    """Start request k at t0 + k / rate on a free connection; latency counts from the scheduled time.

    Requests still waiting for a connection :data:`GRACE_S` after the phase's end are not sent (and
    reported as such): a server far below the rate cannot stretch the run without bound.
    """
    pool: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(pool_size):
        pool.put_nowait(Conn(port))
    t0 = time.perf_counter()
    deadline = t0 + duration + GRACE_S

    async def one(k: int, due: float) -> None:
        conn = await pool.get()
        if time.perf_counter() > deadline:  # bounded: a backlog left at the deadline is not sent
            pool.put_nowait(conn)
            results.append((k, "not sent", float("nan")))
            return
        try:
            status = await conn.request(make(k))
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            conn.writer = None
            status = f"error {type(exc).__name__}"
        finally:
            pool.put_nowait(conn)
        results.append((k, status, time.perf_counter() - due))

    tasks = []
    for k in range(int(rate * duration)):
        due = t0 + k / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(k, due)))
    await asyncio.gather(*tasks)


async def closed_loop(
    port: int, make, connections: int, duration: float, start: int, limit: int, results: list
) -> None:
    counter = iter(range(start, 10**9))
    stop = time.perf_counter() + duration

    async def worker() -> None:
        conn = Conn(port)
        while time.perf_counter() < stop:
            k = next(counter)
            if k >= limit:
                return
            began = time.perf_counter()
            try:
                status = await conn.request(make(k))
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                conn.writer = None
                status = f"error {type(exc).__name__}"
            results.append((k, status, time.perf_counter() - began))

    await asyncio.gather(*(worker() for _ in range(connections)))


def summary(results: list, wall: float) -> dict:
    ok = [lat for _, status, lat in results if status in (200, 201)]
    lat = np.asarray(ok) * 1000 if ok else np.asarray([np.nan])
    statuses: dict[str, int] = {}
    for _, status, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {
        "requests": len(results), "ok": len(ok), "per_s": round(len(ok) / wall, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 1), "p99_ms": round(float(np.percentile(lat, 99)), 1),
        "max_ms": round(float(lat.max()), 1), "statuses": statuses,
    }  # fmt: skip


def p99_by_second(results: list, rate: float) -> list[float]:
    """The votes phase's p99 latency for each second of the schedule (where a slow stretch sits)."""
    buckets: dict[int, list[float]] = {}
    for k, status, latency in results:
        if status in (200, 201):
            buckets.setdefault(int(k / rate), []).append(latency * 1000)
    return [round(float(np.percentile(buckets[s], 99)), 1) for s in sorted(buckets)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=300.0, help="votes per second in the votes phase")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of the votes phase (max 120)")
    parser.add_argument("--page-rate", type=float, default=50.0)
    parser.add_argument("--web-procs", type=int, default=2, help="server processes sharing the socket")
    parser.add_argument("--server", choices=("gunicorn", "gunicorn-gthread", "uvicorn", "daphne"), default="gunicorn",
        help="gunicorn: WSGI sync workers (production's HTTP server); gunicorn-gthread: 2 threads each; "
        "uvicorn, daphne: ASGI servers (production's WebSocket server), one process each",
    )
    args = parser.parse_args()
    if not (0 < args.rate <= 2000 and 0 < args.duration <= 120 and 0 < args.page_rate <= 500):
        raise SystemExit("bounded run: --rate up to 2000/s, --duration up to 120 s, --page-rate up to 500/s")
    (ROOT / "bench" / "out").mkdir(exist_ok=True)
    env = server_env(database_url(), redis_url())
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECURE_SSL", "DEBUG",
                                            "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PODIUM_VAR_DIR")})  # fmt: skip
    saturation_budget = 2000 * 10
    print("seeding...", flush=True)
    data = seed(int(args.rate * args.duration) + saturation_budget)
    targets = data["targets"]
    print(f"refit of 3,000 earlier votes for the page: {data['refit']}", flush=True)
    port, servers = start_servers(env, args.web_procs, args.server)
    report: dict = {"args": vars(args), "cores": os.cpu_count(), "refit": data["refit"]}
    rng = random.Random(1)
    try:

        def vote(k: int) -> bytes:
            public_id, key = targets[k]
            return vote_request(port, public_id, key, rng.choice(WINNERS))

        warm: list = []  # first requests of each process import plotly and render the board: not timed
        asyncio.run(open_loop(port, lambda k: page_request(port), 10, 3, 8, warm))
        report["load_average_before"] = os.getloadavg()
        results: list = []
        t = time.perf_counter()
        asyncio.run(open_loop(port, lambda k: page_request(port), args.page_rate, 10, 32, results))
        report["page"] = summary(results, time.perf_counter() - t)
        votes: list = []
        pages: list = []

        async def votes_phase() -> None:
            await asyncio.gather(
                open_loop(port, vote, args.rate, args.duration, 48, votes),
                open_loop(port, lambda k: page_request(port), 5, args.duration, 4, pages),
            )

        t = time.perf_counter()
        asyncio.run(votes_phase())
        report["votes"] = summary(votes, time.perf_counter() - t)
        report["votes"]["p99_ms_by_second"] = p99_by_second(votes, args.rate)
        report["page_during_votes"] = summary(pages, time.perf_counter() - t)
        saturated: list = []
        t = time.perf_counter()
        start = int(args.rate * args.duration)
        asyncio.run(closed_loop(port, vote, 16, 10, start, len(targets), saturated))
        report["saturation"] = summary(saturated, time.perf_counter() - t)
        report["load_average_after"] = os.getloadavg()
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=20)
    from arena.models import Vote
    from common.public_ids import battle_id

    accepted = {targets[k][0] for k, status, _ in votes + saturated if status == 201}
    rows = set(
        Vote.objects.filter(battle_id__in=data["battle_ids"]).values_list("battle__public_id", flat=True)
    )
    rows = {battle_id(r) for r in rows}
    report["integrity"] = {
        "accepted": len(accepted), "rows": len(rows), "lost": len(accepted - rows), "unexpected": len(rows - accepted),
    }  # fmt: skip
    (ROOT / "bench" / "out" / "arena_load.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    ok = report["integrity"]["lost"] == 0 and report["integrity"]["unexpected"] == 0
    print("no vote lost" if ok else "VOTES LOST OR UNEXPECTED: see integrity", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
