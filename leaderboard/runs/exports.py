"""A run's per-document records as the engine's samples JSONL, in chunks of bytes for a streaming response.

The records come from a server-side cursor, so memory stays flat whatever the run's size.
"""

from __future__ import annotations

from collections.abc import Iterator

from leaderboard.runs.selectors import samples_for_export

CHUNK_ROWS = 500


def samples_jsonl_chunks(run) -> Iterator[bytes]:
    """``samples_<task>.jsonl`` as ``evalcore rescore`` reads it, ``CHUNK_ROWS`` lines at a time."""
    lines = []
    for text in samples_for_export(run):
        lines.append(text)
        if len(lines) == CHUNK_ROWS:
            yield ("\n".join(lines) + "\n").encode()
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode()
