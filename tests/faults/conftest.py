"""Fixtures of the fault tests: servers of their own to restart, arena models, a browser-like client."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import httpx
import pytest

from arena.models import LanguageModel
from tests.faults.servers import PrivatePostgres, PrivateRedis
from tests.leaderboard.conftest import tiny_dir  # noqa: F401 - the tiny real checkpoint, for submissions
from tests.leaderboard.polling import wait_until  # noqa: F401 - the fault tests import it from here


def kill_all(processes) -> None:
    """SIGKILL every process a test started (and their children): throwaway servers and workers need
    no graceful shutdown, which costs seconds each on a busy machine."""
    for process, _ in processes.processes:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(autouse=True)
def quick_stop(processes):
    yield
    kill_all(processes)


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    yield server
    server.destroy()


def arena_models(smollm2_dir, *, max_new_tokens: int) -> list[LanguageModel]:
    """Two arena models on the real SmolLM2 (greedy and sampled), answering up to ``max_new_tokens``."""
    common = {"backend": "hf", "model_args": {"path": smollm2_dir.name}, "in_arena": True}
    return [
        LanguageModel.objects.create(name="smollm2-greedy", generation={"max_new_tokens": max_new_tokens,
                                     "temperature": 0.0}, **common),
        LanguageModel.objects.create(name="smollm2-sampled", generation={"max_new_tokens": max_new_tokens,
                                     "temperature": 0.7, "seed": 1}, **common),
    ]  # fmt: skip


class Browser:
    """What a browser does over HTTP: keeps cookies, sends the CSRF token with every POST."""

    def __init__(self, base: str):
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=60, follow_redirects=False)

    def get(self, path: str, **kwargs) -> httpx.Response:
        return self.http.get(path, **kwargs)

    def post(self, path: str, data: dict | None = None, **kwargs) -> httpx.Response:
        token = self.http.cookies.get("csrftoken") or ""
        headers = {"X-CSRFToken": token, "Referer": self.base + "/"}
        return self.http.post(path, data=data, headers=headers, **kwargs)

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def browser_at():
    opened: list[Browser] = []

    def open_(base: str) -> Browser:
        opened.append(Browser(base))
        return opened[-1]

    yield open_
    for browser in opened:
        browser.close()
