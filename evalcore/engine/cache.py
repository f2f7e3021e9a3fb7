"""A SQLite cache of model responses, keyed by model identity and request, so runs can resume.

:class:`CachedBackend` wraps any backend: requests already answered for the same model identity
are read from the cache, the rest go to the model in chunks, and every chunk is committed as
soon as it is computed, so an interrupted run loses at most one chunk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from pathlib import Path

from evalcore.models.base import (
    Backend,
    GenerationResult,
    LoglikelihoodResult,
    RollingResult,
)

CHUNK = 256
_RESULT_TYPES = {
    "loglikelihood": LoglikelihoodResult,
    "loglikelihood_rolling": RollingResult,
    "generate_until": GenerationResult,
}


class RequestCache:
    """Responses stored by ``sha256(model key, request kind, request fields)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path))
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, kind TEXT, value TEXT NOT NULL)"
        )
        self.db.commit()

    @staticmethod
    def key(model_key: str, kind: str, request) -> str:
        fields = dataclasses.asdict(request)
        if "messages" in fields and not fields["messages"]:
            del fields["messages"]  # text-only requests keep the keys they had before messages existed
        payload = json.dumps([model_key, kind, fields], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, value in self.db.execute(
                f"SELECT key, value FROM responses WHERE key IN ({marks})", part
            ):
                found[key] = value
        return found

    def put_many(self, kind: str, items: list[tuple[str, str]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO responses (key, kind, value) VALUES (?, ?, ?)",
            [(k, kind, v) for k, v in items],
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()


class CachedBackend(Backend):
    """A backend whose benchmark requests go through a :class:`RequestCache`."""

    def __init__(self, backend: Backend, cache: RequestCache) -> None:
        self.inner = backend
        self.cache = cache
        self.name = backend.name
        self.hits = 0
        self.misses = 0

    @property
    def identity(self):
        return self.inner.identity

    def _run(self, kind: str, requests, progress):
        model_key = self.inner.identity.key
        keys = [RequestCache.key(model_key, kind, r) for r in requests]
        found = self.cache.get_many(keys)
        result_type = _RESULT_TYPES[kind]
        results = [result_type(**json.loads(found[k])) if k in found else None for k in keys]
        missing = [i for i, r in enumerate(results) if r is None]
        self.hits += len(requests) - len(missing)
        self.misses += len(missing)
        if progress is not None and len(requests) > len(missing):
            progress(len(requests) - len(missing))
        method = getattr(self.inner, kind)
        size = int(getattr(self.inner, "cache_chunk", CHUNK))  # an endpoint answers one by one: commit often
        for start in range(0, len(missing), size):
            chunk = missing[start : start + size]
            answers = method([requests[i] for i in chunk], progress=progress)
            rows = []
            for i, answer in zip(chunk, answers):
                results[i] = answer
                rows.append((keys[i], json.dumps(dataclasses.asdict(answer))))
            self.cache.put_many(kind, rows)
        return results

    def loglikelihood(self, requests, *, progress=None):
        return self._run("loglikelihood", requests, progress)

    def loglikelihood_rolling(self, requests, *, progress=None):
        return self._run("loglikelihood_rolling", requests, progress)

    def generate_until(self, requests, *, progress=None):
        return self._run("generate_until", requests, progress)

    def stream_chat(self, messages, params=None):
        return self.inner.stream_chat(messages, params)

    def chat_context(self, messages, **template) -> str:
        return self.inner.chat_context(messages, **template)

    def chat_template_choice(self, name: str | None = None) -> dict:
        return self.inner.chat_template_choice(name)

    @property
    def sends_messages(self) -> bool:
        return bool(getattr(self.inner, "sends_messages", False))

    @property
    def scores_loglikelihood(self) -> bool:
        return bool(getattr(self.inner, "scores_loglikelihood", True))
