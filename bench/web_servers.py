"""The web tier the HTTP benches start: gunicorn (production's HTTP server) or uvicorn/daphne
processes on one loopback socket, with production settings, a PostgreSQL database and Redis
(bench/arena_load.py, bench/scale.py, bench/pages_scale.py, bench/live_ratings.py, bench/live_tagged.py)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def database_url(name: str = "podium_bench") -> str:
    """DATABASE_URL, else a fresh PostgreSQL database ``name`` on postgres://postgres@127.0.0.1:5432 (dropped
    and created again: a bench's own; benches that may run side by side give different names)."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def redis_url() -> str:
    """REDIS_URL, else a local Redis on db 14 if one answers, else "" (the file cache)."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1):
            return "redis://127.0.0.1:6379/14"
    except OSError:
        return ""


def server_env(db_url: str, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.prod", SECRET_KEY=secrets.token_urlsafe(48), SECURE_SSL="0",
        DEBUG="0", DATABASE_URL=db_url, REDIS_URL=redis_url, CELERY_BROKER_URL="memory://",
        ARENA_VOTES_PER_MINUTE="10000000", PODIUM_VAR_DIR=str(ROOT / "bench" / "out" / "arena_var"),
        OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
    )  # fmt: skip
    env.setdefault("DATABASE_POOL_SIZE", "4")  # per server process; 0 opens a connection per request
    return env


def page_request(port: int) -> bytes:
    return f"GET /leaderboard/arena/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


def server_command(server: str, fd: int) -> list[str]:
    """The ASGI server's command line, serving the socket ``fd`` it inherits."""
    bindir = Path(sys.executable).parent
    if server == "daphne":
        return [str(bindir / "daphne"), "--fd", str(fd), "-v", "0", "config.asgi:application"]
    return [
        str(bindir / "uvicorn"), "--fd", str(fd), "--loop", "uvloop", "--http", "httptools",
        "--lifespan", "off", "--no-access-log", "--log-level", "warning", "config.asgi:application",
    ]  # fmt: skip


GUNICORN_TIMEOUT_S = 600  # as docker/compose.yaml: a long export must not be cut by the 30 s default


def gunicorn_command(fd: int, workers: int, worker_class: str) -> list[str]:
    """Gunicorn (WSGI, the production HTTP server): one master, ``workers`` processes on the socket."""
    command = [
        str(Path(sys.executable).parent / "gunicorn"), "--bind", f"fd://{fd}", "--workers", str(workers),
        "--worker-class", worker_class, "--timeout", str(GUNICORN_TIMEOUT_S), "--log-level", "warning",
        "config.wsgi:application",
    ]  # fmt: skip
    if worker_class == "gthread":
        command[-1:-1] = ["--threads", "2"]
    return command


def listening_socket() -> tuple[socket.socket, int]:
    """A loopback socket on a free port, listening and inheritable: the server processes share it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock, sock.getsockname()[1]


def start_servers(env: dict, procs: int, server: str = "gunicorn") -> tuple[int, list[subprocess.Popen]]:
    sock, port = listening_socket()
    log = open(ROOT / "bench" / "out" / "arena_server.log", "w")  # noqa: SIM115 - lives as long as the servers
    if server.startswith("gunicorn"):
        worker_class = server.partition("-")[2] or "sync"
        commands = [gunicorn_command(sock.fileno(), procs, worker_class)]
    else:
        commands = [server_command(server, sock.fileno()) for _ in range(procs)]
    servers = [
        subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            pass_fds=[sock.fileno()],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        for command in commands
    ]
    sock.close()
    wait_answering(port, page_request(port), b"HTTP/1.1 200", f"{server} (see bench/out/arena_server.log)")
    return port, servers


def wait_answering(port: int, request: bytes, status: bytes, what: str, timeout: float = 60.0) -> None:
    """Send ``request`` to the loopback ``port`` until the answer starts with ``status``; exit naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as probe:
                probe.sendall(request)
                if probe.recv(len(status)).startswith(status):
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{what} did not answer within {timeout:.0f} s")
