"""The benchmark leaderboard: the table, protocol pages, the sample browser, paired comparison, downloads.

Every view validates its query string with a Form (an unknown, repeated or bad parameter is a 400
that says what is allowed), makes one selector call, and renders.
"""

from __future__ import annotations

from django import forms
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from common.streaming import streaming_download
from leaderboard import exports, selectors_runs
from leaderboard.board_page import board_page, board_params, board_query
from leaderboard.models import Submission
from leaderboard.selectors_board import (
    SIZE_BUCKETS,
    SORT_COLUMNS,
    board_benchmarks,
    board_models,
    board_table,
)
from leaderboard.views_arena import PLOTLY_VERSION

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

    def clean_sort(self):
        sort = self.cleaned_data["sort"] or "-average"
        if sort.lstrip("-").startswith("score:") and sort.lstrip("-")[6:] not in board_benchmarks():
            raise forms.ValidationError(f"no benchmark {sort.lstrip('-')[6:]!r}; known: {board_benchmarks()}")
        return sort


class SamplesForm(forms.Form):
    only = forms.ChoiceField(required=False, choices=[("", "All"), ("wrong", "Wrong answers"),
                                                       ("no_answer", "No answer extracted")])  # fmt: skip
    page = forms.IntegerField(required=False, min_value=1, max_value=10**7)


class ProtocolForm(forms.Form):
    doc = forms.IntegerField(required=False, min_value=0, max_value=10**9, label="Document id")


class CompareForm(forms.Form):
    a = forms.IntegerField(min_value=1, max_value=2**62)
    b = forms.IntegerField(min_value=1, max_value=2**62)
    task = forms.RegexField(regex=r"^[A-Za-z0-9_.\-]{1,200}$", max_length=200)


class EmptyForm(forms.Form):
    pass


def _validate(request, form_class):
    """(form, errors): unknown or repeated parameters and field errors as messages."""
    form = form_class(request.GET)
    errors = [f"unknown parameter {name!r} (allowed: {', '.join(form.fields) or 'none'})"
              for name in sorted(set(request.GET) - set(form.fields))]  # fmt: skip
    errors += [
        f"parameter {name!r} given more than once"
        for name in sorted(request.GET)
        if len(request.GET.getlist(name)) > 1
    ]
    if not form.is_valid():
        errors += [f"{field}: {' '.join(messages)}" for field, messages in form.errors.items()]
    return form, errors


def _bad(request, template: str, errors: list[str], **context):
    return render(request, template, {"errors": errors, **context}, status=400)


@require_GET
def leaderboard_board(request):
    """``/leaderboard/``: models, arena ratings, benchmark scores with 95% intervals, the average."""
    form, errors = _validate(request, BoardForm)
    if errors:
        return _bad(request, "leaderboard/index.html", errors, form=BoardForm())
    data = form.cleaned_data
    page = board_page(viewer=request.user, data=data)
    context = {
        "form": form,
        "sort": data["sort"],
        "normalised": data["scale"] == "normalised",
        "board_html": page["html"],
        "has_figures": page["has_figures"],
        "plotly_version": PLOTLY_VERSION,
        "raw_url": "?" + board_query(data, scale=""),
        "normalised_url": "?" + board_query(data, scale="normalised"),
        "export_query": board_query(data),
    }
    return render(request, "leaderboard/index.html", context)


def _run_or_404(request, run_id: int):
    run = selectors_runs.run_visible(request.user, run_id)
    if run is None:
        raise Http404("no such run")
    return run


@require_GET
def run_protocol(request, run_id: int):
    """``/leaderboard/runs/<id>/``: the protocol behind a score, with one document's exact prompt."""
    run = _run_or_404(request, run_id)
    form, errors = _validate(request, ProtocolForm)
    if errors:
        return _bad(request, "leaderboard/protocol.html", errors, run=run)
    context = selectors_runs.run_protocol(run, doc_id=form.cleaned_data["doc"])
    return render(request, "leaderboard/protocol.html", context)


@require_GET
def run_samples(request, run_id: int):
    """``/leaderboard/runs/<id>/samples/``: per-document outputs, a page at a time, with filters."""
    run = _run_or_404(request, run_id)
    form, errors = _validate(request, SamplesForm)
    metric = selectors_runs.run_headline_metric(run)
    if not errors:
        try:
            found = selectors_runs.samples_page(
                run, metric=metric, only=form.cleaned_data["only"] or "", page=form.cleaned_data["page"] or 1
            )
        except ValueError as exc:
            errors = [str(exc)]
    if errors:
        return _bad(request, "leaderboard/samples.html", errors, run=run)
    only = form.cleaned_data["only"] or ""
    context = {"run": run, "metric": metric, "only": only, "form": form, **found,
               "page_query": urlencode({"only": only}) if only else ""}  # fmt: skip
    return render(request, "leaderboard/samples.html", context)


@require_GET
def compare(request):
    """``/leaderboard/compare/?a=&b=&task=``: paired difference over the documents both ran."""
    pickers = {"models": board_models(request.user), "benchmarks": board_benchmarks()}
    if set(request.GET) <= {"a", "task"}:  # nothing to compare yet: the form, pre-filled from a protocol page
        return render(
            request, "leaderboard/compare.html", {"form": CompareForm(initial=request.GET.dict()), **pickers}
        )
    form, errors = _validate(request, CompareForm)
    result = None
    if not errors:
        try:
            result = selectors_runs.compare_runs(request.user, **form.cleaned_data)
        except ValueError as exc:
            errors = [str(exc)]
    if errors:
        return _bad(request, "leaderboard/compare.html", errors, form=form, **pickers)
    return render(request, "leaderboard/compare.html", {"form": form, "result": result, **pickers})


def _export_table(request, kind: str):
    form, errors = _validate(request, BoardForm)
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
    filters = {k: v for k, v in data.items() if v}
    return streaming_download(
        request,
        lambda: exports.table_json_chunks(table, filters),
        "application/json",
        "podium_leaderboard.json",
    )


@require_GET
def scores_csv(request):
    """The leaderboard table as CSV (same filters as the page), with intervals and protocol hashes."""
    return _export_table(request, "csv")


@require_GET
def scores_json(request):
    """The leaderboard table as JSON (same filters as the page), with intervals and protocol hashes."""
    return _export_table(request, "json")


def _no_params(request):
    _form, errors = _validate(request, EmptyForm)
    return JsonResponse({"detail": errors}, status=400) if errors else None


@require_GET
def all_scores_csv(request):
    """Every metric of every visible run, as CSV (streamed)."""
    viewer = request.user
    return _no_params(request) or streaming_download(
        request, lambda: exports.scores_csv_chunks(viewer), "text/csv; charset=utf-8", "podium_all_scores.csv"
    )


@require_GET
def all_scores_json(request):
    """Every metric of every visible run, as a JSON array (streamed)."""
    viewer = request.user
    return _no_params(request) or streaming_download(
        request, lambda: exports.scores_json_chunks(viewer), "application/json", "podium_all_scores.json"
    )


@require_GET
def run_samples_jsonl(request, run_id: int):
    """A run's per-document records as the engine's samples JSONL (``evalcore rescore`` reads it)."""
    run = _run_or_404(request, run_id)
    return _no_params(request) or streaming_download(
        request,
        lambda: exports.samples_jsonl_chunks(run),
        "application/x-ndjson",
        f"samples_{run.task}_{run.pk}.jsonl",
    )
