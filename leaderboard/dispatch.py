"""Sending the leaderboard's tasks by name, once the current transaction commits.

Services enqueue through here and never import :mod:`leaderboard.tasks` (which imports them).
Each task declares its queue where it is defined; the queue given here is the same one (a test
pins that), so a web process that has not loaded the tasks still routes them right.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import current_app
from django.db import transaction

from workers.queues import DEFAULT, EVALUATE, JUDGE

SUBMISSION_EVALUATE = "leaderboard.tasks.submission_evaluate"
RUN_RESCORE = "leaderboard.tasks.run_rescore"
JUDGE_RUN = "leaderboard.tasks.judge_run"
JUDGE_AUDIT = "leaderboard.tasks.judge_audit"
CONTAMINATION_SCAN = "leaderboard.tasks.contamination_scan"
SUBMISSION_NOTIFY = "leaderboard.tasks.submission_notify"
UPLOADS_EXPIRE = "leaderboard.tasks.uploads_expire"  # periodic (CELERY_BEAT_SCHEDULE)
REWARD_SCORE = "leaderboard.tasks.reward_score"
QUEUES = {SUBMISSION_EVALUATE: EVALUATE, RUN_RESCORE: DEFAULT, JUDGE_RUN: JUDGE, JUDGE_AUDIT: JUDGE,
          CONTAMINATION_SCAN: DEFAULT, SUBMISSION_NOTIFY: DEFAULT, UPLOADS_EXPIRE: DEFAULT,
          REWARD_SCORE: JUDGE}  # fmt: skip

log = logging.getLogger(__name__)


def task_send_on_commit(name: str, *args, on_sent: Callable[[], None] | None = None) -> None:
    """Send task ``name`` with ``args`` to its queue after the current transaction commits (at once
    outside a transaction), then call ``on_sent``.

    A task this process knows is sent through it (so ``task_always_eager`` runs it in place);
    another goes to the broker by name. With ``on_sent`` (a task whose rows an outbox watches, as
    submissions' ``dispatched_at``), a broker that is down is logged, not raised: the rows are
    committed already and the outbox sends them once it is back. Without, the error is raised.
    """
    queue = QUEUES[name]

    def send() -> None:
        if on_sent is None:
            current_app.signature(name, args=args, queue=queue).apply_async()
            return
        try:
            current_app.signature(name, args=args, queue=queue).apply_async()
        except Exception:
            log.exception("could not send %s%r to the broker; left for the outbox", name, args)
            return
        on_sent()

    transaction.on_commit(send)


def submission_evaluate_send(submission_id: int, *, on_sent: Callable[[], None] | None = None) -> None:
    """Enqueue the benchmark run of a submission (``evaluate`` queue); ``on_sent`` once the broker has it."""
    task_send_on_commit(SUBMISSION_EVALUATE, submission_id, on_sent=on_sent)


def submission_notify_send(submission_id: int) -> None:
    """Enqueue the mail that tells the owner a submission finished or failed (``default`` queue)."""
    task_send_on_commit(SUBMISSION_NOTIFY, submission_id)


def run_rescore_send(task: str, admin_id: int, comment: str) -> None:
    """Enqueue the re-scoring of every stored run of ``task``."""
    task_send_on_commit(RUN_RESCORE, task, admin_id, comment)


def judge_run_send(run_id: int) -> None:
    """Enqueue a judge run (``judge`` queue)."""
    task_send_on_commit(JUDGE_RUN, run_id)


def judge_audit_send(audit_id: int) -> None:
    """Enqueue a judge audit (``judge`` queue)."""
    task_send_on_commit(JUDGE_AUDIT, audit_id)


def contamination_scan_send(scan_id: int) -> None:
    """Enqueue an n-gram scan of a corpus for a submission's benchmark items (``default`` queue, CPU)."""
    task_send_on_commit(CONTAMINATION_SCAN, scan_id)


def reward_score_send(result_id: int) -> None:
    """Enqueue the scoring of a reward model on preference pairs (``judge`` queue)."""
    task_send_on_commit(REWARD_SCORE, result_id)
