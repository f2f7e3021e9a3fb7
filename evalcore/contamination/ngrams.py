"""The benchmark's n-grams in memory, and vectorised matching of corpus words against them.

Every word is represented by a 64-bit hash of its normalised UTF-8 bytes
(:class:`evalcore.contamination.tokens.WordHasher`), and an n-gram by a polynomial rolling hash of
its word hashes modulo 2**64 (numpy's wrapping uint64 arithmetic). Both multipliers are random odd
numbers drawn from ``rng`` and redrawn until no two distinct benchmark words, and no two distinct
benchmark n-grams, share a hash. A corpus window whose n-gram hash is in the benchmark set is
confirmed by comparing its word hashes with the stored n-gram, and the scan compares the words
themselves the first time an n-gram is found, so no hash collision can flag an item.

Memory is that of the benchmark's n-grams: ``M`` distinct n-grams take about ``M * 8 * (n + 2)``
bytes plus a membership table of one byte per ``2**k >= 16 M`` slots, whatever the corpus size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evalcore.contamination.items import BenchmarkItem, words
from evalcore.contamination.tokens import python_word_hash

MIN_N, MAX_N = 8, 13
_MAX_DRAWS = 8
_MIX = np.uint64(0x9E3779B97F4A7C15)


def check_n(n: int) -> int:
    """Validate the n-gram length (8 to 13, as in GPT-3's appendix)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not MIN_N <= n <= MAX_N:
        raise ValueError(f"n must be an integer from {MIN_N} to {MAX_N}, got {n!r}")
    return int(n)


def window_hashes(values: np.ndarray, n: int, multiplier: np.uint64) -> np.ndarray:
    """Polynomial hashes of every length-``n`` window of ``values``.

    Parameters
    ----------
    values : ndarray, shape (T,), uint64
        Word hashes.
    n : int
    multiplier : numpy.uint64

    Returns
    -------
    ndarray, shape (max(T - n + 1, 0),), uint64
        ``h[i] = sum_j values[i + j] * multiplier ** (n - 1 - j)`` modulo 2**64.
    """
    count = values.size - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    hashes = values[:count].copy()
    for j in range(1, n):
        hashes *= multiplier
        hashes += values[j : j + count]
    return hashes


def row_hashes(rows: np.ndarray, multiplier: np.uint64) -> np.ndarray:
    """The same hash for n-grams given as rows: shape (M, n) uint64 -> (M,) uint64."""
    hashes = rows[:, 0].copy()
    for j in range(1, rows.shape[1]):
        hashes *= multiplier
        hashes += rows[:, j]
    return hashes


def table_slots(hashes: np.ndarray, bits: int) -> np.ndarray:
    """Slots of a ``2**bits`` membership table: the top bits of ``hashes * golden``, shape (H,) int64."""
    return ((hashes * _MIX) >> np.uint64(64 - bits)).astype(np.int64)


@dataclass(frozen=True)
class NgramIndex:
    """The distinct n-grams of a set of benchmark items.

    Attributes
    ----------
    n : int
    items : tuple of BenchmarkItem
    word_multiplier : int
        Odd multiplier of the word hash.
    words : dict
        Word hash -> normalised word, for every benchmark word.
    multiplier : numpy.uint64
        Odd multiplier of the n-gram hash.
    hashes : ndarray, shape (M,), uint64
        Sorted, distinct n-gram hashes.
    grams : ndarray, shape (M, n), uint64
        The word hashes of the n-gram behind each of ``hashes``.
    owner_ptr : ndarray, shape (M + 1,), int64
        Items holding n-gram ``r`` are ``owner_items[owner_ptr[r]:owner_ptr[r + 1]]``.
    owner_items : ndarray, shape (P,), int32
        Item indices (into ``items``), one per distinct (n-gram, item) pair.
    item_ngrams : ndarray, shape (I,), int64
        Distinct n-grams per item (0 for an item shorter than ``n`` words).
    table : ndarray, shape (2**k,), bool
        ``table[table_slots(h, k)]`` is True for every benchmark hash (a fast first filter).
    """

    n: int
    items: tuple[BenchmarkItem, ...]
    word_multiplier: int
    words: dict
    multiplier: np.uint64
    hashes: np.ndarray
    grams: np.ndarray
    owner_ptr: np.ndarray
    owner_items: np.ndarray
    item_ngrams: np.ndarray
    table: np.ndarray

    @property
    def table_bits(self) -> int:
        return int(self.table.size).bit_length() - 1

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (the word dict not counted)."""
        arrays = (self.hashes, self.grams, self.owner_ptr, self.owner_items, self.item_ngrams, self.table)
        return int(sum(a.nbytes for a in arrays))

    def match(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Benchmark n-grams found among the windows of ``values``.

        Parameters
        ----------
        values : ndarray, shape (T,), uint64
            Corpus word hashes.

        Returns
        -------
        rows : ndarray, shape (H,), int64
            Indices into ``hashes``/``grams`` of the n-grams found (with repeats).
        starts : ndarray, shape (H,), int64
            Position in ``values`` of the window that matched each.
        """
        none = np.empty(0, dtype=np.int64)
        hashes = window_hashes(values, self.n, self.multiplier)
        if hashes.size == 0 or self.hashes.size == 0:
            return none, none
        candidates = np.flatnonzero(self.table[table_slots(hashes, self.table_bits)])
        if candidates.size == 0:
            return none, none
        wanted = hashes[candidates]
        rows = np.searchsorted(self.hashes, wanted).clip(max=self.hashes.size - 1)
        same = self.hashes[rows] == wanted
        candidates, rows = candidates[same], rows[same]
        windows = values[candidates[:, None] + np.arange(self.n)]
        confirmed = (windows == self.grams[rows]).all(axis=1)
        return rows[confirmed], candidates[confirmed]


def _draw(rng: np.random.Generator) -> int:
    return int(rng.integers(1 << 62, dtype=np.int64)) * 2 + 1


def _word_hashes(vocabulary: set[str], rng: np.random.Generator) -> tuple[int, dict[str, int]]:
    """(odd multiplier, word -> hash) with no two words sharing a hash."""
    for _ in range(_MAX_DRAWS):
        multiplier = _draw(rng)
        table = {word: python_word_hash(word, multiplier) for word in vocabulary}
        if len(set(table.values())) == len(table):
            return multiplier, table
    raise RuntimeError("could not draw a collision-free word hash multiplier")  # pragma: no cover


def _distinct_hashes(rows: np.ndarray, rng: np.random.Generator):
    """(multiplier, sorted unique hashes, first row of each, inverse) without collisions."""
    for _ in range(_MAX_DRAWS):
        multiplier = np.uint64(_draw(rng))
        hashes = row_hashes(rows, multiplier)
        unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        if np.array_equal(rows[first[inverse]], rows):
            return multiplier, unique, first, inverse
    raise RuntimeError("could not draw a collision-free n-gram hash multiplier")  # pragma: no cover


def build_index(items: Sequence[BenchmarkItem], *, n: int = 13, rng: np.random.Generator) -> NgramIndex:
    """Index the distinct n-grams of ``items``.

    Parameters
    ----------
    items : sequence of BenchmarkItem, length I
    n : int
        N-gram length in words, 8 to 13.
    rng : numpy.random.Generator
        Draws the hash multipliers.
    """
    n = check_n(n)
    items = tuple(items)
    tokens = [words(item.text) for item in items]
    word_multiplier, table = _word_hashes({w for t in tokens for w in t}, rng)
    per_item = []
    for t in tokens:
        values = np.fromiter(map(table.__getitem__, t), dtype=np.uint64, count=len(t))
        per_item.append(np.lib.stride_tricks.sliding_window_view(values, n) if len(t) >= n else np.empty((0, n), np.uint64))
    counts = np.array([len(r) for r in per_item], dtype=np.int64)
    rows = np.concatenate(per_item) if per_item else np.empty((0, n), dtype=np.uint64)
    owners = np.repeat(np.arange(len(items), dtype=np.int64), counts)
    word_of = {h: w for w, h in table.items()}
    if rows.shape[0] == 0:
        return NgramIndex(n, items, word_multiplier, word_of, np.uint64(1), np.empty(0, np.uint64), rows,
                          np.zeros(1, np.int64), np.empty(0, np.int32), np.zeros(len(items), np.int64),
                          np.zeros(1 << 16, dtype=bool))  # fmt: skip
    multiplier, hashes, first, inverse = _distinct_hashes(rows, rng)
    pairs = np.unique(inverse.astype(np.int64) * max(len(items), 1) + owners)
    pair_rows, pair_items = np.divmod(pairs, max(len(items), 1))
    owner_ptr = np.zeros(hashes.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(pair_rows, minlength=hashes.size), out=owner_ptr[1:])
    item_ngrams = np.bincount(pair_items, minlength=len(items)).astype(np.int64)
    bits = int(min(30, max(16, int(np.ceil(np.log2(16 * hashes.size))))))
    membership = np.zeros(1 << bits, dtype=bool)
    membership[table_slots(hashes, bits)] = True
    return NgramIndex(n, items, word_multiplier, word_of, multiplier, hashes, np.ascontiguousarray(rows[first]),
                      owner_ptr, pair_items.astype(np.int32), item_ngrams, membership)  # fmt: skip
