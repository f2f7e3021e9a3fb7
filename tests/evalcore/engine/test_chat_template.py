"""Benchmarks "with the chat template": the prompt the model reads, and the requests it gets."""

from __future__ import annotations

import textwrap

import pytest

from evalcore.engine.cache import CachedBackend, RequestCache
from evalcore.engine.registry import TaskIndex
from evalcore.engine.runner import evaluate_task
from evalcore.models import LoglikelihoodRequest
from tests.conftest import FLOAT32_ATOL


@pytest.fixture
def mc_task(tmp_path):
    (tmp_path / "d.jsonl").write_text(
        '{"q": "What colour is the sky on a clear day?", "c": ["blue", "green"], "a": 0}\n'
        '{"q": "What colour is grass?", "c": ["blue", "green"], "a": 1}\n'
    )
    (tmp_path / "mc.yaml").write_text(textwrap.dedent(f"""
        task: mc
        dataset_path: {tmp_path / 'd.jsonl'}
        test_split: train
        output_type: multiple_choice
        doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
        doc_to_choice: c
        doc_to_target: a
    """))
    tasks, _ = TaskIndex([tmp_path], bundled=False).resolve(["mc"])
    return tasks[0]


def test_chat_template_prompt_and_requests(smollm2, mc_task, tmp_path):
    plain = evaluate_task(smollm2, mc_task)
    chat = evaluate_task(CachedBackend(smollm2, RequestCache(tmp_path / "c.sqlite3")), mc_task, apply_chat_template=True)
    first = chat.protocol["first_prompt"]
    assert plain.protocol["first_prompt"] == "Question: What colour is the sky on a clear day?\nAnswer:"
    assert first.startswith("<|im_start|>") and first.endswith("<|im_start|>assistant\n")
    assert "Question: What colour is the sky on a clear day?\nAnswer:<|im_end|>" in first
    assert chat.protocol["apply_chat_template"] is True and plain.protocol["apply_chat_template"] is False
    # With the template the answer follows the assistant's turn directly: no target delimiter.
    record = chat.records[0]
    direct = smollm2.loglikelihood([LoglikelihoodRequest(first, choice) for choice in ("blue", "green")])
    assert record["choice_logprobs"] == pytest.approx([answer.logprob for answer in direct], abs=FLOAT32_ATOL)
    assert record["choice_logprobs"] != pytest.approx(plain.records[0]["choice_logprobs"], abs=1e-3)


def test_backends_without_a_template_refuse(tiny_dir, mc_task):
    from evalcore.models import load_backend

    backend = load_backend("hf", path=str(tiny_dir), dtype="float32", device="cpu")
    if getattr(backend.tokenizer, "chat_template", None):
        backend.tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        evaluate_task(backend, mc_task, apply_chat_template=True)
