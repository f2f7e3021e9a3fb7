"""A run's pages: the protocol behind a score, the sample browser, and its records as JSONL.

Every view validates its query string with a Form (an unknown, repeated or bad parameter is a 400
that says what is allowed), makes one selector call, and renders.
"""

from __future__ import annotations

from django import forms
from django.http import Http404
from django.shortcuts import render
from django.utils.http import urlencode

from common.http import read_only
from common.query import WholeNumberField
from common.streaming import streaming_download
from leaderboard.query_forms import query_bad, query_empty, query_validate
from leaderboard.runs import integrity
from leaderboard.runs import selectors as selectors_runs
from leaderboard.runs.exports import samples_jsonl_chunks


class SamplesForm(forms.Form):
    only = forms.ChoiceField(required=False, choices=[("", "All"), ("wrong", "Wrong answers"),
                                                       ("no_answer", "No answer extracted")])  # fmt: skip
    page = WholeNumberField(required=False, min_value=1, max_value=10**7)


class ProtocolForm(forms.Form):
    doc = WholeNumberField(required=False, min_value=0, max_value=10**9, label="Document id")


def _run_or_404(request, run_id: int):
    run = selectors_runs.run_visible(request.user, run_id)
    if run is None:
        raise Http404("no such run")
    return run


@read_only
def run_protocol(request, run_id: int):
    """``/leaderboard/runs/<id>/``: the protocol behind a score, with one document's exact prompt."""
    run = _run_or_404(request, run_id)
    form, errors = query_validate(request, ProtocolForm)
    if errors:
        return query_bad(request, "leaderboard/protocol.html", errors, run=run)
    context = selectors_runs.run_protocol(run, doc_id=form.cleaned_data["doc"], viewer=request.user)
    context["integrity"] = integrity.submission_integrity(run.submission, staff=request.user.is_staff, task=run.task)
    return render(request, "leaderboard/protocol.html", context)


@read_only
def run_samples(request, run_id: int):
    """``/leaderboard/runs/<id>/samples/``: per-document outputs, a page at a time, with filters."""
    run = _run_or_404(request, run_id)
    form, errors = query_validate(request, SamplesForm)
    metric = selectors_runs.run_headline_metric(run)
    if not errors:
        try:
            found = selectors_runs.samples_page(
                run, metric=metric, only=form.cleaned_data["only"] or "", page=form.cleaned_data["page"] or 1
            )
        except ValueError as exc:
            errors = [str(exc)]
    if errors:
        return query_bad(request, "leaderboard/samples.html", errors, run=run)
    only = form.cleaned_data["only"] or ""
    context = {"run": run, "metric": metric, "only": only, "form": form, **found,
               "page_query": urlencode({"only": only}) if only else ""}  # fmt: skip
    return render(request, "leaderboard/samples.html", context)


@read_only
def run_samples_jsonl(request, run_id: int):
    """A run's per-document records as the engine's samples JSONL (``evalcore rescore`` reads it)."""
    run = _run_or_404(request, run_id)
    return query_empty(request) or streaming_download(
        request,
        lambda: samples_jsonl_chunks(run),
        "application/x-ndjson",
        f"samples_{run.task}_{run.pk}.jsonl",
    )
