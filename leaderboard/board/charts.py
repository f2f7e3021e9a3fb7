"""Plotly figures for the benchmark leaderboard, built on the server from the board's rows.

The page embeds them as one escaped JSON script (``board-figures``) and draws them with the plotly.js
the site serves from the installed package (``leaderboard:plotly-js``, :func:`plotly_bytes`).
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

import plotly
import plotly.graph_objects as go
from django.utils.html import json_script
from django.utils.safestring import SafeString

MAX_MODELS = 25
_LAYOUT = {"margin": {"l": 60, "r": 20, "t": 50, "b": 110}, "template": "plotly_white", "height": 440}
PLOTLY_VERSION = plotly.__version__
_COLOURS = ("#2f5bd3", "#d35f2f", "#2f9e6b", "#8a4fd3", "#c9a227", "#d32f6e", "#4a8fa8", "#6b6b6b")


def _scores_figure(rows: list[dict], columns: list[tuple[str, str]], scale: str) -> go.Figure:
    fig = go.Figure()
    models = [r["model"] for r in rows]
    for i, (key, label) in enumerate(columns):
        cells = [r["cells"].get(key) for r in rows]
        fig.add_trace(
            go.Scatter(
                x=models,
                y=[c["shown"] if c else None for c in cells],
                name=label,
                mode="markers",
                marker={"size": 9, "color": _COLOURS[i % len(_COLOURS)]},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        c["shown_high"] - c["shown"] if c and c["shown_high"] is not None else None
                        for c in cells
                    ],
                    "arrayminus": [
                        c["shown"] - c["shown_low"] if c and c["shown_low"] is not None else None
                        for c in cells
                    ],
                    "thickness": 1.5,
                    "width": 4,
                },
                hovertemplate=f"%{{x}}<br>{label}: %{{y:.1f}}<extra></extra>",
            )
        )
    fig.update_layout(
        title=f"Benchmark scores with 95% intervals ({scale})",
        yaxis_title=scale,
        scattermode="group",
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        **_LAYOUT,
    )
    return fig


def _gap(a, b):
    """``a - b``; None when a bound is open (a provisional arena model's interval may be unbounded)."""
    return None if a is None or b is None else a - b


def _arena_figure(rows: list[dict], scale: str) -> go.Figure | None:
    both = [r for r in rows if r["arena"] and r["avg"]]
    if not both:
        return None
    fig = go.Figure(
        go.Scatter(
            x=[r["arena"]["rating"] for r in both],
            y=[r["avg"]["value"] for r in both],
            text=[r["model"] for r in both],
            mode="markers+text",
            textposition="top center",
            marker={"size": 10, "color": "#2f5bd3"},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [_gap(r["arena"]["ci_high"], r["arena"]["rating"]) for r in both],
                "arrayminus": [_gap(r["arena"]["rating"], r["arena"]["ci_low"]) for r in both],
                "thickness": 1.2,
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [
                    r["avg"]["ci_high"] - r["avg"]["value"] if r["avg"]["ci_high"] is not None else None
                    for r in both
                ],
                "arrayminus": [
                    r["avg"]["value"] - r["avg"]["ci_low"] if r["avg"]["ci_low"] is not None else None
                    for r in both
                ],
                "thickness": 1.2,
            },
            hovertemplate="%{text}<br>arena %{x:.0f}, average %{y:.1f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Arena rating against benchmark average (95% intervals)",
        xaxis_title="arena rating (Bradley-Terry)",
        yaxis_title=f"benchmark average ({scale})",
        **{**_LAYOUT, "margin": {"l": 60, "r": 20, "t": 50, "b": 60}},
    )
    return fig


def board_figures(table: dict) -> SafeString | None:
    """A ``<script type="application/json" id="board-figures">`` with ``scores`` and (when any model is in
    the arena) ``arena`` figures for the first :data:`MAX_MODELS` rows as sorted; None with no scores."""
    rows = [r for r in table["rows"] if r["cells"]][:MAX_MODELS]
    if not rows or not table["columns"]:
        return None
    scale = "normalised score" if table["normalised"] else "% correct"
    figures = {"scores": _scores_figure(rows, table["columns"], scale)}
    arena = _arena_figure(rows, scale)
    if arena is not None:
        figures["arena"] = arena
    return json_script({name: json.loads(fig.to_json()) for name, fig in figures.items()}, "board-figures")


@lru_cache(maxsize=1)
def plotly_bytes() -> tuple[bytes, bytes]:
    """plotly.min.js from the installed package: (raw, gzipped)."""
    raw = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    return raw, gzip.compress(raw, compresslevel=6)
