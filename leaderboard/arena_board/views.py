"""The arena leaderboard page (its plotly.js is served by :func:`leaderboard.board.views.plotly_js`)."""

from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.utils import timezone

from common.http import read_only
from common.query import CategoryField
from leaderboard.arena_board.page import METHODS, arena_board_page, arena_live_html
from leaderboard.board.charts import PLOTLY_VERSION
from leaderboard.query_forms import query_validate


class ArenaBoardForm(forms.Form):
    method = forms.ChoiceField(choices=list(METHODS.items()), required=False)
    category = CategoryField(max_length=64, required=False)


@read_only
def arena_leaderboard(request):
    """Latest arena ratings: ``?method=bt|style&category=overall|language:xx|multi_turn|long_prompt``."""
    form, errors = query_validate(request, ArenaBoardForm)
    if errors:
        return render(request, "leaderboard/arena.html", {"errors": errors}, status=400)
    method, category = form.cleaned_data["method"] or "bt", form.cleaned_data["category"] or "overall"
    board = arena_board_page(method=method, category=category)
    live = arena_live_html(category=category, page=board, now=timezone.now()) if method == "bt" else ""
    context = {
        "live_html": live,
        "board_html": board["html"],
        "has_figures": board["has_figures"],
        "plotly_version": PLOTLY_VERSION,
    }
    return render(request, "leaderboard/arena.html", context, status=200 if board["known"] else 404)
