"""The leaderboard table as the page shows it: rendered once per data fingerprint and filters.

Rendering a few hundred rows with their intervals and building the Plotly figures costs far more
than the queries, so the rendered fragment is kept per process (like the arena board), keyed by the
table's fingerprint (which changes with any score, submission, review or contamination-scan change), the validated
filters, and the viewer when the viewer owns an entry (their private and pending entries show only
to them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from django.template.loader import render_to_string
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from leaderboard.board.charts import board_figures
from leaderboard.board.entries import board_entries
from leaderboard.board.selectors import SORT_COLUMNS, board_table
from leaderboard.runs.integrity import board_clean_cells

_RENDERED: OrderedDict[tuple, dict] = OrderedDict()
_RENDERED_SIZE = 128
_LOCK = threading.Lock()
DEFAULT_SORT = "-average"


def board_params(data: dict) -> dict:
    """The selector's keyword arguments from the board form's cleaned data."""
    return {
        "search": data.get("q") or "",
        "model_type": data.get("type") or "",
        "size": data.get("size") or "",
        "normalised": data.get("scale") == "normalised",
        "show_hidden": data.get("show") == "hidden",
        "sort": data.get("sort") or DEFAULT_SORT,
    }


def board_query(data: dict, **changes) -> str:
    """A query string for these filters (defaults left out)."""
    params = {**{k: v for k, v in data.items() if v}, **changes}
    return urlencode({k: v for k, v in params.items() if v and not (k == "sort" and v == DEFAULT_SORT)})


def _links(data: dict, columns: list[tuple[str, str]]) -> dict:
    current = data.get("sort") or DEFAULT_SORT

    def sort_url(column: str) -> str:
        descending_first = column not in ("model", "type", "precision")
        first, other = (f"-{column}", column) if descending_first else (column, f"-{column}")
        return "?" + board_query(data, sort=other if current == first else first)

    return {
        "sort": {c: sort_url(c) for c in SORT_COLUMNS},
        "score_headers": [
            (key, label, sort_url(f"score:{key}"), current.lstrip("-") == f"score:{key}")
            for key, label in columns
        ],
        "hidden_on": "?" + board_query(data, show="hidden"),
        "hidden_off": "?" + board_query(data, show=""),
    }


def board_page(*, viewer, data: dict) -> dict:
    """``html`` (safe) of the table, legend and charts, and ``has_figures``, for validated filters."""
    built = board_entries()
    owns = (
        viewer is not None
        and viewer.is_authenticated
        and any(e["owner_id"] == viewer.pk for e in built["entries"])
    )
    key = (built["fingerprint"], tuple(sorted(board_params(data).items())), viewer.pk if owns else None)
    with _LOCK:
        if key in _RENDERED:
            _RENDERED.move_to_end(key)
            return _RENDERED[key]
    table = board_table(viewer=viewer, **board_params(data))
    board_clean_cells(table["rows"])  # clean-subset scores where a contamination scan flagged items
    links = _links(data, table["columns"])
    figures = board_figures(table)
    sort = data.get("sort") or DEFAULT_SORT
    context = {
        "table": table,
        "links": links,
        "score_headers": links["score_headers"],
        "sort": sort,
        "sort_column": sort.lstrip("-"),
        "filters": data,
        "figures": figures,
    }
    page = {
        "html": mark_safe(render_to_string("leaderboard/_board.html", context)),
        "has_figures": figures is not None,
    }
    with _LOCK:
        _RENDERED[key] = page
        while len(_RENDERED) > _RENDERED_SIZE:
            _RENDERED.popitem(last=False)
    return page
