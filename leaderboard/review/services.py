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


