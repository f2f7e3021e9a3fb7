"""The n-gram overlap scan: which benchmark items occur in a training corpus.

An item is *flagged* when at least ``min_matches`` of its distinct n-grams (13 words by default)
occur anywhere in the corpus (GPT-3's "dirty" examples). The scan finds verbatim and lightly edited
copies; a paraphrase shares no 13-gram and passes unseen, so a clean scan is a floor on
contamination, not a proof of its absence::

    from evalcore.contamination import scan_corpus, write_scan
    result = scan_corpus(["gsm8k"], "corpus/", n=13, seed=0)
    write_scan(result, "out/")          # out/contaminated.jsonl, out/report.json
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalcore.contamination.corpus import BLOCK_BYTES, MAX_LINE_BYTES, CorpusStats, read_chunks
from evalcore.contamination.items import BenchmarkItem, benchmark_items
from evalcore.contamination.ngrams import NgramIndex, build_index
from evalcore.contamination.tokens import ChunkWords, WordHasher


@dataclass(frozen=True)
class ItemMatch:
    """One flagged item: ``matched_ngrams`` of its ``ngrams`` distinct n-grams occur in the corpus."""

    task: str
    doc_id: int
    matched_ngrams: int
    ngrams: int
    share: float

    def as_dict(self) -> dict:
        return {"task": self.task, "doc_id": self.doc_id, "matched_ngrams": self.matched_ngrams,
                "ngrams": self.ngrams, "share": round(self.share, 6)}  # fmt: skip


@dataclass(frozen=True)
class TaskSummary:
    """Per task: items scanned, items flagged, their share, and items too short to have an n-gram."""

    task: str
    items: int
    flagged: int
    share: float
    too_short: int

    def as_dict(self) -> dict:
        return {"items": self.items, "flagged": self.flagged, "share": round(self.share, 6), "too_short": self.too_short}


@dataclass(frozen=True)
class ScanResult:
    """What a scan found.

    Attributes
    ----------
    n : int
    min_matches : int
    flagged : tuple of ItemMatch
        In task then document order.
    tasks : dict
        Task name -> TaskSummary.
    corpus : dict
        :meth:`CorpusStats.as_dict`: files, bytes, lines, documents, lines skipped and why.
    benchmark_ngrams : int
        Distinct n-grams held in memory.
    """

    n: int
    min_matches: int
    flagged: tuple[ItemMatch, ...]
    tasks: dict
    corpus: dict
    benchmark_ngrams: int

    def flagged_doc_ids(self, task: str) -> set[int]:
        """Document ids of ``task`` the scan flagged (the clean subset is every other item)."""
        return {m.doc_id for m in self.flagged if m.task == task}

    def report(self) -> dict:
        """The ``report.json`` mapping."""
        return {
            "n": self.n,
            "min_matches": self.min_matches,
            "benchmark_ngrams": self.benchmark_ngrams,
            "tasks": {name: summary.as_dict() for name, summary in self.tasks.items()},
            "corpus": self.corpus,
        }


def _confirmed(index: NgramIndex, row: int, start: int, tail: list[str], chunk: ChunkWords) -> bool:
    """Whether the window at ``start`` holds the words of n-gram ``row`` (rules out hash collisions)."""
    expected = [index.words[h] for h in index.grams[row].tolist()]
    got = [tail[k] if k < len(tail) else chunk.word(k - len(tail)) for k in range(start, start + index.n)]
    return got == expected


def scan_index(index: NgramIndex, corpus, *, block_bytes: int = BLOCK_BYTES,
               max_line_bytes: int = MAX_LINE_BYTES) -> tuple[np.ndarray, CorpusStats]:  # fmt: skip
    """Stream ``corpus`` (paths) past ``index``.

    Returns
    -------
    found : ndarray, shape (M,), bool
        Whether each benchmark n-gram (a row of ``index.grams``) occurs in the corpus.
    stats : CorpusStats
    """
    stats = CorpusStats()
    found = np.zeros(index.hashes.size, dtype=bool)
    hasher = WordHasher(index.word_multiplier)
    keep = index.n - 1
    tail_values, tail_words = np.empty(0, dtype=np.uint64), []
    for raw, continues in read_chunks(corpus, stats=stats, block_bytes=block_bytes, max_line_bytes=max_line_bytes):
        chunk = hasher.chunk(raw)
        if not continues:
            tail_values, tail_words = tail_values[:0], []
        values = np.concatenate([tail_values, chunk.hashes]) if tail_values.size else chunk.hashes
        rows, starts = index.match(values)
        new = ~found[rows]
        if new.any():
            rows, first = np.unique(rows[new], return_index=True)
            for row, start in zip(rows.tolist(), starts[new][first].tolist()):
                found[row] = _confirmed(index, row, start, tail_words, chunk)
        size = chunk.hashes.size
        tail_words = (tail_words + [chunk.word(k) for k in range(max(0, size - keep), size)])[-keep:]
        tail_values = values[max(0, values.size - keep) :]
    return found, stats


def item_matches(index: NgramIndex, found: np.ndarray) -> np.ndarray:
    """Distinct n-grams found per item: shape (M,) bool -> (I,) int64."""
    per_pair = np.repeat(found, np.diff(index.owner_ptr))
    return np.bincount(index.owner_items, weights=per_pair, minlength=len(index.items)).astype(np.int64)


def summarise(index: NgramIndex, found: np.ndarray, stats: CorpusStats, *, min_matches: int) -> ScanResult:
    """Turn per-n-gram hits into flagged items and per-task summaries."""
    matched = item_matches(index, found)
    flagged, tasks = [], {}
    for i, item in enumerate(index.items):
        summary = tasks.setdefault(item.task, {"items": 0, "flagged": 0, "too_short": 0})
        summary["items"] += 1
        total = int(index.item_ngrams[i])
        if total == 0:
            summary["too_short"] += 1
        if total and matched[i] >= min_matches:
            summary["flagged"] += 1
            flagged.append(ItemMatch(item.task, item.doc_id, int(matched[i]), total, float(matched[i] / total)))
    summaries = {
        name: TaskSummary(name, s["items"], s["flagged"], s["flagged"] / s["items"] if s["items"] else 0.0, s["too_short"])
        for name, s in tasks.items()
    }
    return ScanResult(index.n, min_matches, tuple(flagged), summaries, stats.as_dict(), int(index.hashes.size))


def scan_items(items: Sequence[BenchmarkItem], corpus, *, n: int = 13, min_matches: int = 1, seed: int = 0,
               block_bytes: int = BLOCK_BYTES, max_line_bytes: int = MAX_LINE_BYTES) -> ScanResult:  # fmt: skip
    """Scan ``corpus`` (a path or a list of paths) for the n-grams of ``items``; see :func:`scan_corpus`."""
    if isinstance(min_matches, bool) or not isinstance(min_matches, int) or min_matches < 1:
        raise ValueError(f"min_matches must be a positive integer, got {min_matches!r}")
    index = build_index(items, n=n, rng=np.random.default_rng(seed))
    found, stats = scan_index(index, corpus, block_bytes=block_bytes, max_line_bytes=max_line_bytes)
    return summarise(index, found, stats, min_matches=min_matches)


def scan_corpus(tasks: Sequence[str], corpus, *, n: int = 13, min_matches: int = 1, seed: int = 0,
                include_paths=(), max_line_bytes: int = MAX_LINE_BYTES) -> ScanResult:  # fmt: skip
    """Scan a corpus for the evaluation items of ``tasks`` (task, group or tag names).

    Parameters
    ----------
    tasks : sequence of str
    corpus : str, Path or list of them
        ``.txt`` / ``.jsonl`` (``text`` field) files, optionally ``.gz``, or folders of them.
    n : int
        N-gram length in normalised words, 8 to 13.
    min_matches : int
        Distinct n-gram hits that flag an item (1, as in GPT-3).
    seed : int
        Seeds the hash multiplier (results do not depend on it: every hit is confirmed exactly).
    include_paths : sequence of paths
        Extra task folders.
    max_line_bytes : int
        Longer lines are skipped and counted.
    """
    items = benchmark_items(list(tasks), include_paths=include_paths)
    return scan_items(items, corpus, n=n, min_matches=min_matches, seed=seed, max_line_bytes=max_line_bytes)


def write_scan(result: ScanResult, out_dir: str | Path) -> Path:
    """Write ``contaminated.jsonl`` (one line per flagged item) and ``report.json``; return the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "contaminated.jsonl", "w", encoding="utf-8") as handle:
        for match in result.flagged:
            handle.write(json.dumps(match.as_dict()) + "\n")
    (out / "report.json").write_text(json.dumps(result.report(), indent=2) + "\n", encoding="utf-8")
    return out
