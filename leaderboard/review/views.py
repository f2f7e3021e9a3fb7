"""Staff pages: the one review queue (flagged submissions, flagged voters, identity-revealing answers,
and the audit log of every decision), one submission's review, and re-scoring a task.

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
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from common.public_ids import moved
from leaderboard.evaluation import rescoring, scans
from leaderboard.models import ContaminationScan
from leaderboard.review import selectors as selectors_review
from leaderboard.review import services
from leaderboard.review.forms import (
    BattleReviewForm,
    IdentityReviewForm,
    RescoreForm,
    ReviewForm,
    ScanForm,
    VoterReviewForm,
)


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


def _queue(request, *, status: int = 200, errors=(), failed: tuple[str, int] | None = None, form=None):
    """The whole queue; after a refused decision, its errors and the form as it was sent."""
    context = {
        "rows": [_row(s) for s in selectors_review.submissions_flagged()],
        "voters": selectors_review.voters_flagged(),
        "voters_total": selectors_review.voters_flagged_count(),
        "identity": selectors_review.identity_votes_pending(),
        "identity_total": selectors_review.identity_votes_pending_count(),
        "held": selectors_review.battles_held(),
        "held_total": selectors_review.battles_held_count(),
        "log": selectors_review.review_log(),
        "single": False,
        "errors": list(errors),
        "failed": failed,
        "failed_form": form,
    }
    return render(request, "leaderboard/review.html", context, status=status)


@staff_only
@require_http_methods(["GET"])
def review_queue(request):
    """``/leaderboard/review/``: everything waiting for a decision, oldest first, and the audit log."""
    return _queue(request)


def _decide(request, form, service, item: tuple[str, int], done: str):
    """Validate the form, call the service; 400 for a bad form, 409 for an item already decided."""
    if not form.is_valid():
        errors = [f"{name}: {' '.join(msgs)}" if name != "__all__" else " ".join(msgs)
                  for name, msgs in form.errors.items()]  # fmt: skip
        return _queue(request, status=400, errors=errors, failed=item, form=form)
    try:
        service(admin=request.user, **form.cleaned_data)
    except ValidationError as exc:
        codes = {e.code for e in exc.error_list}
        status = 409 if services.CONFLICT in codes else 404 if services.MISSING in codes else 400
        return _queue(request, status=status, errors=exc.messages, failed=item, form=form)
    messages.success(request, f"{done}: {form.cleaned_data['action']} recorded.")
    return redirect("leaderboard:review")


@staff_only
@require_http_methods(["POST"])
def review_voter(request, flag_id: int):
    """``/leaderboard/review/voters/<id>/``: confirm or dismiss a flagged voter, with a comment."""
    form = VoterReviewForm(request.POST)

    def service(**kwargs):
        return services.voter_review(flag_id=flag_id, **kwargs)

    return _decide(request, form, service, ("voter", flag_id), f"Flagged voter #{flag_id}")


@staff_only
@require_http_methods(["POST"])
def review_vote(request, vote_id: int):
    """``/leaderboard/review/votes/<id>/``: keep an identity-revealing vote out, or restore it."""
    form = IdentityReviewForm(request.POST)

    def service(**kwargs):
        return services.identity_review(vote_id=vote_id, **kwargs)

    return _decide(request, form, service, ("vote", vote_id), f"Vote #{vote_id}")


@staff_only
@require_http_methods(["POST"])
def review_battle(request, hold_id: int):
    """``/leaderboard/review/battles/<id>/``: release a held battle (published) or keep it held."""
    form = BattleReviewForm(request.POST)

    def service(**kwargs):
        return services.battle_review(hold_id=hold_id, **kwargs)

    return _decide(request, form, service, ("battle", hold_id), f"Held battle #{hold_id}")


@staff_only
@require_http_methods(["GET", "POST"])
def review_submission(request, public_id: str):
    """``/leaderboard/review/<public id>/``: one submission (in any state), its log, and the decision form."""
    submission = selectors_review.submission_for_review(public_id)
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
def review_by_row(request, submission_id: int, scan: bool = False):
    """``/leaderboard/review/<row id>/`` (and ``scan/``), the URLs of earlier versions: a permanent
    redirect to the public id's (common.public_ids)."""
    submission = selectors_review.submission_for_review_by_row(submission_id)
    if submission is None:
        raise Http404("no such submission")
    return moved(request, reverse("leaderboard:review-scan" if scan else "leaderboard:review-submission",
                                  args=[submission.public_id]))  # fmt: skip


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
def review_scan(request, public_id: str):
    """``/leaderboard/review/<public id>/scan/``: point the n-gram scan at a training corpus (queued on a worker)."""
    submission = selectors_review.submission_for_review(public_id)
    if submission is None:
        raise Http404("no such submission")
    form = ScanForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            scan = scans.scan_request(submission=submission, corpus=form.cleaned_data["corpus"], requested_by=request.user,
                                      kind=ContaminationScan.Kind.CORPUS, n=form.cleaned_data["n"])  # fmt: skip
        messages.success(request, f"Scan {scan.pk} of {submission.model_name} is queued.")
        return redirect("leaderboard:review-submission", submission.public_id)
    status = 400 if request.method == "POST" else 200
    return render(request, "leaderboard/review_scan.html", {"submission": submission, "form": form}, status=status)
