"""Leaderboard downloads as chunks of bytes for streaming responses: the table and every score.

Scores come from a server-side cursor (``.iterator(chunk_size=...)``) and
are written a chunk of rows at a time, so memory stays flat whatever the table size. The leaderboard
table is one row per model, the rows the page shows.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from evalcore.boundary import csvsafe
from leaderboard.runs.benchmarks import BENCHMARKS, benchmark_label, headline_metric, task_baseline
from leaderboard.runs.selectors import SCORE_COLUMNS, scores_for_export

CHUNK_ROWS = 500
TABLE_FIELDS = (
    "submission_id", "model", "type", "base_model", "parameters", "precision", "submitted_at", "hidden",
    "rank", "arena_rating", "arena_ci_low", "arena_ci_high", "arena_provisional",
    "judge_score", "judge_ci_low", "judge_ci_high", "judge_length_controlled", "judge_win_rate",
    "judge_bt_rating", "judge_bt_ci_low", "judge_bt_ci_high",
    "judge_bt_style_rating", "judge_bt_style_ci_low", "judge_bt_style_ci_high",
)  # fmt: skip
JUDGE_FIELDS = TABLE_FIELDS[TABLE_FIELDS.index("judge_score") :]
CELL_FIELDS = ("value", "stderr", "ci_low", "ci_high", "n", "interval", "normalised", "normalised_stderr",
               "normalised_ci_low", "normalised_ci_high", "baseline", "metric", "protocol_sha256", "run_ids")  # fmt: skip
AVERAGE_FIELDS = (
    "average",
    "average_stderr",
    "average_ci_low",
    "average_ci_high",
    "average_n",
    "average_interval",
    "best_of_k",
    "best_of_k_inflation",
)
# What the ``interval`` columns name (evalcore.stats.estimates.METHODS); the JSON download carries it too.
INTERVAL_NOTE = (
    "95% intervals; the interval column names the method (evalcore.stats.estimates.METHODS): mid-p for a "
    "proportion, pooled-mid-p for a benchmark's tasks together, mover for the average over benchmarks; "
    "stderr is the interval's (half its width / 1.96), empty where the interval is lopsided about the value"
)


def _cell_record(cell: dict | None) -> dict:
    if cell is None:
        return dict.fromkeys(CELL_FIELDS)
    return {
        "value": cell["value"], "stderr": cell["se"], "ci_low": cell["ci_low"], "ci_high": cell["ci_high"],
        "n": cell["n"], "interval": cell["method"], "normalised": cell["norm"], "normalised_stderr": cell["norm_se"],
        "normalised_ci_low": cell["norm_low"],
        "normalised_ci_high": cell["norm_high"], "baseline": cell["baseline"], "metric": cell["metric"],
        "protocol_sha256": cell["protocol_sha256"], "run_ids": cell["run_ids"],
    }  # fmt: skip


def _judge_record(cell: dict | None) -> dict:
    """The judge column in percent: the LC win rate (or the plain one, ``judge_length_controlled`` false),
    and the judge's Bradley-Terry rating and its style-controlled variant, with 95% intervals."""
    if cell is None:
        return dict.fromkeys(JUDGE_FIELDS)
    record = {"judge_score": cell["value"], "judge_ci_low": cell["ci_low"], "judge_ci_high": cell["ci_high"],
              "judge_length_controlled": cell["lc"], "judge_win_rate": cell["win_rate"]}  # fmt: skip
    for prefix, key in (("judge_bt", "bradley_terry"), ("judge_bt_style", "bradley_terry_style")):
        rating = cell.get(key) or {}
        record.update({f"{prefix}_rating": rating.get("rating"), f"{prefix}_ci_low": rating.get("ci_low"),
                       f"{prefix}_ci_high": rating.get("ci_high")})  # fmt: skip
    return record


