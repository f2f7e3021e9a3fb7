"""Leaderboard reads: an owner's submissions, their live status, a submission's results."""

from __future__ import annotations

from django.db.models import Prefetch, Q, QuerySet

from leaderboard.models import EvaluationRun, Score, Submission, SubmissionDraft
from leaderboard.runs.benchmarks import benchmark_key, benchmark_label, benchmark_sort_key

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


def submission_queue(submission: Submission) -> dict | None:
    """Where a PENDING submission stands in the evaluation queue (None once it left it), from the database.

    The ``evaluate`` queue is first in, first out in the order the broker took the submissions
    (``dispatched_at``; an admin's requeue sends one again, to the back). Ahead of a submission the broker
    holds: the PENDING ones it took earlier. Ahead of one still waiting for the broker (``dispatched_at``
    empty, the outbox sends it later): every PENDING one it holds, and those waiting that were stored
    earlier. Every kind counts (private variants and endpoint evaluations take a worker too); none is named.
    """
    if submission.status != Submission.Status.PENDING:
        return None
    pending = Submission.objects.filter(status=Submission.Status.PENDING).exclude(pk=submission.pk)
    if submission.dispatched_at is not None:
        at = submission.dispatched_at
        ahead = pending.filter(Q(dispatched_at__lt=at) | Q(dispatched_at=at, pk__lt=submission.pk))
    else:
        at = submission.created_at
        ahead = pending.filter(
            Q(dispatched_at__isnull=False) | Q(created_at__lt=at) | Q(created_at=at, pk__lt=submission.pk)
        )
    waiting = ahead.count()
    running = Submission.objects.filter(status=Submission.Status.RUNNING).count()
    if waiting == 0:
        sentence = "Next in the evaluation queue: no submission is waiting ahead of this one"
    else:
        sentence = (f"Position {waiting + 1} in the evaluation queue: {waiting} submission{'s' if waiting != 1 else ''}"
                    f" {'are' if waiting != 1 else 'is'} waiting ahead of this one")  # fmt: skip
    if running:
        sentence += f", and {running} {'are' if running != 1 else 'is'} being evaluated now"
    return {"position": waiting + 1, "ahead": waiting, "running": running, "sentence": sentence + "."}


def _count(value) -> int:
    """A stored count as a whole number >= 0 (anything else, a bool included, is 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _stage(submission: Submission, progress: dict) -> str:
    """What a RUNNING submission is doing, in words, from the progress its worker reports."""
    if submission.status != Submission.Status.RUNNING:
        return ""
    total, done = progress.get("tasks_total"), progress.get("tasks_done") or 0
    current = progress.get("current_task")
    if not total:
        return "Starting: a worker took it and is preparing the benchmark suite."
    if isinstance(current, str) and current.startswith("memorisation probe: "):
        return f"Memorisation probe on {current.removeprefix('memorisation probe: ')} (a contamination check)."
    if current:
        return f"Evaluating {current}."
    if done >= total:
        return "Every task is done: checking for contamination and storing the results."
    return "Loading the model."


def submission_progress_summary(submission: Submission) -> dict:
    """The progress a page shows: tasks done of total, the stage in words, the current task's requests
    and ``percent`` (tasks done, 0..100), from what the worker stored (:mod:`leaderboard.evaluation.runner`)."""
    progress = submission.progress if isinstance(submission.progress, dict) else {}
    total = _count(progress.get("tasks_total"))
    done = min(_count(progress.get("tasks_done")), total)
    current = progress.get("current_task") if isinstance(progress.get("current_task"), str) else ""
    requests = progress.get("requests") if isinstance(progress.get("requests"), dict) else {}
    requests_total = _count(requests.get("total"))
    suite = progress.get("suite") if isinstance(progress.get("suite"), str) else ""
    shown = {"tasks_total": total, "tasks_done": done, "current_task": current}
    return {
        "suite": suite, "tasks_total": total, "tasks_done": done, "current_task": current,
        "stage": _stage(submission, shown),
        "requests": {"done": min(_count(requests.get("done")), requests_total), "total": requests_total}
        if requests_total else None,
        "percent": round(100 * done / total, 1) if total else 0.0,
    }  # fmt: skip


def submission_status(submission: Submission, viewer=None) -> dict:
    """What the "my submissions" page and a submission's page poll (an endpoint's address only for staff)."""
    return submission.endpoint_withheld({
        "id": submission.public_id,
        "status": submission.status,
        "note": submission_note(submission),
        "active": submission.is_active,
        "queue": submission_queue(submission),
        "progress": submission.progress,
        "summary": submission_progress_summary(submission),
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


def results_by_benchmark(results: list[dict]) -> list[dict]:
    """:func:`submission_results` grouped by the board's benchmark (MMLU's 57 subjects are one group), in
    the board's column order: ``key``, ``label``, ``runs`` (in their order), ``skipped`` (how many)."""
    groups: dict[str, dict] = {}
    for run in results:
        key = benchmark_key(run["task"])
        group = groups.setdefault(key, {"key": key, "label": benchmark_label(key), "runs": [], "skipped": 0})
        group["runs"].append(run)
        group["skipped"] += bool(run["skipped"])
    return [groups[key] for key in sorted(groups, key=benchmark_sort_key)]


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
