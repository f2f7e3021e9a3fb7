"""Leaderboard tasks (benchmark runs, judge runs) run on the worker runtime.

A GPU host serves them with ``celery -A workers worker -Q evaluate`` against the same database and
broker as the web server; the checkpoint folders (``LEADERBOARD_SUBMISSIONS_DIR`` and the model
store) must be visible at the same paths on that host.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections import deque
from smtplib import SMTPException

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model

from leaderboard import dispatch
from leaderboard.evaluation.rescoring import runs_rescore
from leaderboard.evaluation.runner import submission_run_suite
from leaderboard.evaluation.scans import scan_execute
from leaderboard.judging import states as judge_states
from leaderboard.judging.audits import judge_audit_execute
from leaderboard.judging.panels import panels_refresh_after_run
from leaderboard.judging.runner import judge_run_execute
from leaderboard.judging.services import judge_runs_request_for_submission
from leaderboard.rewards import services as reward_services
from leaderboard.submissions import lifecycle, transfers
from leaderboard.submissions import services as submission_services
from leaderboard.submissions.notifications import submission_notify as notify_owner
from workers.queues import DEFAULT, EVALUATE, JUDGE, LONG_TASK_OPTIONS

log = logging.getLogger(__name__)
LOG_TAIL_LINES = 200


class LogTail(logging.Handler):
    """Keeps the last lines logged while a submission runs (shown to its owner when it fails)."""

    def __init__(self, lines: int = LOG_TAIL_LINES):
        super().__init__(level=logging.INFO)
        self.lines: deque[str] = deque(maxlen=lines)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # noqa: BLE001 - a log line must never fail the run
            pass

    def text(self) -> str:
        return "\n".join(self.lines)


def redact_paths(text: str) -> str:
    """The owner reads the reason and log tail: server folders are named, not spelled out."""
    folders = [
        (settings.LEADERBOARD_SUBMISSIONS_DIR, "<submissions>"),
        (settings.LEADERBOARD_MODEL_STORE, "<model store>"),
        (settings.PODIUM_DATA_DIR, "<data>"),
        (sys.prefix, "<python>"),
        (settings.BASE_DIR, "<podium>"),
    ]
    for folder, name in sorted(((str(f), n) for f, n in folders if str(f or "")), key=lambda p: -len(p[0])):
        text = text.replace(folder, name)
    return text


@shared_task(name=dispatch.SUBMISSION_EVALUATE, declared_queue=EVALUATE, bind=True, max_retries=None, **LONG_TASK_OPTIONS)
def submission_evaluate(self, submission_id: int) -> str:
    """PENDING → RUNNING → FINISHED | FAILED (with the reason and the log tail); safe to run twice.

    A duplicate delivery while another worker is still on it comes back later (then finds it
    FINISHED, or takes over if that worker went silent).
    """
    try:
        started = lifecycle.submission_start(submission_id)
    except lifecycle.SubmissionBusy as busy:
        log.info("%s; checking again in %s s", busy, settings.LEADERBOARD_HEARTBEAT_STALE_S)
        raise self.retry(exc=busy, countdown=settings.LEADERBOARD_HEARTBEAT_STALE_S) from busy
    if started is None:
        dispatch.submission_notify_send(submission_id)  # a no-op unless the worker died before it was sent
        return "nothing to do"
    tail = LogTail()
    root = logging.getLogger()
    root.addHandler(tail)
    previous_level = root.level
    if root.level > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        submission_run_suite(submission_id)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the submission's reason
        lines = tail.text()
        log.exception("submission %s failed", submission_id)
        reason = lifecycle.failure_reason(exc)
        trace = "".join(traceback.format_exception(exc))[-3000:]
        log_tail = redact_paths(f"{lines}\n{trace}".strip())
        lifecycle.submission_fail(submission_id, reason=redact_paths(reason), log_tail=log_tail)
        return "failed"
    finally:
        root.removeHandler(tail)
        root.setLevel(previous_level)
    lifecycle.submission_finish(submission_id, log_tail=redact_paths(tail.text()))
    judge_runs_request_for_submission(submission_id)  # every active judge, each run sent by name
    return "finished"


@shared_task(name="leaderboard.tasks.submissions_dispatch_pending", declared_queue=DEFAULT)
def submissions_dispatch_pending() -> int:
    """The outbox (beat schedule): send the submissions stored while the broker was down."""
    return submission_services.submissions_dispatch_pending(grace_s=settings.LEADERBOARD_OUTBOX_GRACE_S)


@shared_task(name=dispatch.SUBMISSION_NOTIFY, declared_queue=DEFAULT, autoretry_for=(OSError, SMTPException),
             retry_backoff=60, retry_backoff_max=3600, max_retries=8)  # fmt: skip
def submission_notify(submission_id: int) -> str:
    """Mail the owner that the submission finished or failed; once (retried while the mail server is down)."""
    return "sent" if notify_owner(submission_id) else "nothing to send"


@shared_task(name=dispatch.UPLOADS_EXPIRE, declared_queue=DEFAULT)
def uploads_expire() -> str:
    """Remove the bytes of resumable uploads nobody continued before they expired (periodic)."""
    return f"{transfers.uploads_expire()} expired uploads removed"


@shared_task(name=dispatch.RUN_RESCORE, declared_queue=DEFAULT, **LONG_TASK_OPTIONS)
def run_rescore(task: str, admin_id: int, comment: str) -> str:
    """Re-score every stored run of ``task`` from its per-sample records (no model is loaded)."""
    admin = get_user_model().objects.get(pk=admin_id)
    summary = runs_rescore(task=task, admin=admin, comment=comment)
    return f"{summary.runs} runs, {summary.scores_changed} scores changed"


@shared_task(name=dispatch.JUDGE_RUN, declared_queue=JUDGE, bind=True, max_retries=None, **LONG_TASK_OPTIONS)
def judge_run(self, run_id: int) -> str:
    """PENDING → RUNNING → FINISHED | FAILED (with the reason); safe to run twice, resumable."""
    try:
        started = judge_states.judge_run_start(run_id)
    except judge_states.JudgeRunBusy as busy:
        raise self.retry(exc=busy, countdown=settings.LEADERBOARD_HEARTBEAT_STALE_S) from busy
    if started is None:
        return "nothing to do"
    try:
        judge_run_execute(run_id)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the run's reason
        log.exception("judge run %s failed", run_id)
        judge_states.judge_run_fail(run_id, reason=redact_paths(f"{type(exc).__name__}: {exc}"))
        return "failed"
    try:  # the panels this judge sits on see the new scores; a panel that cannot be formed says why
        panels_refresh_after_run(run_id)
    except Exception:  # noqa: BLE001 - the run itself finished; the panel keeps its previous report
        log.exception("refreshing the panels after judge run %s failed", run_id)
    return "finished"


@shared_task(name=dispatch.JUDGE_AUDIT, declared_queue=JUDGE, **LONG_TASK_OPTIONS)
def judge_audit(audit_id: int) -> str:
    """Audit a judge config on labelled pairs and store the report."""
    return judge_audit_execute(audit_id)


@shared_task(name=dispatch.REWARD_SCORE, declared_queue=JUDGE, bind=True, max_retries=None, **LONG_TASK_OPTIONS)
def reward_score(self, result_id: int) -> str:
    """Score a reward model from the admin: PENDING → RUNNING → FINISHED | FAILED (with the reason); safe
    to run twice (a finished result is left alone, a live one comes back later)."""
    try:
        started = reward_services.reward_score_start(result_id)
    except reward_services.RewardScoreBusy as busy:
        raise self.retry(exc=busy, countdown=settings.LEADERBOARD_HEARTBEAT_STALE_S) from busy
    if started is None:
        return "nothing to do"
    try:
        reward_services.reward_score_execute(result_id)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the result's reason
        log.exception("reward scoring %s failed", result_id)
        reward_services.reward_score_fail(result_id, reason=redact_paths(f"{type(exc).__name__}: {exc}"))
        return "failed"
    return "finished"


@shared_task(name=dispatch.CONTAMINATION_SCAN, declared_queue=DEFAULT, **LONG_TASK_OPTIONS)
def contamination_scan(scan_id: int) -> str:
    """PENDING → RUNNING → FINISHED | FAILED (with the reason): an n-gram scan for one submission."""
    return scan_execute(scan_id)
