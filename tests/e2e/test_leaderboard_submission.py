"""A model owner in headless Chromium: signs up, has a pickled upload refused, uploads a tiny real
checkpoint (through the resumable upload), and watches "My submissions" go to FINISHED (polled by the
page) while a real Celery worker on the ``evaluate`` queue runs the suite, through daphne, Redis and
PostgreSQL; the same worker, on the ``default`` queue, then mails the owner."""

from __future__ import annotations

import pytest
from django.db import connection

from leaderboard.models import Submission
from tests.conftest import clean_env, database_url_of
from tests.leaderboard.checkpoint_factory import tiny_checkpoint

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
PASSWORD = "a-long-enough-passphrase-42"


@pytest.fixture
def site(transactional_db, redis_url, smollm2_dir, tmp_path, start_worker, start_asgi_server, processes):
    env = clean_env(
        DJANGO_SETTINGS_MODULE="tests.leaderboard.worker_settings",  # a two-task suite
        DATABASE_URL=database_url_of(connection),
        CELERY_BROKER_URL=redis_url,
        PODIUM_VAR_DIR=str(tmp_path / "var"),
        DEBUG="false",
        SECRET_KEY="e2e-test-secret-key",
    )
    worker = start_worker(env=env, queues="evaluate,default", name="evaluate")  # default: the owner's mail
    port = start_asgi_server(env=env)
    checkpoint = tiny_checkpoint(str(tmp_path), str(smollm2_dir))
    yield {"base": f"http://127.0.0.1:{port}", "checkpoint": checkpoint, "worker": worker}


def test_owner_signs_up_uploads_and_watches_it_finish(site, browser, processes, tmp_path):
    base, checkpoint = site["base"], site["checkpoint"]
    page = browser.new_page()
    page.goto(f"{base}/leaderboard/accounts/signup/")
    page.fill("#id_email", "owner@example.org")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/leaderboard/submit/")

    def fill_form(files):
        page.fill("#id_model_name", "acme/tiny-llama")
        page.set_input_files("#id_files", [str(f) for f in files])
        page.select_option("#id_precision", "float32")
        page.select_option("#id_model_type", "pretrained")
        page.fill("#id_licence", "apache-2.0")
        page.click("form.submit button[type=submit]")

    pickled = tmp_path / "pytorch_model.bin"
    pickled.write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.")
    fill_form([*sorted(checkpoint.iterdir()), pickled])
    page.wait_for_selector("ul.errorlist li")  # the page refuses it before a byte is sent
    assert "only safetensors weights are accepted" in page.inner_text("main")
    assert not Submission.objects.exists()

    fill_form(sorted(checkpoint.iterdir()))
    page.wait_for_url(f"{base}/leaderboard/submissions/")
    assert page.inner_text("tr.submission .status") in ("PENDING", "RUNNING")
    try:  # the page polls status.json every 2 s and updates the row in place
        page.wait_for_function(
            "document.querySelector('tr.submission .status').textContent === 'FINISHED'", timeout=180_000
        )
    except Exception:
        raise AssertionError(processes.log_of(site["worker"])) from None
    assert "2 / 2 tasks" in page.inner_text("tr.submission .progress")
    page.click("tr.submission a")
    results = page.text_content("main")  # the per-benchmark tables are folded (<details>), still there
    assert "gsm8k" in results and "mmlu_cloze_abstract_algebra" in results and "95% interval" in results
    submission = Submission.objects.get()
    assert submission.status == "FINISHED" and submission.owner.username == "owner@example.org"
    for _ in range(600):  # the worker mails the owner once it finished (the console backend: into its log)
        if Submission.objects.get().owner_notified_at is not None:
            break
        page.wait_for_timeout(100)
    log = processes.log_of(site["worker"])
    assert "Subject: Podium: acme/tiny-llama finished" in log and f"/leaderboard/submissions/{submission.public_id}/" in log

    # The same weights again: the page hashes them (sha256.js, as the server does) and the server refuses
    # them before a byte is sent, with a link to the submission that has their results.
    sent = []
    page.on("request", lambda request: sent.append(request.url) if "/uploads" in request.url else None)
    page.goto(f"{base}/leaderboard/submit/")
    page.fill("#id_model_name", "acme/tiny-llama-again")
    page.set_input_files("#id_files", [str(f) for f in sorted(checkpoint.iterdir())])
    page.select_option("#id_precision", "float32")
    page.select_option("#id_model_type", "pretrained")
    page.fill("#id_licence", "apache-2.0")
    page.click("form.submit button[type=submit]")
    page.wait_for_selector("a.existing-submission")
    assert "You already submitted these weights as acme/tiny-llama" in page.inner_text("main")
    assert page.get_attribute("a.existing-submission", "href") == f"/leaderboard/submissions/{submission.public_id}/"
    assert not sent and Submission.objects.count() == 1
    page.click("a.existing-submission")
    page.wait_for_url(f"{base}/leaderboard/submissions/{submission.public_id}/")

