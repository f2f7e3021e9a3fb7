"""The one review queue's decisions: every one is recorded with its comment (the audit log).

Three kinds of item, one :class:`~leaderboard.models.ReviewAction` table: submissions (approve, hide,
reject; ``flag`` is what services record when they flag one), voters the anomalous-voter test flagged
(confirm: their votes leave the next snapshot; dismiss), and votes on identity-revealing answers
(exclude: keep them out; restore: count them). The decision and its audit row are written in one
transaction; a refused decision (an item already decided, a missing comment) writes neither.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from arena.play.base import ArenaError
from arena.publication.holds import battle_hold_decide
from arena.votes.voters import vote_identity_decide, voter_flag_decide
from leaderboard.models import REVIEW_ACTIONS, ReviewAction, Submission

REVIEW_STATE = {
    ReviewAction.Action.FLAG: Submission.Review.FLAGGED,
    ReviewAction.Action.APPROVE: Submission.Review.APPROVED,
    ReviewAction.Action.HIDE: Submission.Review.HIDDEN,
    ReviewAction.Action.REJECT: Submission.Review.REJECTED,
}
CONFLICT = "conflict"  # ValidationError code: the item was already decided (views answer 409)
MISSING = "missing"  # ValidationError code: no such item (views answer 404)


def _refusal(exc: ArenaError) -> ValidationError:
    return ValidationError(str(exc), code={409: CONFLICT, 404: MISSING}.get(exc.status, "invalid"))


def _checked(admin, kind: str, action: str, comment: str) -> str:
    """The comment, stripped, once the admin, the action and the comment pass; else ValidationError."""
    if not getattr(admin, "is_staff", False):
        raise ValidationError("Only staff can review.")
    allowed = [a.value for a in REVIEW_ACTIONS[ReviewAction.Target(kind)]]
    if action not in allowed:
        raise ValidationError(f"Unknown action {str(action)[:40]!r}: choose one of {allowed}.")
    comment = (comment or "").strip()
    if not comment:
        raise ValidationError("A comment is required: say why (it is kept in the audit log).")
    return comment


def submission_review(*, submission: Submission, admin, action: str, comment: str) -> ReviewAction:
    """Record an admin's decision (with its required comment) and set the submission's review state."""
    if not getattr(admin, "is_staff", False):
        raise ValidationError("Only staff can review submissions.")
    with transaction.atomic():
        locked = Submission.objects.select_for_update().get(pk=submission.pk)
        entry = ReviewAction(
            kind=ReviewAction.Target.SUBMISSION, submission=locked, admin=admin, action=action,
            comment=(comment or "").strip(),
        )  # fmt: skip
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


def voter_review(*, flag_id: int, admin, action: str, comment: str) -> ReviewAction:
    """Confirm or dismiss a flagged voter (arena.votes.voters.voter_flag_decide) and log it."""
    comment = _checked(admin, ReviewAction.Target.VOTER, action, comment)
    with transaction.atomic():
        try:
            flag, _ = voter_flag_decide(flag_id, confirm=action == ReviewAction.Action.CONFIRM)
        except ArenaError as exc:
            raise _refusal(exc) from None
        entry = ReviewAction(
            kind=ReviewAction.Target.VOTER, voter_flag=flag, admin=admin, action=action, comment=comment
        )
        entry.full_clean()
        entry.save()
    return entry


def identity_review(*, vote_id: int, admin, action: str, comment: str) -> ReviewAction:
    """Keep an identity-revealing vote out or count it again (arena.votes.voters.vote_identity_decide); log it."""
    comment = _checked(admin, ReviewAction.Target.IDENTITY, action, comment)
    with transaction.atomic():
        try:
            vote = vote_identity_decide(vote_id, restore=action == ReviewAction.Action.RESTORE)
        except ArenaError as exc:
            raise _refusal(exc) from None
        entry = ReviewAction(kind=ReviewAction.Target.IDENTITY, vote=vote, admin=admin, action=action, comment=comment)
        entry.full_clean()
        entry.save()
    return entry


def battle_review(*, hold_id: int, admin, action: str, comment: str) -> ReviewAction:
    """Release a held battle (published from the next snapshot on) or keep it held; log it."""
    comment = _checked(admin, ReviewAction.Target.BATTLE, action, comment)
    with transaction.atomic():
        try:
            hold = battle_hold_decide(hold_id, release=action == ReviewAction.Action.RELEASE)
        except ArenaError as exc:
            raise _refusal(exc) from None
        entry = ReviewAction(kind=ReviewAction.Target.BATTLE, battle_hold=hold, admin=admin, action=action, comment=comment)
        entry.full_clean()
        entry.save()
    return entry


def review_record(*, kind: str, target_id: int, admin, action: str, comment: str) -> ReviewAction:
    """Any decision by kind (Django admin's way in): the submission, voter flag or vote ``target_id``."""
    if kind == ReviewAction.Target.VOTER:
        return voter_review(flag_id=target_id, admin=admin, action=action, comment=comment)
    if kind == ReviewAction.Target.IDENTITY:
        return identity_review(vote_id=target_id, admin=admin, action=action, comment=comment)
    if kind == ReviewAction.Target.BATTLE:
        return battle_review(hold_id=target_id, admin=admin, action=action, comment=comment)
    submission = Submission.objects.filter(pk=target_id).first()
    if submission is None:
        raise ValidationError("No such submission.")
    _checked(admin, ReviewAction.Target.SUBMISSION, action, comment)
    return submission_review(submission=submission, admin=admin, action=action, comment=comment)
