"""submission_evaluate with the real engine: an upload runs a small frozen suite on a tiny real model,
stores scores with intervals, protocol and per-document records, and a retry never duplicates rows."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from leaderboard.evaluation.runner import request_cache_path
from leaderboard.evaluation.suites import suite_freeze
from leaderboard.models import (
    BenchmarkSuite,
    EvaluationRun,
    ReviewAction,
    SampleRecord,
    Score,
    ScoreHistory,
    Submission,
)
from leaderboard.review.services import submission_review
from leaderboard.submissions.lifecycle import SubmissionBusy, submission_start
from leaderboard.submissions.services import submission_requeue
from leaderboard.tasks import submission_evaluate

pytestmark = pytest.mark.django_db
SUITE = [
    {"task": "mmlu_cloze_abstract_algebra", "num_fewshot": 0, "limit": 4},
    {"task": "mmlu_cloze_anatomy", "num_fewshot": 1, "limit": 3},
]


@pytest.fixture
def eager(settings, celery_eager):
    settings.LEADERBOARD_SUITE_TASKS = SUITE


@pytest.fixture
def owner(client):
    user = get_user_model().objects.create_user("owner@example.org", "owner@example.org", "a-long-passphrase-42")
    client.force_login(user)
    return user


def submit(client, folder, captured, **fields) -> Submission:
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(folder.iterdir())]
    data = {"model_name": "acme/tiny", "files": files, "precision": "float32", "model_type": "pretrained",
            "licence": "mit", **fields}  # fmt: skip
    with captured(execute=True):
        response = client.post("/leaderboard/submit/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return Submission.objects.latest("id")


def test_upload_runs_the_suite_and_a_retry_overwrites(client, owner, tiny_dir, submissions_dir, eager, settings,
                                                      django_capture_on_commit_callbacks):  # fmt: skip
    submission = submit(client, tiny_dir, django_capture_on_commit_callbacks)
    submission.refresh_from_db()
    assert submission.status == "FINISHED", (submission.failure_reason, submission.log_tail)
    assert submission.attempts == 1 and submission.started_at <= submission.finished_at
    assert submission.progress["tasks_done"] == 2 and submission.progress["tasks_total"] == 2
    assert submission.progress["current_task"] is None and submission.progress["requests"] is None
    suite = BenchmarkSuite.objects.get()
    assert (suite.name, suite.version, suite.tasks[1]["num_fewshot"]) == ("podium", 1, 1)
    runs = {r.task: r for r in EvaluationRun.objects.filter(submission=submission)}
    assert set(runs) == {"mmlu_cloze_abstract_algebra", "mmlu_cloze_anatomy"}
    anatomy = runs["mmlu_cloze_anatomy"]
    assert anatomy.status == "FINISHED" and anatomy.protocol["num_fewshot"] == 1 and anatomy.protocol["n_docs"] == 3
    assert anatomy.protocol["model"]["weights_sha256"] == submission.weight_sha256
    assert anatomy.protocol["suite"] == {"name": "podium", "version": 1} and anatomy.config_sha256
    assert "evalcore" in anatomy.code_version
    assert SampleRecord.objects.filter(run=anatomy).count() == 3
    record = SampleRecord.objects.get(run=anatomy, doc_id=0).payload
    assert len(record["choice_logprobs"]) == 4 and len(record["fewshot_ids"]) == 1 and record["prompt"]
    scores = {s.metric: s for s in Score.objects.filter(run=runs["mmlu_cloze_abstract_algebra"])}
    assert set(scores) == {"acc", "acc_norm"}
    for score in scores.values():
        assert score.n == 4 and score.ci_low <= score.value <= score.ci_high < 1 and score.interval == "mid-p"
        assert score.effective_n == 4.0 and (score.stderr is None) == (score.value in (0.0, 0.25, 0.75, 1.0))
    page = client.get(f"/leaderboard/submissions/{submission.public_id}/").content.decode()
    assert "mmlu_cloze_anatomy" in page and "95% interval" in page

    # A worker died after one task: the redelivered task resumes, overwriting, never duplicating.
    counts = (EvaluationRun.objects.count(), Score.objects.count(), SampleRecord.objects.count())
    Submission.objects.filter(pk=submission.pk).update(status="RUNNING")
    EvaluationRun.objects.filter(pk=anatomy.pk).update(status="RUNNING")
    Score.objects.filter(run=anatomy, metric="acc").update(value=0.123)
    SampleRecord.objects.filter(run=anatomy, doc_id=2).delete()
    with pytest.raises(SubmissionBusy):  # its worker spoke moments ago: a duplicate delivery waits
        submission_evaluate(submission.pk)
    silent = timezone.now() - timedelta(seconds=settings.LEADERBOARD_HEARTBEAT_STALE_S + 1)
    Submission.objects.filter(pk=submission.pk).update(heartbeat_at=silent)  # ...until that worker falls silent
    assert submission_evaluate(submission.pk) == "finished"
    assert (EvaluationRun.objects.count(), Score.objects.count(), SampleRecord.objects.count()) == counts
    history = ScoreHistory.objects.get()
    assert (history.run_id, history.metric, history.value, history.reason) == (anatomy.pk, "acc", 0.123, "re-run")
    assert Submission.objects.get(pk=submission.pk).attempts == 2
    assert submission_evaluate(submission.pk) == "nothing to do"  # FINISHED stays FINISHED
    assert [m.subject for m in mail.outbox] == ["Podium: acme/tiny finished"]  # one mail, not one per run
    assert not request_cache_path(submission.pk).exists()  # spent once every result is stored


def test_a_retry_answers_from_the_request_cache(client, owner, tiny_dir, submissions_dir, eager, monkeypatch,
                                                tmp_path, shared_data, django_capture_on_commit_callbacks):  # fmt: skip
    # Data for the first task only: the second task fails after the first was answered (and cached).
    partial = tmp_path / "data"
    for split in ("dev", "test"):
        (partial / "benchmarks" / "mmlu" / split).mkdir(parents=True)
        name = f"benchmarks/mmlu/{split}/abstract_algebra_{split}.csv"
        shutil.copy(shared_data / name, partial / name)
    monkeypatch.setenv("PODIUM_DATA_DIR", str(partial))
    submission = submit(client, tiny_dir, django_capture_on_commit_callbacks)
    submission.refresh_from_db()
    assert submission.status == "FAILED" and "anatomy_dev.csv" in submission.failure_reason
    assert request_cache_path(submission.pk).exists()
    # As if the worker had died before storing the first task: its answers are only in the cache.
    EvaluationRun.objects.filter(submission=submission).delete()
    monkeypatch.setenv("PODIUM_DATA_DIR", str(shared_data))
    with django_capture_on_commit_callbacks(execute=True):
        submission_requeue(submission)
    submission.refresh_from_db()
    assert submission.status == "FINISHED", submission.failure_reason
    assert "16 requests answered from the request cache, 0 computed" in submission.log_tail
    assert "0 requests answered from the request cache, 12 computed" in submission.log_tail
    assert not request_cache_path(submission.pk).exists()


def test_changed_weights_fail_with_reason_and_log_tail(client, owner, tiny_dir, submissions_dir, eager,
                                                       django_capture_on_commit_callbacks, settings):  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False):  # not sent: the weights change before it runs
        files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(tiny_dir.iterdir())]
        client.post("/leaderboard/submit/", {"model_name": "acme/tiny", "files": files, "precision": "float32",
                                             "model_type": "pretrained", "licence": "mit"})  # fmt: skip
    submission = Submission.objects.get()
    weights = submissions_dir / str(submission.pk) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # a tensor byte, not the header: it still loads
    weights.write_bytes(bytes(data))
    assert submission_evaluate(submission.pk) == "failed"
    submission.refresh_from_db()
    assert submission.status == "FAILED"
    assert "weights changed after it was submitted" in submission.failure_reason
    assert "loading acme/tiny" in submission.log_tail and "Traceback" in submission.log_tail
    assert f"from <submissions>/{submission.pk}" in submission.log_tail  # server folders are not spelled out
    assert str(submissions_dir) not in submission.log_tail and str(settings.BASE_DIR) not in submission.log_tail
    status = client.get(f"/leaderboard/submissions/{submission.public_id}/status.json").json()
    assert status["status"] == "FAILED" and "loading acme/tiny" in status["log_tail"]
    requeued = submission_requeue(submission)
    assert requeued.status == "PENDING" and requeued.failure_reason == ""


def test_chat_template_is_applied_or_refused_up_front(client, owner, tiny_dir, submissions_dir, eager, tmp_path,
                                                     django_capture_on_commit_callbacks):  # fmt: skip
    """Ticked on a checkpoint without a chat template: refused on the form, nothing stored or queued.
    Ticked on one with a template: the model's own template wraps every prompt the engine sends."""
    bare = tmp_path / "no-template"
    shutil.copytree(tiny_dir, bare, ignore=shutil.ignore_patterns("chat_template.jinja"))
    data = {"model_name": "acme/tiny", "precision": "float32", "model_type": "chat", "licence": "mit"}
    files = [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted(bare.iterdir())]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post("/leaderboard/submit/", {**data, "files": files, "apply_chat_template": "on"})
    assert response.status_code == 400 and "Apply chat template is ticked but the checkpoint has none" in (
        response.content.decode()
    )
    assert not Submission.objects.exists() and not callbacks
    assert not (submissions_dir.exists() and any(submissions_dir.rglob("*")))
    assert "<|im_start|>" in (tiny_dir / "chat_template.jinja").read_text()  # SmolLM2's turns
    submission = submit(client, tiny_dir, django_capture_on_commit_callbacks, apply_chat_template="on")
    submission.refresh_from_db()
    assert submission.status == "FINISHED", submission.failure_reason
    assert EvaluationRun.objects.filter(submission=submission, protocol__apply_chat_template=True).count() == 2
    prompts = [r.payload["prompt"] for r in SampleRecord.objects.filter(run__submission=submission)]
    assert len(prompts) == 7  # 4 + 3 documents
    assert all("<|im_start|>user" in p and "<|im_start|>assistant" in p for p in prompts), prompts[0]


