"""Services enqueue the leaderboard's tasks by name (leaderboard.dispatch), after the transaction commits,
on the queue each task declares where it is defined."""

from __future__ import annotations

import pytest
from celery import current_app
from django.db import transaction

from leaderboard import dispatch, tasks
from workers.queues import ALL_QUEUES


def test_every_dispatched_task_exists_and_declares_the_same_queue():
    assert set(dispatch.QUEUES) == {tasks.submission_evaluate.name, tasks.run_rescore.name, tasks.judge_run.name,
                                    tasks.judge_audit.name, tasks.submission_notify.name, tasks.uploads_expire.name}
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
