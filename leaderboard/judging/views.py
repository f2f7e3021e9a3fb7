"""The judge pages: the list of judges, a judge's protocol page (scores, audit, rank correlation with
the arena), a model's judgments, and the judgments as CSV or JSON Lines.

Every view validates its query string with a Form, makes one selector call, and renders.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, JsonResponse
from django.shortcuts import render

from common.http import read_only
from common.streaming import streaming_download
from leaderboard.judging import selectors
from leaderboard.judging.exports import GRADE_FIELDS, judgments_csv_chunks, judgments_jsonl_chunks
from leaderboard.judging.forms import JudgmentsExportForm, JudgmentsForm
from leaderboard.models import JudgeConfig, JudgePanel
from leaderboard.query_forms import query_bad, query_empty, query_validate

PAGE_SIZE = 10


def _config_or_404(config_id: int):
    config = selectors.judge_config_get(config_id)
    if config is None:
        raise Http404("no such judge")
    return config


@read_only
def judges(request):
    """``/leaderboard/judges/``: every configured judge."""
    bad = query_empty(request)
    if bad is not None:
        return bad
    return render(request, "leaderboard/judges.html", {"configs": selectors.judge_configs(), "panels": selectors.panels()})


@read_only
def judge_detail(request, config_id: int):
    """``/leaderboard/judges/<id>/``: the judge's model, hash, protocol, orders, audit and scores."""
    config = _config_or_404(config_id)
    bad = query_empty(request)
    if bad is not None:
        return bad
    return render(request, "leaderboard/judge.html", selectors.judge_page(config, request.user))


@read_only
def judge_judgments(request, config_id: int, model_id: int):
    """``/leaderboard/judges/<id>/models/<model>/``: each question, both answers and both verdicts."""
    config = _config_or_404(config_id)
    run = selectors.judged_model_run(config, model_id, request.user)
    if run is None:
        raise Http404("this model has not been judged by this judge")
    form, errors = query_validate(request, JudgmentsForm)
    if errors:
        return query_bad(request, "leaderboard/judgments.html", errors, config=config, run=run)
    rows = selectors.grades_of_run(run) if config.kind == JudgeConfig.Kind.SINGLE else selectors.judgments_of_run(run)
    pages = Paginator(rows, PAGE_SIZE)
    number = form.cleaned_data["page"] or 1
    if number > pages.num_pages:
        return query_bad(request, "leaderboard/judgments.html", [f"page: there are {pages.num_pages} pages"],
                         config=config, run=run)  # fmt: skip
    return render(request, "leaderboard/judgments.html", {"config": config, "run": run, "page": pages.page(number)})


def _export(request, config_id: int, chunks, content_type: str, extension: str):
    config = _config_or_404(config_id)
    form, errors = query_validate(request, JudgmentsExportForm)
    if errors:
        return JsonResponse({"detail": errors}, status=400)
    model_id, viewer = form.cleaned_data["model"], request.user
    if config.kind == JudgeConfig.Kind.SINGLE:
        return streaming_download(request, lambda: chunks(selectors.grades_for_export(config, model_id, viewer), GRADE_FIELDS),
                                  content_type, f"grades-{config.pk}.{extension}")  # fmt: skip
    return streaming_download(request, lambda: chunks(selectors.judgments_for_export(config, model_id, viewer)),
                              content_type, f"judgments-{config.pk}.{extension}")  # fmt: skip


@read_only
def judgments_csv(request, config_id: int):
    return _export(request, config_id, judgments_csv_chunks, "text/csv; charset=utf-8", "csv")


@read_only
def judgments_jsonl(request, config_id: int):
    return _export(request, config_id, judgments_jsonl_chunks, "application/x-ndjson; charset=utf-8", "jsonl")


@read_only
def panel_detail(request, panel_id: int):
    """``/leaderboard/judges/panels/<id>/``: the panel's scores with intervals, each judge's agreement
    with the rest of the panel, and which judge disagrees most."""
    panel = JudgePanel.objects.prefetch_related("members").filter(pk=panel_id).first()
    if panel is None:
        raise Http404("no such panel")
    bad = query_empty(request)
    if bad is not None:
        return bad
    return render(request, "leaderboard/judge_panel.html", selectors.panel_page(panel, request.user))
