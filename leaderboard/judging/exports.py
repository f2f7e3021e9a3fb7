"""Judgment downloads as chunks of bytes for streaming responses: CSV (formula-safe) and JSON Lines."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator

from evalcore.boundary import csvsafe

CHUNK_ROWS = 500
JUDGMENT_FIELDS = (
    "run_id", "config", "model", "baseline", "instruction_idx", "order", "first_shown", "p_first", "verdict",
    "winner", "weight", "status", "error", "prompt_sha256", "raw",
)  # fmt: skip
GRADE_FIELDS = (
    "run_id", "config", "model", "question_id", "category", "turn", "score", "grade_method", "scale_mass",
    "entropy", "probabilities", "status", "error", "reference", "prompt_sha256", "protocol_sha256", "raw",
)  # fmt: skip


def judgments_csv_chunks(records: Iterable[dict], fields: tuple[str, ...] = JUDGMENT_FIELDS) -> Iterator[bytes]:
    """One row per judgment (``order`` ``ab`` shows the baseline's answer first) or per grade
    (``fields=GRADE_FIELDS``); floats written exactly."""
    buffer = io.StringIO()
    writer = csvsafe.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    for count, record in enumerate(records, start=1):
        writer.writerow(["" if record[f] is None else repr(record[f]) if isinstance(record[f], float) else record[f]
                         for f in fields])  # fmt: skip
        if count % CHUNK_ROWS == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def judgments_jsonl_chunks(records: Iterable[dict], fields: tuple[str, ...] = JUDGMENT_FIELDS) -> Iterator[bytes]:
    lines = []
    for record in records:
        lines.append(json.dumps({f: record[f] for f in fields}, ensure_ascii=False))
        if len(lines) == CHUNK_ROWS:
            yield ("\n".join(lines) + "\n").encode()
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode()
