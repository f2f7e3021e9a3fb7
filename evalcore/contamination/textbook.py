"""The n-gram scan written as the textbook writes it: a set of word tuples, the corpus word by word.

Kept as the reference the vectorised scan (:mod:`evalcore.contamination.scan`) is checked against in
the tests and timed against in ``bench/contamination.py``. It reads clean corpora only (no bounds on
line length, strict UTF-8) and holds n-grams as Python tuples of strings.
"""

from __future__ import annotations

import gzip
import json
from collections import deque
from collections.abc import Sequence

from evalcore.contamination.corpus import corpus_files
from evalcore.contamination.items import BenchmarkItem, normalise, words


def _open_text(path):
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115


def textbook_scan(items: Sequence[BenchmarkItem], corpus, *, n: int = 13) -> dict[int, int]:
    """Distinct n-grams of each item found in ``corpus``: item index -> count (items with a hit only)."""
    table: dict[tuple, list[int]] = {}
    for i, item in enumerate(items):
        tokens = words(item.text)
        for grams in {tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1)}:
            table.setdefault(grams, []).append(i)
    found: set[tuple] = set()
    paths = [corpus] if not isinstance(corpus, list | tuple) else corpus
    for path in paths:
        for file in corpus_files(path):
            jsonl = file.name.endswith((".jsonl", ".jsonl.gz"))
            window: deque = deque(maxlen=n)
            with _open_text(file) as handle:
                for line in handle:
                    if jsonl:
                        if not line.strip():
                            continue
                        line = json.loads(line)["text"]
                        window.clear()
                    for word in normalise(line).split():
                        window.append(word)
                        if len(window) == n:
                            grams = tuple(window)
                            if grams in table:
                                found.add(grams)
    matched: dict[int, int] = {}
    for grams in found:
        for i in table[grams]:
            matched[i] = matched.get(i, 0) + 1
    return matched
