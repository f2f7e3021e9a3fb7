"""Query strings validated with a Form: an unknown, repeated or bad parameter is a 400 that says what is allowed.

Shared by the board's and the runs' views.
"""

from __future__ import annotations

from django import forms
from django.http import JsonResponse
from django.shortcuts import render

from common.public_ids import ROW_ID, SUBMISSION_ID, is_row_id, moved
from common.query import query_problems, range_problem
from leaderboard.submissions.selectors import submission_public_id_of_row


class EmptyForm(forms.Form):
    """No parameter allowed."""


def query_validate(request, form_class):
    """(form, errors): by the rules of common.query, as the API's parameters are: unknown or repeated
    parameters, field errors, and an inverted since/until range, as messages."""
    form = form_class(request.GET)
    errors = query_problems(request.GET, form.fields)
    if not form.is_valid():
        errors += [f"{field}: {' '.join(messages)}" for field, messages in form.errors.items()]
    elif inverted := range_problem(form.cleaned_data, request.GET):
        errors.append(inverted)
    return form, errors


def query_bad(request, template: str, errors: list[str], **context):
    """The page ``template`` with its ``errors`` listed, as a 400."""
    return render(request, template, {"errors": errors, **context}, status=400)


def query_empty(request):
    """A 400 naming the parameters given to a download that takes none; None when there are none."""
    _form, errors = query_validate(request, EmptyForm)
    return JsonResponse({"detail": errors}, status=400) if errors else None


SUBMISSION_PARAM = rf"^(?:{SUBMISSION_ID}|{ROW_ID})$"  # a public id; a row number of earlier versions redirects


def legacy_submission_redirect(request, names: tuple[str, ...]):
    """Earlier versions named a submission by its row number (``?submission=12``, ``?a=3&b=5``): the
    same URL with the public ids instead, as a permanent redirect (common.public_ids), where the
    viewer may see those submissions; None when there is nothing to redirect (a row number the viewer
    may not see stays, and matches nothing, as an unknown public id does)."""
    query = request.GET
    if any(len(query.getlist(k)) > 1 for k in query):
        return None  # refused by validation, which names the repeated parameter
    found = {}
    for name in names:
        value = query.get(name, "")
        if is_row_id(value):
            public_id = submission_public_id_of_row(request.user, int(value))
            if public_id is not None:
                found[name] = public_id
    return moved(request, request.path, {**query.dict(), **found}) if found else None
