"""``/leaderboard/rewards/``: reward models' accuracy on preference pairs, per category with Wilson
intervals, and the same figures as CSV and JSON. No query parameter is taken (a 400 names any given)."""

from __future__ import annotations

from django.http import HttpResponse
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
