"""Podium with its broker on RabbitMQ: a battle and an evaluation sent by a real daphne through
RabbitMQ (py-amqp) to two real workers serving different queues (``generate`` and ``evaluate``).

The test runs in a vhost of its own, created with rabbitmqctl and deleted afterwards, so it shares
nothing with other users of the server (``make test`` finds RabbitMQ on 127.0.0.1:5672 or starts one).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from arena.models import Battle, Turn, Vote
from leaderboard.models import SampleRecord, Submission
from tests.arena_terms import agree
from tests.conftest import clean_env, database_url_of
from tests.faults.conftest import Browser, arena_models, kill_all
from tests.leaderboard.conftest import tiny_dir  # noqa: F401 - the tiny real checkpoint
from tests.leaderboard.polling import wait_for_row

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SUITE = [{"task": "mmlu_cloze_abstract_algebra", "num_fewshot": 0, "limit": 4}]


def rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    node = os.environ.get("TEST_RABBITMQ_NODE")
    argv = [shutil.which("rabbitmqctl") or "rabbitmqctl", *(["-n", node] if node else []), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.fixture
def rabbitmq_url() -> Iterator[str]:
    """A broker URL on a vhost of this test's own (``TEST_RABBITMQ_URL``'s server)."""
    base = getattr(settings, "TEST_RABBITMQ_URL", "")
    if not base:
        pytest.fail("TEST_RABBITMQ_URL is not set: run the suite with `make test`, which finds or starts RabbitMQ")
    parts = urlsplit(base)
    if shutil.which("rabbitmqctl") is None:
        if parts.path.strip("/") in ("", "%2F"):
            pytest.fail("rabbitmqctl is not here to create a private vhost: give TEST_RABBITMQ_URL a vhost of its own")
        yield base
        return
    vhost = f"podium-test-{uuid.uuid4().hex[:12]}"
    user = parts.username or "guest"
    for args in (("add_vhost", vhost), ("set_permissions", "-p", vhost, user, ".*", ".*", ".*")):
        done = rabbitmqctl(*args)
        assert done.returncode == 0, f"rabbitmqctl {' '.join(args)}: {done.stderr}"
    try:
        yield urlunsplit(parts._replace(path="/" + quote(vhost, safe="")))
    finally:
        rabbitmqctl("delete_vhost", vhost)


@pytest.mark.django_db(transaction=True)
def test_a_battle_and_an_evaluation_through_rabbitmq(rabbitmq_url, smollm2_dir, tiny_dir, start_worker,  # noqa: F811
                                                     start_asgi_server, processes, tmp_path):  # fmt: skip
    arena_models(smollm2_dir, max_new_tokens=8)
    owner = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "a-long-passphrase-42")
    login = Client()
    login.force_login(owner)
    env = clean_env(
        DJANGO_SETTINGS_MODULE="config.settings.dev", DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=rabbitmq_url, PODIUM_VAR_DIR=str(tmp_path / "var"),
        PODIUM_MODELS_DIR=str(smollm2_dir.parent), DEBUG="false", SECRET_KEY=settings.SECRET_KEY,
        LEADERBOARD_SUITE_TASKS=json.dumps(SUITE),
    )  # fmt: skip
    port = start_asgi_server(env=env)
    arena_host = start_worker(env=env, queues="generate", name="arena-host")
    gpu_host = start_worker(env=env, queues="evaluate", name="gpu-host")
    site = Browser(f"http://127.0.0.1:{port}")
    try:
        assert site.get("/arena/").status_code == 200
        agree(site)
        created = site.post("/arena/battles/", {"prompt": "What is the capital of France?"})
        assert created.status_code == 201, created.text
        public_id = created.json()["battle"]
        site.http.cookies.set("sessionid", login.cookies["sessionid"].value)  # now the owner, in another tab
        assert site.get("/leaderboard/submit/").status_code == 200
        files = [("files", (p.name, p.read_bytes())) for p in sorted(tiny_dir.iterdir())]
        form = {"model_name": "acme/tiny", "precision": "float32", "model_type": "pretrained", "licence": "mit"}
        submitted = site.post("/leaderboard/submit/", form, files=files)
        assert submitted.status_code == 302, submitted.text[-2000:]
    finally:
        site.close()

    turn = Turn.objects.get(battle__public_id=public_id)
    answered = wait_for_row(lambda: Turn.objects.get(pk=turn.pk),
                            lambda t: t.status_a in ("done", "error") and t.status_b in ("done", "error"),
                            timeout=240, what="both answers", log=lambda: processes.log_of(arena_host))  # fmt: skip
    assert (answered.status_a, answered.status_b) == ("done", "done"), (answered.error_a, answered.error_b)
    assert answered.answer_a.strip() and answered.answer_b.strip()
    assert Battle.objects.get(public_id=public_id).status == "active" and not Vote.objects.exists()

    finished = wait_for_row(lambda: Submission.objects.get(), lambda s: s.status in ("FINISHED", "FAILED"),
                            timeout=300, what="the evaluation", log=lambda: processes.log_of(gpu_host))  # fmt: skip
    assert finished.status == "FINISHED", (finished.failure_reason, finished.log_tail)
    assert finished.dispatched_at is not None
    assert SampleRecord.objects.filter(run__submission=finished).count() == 4

    # Each worker ran only its own queue's tasks.
    arena_log, gpu_log = processes.log_of(arena_host), processes.log_of(gpu_host)
    generate, evaluate = "Task arena.tasks.battle_generate[", "Task leaderboard.tasks.submission_evaluate["
    assert generate in arena_log and evaluate not in arena_log
    assert evaluate in gpu_log and generate not in gpu_log
    assert "Connected to amqp://" in arena_log and "Connected to amqp://" in gpu_log
    kill_all(processes)
