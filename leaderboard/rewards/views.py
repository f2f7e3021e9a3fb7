"""``/leaderboard/rewards/``: reward models' accuracy on preference pairs, per category with mid-p
intervals, and the same figures as CSV and JSON. No query parameter is taken (a 400 names any given)."""

from __future__ import annotations

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render

from common.http import read_only
from leaderboard.query_forms import EmptyForm, query_bad, query_empty, query_validate
from leaderboard.rewards import selectors
from leaderboard.rewards.exports import rewards_csv, rewards_json


@read_only
def reward_models(request):
    _form, errors = query_validate(request, EmptyForm)
    if errors:
        return query_bad(request, "leaderboard/rewards.html", errors, boards=[])
    return render(request, "leaderboard/rewards.html", {"boards": selectors.reward_boards()})


def _download(request, body, content_type: str, filename: str):
    bad = query_empty(request)
    if bad is not None:
        return bad
    response = HttpResponse(body(selectors.reward_rows()), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@read_only
def reward_models_csv(request):
    return _download(request, rewards_csv, "text/csv; charset=utf-8", "reward-models.csv")


@read_only
def reward_models_json(request):
    return _download(request, rewards_json, "application/json", "reward-models.json")


@read_only
def reward_result_report(request, result_id: int):
    """``/leaderboard/rewards/<id>/report.json``: one result as stored: figures, model, protocol and every
    pair's rewards (enough to recompute each figure)."""
    result = selectors.reward_result_get(result_id)
    if result is None:
        raise Http404("no such reward-model result")
    bad = query_empty(request)
    if bad is not None:
        return bad
    return JsonResponse({"name": result.name, **result.report}, json_dumps_params={"ensure_ascii": False})
