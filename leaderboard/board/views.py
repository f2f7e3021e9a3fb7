"""The benchmark leaderboard: the table, paired comparison, downloads, and the plotly.js the pages load.

Every view validates its query string with a Form (an unknown, repeated or bad parameter is a 400
that says what is allowed), makes one selector call, and renders.
"""

from __future__ import annotations

from django import forms
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from common.http import read_only
from common.query import WholeNumberField
from common.streaming import streaming_download
from leaderboard.board import exports
from leaderboard.board.charts import PLOTLY_VERSION, plotly_bytes
from leaderboard.board.page import board_page, board_params, board_query
from leaderboard.board.selectors import (
    SIZE_BUCKETS,
    SORT_COLUMNS,
    board_benchmarks,
    board_models,
    board_table,
)
from leaderboard.models import Submission
from leaderboard.query_forms import (
    SUBMISSION_PARAM,
    legacy_submission_redirect,
    query_bad,
    query_empty,
    query_validate,
)
from leaderboard.runs import selectors as selectors_runs

SORT_PATTERN = r"^-?(" + "|".join(SORT_COLUMNS) + r"|score:[a-z0-9_]{1,100})$"


class BoardForm(forms.Form):
    q = forms.CharField(required=False, max_length=100, strip=True, label="Search")
    type = forms.ChoiceField(required=False, choices=[("", "Any type"), *Submission.ModelType.choices])
    size = forms.ChoiceField(
        required=False, choices=[("", "Any size"), *((k, v[0]) for k, v in SIZE_BUCKETS.items())]
    )
    scale = forms.ChoiceField(required=False, choices=[("raw", "Raw"), ("normalised", "Normalised")])
    show = forms.ChoiceField(required=False, choices=[("", "Default"), ("hidden", "Include hidden models")])
    sort = forms.RegexField(required=False, regex=SORT_PATTERN, max_length=120,
                            error_messages={"invalid": f"must match {SORT_PATTERN}"})  # fmt: skip
    # The page's table is shown PAGE_ROWS rows at a time; a page past the end shows the last one.
    # The downloads ignore it: they hold every row.
    page = WholeNumberField(required=False, min_value=1, max_value=1_000_000)

    def clean_sort(self):
        sort = self.cleaned_data["sort"] or "-average"
        if sort.lstrip("-").startswith("score:") and sort.lstrip("-")[6:] not in board_benchmarks():
            raise forms.ValidationError(f"no benchmark {sort.lstrip('-')[6:]!r}; known: {board_benchmarks()}")
        return sort


class CompareForm(forms.Form):
    a = forms.RegexField(regex=SUBMISSION_PARAM, help_text="a submission's public id")
    b = forms.RegexField(regex=SUBMISSION_PARAM, help_text="a submission's public id")
    task = forms.RegexField(regex=r"^[A-Za-z0-9_.\-]{1,200}$", max_length=200)


@read_only
def leaderboard_board(request):
    """``/leaderboard/``: models, arena ratings, benchmark scores with 95% intervals, the average."""
    form, errors = query_validate(request, BoardForm)
    if errors:
        return query_bad(request, "leaderboard/index.html", errors, form=BoardForm())
    data = form.cleaned_data
    board = board_page(viewer=request.user, data=data)
    context = {
        "form": form,
        "sort": data["sort"],
        "normalised": data["scale"] == "normalised",
        "board_html": board["html"],
        "has_figures": board["has_figures"],
        "plotly_version": PLOTLY_VERSION,
        "raw_url": "?" + board_query(data, scale=""),
        "normalised_url": "?" + board_query(data, scale="normalised"),
        "export_query": board_query(data, page=""),
    }
    return render(request, "leaderboard/index.html", context)


@read_only
def compare(request):
    """``/leaderboard/compare/?a=&b=&task=``: paired difference over the documents both ran."""
    moved = legacy_submission_redirect(request, ("a", "b"))
    if moved is not None:
        return moved
    pickers = {"models": board_models(request.user), "benchmarks": board_benchmarks()}
    if set(request.GET) <= {"a", "task"}:  # nothing to compare yet: the form, pre-filled from a protocol page
        return render(
            request, "leaderboard/compare.html", {"form": CompareForm(initial=request.GET.dict()), **pickers}
        )
    form, errors = query_validate(request, CompareForm)
    result = None
    if not errors:
        try:
            result = selectors_runs.compare_runs(request.user, **form.cleaned_data)
        except ValueError as exc:
            errors = [str(exc)]
    if errors:
        return query_bad(request, "leaderboard/compare.html", errors, form=form, **pickers)
    return render(request, "leaderboard/compare.html", {"form": form, "result": result, **pickers})


def _export_table(request, kind: str):
    form, errors = query_validate(request, BoardForm)
    if errors:
        return JsonResponse({"detail": errors}, status=400)
    data = form.cleaned_data
    table = board_table(viewer=request.user, **board_params(data))
    if kind == "csv":
        return streaming_download(
            request,
            lambda: exports.table_csv_chunks(table),
            "text/csv; charset=utf-8",
            "podium_leaderboard.csv",
        )
    filters = {k: v for k, v in data.items() if v and k != "page"}
    return streaming_download(
        request,
        lambda: exports.table_json_chunks(table, filters),
        "application/json",
        "podium_leaderboard.json",
    )


@read_only
def scores_csv(request):
    """The leaderboard table as CSV (same filters as the page), with intervals and protocol hashes."""
    return _export_table(request, "csv")


@read_only
def scores_json(request):
    """The leaderboard table as JSON (same filters as the page), with intervals and protocol hashes."""
    return _export_table(request, "json")


@read_only
def all_scores_csv(request):
    """Every metric of every visible run, as CSV (streamed)."""
    viewer = request.user
    return query_empty(request) or streaming_download(
        request, lambda: exports.scores_csv_chunks(viewer), "text/csv; charset=utf-8", "podium_all_scores.csv"
    )


@read_only
def all_scores_json(request):
    """Every metric of every visible run, as a JSON array (streamed)."""
    viewer = request.user
    return query_empty(request) or streaming_download(
        request, lambda: exports.scores_json_chunks(viewer), "application/json", "podium_all_scores.json"
    )


@read_only
def plotly_js(request, version: str):
    """plotly.min.js from the installed package (the site runs offline: no CDN), cached for a year."""
    if version != PLOTLY_VERSION:
        raise Http404("unknown plotly.js version")
    raw, packed = plotly_bytes()
    use_gzip = "gzip" in request.headers.get("Accept-Encoding", "")
    response = HttpResponse(packed if use_gzip else raw, content_type="text/javascript; charset=utf-8")
    if use_gzip:
        response["Content-Encoding"] = "gzip"
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    patch_vary_headers(response, ["Accept-Encoding"])
    return response