def test_suites_are_frozen_and_versioned(settings):
    first = suite_freeze(name="s", tasks=SUITE)
    assert suite_freeze(name="s", tasks=[dict(e) for e in SUITE]) == first
    second = suite_freeze(name="s", tasks=SUITE[:1])
    assert (first.version, second.version) == (1, 2)
    assert suite_freeze(name="s", tasks=SUITE) == first  # going back reuses the old version
    for bad in ([], [{"task": ""}], [{"task": "x", "limit": 0}], [{"task": "x", "shots": 1}], [SUITE[0], SUITE[0]]):
        with pytest.raises(ValidationError):
            suite_freeze(name="s", tasks=bad)


def test_review_needs_staff_and_a_comment(owner):
    from arena.catalogue.services import model_register

    submission = Submission.objects.create(
        owner=owner, model_name="acme/x", language_model=model_register(name="acme/x"), model_type="pretrained",
        licence="mit", source="upload", architecture="LlamaForCausalLM", weight_sha256="a" * 64,
        parameter_count=1, total_bytes=1, storage_path="/nowhere",
    )  # fmt: skip
    with pytest.raises(ValidationError, match="staff"):
        submission_review(submission=submission, admin=owner, action="hide", comment="x")
    admin = get_user_model().objects.create_user("admin@example.org", is_staff=True)
    with pytest.raises(ValidationError):
        submission_review(submission=submission, admin=admin, action="hide", comment="  ")
    submission_review(submission=submission, admin=admin, action="hide", comment="duplicate of #3")
    submission.refresh_from_db()
    assert submission.review_state == "hidden"
    assert ReviewAction.objects.get().comment == "duplicate of #3"


