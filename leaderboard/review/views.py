"""Staff pages: the review queue (approve / hide / reject with a comment) and re-scoring a task.

Anonymous visitors are sent to log in; logged-in non-staff get a 404 (no one learns the page exists).
"""

from __future__ import annotations

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from leaderboard.evaluation import rescoring, scans
from leaderboard.models import ContaminationScan
from leaderboard.review import selectors as selectors_review
from leaderboard.review import services
from leaderboard.review.forms import RescoreForm, ReviewForm, ScanForm


def staff_only(view):
    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_staff:
            raise Http404("no such page")
        return view(request, *args, **kwargs)

    return wrapped


def _row(submission, form=None, *, log=False):
    row = {"submission": submission, "form": form or ReviewForm()}
    if log:
        row["log"] = selectors_review.submission_review_log(submission, with_admins=True)
    return row


@staff_only
@require_http_methods(["GET"])
def review_queue(request):
    """``/leaderboard/review/``: flagged submissions with their reasons, oldest first."""
    rows = [_row(s) for s in selectors_review.submissions_flagged()]
    return render(request, "leaderboard/review.html", {"rows": rows, "single": False})


@staff_only
@require_http_methods(["GET", "POST"])
def review_submission(request, submission_id: int):
    """``/leaderboard/review/<id>/``: one submission (in any state), its log, and the decision form."""
    submission = selectors_review.submission_for_review(submission_id)
    if submission is None:
        raise Http404("no such submission")
    form = ReviewForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.submission_review(submission=submission, admin=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for message in exc.messages:
                form.add_error(None, message)
        else:
            messages.success(request, f"{submission.model_name}: {form.cleaned_data['action']} recorded.")
            return redirect("leaderboard:review")
    status = 400 if request.method == "POST" else 200
    context = {"rows": [_row(submission, form, log=True)], "single": True}
    return render(request, "leaderboard/review.html", context, status=status)


@staff_only
@require_http_methods(["GET", "POST"])
def rescore(request):
    """``/leaderboard/review/rescore/``: re-score every stored run of a task from its samples (queued)."""
    tasks = selectors_review.rescore_tasks()
    form = RescoreForm(request.POST or None, tasks=tasks, initial={"task": request.GET.get("task", "")})
    if request.method == "POST" and form.is_valid():
        try:
            rescoring.rescore_enqueue(admin=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for message in exc.messages:
                form.add_error(None, message)
        else:
            messages.success(request, f"Re-scoring of {form.cleaned_data['task']} is queued.")
            return redirect("leaderboard:review-rescore")
    status = 400 if request.method == "POST" else 200
    return render(request, "leaderboard/rescore.html", {"form": form, "tasks": tasks}, status=status)


@staff_only
@require_http_methods(["GET", "POST"])
def review_scan(request, submission_id: int):
    """``/leaderboard/review/<id>/scan/``: point the n-gram scan at a training corpus (queued on a worker)."""
    submission = selectors_review.submission_for_review(submission_id)
    if submission is None:
        raise Http404("no such submission")
    form = ScanForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            scan = scans.scan_request(submission=submission, corpus=form.cleaned_data["corpus"], requested_by=request.user,
                                      kind=ContaminationScan.Kind.CORPUS, n=form.cleaned_data["n"])  # fmt: skip
        messages.success(request, f"Scan {scan.pk} of {submission.model_name} is queued.")
        return redirect("leaderboard:review-submission", submission.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "leaderboard/review_scan.html", {"submission": submission, "form": form}, status=status)
