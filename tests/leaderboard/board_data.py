"""Leaderboard fixtures written straight through the ORM: submissions with runs, scores and records.

Scores are computed from the per-document values with the engine's own aggregation, so what the
board shows can be checked against the records.
"""

from __future__ import annotations

import hashlib
import itertools

from django.contrib.auth import get_user_model
from django.utils import timezone

from arena.models import LanguageModel, RatingSnapshot
from evalcore.engine.metrics import mean_value
from leaderboard.models import BenchmarkSuite, EvaluationRun, SampleRecord, Score, Submission

_counter = itertools.count(1)


def user(email: str, *, staff: bool = False):
    return get_user_model().objects.create_user(email, email, "a-long-passphrase-42", is_staff=staff)


def suite() -> BenchmarkSuite:
    found, _ = BenchmarkSuite.objects.get_or_create(
        name="podium",
        version=1,
        defaults={"tasks": [{"task": "gsm8k"}, {"task": "mmlu"}], "tasks_sha256": "0" * 64},
    )
    return found


def gsm8k_record(doc_id: int, correct: bool, *, extracted: bool = True) -> dict:
    answer = str(doc_id) if correct else "-1"
    strict = [answer] if extracted else ["[invalid]"]
    return {
        "doc_id": doc_id, "doc": {"question": f"What is {doc_id}?", "answer": f"#### {doc_id}"},
        "prompt": f"Question: What is 1?\nAnswer: #### 1\n\nQuestion: What is {doc_id}?\nAnswer:",
        "target": f"#### {doc_id}", "fewshot_ids": [0, 1, 2, 3, 4],
        "responses": [f" The answer is #### {answer}" if extracted else " I do not know"],
        "finish_reasons": ["stop"], "filtered": {"strict-match": strict, "flexible-extract": [answer]},
        "metrics": {"exact_match,strict-match": float(correct and extracted), "exact_match,flexible-extract": float(correct)},
    }  # fmt: skip


def mmlu_record(doc_id: int, correct: bool) -> dict:
    gold = doc_id % 4
    logprobs = [-3.0, -3.0, -3.0, -3.0]
    logprobs[gold if correct else (gold + 1) % 4] = -0.5
    return {
        "doc_id": doc_id, "doc": {"question": f"Q{doc_id}"}, "prompt": f"Q{doc_id}\nA. w\nB. x\nC. y\nD. z\nAnswer:",
        "target": gold, "fewshot_ids": [], "choices": ["A", "B", "C", "D"], "choice_logprobs": logprobs,
        "filtered": {}, "metrics": {"acc": float(correct)},
    }  # fmt: skip


def add_run(submission: Submission, task: str, records: list[dict], *, metrics: list[str], protocol: dict | None = None,
            config_sha256: str | None = None) -> EvaluationRun:  # fmt: skip
    output_type = "generate_until" if task == "gsm8k" else "multiple_choice"
    sha = config_sha256 or hashlib.sha256(task.encode()).hexdigest()
    run = EvaluationRun.objects.create(
        submission=submission, suite=suite(), task=task, status=EvaluationRun.Status.FINISHED,
        config_sha256=sha, code_version={"evalcore": "0.1.0", "git_commit": "abc123", "git_dirty": False},
        protocol={
            "task": task, "version": 3.0, "config_sha256": sha, "output_type": output_type, "num_fewshot": 5,
            "fewshot_sampler": "first_n", "fewshot_seed": 1234, "fewshot_doc_ids_first_doc": records[0]["fewshot_ids"],
            "first_prompt": records[0]["prompt"], "n_docs": len(records), "limit": None, "seed": 0,
            "decoding": {"until": ["Question:"], "do_sample": False, "max_gen_toks": 256} if output_type == "generate_until" else None,
            "model": {"backend": "hf", "name": submission.model_name, "weights_sha256": submission.weight_sha256, "dtype": "float32"},
            "precision": submission.precision, "config": {"task": task}, **(protocol or {}),
        },
        wall_time_s=1.5, finished_at=timezone.now(),
    )  # fmt: skip
    SampleRecord.objects.bulk_create([SampleRecord(run=run, doc_id=r["doc_id"], payload=r) for r in records])
    for metric in metrics:
        value = mean_value([r["metrics"][metric] for r in records])
        Score.objects.create(
            run=run, metric=metric, value=value.value, stderr=value.stderr, ci_low=value.ci_low,
            ci_high=value.ci_high, n=value.n, interval=value.interval, effective_n=value.effective_n,
        )  # fmt: skip
    return run


def submission(owner, name: str, *, model_type: str = "pretrained", parameters: int = 135_000_000,
               private: bool = False, review: str = "none", base_model: str = "", precision: str = "bfloat16",
               status: str = "FINISHED") -> Submission:  # fmt: skip
    model = LanguageModel.objects.create(name=name, family=base_model)
    k = next(_counter)
    if model_type in Submission.NEEDS_BASE_MODEL and not base_model:
        base_model = "acme/base"
    return Submission.objects.create(
        owner=owner, model_name=name, language_model=model, model_type=model_type, base_model=base_model,
        licence="mit", precision=precision, private=private, source="upload", architecture="LlamaForCausalLM",
        weight_sha256=hashlib.sha256(f"{name}-{k}".encode()).hexdigest(), parameter_count=parameters,
        total_bytes=2 * parameters, storage_path=f"/tmp/{k}", status=status, review_state=review,
        finished_at=timezone.now() if status == "FINISHED" else None,
    )  # fmt: skip


def entry(owner, name: str, *, gsm8k: list[bool], mmlu: dict[str, list[bool]] | None = None,
          no_answer: tuple[int, ...] = (), **fields) -> Submission:  # fmt: skip
    """A finished submission with a gsm8k run (and MMLU subject runs when given)."""
    sub = submission(owner, name, **fields)
    records = [gsm8k_record(i, ok, extracted=i not in no_answer) for i, ok in enumerate(gsm8k)]
    add_run(sub, "gsm8k", records, metrics=["exact_match,strict-match", "exact_match,flexible-extract"])
    for subject, correct in (mmlu or {}).items():
        add_run(sub, f"mmlu_{subject}", [mmlu_record(i, ok) for i, ok in enumerate(correct)], metrics=["acc"])
    return sub


def arena_snapshot(ratings: dict[str, tuple[float, float, float]]) -> RatingSnapshot:
    rows = [
        {
            "model": m,
            "rating": r,
            "ci_low": lo,
            "ci_high": hi,
            "rank": i + 1,
            "rank_ub": i + 1,
            "battles": 100,
        }
        for i, (m, (r, lo, hi)) in enumerate(sorted(ratings.items(), key=lambda kv: -kv[1][0]))
    ]
    return RatingSnapshot.objects.create(
        method="bt", category="overall", vote_count=500, rows=rows, last_vote_at=timezone.now()
    )  # made now, covering every earlier vote: it publishes the battles of those votes


def pattern(n: int, right: int, *, offset: int = 0) -> list[bool]:
    """``n`` documents of which ``right`` are right, spread out (deterministic)."""
    return [((i * 7 + offset) % n) < right for i in range(n)]
