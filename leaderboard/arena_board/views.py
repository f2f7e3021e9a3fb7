"""The arena leaderboard pages: the board, one model's page (its description and rating history), and
the public record of retired and unreleased models (plotly.js is served by
:func:`leaderboard.board.views.plotly_js`)."""

from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.utils import timezone

from arena.catalogue.selectors import BoardFilters
from common.http import read_only
from common.query import CategoryField, LicenceField, OrganisationField, YesNoField
from leaderboard.arena_board.model_page import arena_model_page, arena_retired_page
from leaderboard.arena_board.page import METHODS, arena_board_page, arena_live_html
from leaderboard.board.charts import PLOTLY_VERSION
from leaderboard.query_forms import EmptyForm, query_validate


class ArenaBoardForm(forms.Form):
    method = forms.ChoiceField(choices=list(METHODS.items()), required=False)
    category = CategoryField(max_length=64, required=False)
    organisation = OrganisationField(max_length=200, required=False)
    licence = LicenceField(max_length=100, required=False)
    open_weights = YesNoField(required=False)
    retired = YesNoField(required=False)


class ArenaModelForm(forms.Form):
    method = forms.ChoiceField(choices=list(METHODS.items()), required=False)
    category = CategoryField(max_length=64, required=False)


@read_only
def arena_leaderboard(request):
    """Latest arena ratings: ``?method=bt|style&category=...`` and the catalogue filters
    ``organisation``, ``licence``, ``open_weights=yes|no`` and ``retired=yes`` (show retired models)."""
    form, errors = query_validate(request, ArenaBoardForm)
    if errors:
        return render(request, "leaderboard/arena.html", {"errors": errors}, status=400)
    method, category = form.cleaned_data["method"] or "bt", form.cleaned_data["category"] or "overall"
    filters = BoardFilters.of(form.cleaned_data)
    board = arena_board_page(method=method, category=category, filters=filters)
    if not board["known"]:  # no such category: say so, and list the ones there are
        context = {"unknown_category": category, "category_choices": board["choices"], "method": method}
        return render(request, "leaderboard/arena.html", context, status=404)
    live = arena_live_html(category=category, page=board, now=timezone.now()) if method == "bt" else ""
    context = {
        "live_html": live,
        "board_html": board["html"],
        "has_figures": board["has_figures"],
        "plotly_version": PLOTLY_VERSION,
    }
    return render(request, "leaderboard/arena.html", context)


@read_only
def arena_model(request, name: str):
    """One arena model: what it is, whether it was retired, and its rating across refits (a chart)."""
    form, errors = query_validate(request, ArenaModelForm)
    if errors:
        return render(request, "leaderboard/arena_model.html", {"errors": errors}, status=400)
    method, category = form.cleaned_data["method"] or "bt", form.cleaned_data["category"] or "overall"
    page = arena_model_page(name, method=method, category=category)
    if page is None:
        return render(request, "leaderboard/arena_model.html", {"missing": name[:200]}, status=404)
    return render(request, "leaderboard/arena_model.html", {**page, "plotly_version": PLOTLY_VERSION})


@read_only
def arena_retired(request):
    """Every retired model with its date and reason, and every model tested in the arena but never shown."""
    _form, errors = query_validate(request, EmptyForm)
    if errors:
        return render(request, "leaderboard/arena_retired.html", {"errors": errors}, status=400)
    return render(request, "leaderboard/arena_retired.html", arena_retired_page())
