"""Leaderboard reads: an owner's submissions, their live status, a submission's results."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from leaderboard.models import EvaluationRun, Score, Submission, SubmissionDraft

# Review states whose entries the public may open (flagged ones wait for an admin; rejected are gone).
PUBLIC_REVIEW_STATES = (Submission.Review.NONE, Submission.Review.APPROVED, Submission.Review.HIDDEN)


def submissions_for_owner(owner) -> QuerySet[Submission]:
    return Submission.objects.filter(owner=owner).order_by("-created_at", "-id")


def submission_for_owner(owner, public_id: str) -> Submission | None:
    """The owner's submission, or None (also for anyone else's: no one learns it exists)."""
    return Submission.objects.filter(owner=owner, public_id=public_id).first()


def submission_note(submission: Submission) -> str:
    """A line for a PENDING submission: queued for a worker, or waiting for the task queue itself."""
    if submission.status != Submission.Status.PENDING:
        return ""
    if submission.dispatched_at is None:
        return "Queued: stored, and waiting for the task queue to come back; it will start automatically."
    return "Queued: waiting for a free evaluation worker."


def submission_status(submission: Submission, viewer=None) -> dict:
    """What the "my submissions" page polls (an endpoint's address only for staff)."""
    return submission.endpoint_withheld({
        "id": submission.public_id,
        "status": submission.status,
        "note": submission_note(submission),
        "active": submission.is_active,
        "progress": submission.progress,
        "failure_reason": submission.failure_reason,
        "log_tail": submission.log_tail if submission.status == Submission.Status.FAILED else "",
        "started_at": submission.started_at.isoformat() if submission.started_at else None,
        "finished_at": submission.finished_at.isoformat() if submission.finished_at else None,
    }, viewer)  # fmt: skip


def submission_visible(viewer, public_id: str) -> Submission | None:
    """A submission the viewer may see: theirs, any for staff, else only a published one that is not
    waiting for review or refused (None otherwise: nobody learns it exists).

    Hidden entries stay readable (the board lists them behind ``show=hidden``, their runs are public).
    """
    return _visible(viewer, Submission.objects.select_related("owner").filter(public_id=public_id).first())


def submission_public_id_of_row(viewer, row_id: int) -> str | None:
    """The public id of the submission that an earlier version's integer id named, where the viewer
    may see it (None otherwise, as for an unknown public id): old links and scripts are redirected."""
    submission = _visible(viewer, Submission.objects.select_related("owner").filter(pk=row_id).first())
    return None if submission is None else submission.public_id


def _visible(viewer, submission: Submission | None) -> Submission | None:
    if submission is None:
        return None
    if getattr(viewer, "is_staff", False) or (viewer.is_authenticated and submission.owner_id == viewer.pk):
        return submission
    if submission.private or submission.review_state not in PUBLIC_REVIEW_STATES:
        return None
    return submission


def submission_results(submission: Submission, viewer=None) -> list[dict]:
    """Per task: its run, protocol summary and scores (with intervals), newest suite first (an
    endpoint's address only for staff: :meth:`Submission.endpoint_withheld`)."""
    runs = (
        EvaluationRun.objects.filter(submission=submission)
        .select_related("suite")
        .prefetch_related(Prefetch("scores", queryset=Score.objects.order_by("metric")))
        .order_by("-suite__version", "task")
    )

    def withheld(value):
        return submission.endpoint_withheld(value, viewer)

    return [
        {
            "task": run.task,
            "suite": str(run.suite),
            "status": run.status,
            "num_fewshot": run.protocol.get("num_fewshot"),
            "n_docs": run.protocol.get("n_docs"),
            "config_sha256": run.config_sha256,
            "wall_time_s": run.wall_time_s,
            "skipped": withheld(run.protocol.get("skipped", "")) if run.status == EvaluationRun.Status.SKIPPED else "",
            "endpoint": withheld(run.protocol.get("endpoint")),
            "decoding": run.protocol.get("decoding"),
            "scores": [
                {
                    "metric": s.metric, "value": s.value, "stderr": s.stderr, "ci_low": s.ci_low,
                    "ci_high": s.ci_high, "n": s.n, "higher_is_better": s.higher_is_better, "interval": s.interval,
                }
                for s in run.scores.all()
            ],
        }  # fmt: skip
        for run in runs
    ]


def draft_for_owner(owner, public_id: str) -> SubmissionDraft | None:
    """A submission of the owner's whose files are still arriving (or were refused or expired)."""
    if not getattr(owner, "is_authenticated", False):
        return None
    return SubmissionDraft.objects.filter(owner=owner, public_id=public_id).first()


def draft_status(draft: SubmissionDraft) -> dict:
    received = {u.name: u.offset for u in draft.uploads.all()}
    return {
        "id": draft.public_id,
        "status": draft.state,
        "errors": draft.errors,
        "expires_at": draft.expires_at.isoformat(),
        "files": [{"name": n, "size": s, "received": received.get(n, 0)} for n, s in sorted(draft.files.items())],
    }
