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

from arena.models import LanguageModel
from leaderboard.models import JudgeRun
from leaderboard.submissions.lifecycle import worker_gone, worker_identity

log = logging.getLogger(__name__)


class JudgeRunBusy(Exception):
    """Another worker ran this judge run moments ago: try again later."""


def judge_run_start(run_id: int) -> JudgeRun | None:
    """PENDING (or RUNNING after its worker died) → RUNNING; None when there is nothing to do."""
    now = timezone.now()
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status not in JudgeRun.ACTIVE:
            return None
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


def answers_claim(run_id: int, model_name: str, set_sha: str, total: int) -> bool:
    """Claim the generation of ``model_name``'s answers to an instruction set for run ``run_id``.

    False while another live run (fresh heartbeat, worker not gone) is generating the same answers:
    two runs that need the same model's answers (the baseline's, typically) do not generate them twice
    at once; the loser waits and reads them.
    """
    now = timezone.now()
    stage = f"answers of {model_name}"
    stale = timedelta(seconds=settings.LEADERBOARD_HEARTBEAT_STALE_S)
    with transaction.atomic():
        # One lock per answering model (its catalogue row), taken alone: claims for the same answers
        # queue behind it, and no two claims ever hold locks the other waits for.
        LanguageModel.objects.select_for_update().filter(name=model_name).first()
        run = JudgeRun.objects.get(pk=run_id)
        others = JudgeRun.objects.filter(
            status=JudgeRun.Status.RUNNING, instructions_sha256=set_sha, heartbeat_at__gte=now - stale
        ).exclude(pk=run_id)  # fmt: skip
        if any(o.progress.get("stage") == stage and not worker_gone(o.worker) for o in others):
            return False
        progress = {**run.progress, "stage": stage, "done": 0, "total": total}
        JudgeRun.objects.filter(pk=run_id).update(progress=progress, heartbeat_at=now)
    return True


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
