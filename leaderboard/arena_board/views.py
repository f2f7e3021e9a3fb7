"""The arena leaderboard page and the plotly.js it loads (served from the installed plotly package)."""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

import plotly
from django import forms
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from leaderboard.arena_board import METHODS, arena_board_page

PLOTLY_VERSION = plotly.__version__


class ArenaBoardForm(forms.Form):
    method = forms.ChoiceField(choices=list(METHODS.items()), required=False)
    category = forms.RegexField(regex=r"^[a-z_]+(:[A-Za-z0-9_-]{1,16})?$", max_length=64, required=False)


@require_GET
def arena_leaderboard(request):
    """Latest arena ratings: ``?method=bt|style&category=overall|language:xx|multi_turn|long_prompt``."""
    unknown = sorted(set(request.GET) - {"method", "category"})
    form = ArenaBoardForm(request.GET)
    if unknown or not form.is_valid():
        errors = [f"unknown parameter {name!r}" for name in unknown]
        errors += [f"{field}: {' '.join(msgs)}" for field, msgs in form.errors.items()]
        return render(request, "leaderboard/arena.html", {"errors": errors}, status=400)
    board = arena_board_page(
        method=form.cleaned_data["method"] or "bt", category=form.cleaned_data["category"] or "overall"
    )
    context = {
        "board_html": board["html"],
        "has_figures": board["has_figures"],
        "plotly_version": PLOTLY_VERSION,
    }
    return render(request, "leaderboard/arena.html", context, status=200 if board["known"] else 404)


@lru_cache(maxsize=1)
def _plotly_bytes() -> tuple[bytes, bytes]:
    raw = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    return raw, gzip.compress(raw, compresslevel=6)


@require_GET
def plotly_js(request, version: str):
    """plotly.min.js from the installed package (the site runs offline: no CDN), cached for a year."""
    if version != PLOTLY_VERSION:
        raise Http404("unknown plotly.js version")
    raw, packed = _plotly_bytes()
    use_gzip = "gzip" in request.headers.get("Accept-Encoding", "")
    response = HttpResponse(packed if use_gzip else raw, content_type="text/javascript; charset=utf-8")
    if use_gzip:
        response["Content-Encoding"] = "gzip"
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    patch_vary_headers(response, ["Accept-Encoding"])
    return response
