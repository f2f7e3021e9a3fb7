"""The broker down when a model owner submits: the submission is stored and the page says it is queued;
once the broker is back, the outbox (a celery beat task) sends it to the ``evaluate`` queue.

Real daphne and a real worker with beat, the test's PostgreSQL, a Redis of the test's own as the broker
(stopped, then started again on the same port), the tiny real checkpoint.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import redis
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from leaderboard.models import Submission
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.polling import wait_for_row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUEUED_FOR_BROKER = "waiting for the task queue to come back"
QUEUED_FOR_WORKER = "waiting for a free evaluation worker"


@pytest.mark.django_db(transaction=True)
def test_submission_while_the_broker_is_down_is_sent_when_it_returns(
    tiny_dir, private_redis, start_asgi_server, start_worker, processes, browser_at, tmp_path, settings
):
    owner = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "a-long-passphrase-42")
    login = Client()
    login.force_login(owner)
    private_redis.kill()  # the broker is down from the start
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=private_redis.url, PODIUM_VAR_DIR=str(tmp_path / "var"), DEBUG="false",
        SECRET_KEY=settings.SECRET_KEY, LEADERBOARD_OUTBOX_GRACE_S="0", PODIUM_OUTBOX_INTERVAL_S="1",
    )  # fmt: skip
    port = start_asgi_server(env=env)
    site = browser_at(f"http://127.0.0.1:{port}")
    site.http.cookies.set("sessionid", login.cookies["sessionid"].value)
    assert site.get("/leaderboard/submit/").status_code == 200
    files = [("files", (p.name, p.read_bytes())) for p in sorted(tiny_dir.iterdir())]
    form = {"model_name": "acme/tiny", "precision": "float32", "model_type": "pretrained", "licence": "mit"}
    response = site.post("/leaderboard/submit/", form, files=files)
    assert response.status_code == 302, response.text[-2000:]
    assert response.headers["Location"].endswith("/leaderboard/submissions/")

    submission = Submission.objects.get()
    assert submission.status == "PENDING" and submission.dispatched_at is None
    stored = Path(submission.storage_path)
    assert sorted(p.name for p in stored.iterdir()) == sorted(p.name for p in tiny_dir.iterdir())
    page = site.get("/leaderboard/submissions/")
    assert page.status_code == 200 and QUEUED_FOR_BROKER in page.text
    status = site.get(f"/leaderboard/submissions/{submission.public_id}/status.json")
    assert status.status_code == 200 and QUEUED_FOR_BROKER in status.json()["note"]

    private_redis.start()  # back (empty), on the same port
    outbox = start_worker(env=env, queues="default", name="outbox", beat_schedule=tmp_path / "beat")
    sent = wait_for_row(lambda: Submission.objects.get(pk=submission.pk), lambda s: s.dispatched_at is not None,
                        timeout=120, what="the outbox to send the submission", log=lambda: processes.log_of(outbox))  # fmt: skip
    assert sent.status == "PENDING"
    queued = redis.Redis.from_url(private_redis.url).lrange("evaluate", 0, -1)
    assert len(queued) == 1, queued  # sent once, to the evaluate queue
    message = json.loads(queued[0])
    assert message["headers"]["task"] == "leaderboard.tasks.submission_evaluate"
    assert json.loads(base64.b64decode(message["body"]))[0] == [submission.pk]
    assert QUEUED_FOR_WORKER in site.get("/leaderboard/submissions/").text
