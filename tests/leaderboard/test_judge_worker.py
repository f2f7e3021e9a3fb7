"""A judge run on real Celery worker processes serving the ``judge`` queue through Redis and
PostgreSQL: the first worker is killed with SIGKILL while the judged model is answering (the
baseline's answers already stored); a second worker finishes the run, reusing what was stored, with
no duplicate rows."""

from __future__ import annotations

import os
import signal

import pytest
from celery import Celery
from django.db import connection

from leaderboard.models import JudgeAnswer, JudgeRun, Judgment
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.judging_data import INSTRUCTIONS, judge_setup
from tests.leaderboard.polling import wait_for_row

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def wait_for(condition, *, timeout: float, what: str, log) -> JudgeRun:
    return wait_for_row(JudgeRun.objects.get, condition, timeout=timeout, what=what, log=log)


@pytest.mark.django_db(transaction=True)
def test_killed_judge_worker_is_replaced_and_the_run_completes_once(smollm2_dir, redis_url, start_worker, processes):
    setup = judge_setup(smollm2_dir, max_new_tokens=48)  # long enough answers to be killed while answering
    run = JudgeRun.objects.create(config=setup["config"], model=setup["terse"])
    env = clean_env(DJANGO_SETTINGS_MODULE="tests.leaderboard.worker_settings", DATABASE_URL=database_url_of(connection),
                    CELERY_BROKER_URL=redis_url, DEBUG="false")  # fmt: skip
    first = start_worker(env=env, queues="judge", name="judge-host-1")
    sender = Celery("podium-test-sender", broker=redis_url, set_as_current=False)
    try:
        sender.send_task("leaderboard.tasks.judge_run", args=[run.pk], queue="judge")
    finally:
        sender.close()

    def answering(r: JudgeRun) -> bool:
        baseline_done = JudgeAnswer.objects.filter(model=setup["baseline"]).count() == len(INSTRUCTIONS)
        return baseline_done and r.status == "RUNNING" and r.progress.get("stage") == "answers of smol-terse"

    wait_for(answering, timeout=240, what="the judged model to start answering", log=lambda: processes.log_of(first))
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    assert JudgeRun.objects.get().status == "RUNNING"
    second = start_worker(env=env, queues="judge", name="judge-host-2")
    done = wait_for(lambda r: r.status in ("FINISHED", "FAILED"), timeout=240, what="the retry to finish",
                    log=lambda: processes.log_of(second))  # fmt: skip
    assert done.status == "FINISHED", done.failure_reason
    assert done.attempts == 2
    assert Judgment.objects.filter(run=done).count() == 2 * len(INSTRUCTIONS)
    assert JudgeAnswer.objects.count() == 2 * len(INSTRUCTIONS)
    log = processes.log_of(second)
    assert "smol-terse answers 3 instructions" in log and "smol-baseline answers" not in log  # resumed, not redone
    assert done.results["win_rate"] is not None and done.results["judgments_computed"] == 2 * len(INSTRUCTIONS)
