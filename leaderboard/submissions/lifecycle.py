"""A submission's states while a worker runs it: PENDING → RUNNING → FINISHED | FAILED, with a heartbeat.

Called by :mod:`leaderboard.tasks` and the suite runner; a worker that died is recognised (by its
heartbeat, or at once when it was a process on this machine) and its submission taken over.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import sqlite3
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from leaderboard import dispatch
from leaderboard.models import Submission

log = logging.getLogger(__name__)


class SubmissionBusy(Exception):
    """Another worker ran this submission moments ago (a duplicate delivery): try again later."""


def submission_start(submission_id: int) -> Submission | None:
    """PENDING (or RUNNING again, after a worker died) → RUNNING; None when there is nothing to do.

    A RUNNING submission whose worker showed a sign of life within ``LEADERBOARD_HEARTBEAT_STALE_S``
    is still being evaluated (the broker handed the task out twice, e.g. past Redis's visibility
    timeout): raises SubmissionBusy rather than running it twice at once.
    """
    with transaction.atomic():
        submission = Submission.objects.select_for_update().filter(pk=submission_id).first()
        if submission is None or submission.status not in Submission.ACTIVE:
            return None
        worker_take(submission, running=Submission.Status.RUNNING, busy=SubmissionBusy,
                    what=f"submission {submission_id}")  # fmt: skip
        submission.started_at = submission.started_at or submission.heartbeat_at
        submission.save(update_fields=["status", "started_at", "heartbeat_at", "worker", "attempts"])
    return submission


def heartbeat_cutoff():
    """The oldest heartbeat that still counts as a sign of life (``LEADERBOARD_HEARTBEAT_STALE_S`` ago)."""
    return timezone.now() - timedelta(seconds=settings.LEADERBOARD_HEARTBEAT_STALE_S)


def worker_alive(heartbeat_at, worker: str) -> bool:
    """Whether the worker that holds a RUNNING row is alive: a fresh heartbeat, and not a process on
    this machine that has exited."""
    return heartbeat_at is not None and heartbeat_at > heartbeat_cutoff() and not worker_gone(worker)


def worker_take(row, *, running, busy: type[Exception], what: str) -> None:
    """Make ``row`` (a submission or a judge run, locked with ``select_for_update``) RUNNING on this
    worker: its heartbeat, ``worker`` and ``attempts`` are set; the caller saves. The one rule for
    every long task: a RUNNING row whose worker is alive raises ``busy`` (a duplicate delivery comes
    back later); one whose worker is gone or silent is taken over."""
    if row.status == running and row.heartbeat_at is not None and row.heartbeat_at > heartbeat_cutoff():
        if not worker_gone(row.worker):
            raise busy(f"{what} is running on another worker")
        log.info("%s: its worker %s is gone; taking over", what, row.worker)
    row.status = running
    row.heartbeat_at = timezone.now()
    row.worker = worker_identity()
    row.attempts += 1


def worker_identity() -> str:
    """``host:pid`` of this process, recorded on the submission it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_gone(worker: str) -> bool:
    """Whether ``worker`` (``host:pid``) was a process on this machine that no longer exists.

    Lets a restarted worker (``make demo`` after Ctrl-C) resume at once instead of waiting out the
    heartbeat. Another machine's worker, this very process, or anything unreadable counts as alive:
    the heartbeat decides for those.
    """
    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) in (0, os.getpid()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def submission_progress(submission_id: int, progress: dict) -> None:
    """Store progress; it is also the worker's heartbeat."""
    Submission.objects.filter(pk=submission_id).update(progress=progress, heartbeat_at=timezone.now())


def submission_finish(submission_id: int, *, log_tail: str = "") -> None:
    """RUNNING → FINISHED. A re-run of an arena model's endpoint evaluation supersedes the model's
    current one in the same transaction: its scores replace the old ones on the board row."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        if submission.is_endpoint:
            Submission.objects.filter(
                language_model_id=submission.language_model_id, source=Submission.Source.ENDPOINT,
                status=Submission.Status.FINISHED, superseded_by__isnull=True,
            ).exclude(pk=submission.pk).update(superseded_by=submission)  # fmt: skip
        submission.status = Submission.Status.FINISHED
        submission.finished_at = timezone.now()
        submission.failure_reason = ""
        submission.log_tail = log_tail[-8000:]
        submission.save(update_fields=["status", "finished_at", "failure_reason", "log_tail"])
        dispatch.submission_notify_send(submission_id)  # the owner hears of it once this commits


def submission_fail(submission_id: int, *, reason: str, log_tail: str = "") -> None:
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        submission.status = Submission.Status.FAILED
        submission.finished_at = timezone.now()
        submission.failure_reason = (reason.strip() or "unknown error")[:1000]
        submission.log_tail = log_tail[-8000:]
        submission.save(update_fields=["status", "finished_at", "failure_reason", "log_tail"])
        dispatch.submission_notify_send(submission_id)  # the owner hears of it once this commits


OUT_OF_SPACE = "The evaluation worker ran out of disk space; an admin can requeue it once there is room."


def failure_reason(exc: BaseException) -> str:
    """What the owner reads for a failed run: a full disk said in words, anything else as raised."""
    full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or (
        isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc)  # the request cache
    )
    raised = f"{type(exc).__name__}: {exc}"
    return f"{OUT_OF_SPACE} ({raised})" if full else raised