def table_record(row: dict, columns: list[str]) -> dict:
    """One board row as plain values: scores as fractions (0..1), normalised scores on 0..100."""
    avg = row["avg"]
    scale = 1.0 if row.get("normalised") else 0.01
    badge = row.get("badge") or {}
    return {
        "submission_id": row["public_id"], "model": row["model"], "type": row["type"], "base_model": row["base_model"],
        "parameters": row["parameters"], "precision": row["precision"],
        "submitted_at": row["created_at"].isoformat(), "hidden": row["hidden"], "rank": row["rank"],
        "arena_rating": row["arena"]["rating"] if row["arena"] else None,
        "arena_ci_low": row["arena"]["ci_low"] if row["arena"] else None,
        "arena_ci_high": row["arena"]["ci_high"] if row["arena"] else None,
        "arena_provisional": row["arena"].get("provisional", False) if row["arena"] else None,
        **_judge_record(row.get("judge")),
        "scores": {key: _cell_record(row["cells"].get(key)) for key in columns},
        "average": None if avg is None else avg["value"] * scale,
        "average_stderr": None if avg is None or avg["se"] is None else avg["se"] * scale,
        "average_ci_low": None if avg is None or avg["ci_low"] is None else avg["ci_low"] * scale,
        "average_ci_high": None if avg is None or avg["ci_high"] is None else avg["ci_high"] * scale,
        "average_n": None if avg is None else avg["n"],
        "average_interval": None if avg is None else avg["method"],
        "best_of_k": badge.get("k"),
        "best_of_k_inflation": None if badge.get("inflation") is None else badge["inflation"] / 100,
    }  # fmt: skip


def _csv_chunks(header: list[str], rows: Iterable[list]) -> Iterator[bytes]:
    buffer = io.StringIO()
    writer = csvsafe.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for count, row in enumerate(rows, start=1):
        writer.writerow(["" if v is None else v for v in row])
        if count % CHUNK_ROWS == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def _csv_value(value):
    if isinstance(value, float):
        return repr(value)  # shortest exact repr: the export round-trips
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return value


def table_csv_chunks(table: dict) -> Iterator[bytes]:
    """The board as CSV: one row per model; per benchmark ``<b>``, ``<b>_stderr``, ... (see CELL_FIELDS).

    The average is on the table's scale; ``average`` columns are fractions unless ``scale=normalised``.
    """
    columns = [key for key, _ in table["columns"]]
    header = [*TABLE_FIELDS, *(key if f == "value" else f"{key}_{f}" for key in columns for f in CELL_FIELDS),
              *AVERAGE_FIELDS]  # fmt: skip

    def rows():
        for row in table["rows"]:
            record = table_record({**row, "normalised": table["normalised"]}, columns)
            values = [record[f] for f in TABLE_FIELDS]
            values += [record["scores"][key][f] for key in columns for f in CELL_FIELDS]
            values += [record[f] for f in AVERAGE_FIELDS]
            yield [_csv_value(v) for v in values]

    return _csv_chunks(header, rows())


def table_json_chunks(table: dict, filters: dict) -> Iterator[bytes]:
    """The board as one JSON document: benchmarks (metric, baseline), filters, then the rows."""
    columns = [key for key, _ in table["columns"]]
    known = {b.key: b for b in BENCHMARKS}
    head = {
        "generated_at": datetime.now(UTC).isoformat(),
        "filters": filters,
        "scale": "normalised" if table["normalised"] else "raw",
        "average": "mean over the benchmarks; 95% interval by MOVER from the benchmarks' own intervals",
        "intervals": INTERVAL_NOTE,
        "benchmarks": [
            {"key": key, "label": benchmark_label(key),
             "metric": known[key].metric if key in known else headline_metric(key),
             "baseline": known[key].baseline if key in known and key != "bbh" else (
                 "per task" if key == "bbh" else task_baseline(key))}
            for key in columns
        ],
        "arena_snapshot_id": table["arena_snapshot_id"],
        "judge": table.get("judge"),
    }  # fmt: skip
    yield (json.dumps(head)[:-1] + ', "rows": [').encode()
    lines = []
    for i, row in enumerate(table["rows"]):
        lines.append(
            ("" if i == 0 else ",")
            + json.dumps(table_record({**row, "normalised": table["normalised"]}, columns))
        )
        if len(lines) == CHUNK_ROWS:
            yield "\n".join(lines).encode()
            lines = []
    yield ("\n".join(lines) + "]}\n").encode()


def scores_csv_chunks(viewer=None) -> Iterator[bytes]:
    return _csv_chunks(
        list(SCORE_COLUMNS), ([_csv_value(r[c]) for c in SCORE_COLUMNS] for r in scores_for_export(viewer))
    )


def scores_json_chunks(viewer=None) -> Iterator[bytes]:
    """Every score as one JSON array (streamed)."""
    yield b"["
    lines, first = [], True
    for record in scores_for_export(viewer):
        lines.append(("" if first else ",") + json.dumps(record))
        first = False
        if len(lines) == CHUNK_ROWS:
            yield "\n".join(lines).encode()
            lines = []
    yield ("\n".join(lines) + "]\n").encode()