def test_counting_backend_reports_requests_done(tiny_dir):
    from evalcore.models import LoglikelihoodRequest, load_backend
    from leaderboard.evaluation.progress import CountingBackend

    reports = []
    backend = CountingBackend(load_backend("hf", path=str(tiny_dir), dtype="float32", batch_size=2),
                              lambda done, total: reports.append((done, total)), every_s=0)  # fmt: skip
    requests = [LoglikelihoodRequest(f"Question {i}:", f" answer {i}") for i in range(5)]
    results = backend.loglikelihood(requests)
    assert len(results) == 5 and backend.identity == backend.inner.identity
    assert reports[0] == (0, 5) and reports[-1][1] == 5 and len(reports) >= 3
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)
    assert (backend.done, backend.total) == (5, 5)
    backend.reset()
    assert (backend.done, backend.total) == (0, 0)
    assert backend.sends_messages is False and backend.scores_loglikelihood is True  # the hf backend's


def test_counting_backend_says_what_a_chat_endpoint_is():
    """The runner asks its backend whether it sends conversations and scores log-likelihoods: the
    leaderboard's wrapper answers for a chat-only endpoint as the endpoint does (no request is made)."""
    from evalcore.models import load_backend
    from leaderboard.evaluation.progress import CountingBackend

    chat = load_backend("openai-chat", base_url="http://127.0.0.1:9/v1", model="m")
    try:
        wrapped = CountingBackend(chat, lambda done, total: None)
        assert wrapped.sends_messages is True and wrapped.scores_loglikelihood is False
        with_logprobs = load_backend("openai-chat", base_url="http://127.0.0.1:9/v1", model="m", completions_logprobs=True)
        assert CountingBackend(with_logprobs, lambda done, total: None).scores_loglikelihood is True
        with_logprobs.close()
    finally:
        chat.close()


@pytest.mark.django_db
def test_a_worker_that_died_on_this_machine_is_taken_over_at_once():
    """A RUNNING submission whose heartbeat is fresh waits for its worker, unless that worker was a
    process on this machine that no longer exists (a restarted demo): then the new one takes over."""
    import os
    import socket
    import subprocess
    import sys

    from tests.leaderboard.board_data import submission as submission_make

    owner = get_user_model().objects.create_user("owner-takeover", password="x" * 12)
    submission = submission_make(owner, "m-takeover", status="RUNNING")
    Submission.objects.filter(pk=submission.pk).update(heartbeat_at=timezone.now())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    for alive in (f"{host}:{os.getppid()}", f"{host}:{os.getpid()}", f"elsewhere:{dead.stdout.strip()}", "", "x:y"):
        Submission.objects.filter(pk=submission.pk).update(worker=alive)
        with pytest.raises(SubmissionBusy):
            submission_start(submission.pk)
    Submission.objects.filter(pk=submission.pk).update(worker=f"{host}:{dead.stdout.strip()}")
    started = submission_start(submission.pk)
    assert started is not None and started.worker == f"{host}:{os.getpid()}"
    assert Submission.objects.get(pk=submission.pk).attempts == 1
