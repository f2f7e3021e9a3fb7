"""Vote exports in the FastChat battle format, as chunks of bytes for a streaming response.

CSV has the flat columns of :data:`arena.votes.selectors.EXPORT_COLUMNS` (what ``python -m evalcore rate``
reads, style columns included). JSON Lines has the same keys plus FastChat's ``conv_metadata`` object
(``sum_assistant_a_tokens``, ``header_count_a``, ...), so notebooks written for LMArena's published
battles read either. Rows are written in chunks: memory stays flat whatever the table size.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from django.db import connection

from arena.votes import csv_writer as vote_csv
from arena.votes.selectors import EXPORT_COLUMNS, votes_for_export
from evalcore.boundary import csvsafe

CHUNK_ROWS = 1000


def votes_csv_chunks() -> Iterator[bytes]:
    """The header, then the votes: on PostgreSQL as :mod:`arena.votes.csv_writer` has the database write them
    (chunks of lines), elsewhere (SQLite, the embedded default) through Python's writer, the same bytes."""
    buffer = io.StringIO()
    writer = csvsafe.writer(buffer, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    if connection.vendor == "postgresql":
        yield buffer.getvalue().encode()
        yield from vote_csv.votes_csv_lines()
        return
    for count, record in enumerate(votes_for_export(), start=1):
        record["tstamp"] = repr(record["tstamp"])  # shortest exact repr: the export round-trips
        record["anony"] = "true"
        writer.writerow([record[column] for column in EXPORT_COLUMNS])
        if count % CHUNK_ROWS == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def conv_metadata(record: dict) -> dict:
    """FastChat's per-battle style metadata from the flat counts (totals under the key ``all``)."""
    meta = {"sum_user_tokens": record["prompt_tokens"]}
    for side in ("a", "b"):
        meta[f"sum_assistant_{side}_tokens"] = record[f"tokens_{side}"]
        meta[f"header_count_{side}"] = {"all": record[f"headers_{side}"]}
        meta[f"list_count_{side}"] = {"all": record[f"list_items_{side}"]}
        meta[f"bold_count_{side}"] = {"all": record[f"bold_{side}"]}
    return meta


def votes_jsonl_chunks() -> Iterator[bytes]:
    lines: list[str] = []
    for record in votes_for_export():
        record["conv_metadata"] = conv_metadata(record)
        lines.append(json.dumps(record, ensure_ascii=False))
        if len(lines) == CHUNK_ROWS:
            yield ("\n".join(lines) + "\n").encode()
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode()
