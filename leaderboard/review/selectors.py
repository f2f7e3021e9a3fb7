"""Reads for the admins' review queue, a submission's audit log, and the tasks that can be re-scored."""

from __future__ import annotations

from django.db.models import Count

from leaderboard.models import EvaluationRun, ReviewAction, Submission


def submissions_flagged() -> list[Submission]:
    """Submissions waiting for an admin's decision, oldest first (the queue's order)."""
    return list(
        Submission.objects.filter(review_state=Submission.Review.FLAGGED)
        .select_related("owner")
        .order_by("created_at", "id")
    )


def submission_for_review(submission_id: int) -> Submission | None:
    return Submission.objects.select_related("owner").filter(pk=submission_id).first()


def submission_review_log(submission: Submission, *, with_admins: bool = False) -> list[dict]:
    """The audit log, newest first: action, comment, date (and who, for staff viewers)."""
    rows = (
        ReviewAction.objects.filter(submission=submission)
        .select_related("admin")
        .order_by("-created_at", "-id")
    )
    return [
        {
            "action": row.get_action_display(), "comment": row.comment, "created_at": row.created_at,
            "admin": (row.admin.get_username() if row.admin else "system") if with_admins else "",
            "system": row.admin_id is None,
        }
        for row in rows
    ]  # fmt: skip


def rescore_tasks() -> list[tuple[str, int]]:
    """(task, finished runs) for every task with a stored run, by name."""
    rows = (
        EvaluationRun.objects.filter(status=EvaluationRun.Status.FINISHED)
        .values("task")
        .annotate(n=Count("id"))
        .order_by("task")
    )
    return [(row["task"], row["n"]) for row in rows]
