"""Caches for judgments and generated answers, over a pluggable key-value store.

A judgment is keyed by (judge key, protocol sha256, prompt sha256): the judge key is the judge's
weights hash (plus dtype), so re-running a judge on the same prompts reproduces every number without a
model call, and a different judge, protocol or prompt never hits a stale entry. Answers are keyed by
(model key, generation settings, instruction sha256).

A store is anything with ``get_many(keys) -> {key: dict}`` and ``put_many({key: dict})``:
:class:`MemoryStore` (tests), :class:`SqliteStore` (the command line), or a site's own store backed
by database rows. Only successful judgments are stored, so a re-run retries the failed ones.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from evalcore.judging.records import Judgment

SQLITE_CHUNK = 500


class JudgmentStore(Protocol):
    """The two calls a cache store answers (values are JSON-serialisable dicts)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, dict]: ...

    def put_many(self, items: dict[str, dict]) -> None: ...


class MemoryStore:
    """A store in a dict (one process)."""

    def __init__(self) -> None:
        self.data: dict[str, dict] = {}

    def get_many(self, keys: Sequence[str]) -> dict[str, dict]:
        return {k: json.loads(json.dumps(self.data[k])) for k in keys if k in self.data}

    def put_many(self, items: dict[str, dict]) -> None:
        self.data.update(json.loads(json.dumps(items)))


class SqliteStore:
    """A store in one SQLite file (``entries(key TEXT PRIMARY KEY, value TEXT)``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"cache file {str(self.path)!r} is not a usable SQLite database: {exc}") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        keys = list(keys)
        with self._lock:
            for start in range(0, len(keys), SQLITE_CHUNK):
                chunk = keys[start : start + SQLITE_CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, value in self._db.execute(f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk):
                    out[key] = json.loads(value)
        return out

    def put_many(self, items: dict[str, dict]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO entries (key, value) VALUES (?, ?)",
                [(k, json.dumps(v, sort_keys=True)) for k, v in items.items()],
            )
            self._db.commit()

    def close(self) -> None:
        self._db.close()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JudgmentCache:
    """Judgments of one judge under one protocol, keyed by prompt sha256.

    Parameters
    ----------
    store : JudgmentStore
    judge_key : str
        The judge's weights hash (see :func:`evalcore.judging.judge.judge_key`).
    protocol_sha256 : str
    """

    def __init__(self, store: JudgmentStore, *, judge_key: str, protocol_sha256: str) -> None:
        if not judge_key or not protocol_sha256:
            raise ValueError("a judgment cache needs the judge key and the protocol hash")
        self.store = store
        self.judge_key = judge_key
        self.protocol_sha256 = protocol_sha256

    def key(self, prompt_sha256: str) -> str:
        return f"judgment:{self.judge_key}:{self.protocol_sha256}:{prompt_sha256}"

    def lookup(self, prompt_shas: Iterable[str]) -> dict[str, dict]:
        """Stored verdict fields by prompt sha256 (only the prompts found)."""
        shas = list(dict.fromkeys(prompt_shas))
        found = self.store.get_many([self.key(s) for s in shas])
        return {s: found[self.key(s)] for s in shas if self.key(s) in found}

    def save(self, judgments: Iterable[Judgment]) -> None:
        """Store the verdict fields of every successful judgment."""
        fields = {}
        for j in judgments:
            if j.ok and not j.cached:
                fields[j.prompt_sha256] = {"p_first": j.p_first, "verdict": j.verdict, "winner": j.winner,
                                           "weight": j.weight, "raw": j.raw}
        self.save_fields(fields)

    def save_fields(self, fields: dict[str, dict]) -> None:
        """Store result fields by prompt sha256 (None values dropped)."""
        items = {self.key(sha): {k: v for k, v in f.items() if v is not None} for sha, f in fields.items()}
        if items:
            self.store.put_many(items)


class AnswerCache:
    """Generated answers keyed by (model key, generation settings, instruction sha256)."""

    def __init__(self, store: JudgmentStore) -> None:
        self.store = store

    @staticmethod
    def key(model_key: str, settings: dict, instruction: str) -> str:
        digest = sha256_text(json.dumps(settings, sort_keys=True))[:16]
        return f"answer:{model_key}:{digest}:{sha256_text(instruction)}"

    def lookup(self, model_key: str, settings: dict, instructions: Sequence[str]) -> dict[str, dict]:
        keys = [self.key(model_key, settings, text) for text in instructions]
        return self.store.get_many(keys)

    def save(self, model_key: str, settings: dict, answers: dict[str, dict]) -> None:
        """``answers``: instruction text -> ``{"answer": str, "num_tokens": int, ...}``."""
        self.store.put_many({self.key(model_key, settings, text): value for text, value in answers.items()})
