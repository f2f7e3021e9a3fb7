"""A judge run's states while a worker runs it: PENDING → RUNNING → FINISHED | FAILED, with a heartbeat.

The same rules as a submission's evaluation (:mod:`leaderboard.submissions.lifecycle`): a RUNNING run
whose worker showed a sign of life recently is busy (a duplicate delivery comes back later); one whose
worker is gone or silent is taken over.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from leaderboard.models import JudgeRun
from leaderboard.submissions.lifecycle import worker_gone, worker_identity

log = logging.getLogger(__name__)


class JudgeRunBusy(Exception):
    """Another worker ran this judge run moments ago: try again later."""


class JudgeRunWaiting(Exception):
    """Another run of the same judge is generating the baseline's answers, which this run needs too:
    start a little later and read them, rather than generate the same answers twice at once."""


def baseline_answers_in_progress(run: JudgeRun, now) -> bool:
    """Whether a live run of the same config is now generating the baseline's answers."""
    stale = timedelta(seconds=settings.LEADERBOARD_HEARTBEAT_STALE_S)
    stage = f"answers of {run.config.baseline.name}"
    others = JudgeRun.objects.filter(config_id=run.config_id, status=JudgeRun.Status.RUNNING,
                                     heartbeat_at__gte=now - stale).exclude(pk=run.pk)  # fmt: skip
    return any(other.progress.get("stage") == stage and not worker_gone(other.worker) for other in others)


def judge_run_start(run_id: int) -> JudgeRun | None:
    """PENDING (or RUNNING after its worker died) → RUNNING; None when there is nothing to do.

    Raises JudgeRunBusy when another worker is on this run, JudgeRunWaiting when another run of the
    same judge is generating the baseline's answers (both: the task tries again later).
    """
    now = timezone.now()
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().select_related("config__baseline").filter(pk=run_id).first()
        if run is None or run.status not in JudgeRun.ACTIVE:
            return None
        if run.status == JudgeRun.Status.PENDING and baseline_answers_in_progress(run, now):
            raise JudgeRunWaiting(f"judge run {run_id} waits for the baseline's answers another run is generating")
        stale = timedelta(seconds=settings.LEADERBOARD_HEARTBEAT_STALE_S)
        fresh = run.heartbeat_at is not None and now - run.heartbeat_at < stale
        if run.status == JudgeRun.Status.RUNNING and fresh:
            if not worker_gone(run.worker):
                raise JudgeRunBusy(f"judge run {run_id} is running on another worker")
            log.info("judge run %s: its worker %s is gone; taking over", run_id, run.worker)
        run.status = JudgeRun.Status.RUNNING
        run.heartbeat_at = now
        run.worker = worker_identity()
        run.attempts += 1
        run.save(update_fields=["status", "heartbeat_at", "worker", "attempts", "updated_at"])
    return run


def judge_run_progress(run_id: int, progress: dict) -> None:
    """Store progress; it is also the worker's heartbeat."""
    JudgeRun.objects.filter(pk=run_id).update(progress=progress, heartbeat_at=timezone.now())


def judge_run_fail(run_id: int, *, reason: str) -> None:
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().get(pk=run_id)
        run.status = JudgeRun.Status.FAILED
        run.finished_at = timezone.now()
        run.failure_reason = (reason.strip() or "unknown error")[:1000]
        run.save(update_fields=["status", "finished_at", "failure_reason", "updated_at"])
