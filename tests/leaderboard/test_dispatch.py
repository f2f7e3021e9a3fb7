"""Services enqueue the leaderboard's tasks by name (leaderboard.dispatch), after the transaction commits,
on the queue each task declares where it is defined."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import current_app
from django.db import transaction
from django.utils import timezone

from leaderboard import dispatch, tasks
from leaderboard.models import Submission
from leaderboard.submissions.services import submissions_dispatch_pending
from tests.leaderboard.board_data import submission, user
from workers.queues import ALL_QUEUES


def test_every_dispatched_task_exists_and_declares_the_same_queue():
    assert set(dispatch.QUEUES) == {tasks.submission_evaluate.name, tasks.run_rescore.name, tasks.judge_run.name,
                                    tasks.judge_audit.name, tasks.contamination_scan.name,
                                    tasks.submission_notify.name, tasks.uploads_expire.name, tasks.reward_score.name}
    for name, queue in dispatch.QUEUES.items():
        assert queue in ALL_QUEUES
        assert current_app.tasks[name].declared_queue == queue, name


@pytest.mark.django_db(transaction=True)
def test_nothing_is_sent_before_commit_nor_after_a_rollback(monkeypatch):
    sent = []
    monkeypatch.setattr(
        tasks.run_rescore, "apply_async", lambda args, kwargs=None, **options: sent.append((tuple(args), options))
    )
    with pytest.raises(RuntimeError), transaction.atomic():
        dispatch.run_rescore_send("gsm8k", 1, "rolled back")
        raise RuntimeError("the request failed")
    assert sent == []
    with transaction.atomic():
        dispatch.run_rescore_send("gsm8k", 1, "kept")
        assert sent == []
    assert sent == [(("gsm8k", 1, "kept"), {"queue": "default"})]


@pytest.mark.django_db
def test_an_unknown_task_goes_to_the_broker_by_name(monkeypatch, django_capture_on_commit_callbacks):
    """A web process that never loaded the task module still sends it, by name, to the task's queue."""
    sent = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, kwargs=None, **options: sent.append(
        (name, tuple(args), options.get("queue"))
    ))  # fmt: skip
    monkeypatch.setitem(dispatch.QUEUES, "leaderboard.tasks.not_loaded", "evaluate")
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.task_send_on_commit("leaderboard.tasks.not_loaded", 7)
    assert sent == [("leaderboard.tasks.not_loaded", (7,), "evaluate")]


@pytest.mark.django_db(transaction=True)
def test_the_outbox_sends_only_what_the_broker_never_took(monkeypatch):
    """PENDING with no ``dispatched_at`` and older than the grace: sent, and marked; anything else: not."""
    sent = []
    monkeypatch.setattr(tasks.submission_evaluate, "apply_async", lambda args, kwargs=None, **options: sent.append(args[0]))
    owner = user("owner@example.org")
    waiting, taken, running, young = (submission(owner, f"acme/m{n}") for n in range(4))
    Submission.objects.exclude(pk=young.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    Submission.objects.update(status="PENDING", dispatched_at=None)
    Submission.objects.filter(pk=taken.pk).update(dispatched_at=timezone.now())
    Submission.objects.filter(pk=running.pk).update(status="RUNNING")
    assert submissions_dispatch_pending(grace_s=60) == 1
    assert sent == [waiting.pk]
    assert Submission.objects.get(pk=waiting.pk).dispatched_at is not None
    assert submissions_dispatch_pending(grace_s=60) == 0  # once sent, never again

    def broker_down(args, kwargs=None, **options):
        raise OSError("connection refused")

    monkeypatch.setattr(tasks.submission_evaluate, "apply_async", broker_down)
    assert submissions_dispatch_pending(grace_s=0) == 0  # the young one: not taken, left for next time
    assert Submission.objects.get(pk=young.pk).dispatched_at is None
