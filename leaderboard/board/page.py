"""The leaderboard table as the page shows it: one page of rows, rendered once per data fingerprint,
filters and page number.

Rendering a row with its intervals costs about a millisecond of template work, so the page shows
:data:`PAGE_ROWS` rows at a time (``?page=``, 1-based; a page past the end shows the last one). The
filtered, ranked and sorted table and its Plotly figures (the top :data:`~leaderboard.board.charts.MAX_MODELS`
rows) are kept per process, keyed by the table's fingerprint (which changes with any score, submission,
review or contamination-scan change), the validated filters, and the viewer when the viewer owns an
entry (their private and pending entries show only to them); the rendered fragment is kept per page
of that key. A request then costs the fingerprint query and a dictionary lookup, whatever the number
of submissions; the downloads (:mod:`leaderboard.board.exports`) stream every row.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from leaderboard.board.charts import board_figures
from leaderboard.board.entries import board_entries, entry_visible
from leaderboard.board.selectors import SORT_COLUMNS, board_table
from leaderboard.runs.integrity import board_clean_cells

_RENDERED: OrderedDict[tuple, dict] = OrderedDict()
_RENDERED_SIZE = 128
_TABLES: OrderedDict[tuple, dict] = OrderedDict()
_TABLES_SIZE = 16
_LOCK = threading.Lock()
DEFAULT_SORT = "-average"
PAGE_ROWS = 50


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
        return "?" + board_query(data, sort=other if current == first else first, page="")

    return {
        "sort": {c: sort_url(c) for c in SORT_COLUMNS},
        "score_headers": [
            (key, label, sort_url(f"score:{key}"), current.lstrip("-") == f"score:{key}")
            for key, label in columns
        ],
        "hidden_on": "?" + board_query(data, show="hidden", page=""),
        "hidden_off": "?" + board_query(data, show="", page=""),
    }


def _kept(store: OrderedDict, size: int, key: tuple, make):
    """``store[key]``, made with ``make()`` on a miss (outside the lock) and the oldest entries dropped."""
    with _LOCK:
        if key in store:
            store.move_to_end(key)
            return store[key]
    value = make()
    with _LOCK:
        store[key] = value
        while len(store) > size:
            store.popitem(last=False)
    return value


def _table(viewer, data: dict) -> dict:
    """The whole filtered, sorted table and its figures (the top rows): built once per key."""
    table = board_table(viewer=viewer, **board_params(data))
    return {"table": table, "figures": board_figures(table)}


def page_count(total: int) -> int:
    return max(1, -(-total // PAGE_ROWS))


def _pagination(data: dict, number: int, pages: int, total: int) -> dict:
    first = (number - 1) * PAGE_ROWS
    return {
        "number": number, "pages": pages, "first": first + 1 if total else 0,
        "last": min(total, first + PAGE_ROWS),
        "previous": "?" + board_query(data, page=number - 1 if number > 2 else "") if number > 1 else None,
        "next": "?" + board_query(data, page=number + 1) if number < pages else None,
        "first_url": "?" + board_query(data, page=""), "last_url": "?" + board_query(data, page=pages),
    }  # fmt: skip


def _kept_table(viewer, data: dict, built: dict) -> tuple[tuple, dict]:
    """The key and the kept table and figures for these filters, as the page shows them to ``viewer``."""
    owns = viewer is not None and viewer.is_authenticated and viewer.pk in built["owners"]
    key = (built["fingerprint"], tuple(sorted(board_params(data).items())), viewer.pk if owns else None)
    return key, _kept(_TABLES, _TABLES_SIZE, key, lambda: _table(viewer, data))


def board_page(*, viewer, data: dict) -> dict:
    """``html`` (safe) of one page of the table, its legend and the charts, ``has_figures``, and
    ``page`` (the page number shown: ``data["page"]``, clamped to the last page), for validated filters."""
    key, kept = _kept_table(viewer, data, board_entries())
    pages = page_count(len(kept["table"]["rows"]))
    number = min(data.get("page") or 1, pages)
    return {**_kept(_RENDERED, _RENDERED_SIZE, (*key, number), lambda: _render(kept, data, number, pages)),
            "page": number}  # fmt: skip


def _render(kept: dict, data: dict, number: int, pages: int) -> dict:
    table = kept["table"]
    start = (number - 1) * PAGE_ROWS
    rows = table["rows"][start : start + PAGE_ROWS]
    board_clean_cells(rows)  # clean-subset scores where a contamination scan flagged items
    links = _links(data, table["columns"])
    sort = data.get("sort") or DEFAULT_SORT
    context = {
        "table": table,
        "rows": rows,
        "pagination": _pagination(data, number, pages, len(table["rows"])),
        "links": links,
        "score_headers": links["score_headers"],
        "sort": sort,
        "sort_column": sort.lstrip("-"),
        "filters": data,
        "figures": kept["figures"],
    }
    return {
        "html": mark_safe(render_to_string("leaderboard/_board.html", context)),
        "has_figures": kept["figures"] is not None,
    }


def board_position(*, viewer, public_id: str) -> dict | None:
    """Where a submission stands on the board as ``viewer`` sees ``/leaderboard/`` unfiltered (with hidden
    models when it is hidden): the very row that page shows, from the same kept table, so its average,
    interval, rank and cells are the board's own numbers. None when it is not on the board (not
    finished, re-run since, rejected, or not the viewer's to see).

    ``row`` is the table's row (``avg`` and each ``cells[benchmark]`` on the percent scale), ``position``
    its place in the default order (1-based) of ``total``, ``page`` the board page that lists it and
    ``url`` that page with the row's anchor (``#entry-<public id>``).
    """
    built = board_entries()
    entry = next((e for e in built["entries"] if e["public_id"] == public_id), None)
    if entry is None or not entry_visible(entry, viewer, show_hidden=True):
        return None
    data = {"show": "hidden"} if entry["hidden"] else {}
    _key, kept = _kept_table(viewer, data, built)
    rows = kept["table"]["rows"]
    index = next((i for i, row in enumerate(rows) if row["public_id"] == public_id), None)
    if index is None:
        return None
    number = index // PAGE_ROWS + 1
    query = board_query(data, page=number if number > 1 else "")
    return {
        "row": rows[index], "position": index + 1, "total": len(rows), "page": number,
        "columns": kept["table"]["columns"], "hidden": entry["hidden"],
        "url": reverse("leaderboard:index") + (f"?{query}" if query else "") + f"#entry-{public_id}",
    }  # fmt: skip
