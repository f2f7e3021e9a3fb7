"""Streaming a training corpus in bounded memory: ``.txt`` and ``.jsonl`` files, either gzipped.

A corpus is a file or a folder (searched recursively; files with other suffixes are counted and
ignored). Files are read in blocks of ``block_bytes``, never whole. Lines are bounded: a line longer
than ``max_line_bytes`` is skipped without being held (its remaining blocks are read and dropped).
Corrupt input is counted, never fatal: lines with NUL bytes (binary content), lines that are not
UTF-8, JSON lines that do not parse or have no string ``text`` field, and files that end early or
are not gzip although named so.

The reader yields *chunks*: UTF-8 bytes in which consecutive words belong to one stream, with documents
separated by a lone ``"\\x00"`` word (``BOUNDARY``) that no n-gram can span. A ``.txt`` file is one
stream (n-grams span line breaks) until a skipped line breaks it; each JSON line is its own document.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SUFFIXES = (".txt", ".jsonl", ".txt.gz", ".jsonl.gz")
BOUNDARY = b"\n\x00\n"
BLOCK_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 22


@dataclass
class CorpusStats:
    """Counts gathered while reading (mutable; :meth:`as_dict` gives the report's form)."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    documents: int = 0
    skipped: Counter = field(default_factory=Counter)
    failed_files: list = field(default_factory=list)
    ignored_files: int = 0

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "lines": self.lines,
            "documents": self.documents,
            "lines_skipped": sum(self.skipped.values()),
            "skipped": dict(sorted(self.skipped.items())),
            "failed_files": [{"path": p, "reason": r} for p, r in self.failed_files],
            "ignored_files": self.ignored_files,
        }


def corpus_files(path: str | Path, stats: CorpusStats | None = None) -> list[Path]:
    """The corpus files under ``path`` (a file or a folder), sorted; ValueError if there are none."""
    path = Path(path)
    if path.is_file():
        if not path.name.endswith(SUFFIXES):
            raise ValueError(f"corpus file {str(path)!r} is not one of {', '.join(SUFFIXES)}")
        return [path]
    if not path.is_dir():
        raise ValueError(f"corpus path {str(path)!r} does not exist")
    files, ignored = [], 0
    for candidate in sorted(path.rglob("*")):
        if candidate.is_file():
            if candidate.name.endswith(SUFFIXES):
                files.append(candidate)
            else:
                ignored += 1
    if stats is not None:
        stats.ignored_files += ignored
    if not files:
        raise ValueError(f"corpus folder {str(path)!r} holds no {', '.join(SUFFIXES)} files")
    return files


def raw_lines(handle, *, block_bytes: int, max_line_bytes: int, stats: CorpusStats) -> Iterator[list]:
    """Lists of raw lines (bytes, no newline) per block; ``None`` marks a skipped over-long line."""
    carry, skipping = b"", False
    while data := handle.read(block_bytes):
        parts = data.split(b"\n")
        if skipping:
            if len(parts) == 1:
                continue
            parts, skipping = parts[1:], False
        else:
            parts[0] = carry + parts[0]
        carry = parts.pop()
        lines = parts
        if parts and max(map(len, parts)) > max_line_bytes:
            lines = [None if len(part) > max_line_bytes else part for part in parts]
            stats.skipped["line_too_long"] += lines.count(None)
        if len(carry) > max_line_bytes:
            stats.skipped["line_too_long"] += 1
            lines.append(None)
            carry, skipping = b"", True
        yield lines
    if carry and not skipping:
        yield [carry]


def decode_line(line: bytes, stats: CorpusStats) -> str | None:
    """The line as text, or None (counted) for binary content or bytes that are not UTF-8."""
    if b"\x00" in line:
        stats.skipped["binary"] += 1
        return None
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        stats.skipped["decode_error"] += 1
        return None


def json_text(line: str, stats: CorpusStats) -> str | None:
    """The ``text`` field of one JSON line, or None (counted)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep, hostile or corrupt
        stats.skipped["bad_json"] += 1
        return None
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str):
        stats.skipped["no_text"] += 1
        return None
    return text


def _fast_block(lines: list) -> bytes | None:
    """A block of ``.txt`` lines as one chunk when every line is clean UTF-8 text, else None."""
    if None in lines:
        return None
    joined = b"\n".join(lines)
    if b"\x00" in joined:
        return None
    if not joined.isascii():
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return joined + b"\n"


def _line_piece(raw, *, jsonl: bool, stats: CorpusStats) -> bytes | None:
    """One line's text as UTF-8 bytes, or None when it is skipped (and counted)."""
    text = None if raw is None else decode_line(raw, stats)
    if text is None or not jsonl:
        return None if text is None else raw
    text = json_text(text, stats)
    if text is None:
        return None
    stats.documents += 1
    return text.encode("utf-8", "replace")


def _chunks(lines_iter, *, jsonl: bool, stats: CorpusStats) -> Iterator[tuple[bytes, bool]]:
    """(chunk bytes, whether it continues the previous chunk's stream) per block of lines."""
    continues = False
    for lines in lines_iter:
        stats.lines += len(lines) - lines.count(None)
        chunk = None if jsonl else _fast_block(lines)
        if chunk is None:
            pieces = []
            for raw in lines:
                if jsonl and raw is not None and not raw.strip():
                    continue
                piece = _line_piece(raw, jsonl=jsonl, stats=stats)
                if piece is None or jsonl:
                    pieces.append(BOUNDARY)
                if piece is not None:
                    pieces += (piece, b"\n")
            chunk = b"".join(pieces)
        if chunk:
            yield chunk, continues
            continues = not jsonl


def _open(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115


def read_chunks(paths, *, stats: CorpusStats, block_bytes: int = BLOCK_BYTES,
                max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[bytes, bool]]:  # fmt: skip
    """Stream every corpus file under ``paths`` as chunks of UTF-8 bytes (see the module docstring).

    Yields ``(chunk, continues)``: ``continues`` is True when the chunk's first words follow the
    previous chunk's last words in the same stream (a ``.txt`` file read across a block boundary).
    """
    if block_bytes < 1 or max_line_bytes < 1:
        raise ValueError("block_bytes and max_line_bytes must be positive")
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    if not paths:
        raise ValueError("no corpus path given")
    files = [file for path in paths for file in corpus_files(path, stats)]
    for file in files:
        stats.files += 1
        jsonl = file.name.endswith((".jsonl", ".jsonl.gz"))
        try:
            with _open(file) as handle:
                counted = _CountingReader(handle, stats)
                lines = raw_lines(counted, block_bytes=block_bytes, max_line_bytes=max_line_bytes, stats=stats)
                yield from _chunks(lines, jsonl=jsonl, stats=stats)
        except (OSError, EOFError, zlib.error) as exc:
            stats.failed_files.append((str(file), f"{type(exc).__name__}: {exc}"))


class _CountingReader:
    """Counts the (decompressed) bytes read from a binary handle."""

    def __init__(self, handle, stats: CorpusStats) -> None:
        self.handle, self.stats = handle, stats

    def read(self, size: int) -> bytes:
        data = self.handle.read(size)
        self.stats.bytes += len(data)
        return data
