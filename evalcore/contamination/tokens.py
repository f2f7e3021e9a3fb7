"""Corpus text to benchmark word ids without a Python object per word.

A chunk of UTF-8 bytes is normalised with byte lookup tables (ASCII letters lower-cased, ASCII
punctuation deleted, ASCII whitespace splits words), each word is hashed with a polynomial hash of
its bytes (vectorised with ``np.add.reduceat``), and the hash is looked up among the benchmark
vocabulary's hashes. Words holding non-ASCII bytes (a small share of English text) go through
:func:`evalcore.contamination.items.normalise` one by one, so Unicode punctuation, upper case and
whitespace are treated exactly as in the benchmark text. The words are exactly
``normalise(text).split()`` (the reader's NUL boundary word comes out as DEL); two different words
may share a hash, which the scan rules out by comparing the words of every new match.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from evalcore.contamination.items import _PUNCTUATION, normalise

_MASK = (1 << 64) - 1
_CACHE_WORDS = 1 << 16
MIN_POWERS = 1 << 21  # power tables cover a chunk of this many bytes without regrowing
# One bytes.translate pass: delete the ASCII bytes the normaliser deletes (DEL among them), then map
# ASCII upper case to lower case, ASCII whitespace to 0 and NUL (the reader's boundary word) to DEL,
# so that afterwards a byte is 0 exactly where words are split and DEL marks a boundary word.
DELETED = bytes(c for c in range(1, 128) if _PUNCTUATION.match(chr(c)) and not chr(c).isspace())
SPACES = bytes(c for c in range(1, 128) if chr(c).isspace())
BOUNDARY_BYTE = 0x7F
TABLE = bytes(
    0 if c in SPACES else BOUNDARY_BYTE if c == 0 else ord(chr(c).lower()) if c < 128 else c for c in range(256)
)


def python_word_hash(word: str, multiplier: int) -> int:
    """The hash of one normalised word: ``sum_i byte_i * multiplier ** (L - 1 - i)`` mod 2**64."""
    h = 0
    for byte in word.encode("utf-8"):
        h = (h * multiplier + byte) & _MASK
    return h


@functools.lru_cache(maxsize=1 << 16)
def _renormalised(word: bytes) -> list[str]:
    """The str normaliser's words for the bytes of one word holding non-ASCII characters."""
    return normalise(word.decode("utf-8")).split()


@dataclass
class ChunkWords:
    """The words of one chunk.

    Attributes
    ----------
    hashes : ndarray, shape (W,), uint64
    data : bytes
        The chunk after byte-level normalisation (whitespace bytes set to 0).
    starts, ends : ndarray, shape (W,), int64
        Byte span of each word in ``data``; -1 for words that came out of the Unicode path.
    special : dict
        Word index -> normalised text, for the words of the Unicode path.
    """

    hashes: np.ndarray
    data: bytes
    starts: np.ndarray
    ends: np.ndarray
    special: dict

    def word(self, k: int) -> str:
        if self.starts[k] < 0:
            return self.special[k]
        return self.data[self.starts[k] : self.ends[k]].decode("utf-8")


class WordHasher:
    """Hashes the words of byte chunks under one odd ``multiplier`` (shared with the vocabulary).

    A word spanning bytes ``[s, e)`` of a chunk hashes to ``(sum_i b_i * q**i) * m**(e - 1)`` where
    ``q`` is the inverse of ``m`` modulo 2**64, which is ``sum_i b_i * m**(e - 1 - i)``: one
    multiply per byte and one ``np.add.reduceat`` per chunk.
    """

    def __init__(self, multiplier: int) -> None:
        self.multiplier = int(multiplier) & _MASK
        if self.multiplier % 2 == 0:
            raise ValueError("the hash multiplier must be odd")
        self.inverse = pow(self.multiplier, -1, 1 << 64)
        self._forward = np.ones(1, dtype=np.uint64)
        self._backward = np.ones(1, dtype=np.uint64)
        self._cache: dict[str, int] = {}

    def word_hash(self, word: str) -> int:
        """:func:`python_word_hash` under this multiplier, cached (non-ASCII words repeat a lot)."""
        h = self._cache.get(word)
        if h is None:
            if len(self._cache) >= _CACHE_WORDS:
                self._cache.clear()
            h = self._cache[word] = python_word_hash(word, self.multiplier)
        return h

    def _powers(self, length: int) -> tuple[np.ndarray, np.ndarray]:
        if self._forward.size < length:
            size = max(length, 2 * self._forward.size, MIN_POWERS)
            steps = np.full(size, self.multiplier, dtype=np.uint64)
            steps[0] = 1
            self._forward = np.cumprod(steps, dtype=np.uint64)
            steps[1:] = self.inverse
            self._backward = np.cumprod(steps, dtype=np.uint64)
        return self._forward[:length], self._backward[:length]

    def chunk(self, raw: bytes) -> ChunkWords:
        """Normalise and hash the words of ``raw`` (UTF-8 bytes)."""
        data = raw.translate(TABLE, DELETED)
        codes = np.frombuffer(data, dtype=np.uint8)
        in_word = codes != 0
        edges = np.diff(in_word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        if starts.size == 0:
            empty = np.empty(0, dtype=np.int64)
            return ChunkWords(np.empty(0, dtype=np.uint64), data, empty, empty, {})
        forward, backward = self._powers(codes.size)
        values = codes.astype(np.uint64)
        values *= backward  # whitespace bytes are 0 and add nothing
        hashes = np.add.reduceat(values, starts)
        hashes *= forward[ends - 1]
        words = ChunkWords(hashes, data, starts, ends, {})
        if not data.isascii():
            words = self._unicode_words(words, codes)
        return words

    def _unicode_words(self, words: ChunkWords, codes: np.ndarray) -> ChunkWords:
        """Re-normalise the words holding non-ASCII bytes with the str normaliser (may split them)."""
        high = np.flatnonzero(codes >= 128)
        odd = np.unique(np.searchsorted(words.starts, high, side="right") - 1)
        odd = odd[odd >= 0]
        replaced = [_renormalised(words.data[words.starts[k] : words.ends[k]]) for k in odd.tolist()]
        lengths = np.array([len(r) for r in replaced], dtype=np.int64)
        if (lengths == 1).all():
            positions = odd
            hashes, starts, ends = words.hashes.copy(), words.starts.copy(), words.ends.copy()
        else:
            counts = np.ones(words.hashes.size, dtype=np.int64)
            counts[odd] = lengths
            positions = (np.cumsum(counts) - counts)[odd]
            hashes = np.repeat(words.hashes, counts)
            starts = np.repeat(words.starts, counts)
            ends = np.repeat(words.ends, counts)
        special = {}
        for k, texts in zip(positions.tolist(), replaced):
            for j, text in enumerate(texts):
                special[k + j] = text
                hashes[k + j] = self.word_hash(text)
                starts[k + j] = ends[k + j] = -1
        return ChunkWords(hashes, words.data, starts, ends, special)
