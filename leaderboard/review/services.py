"""Admin review of submissions: every decision is recorded with its comment (the audit log)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from leaderboard.models import ReviewAction, Submission

REVIEW_STATE = {
    ReviewAction.Action.FLAG: Submission.Review.FLAGGED,
    ReviewAction.Action.APPROVE: Submission.Review.APPROVED,
    ReviewAction.Action.HIDE: Submission.Review.HIDDEN,
    ReviewAction.Action.REJECT: Submission.Review.REJECTED,
}


def submission_review(*, submission: Submission, admin, action: str, comment: str) -> ReviewAction:
    """Record an admin's decision (with its required comment) and set the submission's review state."""
    if not getattr(admin, "is_staff", False):
        raise ValidationError("Only staff can review submissions.")
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        entry = ReviewAction(submission=locked, admin=admin, action=action, comment=(comment or "").strip())
        entry.full_clean()
        entry.save()
        locked.review_state = REVIEW_STATE[ReviewAction.Action(action)]
        locked.save(update_fields=["review_state"])
    return entry




SYSTEM = "system"  # who, in the audit log, for flags no person raised
# States a system flag moves to FLAGGED: a new finding re-opens an approved entry; hidden and
# rejected entries are already off the board and keep their state (the finding is still logged).
SYSTEM_FLAGGABLE = (Submission.Review.NONE, Submission.Review.APPROVED, Submission.Review.FLAGGED)


def submission_flag_system(*, submission_id: int, reason: str) -> ReviewAction | None:
    """Flag a submission for review on the system's own finding (a contamination check past its
    threshold): a FLAG entry with no admin ("system") and ``reason`` as its comment.

    Idempotent: a finding already logged with the same reason is not logged twice (None then).
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("a system flag needs a reason")
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission_id)
        if ReviewAction.objects.filter(submission=locked, admin__isnull=True, comment=reason).exists():
            return None
        entry = ReviewAction(submission=locked, admin=None, action=ReviewAction.Action.FLAG, comment=reason)
        entry.full_clean()
        entry.save()
        if locked.review_state in SYSTEM_FLAGGABLE:
            locked.review_state = Submission.Review.FLAGGED
            locked.review_reason = reason[:300]
            locked.save(update_fields=["review_state", "review_reason"])
    return entry
