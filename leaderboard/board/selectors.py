"""The leaderboard table: the kept entries (:mod:`leaderboard.board.entries`) filtered, searched,
ranked and sorted in Python for one page view or export; read-only."""

from __future__ import annotations

import bisect
import math

from leaderboard.board.entries import board_entries, cells_average, entry_visible
from leaderboard.runs.benchmarks import (
    benchmark_label,
    benchmark_sort_key,
)

SIZE_BUCKETS = {  # parameters, in [low, high)
    "lt1b": ("< 1B", 0, 1e9),
    "1to3b": ("1B – 3B", 1e9, 3e9),
    "3to8b": ("3B – 8B", 3e9, 8e9),
    "8to15b": ("8B – 15B", 8e9, 15e9),
    "gte15b": ("≥ 15B", 15e9, math.inf),
}
SORT_COLUMNS = ("average", "model", "type", "parameters", "precision", "arena", "judge", "date")



def _sort_value(row: dict, column: str):
    if column == "average":
        return row["avg"]["value"] if row["avg"] else None
    if column == "arena":
        return row["arena"]["rating"] if row["arena"] else None
    if column == "judge":
        return row["judge"]["value"] if row["judge"] else None
    if column.startswith("score:"):
        cell = row["cells"].get(column.removeprefix("score:"))
        return cell["shown"] if cell else None
    return {
        "model": row["model"].lower(), "type": row["type"], "parameters": row["parameters"],
        "precision": row["precision"], "date": row["created_at"],
    }[column]  # fmt: skip


def _ranks(rows: list[dict]) -> None:
    """Conservative rank on the average: 1 + the entries whose interval lies wholly above this one's."""
    ranked = [r for r in rows if r["avg"] and r["avg"]["ci_low"] is not None]
    lows = sorted(r["avg"]["ci_low"] for r in ranked)  # ascending: the lows above x are those past bisect_right
    for row in ranked:
        row["rank"] = 1 + len(lows) - bisect.bisect_right(lows, row["avg"]["ci_high"])
    best_first = sorted(ranked, key=lambda r: -r["avg"]["value"])
    for above, row in zip(best_first, best_first[1:]):
        row["tied"] = above["avg"]["ci_low"] <= row["avg"]["ci_high"]


def _entries_matching(entries: list[dict], viewer, *, show_hidden: bool, model_type: str, size: str,
                      search: str) -> list[dict]:  # fmt: skip
    """The entries the viewer may see that pass the type, size and search filters, in their order."""
    needle = search.strip().lower()
    bucket = SIZE_BUCKETS.get(size)
    rows = []
    for entry in entries:
        if not entry_visible(entry, viewer, show_hidden=show_hidden):
            continue
        if model_type and entry["type"] != model_type:
            continue
        if bucket and (entry["parameters"] is None or not bucket[1] <= entry["parameters"] < bucket[2]):
            continue
        if needle and needle not in entry["model"].lower() and needle not in entry["base_model"].lower():
            continue
        rows.append(entry)
    return rows


def _shown_cell(cell: dict, normalised: bool) -> dict:
    """``cell`` plus ``raw_pct`` and ``shown``, ``shown_low``, ``shown_high``, ``shown_se`` (chosen scale).

    The intervals are already within the possible range (raw 0..1, normalised 0..100): nothing is cut here.
    """
    if normalised:
        shown = (cell["norm"], cell["norm_low"], cell["norm_high"], cell["norm_se"])
    else:  # percent right
        shown = tuple(None if x is None else 100 * x for x in (cell["value"], cell["ci_low"], cell["ci_high"], cell["se"]))
    return {
        **cell,
        "raw_pct": 100 * cell["value"],
        "shown": shown[0],
        "shown_low": shown[1],
        "shown_high": shown[2],
        "shown_se": shown[3],
    }


def _row_average(entry: dict, columns: list[str], normalised: bool) -> dict | None:
    """Mean over ``columns`` on the chosen scale; None if the entry lacks one of them (or there are none)."""
    if not columns or not all(key in entry["cells"] for key in columns):
        return None
    avg = cells_average([entry["cells"][k] for k in columns], normalised=normalised)
    if avg and not normalised:
        avg = {**avg, **{k: None if avg[k] is None else 100 * avg[k] for k in ("value", "se", "ci_low", "ci_high")}}
    return avg


def board_table(
    *,
    viewer=None,
    show_hidden: bool = False,
    model_type: str = "",
    size: str = "",
    search: str = "",
    sort: str = "-average",
    normalised: bool = False,
) -> dict:
    """The rows and columns the board shows for these filters, sorted; plain data for templates and exports.

    Each row's ``cells[benchmark]`` has ``shown``, ``shown_low``, ``shown_high`` on the chosen scale
    (percent of documents right, or normalised) beside the raw ``value``/``ci_low``/``ci_high`` (0..1).
    ``avg`` is the mean over the table's benchmarks (None when the entry lacks one of them).
    """
    built = board_entries()
    rows = _entries_matching(
        built["entries"], viewer, show_hidden=show_hidden, model_type=model_type, size=size, search=search
    )
    columns = sorted({key for e in rows for key in e["cells"]}, key=benchmark_sort_key)
    shown_rows = []
    for entry in rows:
        cells = {key: _shown_cell(cell, normalised) for key, cell in entry["cells"].items()}
        avg = _row_average(entry, columns, normalised)
        shown_rows.append({
            **entry, "cells": cells, "avg": avg, "rank": None, "tied": False,
            "own": viewer is not None and viewer.is_authenticated and entry["owner_id"] == viewer.pk,
            "row_cells": [(key, cells.get(key)) for key in columns],
        })  # fmt: skip
    _ranks(shown_rows)
    descending = sort.startswith("-")
    column = sort.lstrip("-")
    present = [r for r in shown_rows if _sort_value(r, column) is not None]
    missing = [r for r in shown_rows if _sort_value(r, column) is None]
    present.sort(
        key=lambda r: _sort_value(r, column), reverse=descending
    )  # stable: newest first among equals
    return {
        "rows": present + missing,
        "columns": [(key, benchmark_label(key)) for key in columns],
        "normalised": normalised,
        "arena_snapshot_id": built["arena_snapshot_id"],
        "judge": built["judge"],
        "total": len(shown_rows),
    }


def board_benchmarks() -> list[str]:
    """Benchmarks any entry has (what ``sort=score:<benchmark>`` may name)."""
    return sorted({key for e in board_entries()["entries"] for key in e["cells"]}, key=benchmark_sort_key)


def board_models(viewer=None) -> list[tuple[str, str]]:
    """(submission public id, model name) of every entry the viewer may compare, hidden ones included, by name."""
    entries = [e for e in board_entries()["entries"] if entry_visible(e, viewer, show_hidden=True)]
    return sorted(((e["public_id"], e["model"]) for e in entries), key=lambda pair: (pair[1].lower(), pair[0]))
