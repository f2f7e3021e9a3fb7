"""A submission evaluated by real Celery worker processes on the ``evaluate`` queue through Redis and
PostgreSQL, as a GPU host would run it; the first worker is killed with SIGKILL in the middle of the
evaluation and a second worker finishes it from where it stopped, with no duplicate rows."""

from __future__ import annotations

import os
import signal
import time

import pytest
from celery import Celery
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from leaderboard.models import EvaluationRun, SampleRecord, Score, Submission
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.worker_settings import LEADERBOARD_SUITE_TASKS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def wait_for(condition, *, timeout: float, what: str, log) -> Submission:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        submission = Submission.objects.get()
        if condition(submission):
            return submission
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {Submission.objects.get().__dict__}\n{log()}")


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
    first = start_worker(env=env, queues="evaluate", name="gpu-host-1")
    sender = Celery("podium-test-sender", broker=redis_url)
    try:
        sender.send_task("leaderboard.tasks.submission_evaluate", args=[submission.pk], queue="evaluate")
    finally:
        sender.close()
    # Kill the worker once the first task is stored and the second (generation) is running.
    def generating(s: Submission) -> bool:
        requests = s.progress.get("requests") or {}
        return s.progress.get("tasks_done") == 1 and s.progress.get("current_task") == "gsm8k" and requests.get("total") == 8

    wait_for(generating, timeout=120, what="the second task to start", log=lambda: processes.log_of(first))
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert Submission.objects.get().status == "RUNNING"
    second = start_worker(env=env, queues="evaluate", name="gpu-host-2")
    done = wait_for(lambda s: s.status in ("FINISHED", "FAILED"), timeout=150, what="the retry to finish",
                    log=lambda: processes.log_of(second))  # fmt: skip
    assert done.status == "FINISHED", (done.failure_reason, done.log_tail)
    assert done.attempts == 2
    runs = EvaluationRun.objects.filter(submission=done)
    assert sorted(runs.values_list("task", flat=True)) == ["gsm8k", "mmlu_cloze_abstract_algebra"]
    assert SampleRecord.objects.filter(run__submission=done).count() == 4 + 8
    assert Score.objects.filter(run__task="gsm8k").count() == 2  # strict-match and flexible-extract
    log = processes.log_of(second)
    assert "task gsm8k" in log and "task mmlu_cloze_abstract_algebra" not in log  # resumed, not redone
