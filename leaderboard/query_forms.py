"""Query strings validated with a Form: an unknown, repeated or bad parameter is a 400 that says what is allowed.

Shared by the board's and the runs' views.
"""

from __future__ import annotations

from django import forms
from django.http import JsonResponse
from django.shortcuts import render


class EmptyForm(forms.Form):
    """No parameter allowed."""


def query_validate(request, form_class):
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


def query_bad(request, template: str, errors: list[str], **context):
    """The page ``template`` with its ``errors`` listed, as a 400."""
    return render(request, template, {"errors": errors, **context}, status=400)


def query_empty(request):
    """A 400 naming the parameters given to a download that takes none; None when there are none."""
    _form, errors = query_validate(request, EmptyForm)
    return JsonResponse({"detail": errors}, status=400) if errors else None
