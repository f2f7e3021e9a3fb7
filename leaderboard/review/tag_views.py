"""Staff check the prompt tagger: ``/leaderboard/review/categories/`` shows a random sample of one tagged
category's prompts (only prompts of published battles, as the public sees them: redacted), with the
tagger's verdict; staff confirm or correct each. The category's agreement with staff is shown here and on
the category's board (docs/categories.md).

Anonymous visitors are sent to log in; logged-in non-staff get a 404 (no one learns the page exists).
"""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from arena.categories import selectors as selectors_categories
from arena.categories import services as category_services
from arena.play.base import ArenaError
from leaderboard.review.forms import TagReviewForm, TagSampleForm


def staff_only(view):
    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_staff:
            raise Http404("no such page")
        return view(request, *args, **kwargs)

    return wrapped


def _page(request, form, *, category: str | None, seed: int | None, status: int = 200, errors=()):
    categories = selectors_categories.tagged_categories()
    context = {
        "categories": categories,
        "category": category,
        "seed": seed,
        "form": form,
        "errors": list(errors),
        "items": selectors_categories.tags_sample(category, seed=seed) if category else [],
        "agreement": {c: selectors_categories.category_agreement(c) for c in categories},
    }
    return render(request, "leaderboard/review_categories.html", context, status=status)


def _errors(form) -> list[str]:
    return [f"{name}: {' '.join(msgs)}" for name, msgs in form.errors.items()]


@staff_only
@require_http_methods(["GET", "POST"])
def review_categories(request):
    """GET ``?category=coding&seed=7``: a sample to check; POST ``tag``, ``value`` (yes/no), ``category``,
    ``seed``: record a check, then back to the same sample."""
    categories = selectors_categories.tagged_categories()
    if request.method == "GET":
        if not request.GET:
            return _page(request, None, category=None, seed=None)
        form = TagSampleForm(request.GET, categories=categories)
        if not form.is_valid():
            return _page(request, form, category=None, seed=None, status=400, errors=_errors(form))
        return _page(request, form, category=form.cleaned_data["category"], seed=form.cleaned_data["seed"])
    form = TagReviewForm(request.POST, categories=categories)
    if not form.is_valid():
        return _page(request, form, category=None, seed=None, status=400, errors=_errors(form))
    data = form.cleaned_data
    try:
        category_services.tag_review_record(
            tag_id=data["tag"], reviewer=request.user, value=data["value"] == "yes"
        )
    except ArenaError as exc:
        return _page(
            request, form, category=data["category"], seed=data["seed"], status=exc.status, errors=[str(exc)]
        )
    messages.success(request, f"Tag #{data['tag']}: {'confirmed in' if data['value'] == 'yes' else 'marked not in'} "
                              f"{data['category']}.")  # fmt: skip
    query = {"category": data["category"], **({"seed": data["seed"]} if data["seed"] is not None else {})}
    return redirect(f"{reverse('leaderboard:review-categories')}?{urlencode(query)}")
