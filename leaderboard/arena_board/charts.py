"""Plotly figures for the arena leaderboard, built on the server from a snapshot's rows and matrices.

Built once per snapshot: :mod:`leaderboard.arena_board.page` keeps the rendered board per process. The
figures are written as plain Plotly JSON (``data`` traces and a ``layout`` with the ``plotly_white``
template, read once): building them through ``plotly.graph_objects`` validated every value and cost
~0.45 s at 200 models, paid by a page view whenever a refit wrote a new snapshot.
"""

from __future__ import annotations

from functools import lru_cache

import plotly.io as pio
from django.utils.html import json_script
from django.utils.safestring import SafeString

HEATMAP_MODELS = 20  # a 200 x 200 matrix is 1 MB of JSON and unreadable: the top models by rating
_MARGIN = {"l": 60, "r": 20, "t": 50, "b": 60}


@lru_cache(maxsize=1)
def _template() -> dict:
    return pio.templates["plotly_white"].to_plotly_json()


def _layout(title: str, height: int, x_title: str, y_title: str | None = None, **axes) -> dict:
    layout = {
        "margin": _MARGIN, "template": _template(), "height": height, "title": {"text": title},
        "xaxis": {"title": {"text": x_title}}, "yaxis": {"title": {"text": y_title}} if y_title else {},
    }  # fmt: skip
    for axis, settings in axes.items():
        layout[axis] = {**layout.get(axis, {}), **settings}
    return layout


def _ratings_figure(rows: list[dict], title: str) -> dict:
    best_last = list(reversed(rows))  # the best model at the top of a horizontal chart
    trace = {
        "type": "scatter",
        "x": [r["rating"] for r in best_last],
        "y": [r["model"] for r in best_last],
        "mode": "markers",
        "marker": {"size": 9, "color": "#2f5bd3"},
        "error_x": {
            "type": "data",
            "symmetric": False,
            # An open side of a provisional model's interval has no whisker (null).
            "array": [None if r["ci_high"] is None else r["ci_high"] - r["rating"] for r in best_last],
            "arrayminus": [None if r["ci_low"] is None else r["rating"] - r["ci_low"] for r in best_last],
            "thickness": 1.5,
            "width": 4,
        },
        "hovertemplate": "%{y}: %{x:.0f}<extra></extra>",
    }
    return {"data": [trace], "layout": _layout(title, max(260, 60 + 28 * len(rows)), "rating (95% interval)")}


def _top(rows: list[dict], extra: dict) -> list[int]:
    """Indexes into ``extra["models"]`` of the :data:`HEATMAP_MODELS` best-rated models, in matrix order."""
    best = {r["model"] for r in sorted(rows, key=lambda r: -r["rating"])[:HEATMAP_MODELS]}
    return [i for i, name in enumerate(extra["models"]) if name in best]


# Battles per pair: more battles, darker blue, from 0. Plotly.js's named "Blues" runs the other way (dark
# rgb(5,10,172) at the minimum, light grey at the maximum), which drew the rarest pairs darkest; this is
# ColorBrewer's Blues (matplotlib's), light to dark, spelled out so no library's naming decides it.
BATTLES_COLORSCALE = [
    [0.0, "#f7fbff"], [0.125, "#deebf7"], [0.25, "#c6dbef"], [0.375, "#9ecae1"], [0.5, "#6baed6"],
    [0.625, "#4292c6"], [0.75, "#2171b5"], [0.875, "#08519c"], [1.0, "#08306b"],
]  # fmt: skip


def _heatmap(extra: dict, keep: list[int], key: str, title: str, *, percent: bool) -> dict:
    models = [extra["models"][i] for i in keep]
    matrix = extra[key]
    # No model meets itself: leave the diagonal blank rather than print 0 battles or a 50% rate.
    values = [[None if i == j else matrix[i][j] for j in keep] for i in keep]
    text = [
        ["" if v is None else (f"{100 * v:.0f}%" if percent else f"{v:g}") for v in row] for row in values
    ]
    trace = {
        "type": "heatmap", "z": values, "x": models, "y": models, "text": text, "texttemplate": "%{text}",
        "colorscale": "RdBu" if percent else BATTLES_COLORSCALE, "hovertemplate": "%{y} vs %{x}: %{text}<extra></extra>",
        **({"zmin": 0, "zmax": 1, "zmid": 0.5} if percent else {"zmin": 0}),
    }  # fmt: skip
    side = max(320, 90 + 36 * len(models))
    layout = _layout(title, side, "opponent", "model", yaxis={"autorange": "reversed"})
    return {"data": [trace], "layout": layout}


def snapshot_figures(rows: list[dict], extra: dict, method_label: str) -> SafeString:
    """A ``<script type="application/json" id="arena-figures">`` element holding the snapshot's figures.

    Its JSON maps ``ratings``, ``predicted`` and ``battles`` to Plotly figures (``data`` and ``layout``); the
    two heatmaps show the :data:`HEATMAP_MODELS` best-rated models (the table has them all). Escaped for
    HTML by :func:`django.utils.html.json_script`.
    """
    figures = {"ratings": _ratings_figure(rows, f"{method_label}: ratings with 95% intervals")}
    if extra.get("models") and extra.get("predicted"):
        keep = _top(rows, extra)
        top = f" (top {len(keep)} of {len(extra['models'])} by rating)" if len(keep) < len(extra["models"]) else ""
        figures["predicted"] = _heatmap(
            extra, keep, "predicted", f"Predicted win rate (row beats column){top}", percent=True
        )
        figures["battles"] = _heatmap(extra, keep, "battles", f"Battles per pair{top}", percent=False)
    return json_script(figures, "arena-figures")


def history_figure(history: list[dict], changes: list[dict], title: str) -> SafeString:
    """A ``<script type="application/json" id="arena-history">`` element: one model's rating (with its
    interval as whiskers) at each stored refit, oldest first; a dotted line where the scale's anchor
    changed (numbers either side of it are on different scales)."""
    trace = {
        "type": "scatter", "mode": "lines+markers", "name": "rating",
        "x": [p["at"].isoformat() for p in history], "y": [p["rating"] for p in history],
        "error_y": {
            "type": "data", "symmetric": False, "thickness": 1.2, "width": 3,
            "array": [None if p["ci_high"] is None else p["ci_high"] - p["rating"] for p in history],
            "arrayminus": [None if p["ci_low"] is None else p["rating"] - p["ci_low"] for p in history],
        },
        "text": [f"{p['votes']} votes; scale: {p['scale']}" for p in history],
        "hovertemplate": "%{x}: %{y:.0f} (%{text})<extra></extra>",
        "marker": {"size": 7, "color": "#2f5bd3"},
    }  # fmt: skip
    layout = _layout(title, 380, "refit", "rating (95% interval)")
    layout["shapes"] = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": c["at"].isoformat(), "x1": c["at"].isoformat(),
         "y0": 0, "y1": 1, "line": {"dash": "dot", "color": "#a05a00"}}
        for c in changes
    ]  # fmt: skip
    layout["annotations"] = [
        {"x": c["at"].isoformat(), "xref": "x", "y": 1, "yref": "paper", "text": "scale changed",
         "showarrow": False, "yanchor": "bottom", "font": {"color": "#a05a00", "size": 11}}
        for c in changes
    ]  # fmt: skip
    return json_script({"history": {"data": [trace], "layout": layout}}, "arena-history")
