"""A submission evaluated by real Celery worker processes on the ``evaluate`` queue through Redis and
PostgreSQL, as a GPU host would run it; the first worker is killed with SIGKILL in the middle of the
evaluation and a second worker finishes it from where it stopped, with no duplicate rows.

The kill lands at a known point, not after a race: the test holds a row lock the first worker must
take to store its second task, waits (in PostgreSQL's lock table) until the worker is blocked on it,
then kills it there.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from celery import Celery
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction

from leaderboard.evaluation.suites import suite_current
from leaderboard.models import EvaluationRun, MemorisationProbe, SampleRecord, Score, Submission
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.polling import wait_for_row
from tests.leaderboard.worker_settings import LEADERBOARD_SUITE_TASKS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def wait_for(condition, *, timeout: float, what: str, log) -> Submission:
    return wait_for_row(Submission.objects.get, condition, timeout=timeout, what=what, log=log)


def backends_blocked_by_us() -> list[str]:
    """Queries of the other sessions now waiting for a lock this test's database session holds."""
    with connection.cursor() as cursor:
        # Inside a transaction PostgreSQL keeps its first view of pg_stat_activity: ask for a fresh one.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT query FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        return [row[0] for row in cursor.fetchall()]


def wait_until_blocked(*, timeout: float, log) -> str:
    """The query of the worker session once it waits for our lock on the gate row."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        blocked = [q for q in backends_blocked_by_us() if "leaderboard_evaluationrun" in q]
        if blocked:
            return blocked[0]
        time.sleep(0.1)
    state = Submission.objects.get().__dict__
    raise AssertionError(f"the worker never reached the gsm8k store: {state}\n{log()}")


@pytest.mark.django_db(transaction=True)
def test_killed_worker_is_replaced_and_the_run_completes_once(client, tiny_dir, submissions_dir, redis_url,
                                                              start_worker, processes, settings,
                                                              django_capture_on_commit_callbacks):  # fmt: skip
    settings.LEADERBOARD_SUITE_TASKS = LEADERBOARD_SUITE_TASKS
    owner = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "a-long-passphrase-42")
    client.force_login(owner)
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(tiny_dir.iterdir())]
    with django_capture_on_commit_callbacks(execute=False):  # sent below through Redis, as the web server would
        response = client.post("/leaderboard/submit/", {"model_name": "acme/tiny", "files": files,
                               "precision": "float32", "model_type": "pretrained", "licence": "mit"})  # fmt: skip
    assert response.status_code == 302
    submission = Submission.objects.get()
    env = clean_env(
        DJANGO_SETTINGS_MODULE="tests.leaderboard.worker_settings",
        DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=redis_url,
        DEBUG="false",
    )
    # The gate: a gsm8k run row (the second task's), locked by this test. Storing gsm8k selects that row
    # FOR UPDATE, so the first worker stops there: the first task stored, the second one generated.
    gate = EvaluationRun.objects.create(submission=submission, suite=suite_current(), task="gsm8k")
    with transaction.atomic():
        EvaluationRun.objects.select_for_update().get(pk=gate.pk)
        first = start_worker(env=env, queues="evaluate", name="gpu-host-1")
        sender = Celery("podium-test-sender", broker=redis_url, set_as_current=False)
        try:
            sender.send_task("leaderboard.tasks.submission_evaluate", args=[submission.pk], queue="evaluate")
        finally:
            sender.close()
        wait_until_blocked(timeout=300, log=lambda: processes.log_of(first))
        mid_run = Submission.objects.get()
        assert mid_run.status == "RUNNING" and mid_run.attempts == 1
        assert mid_run.progress["tasks_done"] == 1 and mid_run.progress["current_task"] == "gsm8k"
        assert mid_run.progress["requests"]["total"] == 8
        assert list(EvaluationRun.objects.filter(status="FINISHED").values_list("task", flat=True)) == [
            "mmlu_cloze_abstract_algebra"
        ]
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        # Committed with the lock's release: the dead worker's session, still waiting in PostgreSQL, finds no
        # row and then no client, so its transaction rolls back; the retry starts from a clean gsm8k.
        gate.delete()
    assert Submission.objects.get().status == "RUNNING"
    second = start_worker(env=env, queues="evaluate", name="gpu-host-2")
    done = wait_for(lambda s: s.status in ("FINISHED", "FAILED"), timeout=300, what="the retry to finish",
                    log=lambda: processes.log_of(second))  # fmt: skip
    assert done.status == "FINISHED", (done.failure_reason, done.log_tail)
    assert done.attempts == 2
    runs = EvaluationRun.objects.filter(submission=done)
    assert sorted(runs.values_list("task", flat=True)) == ["gsm8k", "mmlu_cloze_abstract_algebra"]
    assert SampleRecord.objects.filter(run__submission=done).count() == 4 + 8
    assert Score.objects.filter(run__task="gsm8k").count() == 2  # strict-match and flexible-extract
    probe = MemorisationProbe.objects.get(submission=done)  # gsm8k has a train split: probed after the suite
    assert (probe.task, probe.summary["test"]["n"], probe.summary["train"]["n"]) == ("gsm8k", 4, 4)
    log = processes.log_of(second)
    assert "task gsm8k" in log and "task mmlu_cloze_abstract_algebra" not in log  # resumed, not redone
