"""A judge run's states while a worker runs it: PENDING → RUNNING → FINISHED | FAILED, with a heartbeat.

The same rules as a submission's evaluation, from one place
(:func:`leaderboard.submissions.lifecycle.worker_take` and ``worker_alive``): a RUNNING run whose
worker showed a sign of life recently is busy (a duplicate delivery comes back later); one whose
worker is gone or silent is taken over.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from arena.models import LanguageModel
from leaderboard.models import JudgeRun
from leaderboard.submissions.lifecycle import worker_alive, worker_take


class JudgeRunBusy(Exception):
    """Another worker ran this judge run moments ago: try again later."""


def judge_run_start(run_id: int) -> JudgeRun | None:
    """PENDING (or RUNNING after its worker died) → RUNNING; None when there is nothing to do."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status not in JudgeRun.ACTIVE:
            return None
        worker_take(run, running=JudgeRun.Status.RUNNING, busy=JudgeRunBusy, what=f"judge run {run_id}")
        run.save(update_fields=["status", "heartbeat_at", "worker", "attempts", "updated_at"])
    return run


def answers_claim(run_id: int, model_name: str, set_sha: str, total: int) -> bool:
    """Claim the generation of ``model_name``'s answers to an instruction set for run ``run_id``.

    False while another live run (fresh heartbeat, worker not gone) is generating the same answers:
    two runs that need the same model's answers (the baseline's, typically) do not generate them twice
    at once; the loser waits and reads them.
    """
    stage = f"answers of {model_name}"
    with transaction.atomic():
        # One lock per answering model (its catalogue row), taken alone: claims for the same answers
        # queue behind it, and no two claims ever hold locks the other waits for.
        LanguageModel.objects.select_for_update().filter(name=model_name).first()
        run = JudgeRun.objects.get(pk=run_id)
        others = JudgeRun.objects.filter(status=JudgeRun.Status.RUNNING, instructions_sha256=set_sha).exclude(pk=run_id)
        if any(o.progress.get("stage") == stage and worker_alive(o.heartbeat_at, o.worker) for o in others):
            return False
        progress = {**run.progress, "stage": stage, "done": 0, "total": total}
        JudgeRun.objects.filter(pk=run_id).update(progress=progress, heartbeat_at=timezone.now())
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
