"""Submitting a checkpoint, an owner's submissions with live status, and a submission's results."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import TooManyFilesSent, ValidationError
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from common.http import read_only
from leaderboard.board.page import board_position
from leaderboard.models import Submission
from leaderboard.review import selectors as selectors_review
from leaderboard.runs import integrity
from leaderboard.submissions import file_rules, selectors, services
from leaderboard.submissions.forms import SubmissionForm
from leaderboard.submissions.forms import limits as form_limits
from leaderboard.submissions.uploads import SizeLimitHandler

log = logging.getLogger(__name__)


def _render_form(request, form, status=200, upload_error=""):
    limits = form_limits()
    context = {
        "form": form, "upload_error": upload_error,
        "checkpoint_rules": file_rules.browser_rules(max_files=limits.max_files, max_bytes=limits.max_bytes),
        "upload_chunk_bytes": settings.LEADERBOARD_UPLOAD_CHUNK_BYTES,
        "drafts_url": reverse("leaderboard-api:submission-list"), "uploads_url": reverse("leaderboard:uploads"),
    }  # fmt: skip
    return render(request, "leaderboard/submit.html", context, status=status)


@csrf_exempt  # CSRF is checked in _submit: the upload handler must be installed before the body is read
@login_required
def submit(request):
    """``/leaderboard/submit/``: every check runs before anything is stored or queued."""
    handler = SizeLimitHandler(request)
    request.upload_handlers.insert(0, handler)
    try:
        return _submit(request, handler)
    except TooManyFilesSent:
        message = "Too many files in one upload."
        return _render_form(request, SubmissionForm(staff=request.user.is_staff), status=400, upload_error=message)
    except OSError as exc:  # the temporary folder filled up while the upload arrived
        log.warning("an upload by %s could not be received: %s", request.user.pk, exc)
        _discard_partial_uploads(request)
        message = "The server ran out of space while receiving the upload; nothing was stored. Try again later."
        return _render_form(request, SubmissionForm(staff=request.user.is_staff), status=507, upload_error=message)


def _discard_partial_uploads(request) -> None:
    """Close (and so delete) the temporary file a handler was writing when the disk filled; the
    files already complete are closed by Django when the request ends."""
    for handler in request.upload_handlers:
        partial = getattr(handler, "file", None)
        if partial is not None:
            try:
                partial.close()
            except OSError:  # flushing its buffer fails on the full disk; the file is removed anyway
                pass


@csrf_protect
def _submit(request, handler: SizeLimitHandler):
    if request.method != "POST":
        return _render_form(request, SubmissionForm(staff=request.user.is_staff))
    form = SubmissionForm(request.POST, request.FILES, staff=request.user.is_staff)
    if handler.too_large:
        message = f"The upload is larger than the limit of {handler.limit} bytes; nothing was stored."
        form = SubmissionForm(initial=request.POST.dict(), staff=request.user.is_staff)
        return _render_form(request, form, status=413, upload_error=message)
    if not form.is_valid():
        return _render_form(request, form, status=400)
    try:
        services.submission_create(
            owner=request.user, data=form.cleaned_data, files=form.checkpoint_files, report=form.report,
            store_folder=form.store_folder,
        )  # fmt: skip
    except ValidationError as exc:
        for message in exc.messages:
            form.add_error(None, message)
        return _render_form(request, form, status=400)
    return redirect("leaderboard:submissions")


@login_required
@read_only
def submissions(request):
    """``/leaderboard/submissions/``: the owner's submissions, polled while any is active."""
    rows = [(s, selectors.submission_status(s, request.user)) for s in selectors.submissions_for_owner(request.user)]
    return render(request, "leaderboard/submissions.html", {"rows": rows})


@never_cache
@login_required
@read_only
def submission_status(request, public_id: str):
    submission = selectors.submission_for_owner(request.user, public_id)
    if submission is None:
        raise Http404("no such submission")
    return JsonResponse(selectors.submission_status(submission, request.user))


@login_required
@require_POST
def submission_publish(request, public_id: str):
    """Publish one of the owner's private variants (CSRF-protected POST; others get 404)."""
    submission = selectors.submission_for_owner(request.user, public_id)
    if submission is None:
        raise Http404("no such submission")
    try:
        services.submission_publish(submission_id=submission.pk, owner=request.user)
    except Submission.DoesNotExist:
        raise Http404("no such submission") from None
    return redirect("leaderboard:submissions")


@read_only
def submission_detail(request, public_id: str):
    """A submission's results: scores with their 95% intervals, per task."""
    submission = selectors.submission_visible(request.user, public_id)
    if submission is None:
        raise Http404("no such submission")
    results = selectors.submission_results(submission, request.user)
    on_board = None
    if submission.status == Submission.Status.FINISHED:
        on_board = board_position(viewer=request.user, public_id=submission.public_id)
    groups = selectors.results_by_benchmark(results)
    for group in groups:  # the board's own cell for the benchmark, where the submission has a row
        group["cell"] = on_board["row"]["cells"].get(group["key"]) if on_board else None
    context = {"submission": submission, "results": results, "groups": groups, "board": on_board,
               "status": _public_status(submission, request.user),
               "review_log": selectors_review.submission_review_log(submission, with_admins=request.user.is_staff),
               "integrity": integrity.submission_integrity(submission, staff=request.user.is_staff)}  # fmt: skip
    return render(request, "leaderboard/submission.html", context)


def _public_status(submission: Submission, viewer) -> dict:
    """The status anyone who may see the submission reads (its log tail only for its owner)."""
    state = selectors.submission_status(submission, viewer)
    if not (viewer.is_authenticated and submission.owner_id == viewer.pk):
        state.pop("log_tail", None)
    return state


@never_cache
@read_only
def submission_progress(request, public_id: str):
    """``/leaderboard/submissions/<id>/progress.json``: what the submission's page polls while it is
    PENDING or RUNNING (queue position, tasks done, stage), for whoever may see the page."""
    submission = selectors.submission_visible(request.user, public_id)
    if submission is None:
        raise Http404("no such submission")
    return JsonResponse(_public_status(submission, request.user))
