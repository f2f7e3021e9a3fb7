"""What judging costs: MeteredBackend (time and tokens through any backend) and cost_per_1000."""

from __future__ import annotations

import json

import pytest

from evalcore.judging import (
    GradeItem,
    grade_answers,
    judge_pairs,
    load_protocol,
    protocol_from_dict,
    read_pairs,
)
from evalcore.judging.cost import MeteredBackend, cost_per_1000, logprob_prompt_tokens
from evalcore.judging.judge import order_messages
from evalcore.models import load_backend
from evalcore.models.base import GenerationRequest
from tests.evalcore.models.test_openai_backend import scripted  # noqa: F401 - a fixture

SHORT_GRADER = {
    "name": "short-grader", "kind": "single",
    "user": "Rate this answer from 1 to 10 as [[N]].\nQuestion: {question}\nAnswer: {answer}",
    "verdict": {"method": "generate", "max_new_tokens": 6, "score": {"regex": r"\[\[(\d+)\]\]", "min": 1, "max": 10}},
}  # fmt: skip


def test_metered_hf_grading_counts_the_tokenizers_tokens(judge):
    protocol = protocol_from_dict(SHORT_GRADER)
    items = [GradeItem("q1", "What is 2+2?", "4"), GradeItem("q2", "Name a colour.", "Blue, like the sky.")]
    metered = MeteredBackend(judge)
    assert metered.tokenizer is judge.tokenizer and metered.identity == judge.identity
    assert getattr(metered, "sends_messages", False) is getattr(judge, "sends_messages", False)
    grades = grade_answers(metered, protocol, items)
    assert len(grades) == 2 and metered.calls == 1 and metered.seconds > 0
    contexts = [judge.chat_context(protocol.messages(question=i.question, answer=i.answer)) for i in items]
    want_prompt = sum(len(judge.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in contexts)
    assert metered.prompt_tokens == want_prompt
    # The generated tokens: the model's own count; re-encoding the texts gives the same or one fewer
    # per answer (an end-of-sequence token is generated but not part of the text).
    results = judge.generate_until([GenerationRequest(c, max_gen_toks=6) for c in contexts])
    assert metered.completion_tokens == sum(r.num_tokens for r in results)
    encoded = sum(len(judge.tokenizer(r.text, add_special_tokens=False)["input_ids"]) for r in results)
    assert encoded <= metered.completion_tokens <= encoded + len(results)
    cost = cost_per_1000(seconds=metered.seconds, judgments=len(grades), prompt_tokens=metered.prompt_tokens,
                         completion_tokens=metered.completion_tokens)  # fmt: skip
    assert cost["prompt_tokens_per_1000"] == pytest.approx(500 * want_prompt)
    assert cost["seconds_per_1000"] == pytest.approx(500 * metered.seconds)
    json.dumps(cost, allow_nan=False)


def test_logprob_verdicts_on_the_model_directly_need_their_tokens_added(judge, llmbar):
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    pairs = sorted(read_pairs(llmbar), key=lambda p: len(p.question) + len(p.answer_1) + len(p.answer_2))[:1]
    metered = MeteredBackend(judge)
    with metered:
        judgments = judge_pairs(metered, protocol, pairs)
    assert [j.status for j in judgments] == ["ok", "ok"]
    assert metered.seconds > 0 and metered.direct_model_uses == 1
    assert metered.prompt_tokens is None  # never a silent zero
    counted = logprob_prompt_tokens(judge.tokenizer, protocol, pairs, judgments=judgments)
    by_hand = 0
    for order in ("ab", "ba"):
        rendered = judge.tokenizer.apply_chat_template(order_messages(protocol, pairs[0], order), tokenize=False,
                                                       add_generation_prompt=True) + protocol.verdict.prefix
        by_hand += len(judge.tokenizer(rendered, add_special_tokens=False)["input_ids"])
    assert abs(counted - by_hand) <= 2  # the prefix tokenised apart from the template may split differently
    metered.add_tokens(prompt=counted)
    assert metered.prompt_tokens == counted and metered.completion_tokens == 0
    cached = [type(j)(**{**j.__dict__, "cached": True}) for j in judgments]
    assert logprob_prompt_tokens(judge.tokenizer, protocol, pairs, judgments=cached) == 0


def test_a_with_block_counts_its_wall_time_once(judge):
    metered = MeteredBackend(judge)
    with metered:
        with metered:  # nested: still one span
            metered.generate_until([GenerationRequest("Hi", max_gen_toks=1)])
            metered.generate_until([GenerationRequest("Hello", max_gen_toks=1)])
    inside = metered.seconds
    assert metered.calls == 2 and inside > 0
    metered.generate_until([GenerationRequest("Hi", max_gen_toks=1)])
    assert metered.seconds > inside and metered.calls == 3


def _completion(prompt_tokens, completion_tokens):
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip
    return 200, {"choices": [{"text": " [[7]]", "finish_reason": "stop"}], "usage": usage}, None


def test_openai_usage_is_read_from_every_answer(scripted):  # noqa: F811
    script, url = scripted(_completion(11, 3), _completion(20, 5), (200, {"choices": [{"text": "x"}]}, None))
    remote = load_backend("openai", base_url=url, model="m")
    metered = MeteredBackend(remote)
    metered.generate_until([GenerationRequest("a", max_gen_toks=4), GenerationRequest("b", max_gen_toks=4)])
    assert remote.token_usage == {"prompt_tokens": 31, "completion_tokens": 8, "responses": 2,
                                  "responses_without_usage": 0}  # fmt: skip
    assert (metered.prompt_tokens, metered.completion_tokens, metered.calls) == (31, 8, 1)
    metered.generate_until([GenerationRequest("c", max_gen_toks=4)])  # no usage, no tokenizer: unknown
    assert remote.token_usage["responses_without_usage"] == 1
    assert metered.prompt_tokens is None and metered.completion_tokens is None
    cost = cost_per_1000(seconds=metered.seconds, judgments=3)
    assert cost["prompt_tokens_per_1000"] is None and cost["notes"]


def test_openai_chat_usage_from_json_and_from_a_stream(scripted):  # noqa: F811
    chat = (200, {"choices": [{"message": {"role": "assistant", "content": "[[8]]"}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 40, "completion_tokens": 4}}, None)  # fmt: skip
    events = ("events", [json.dumps({"choices": [{"delta": {"content": "[[6"}}]}),
                         json.dumps({"choices": [{"delta": {"content": "]]"}, "finish_reason": "stop"}],
                                     "usage": {"prompt_tokens": 30, "completion_tokens": 3}}), "[DONE]"], None)  # fmt: skip
    script, url = scripted(chat, events)
    remote = load_backend("openai-chat", base_url=url, model="m")
    metered = MeteredBackend(remote)
    assert metered.sends_messages is True and metered.scores_loglikelihood is False
    metered.generate_until([GenerationRequest("rate", max_gen_toks=8)])
    assert metered.chat([{"role": "user", "content": "rate"}]) == "[[6]]"
    assert (metered.prompt_tokens, metered.completion_tokens, metered.calls) == (70, 7, 2)


def test_cost_per_1000_values_and_refusals():
    cost = cost_per_1000(seconds=2.5, judgments=50, prompt_tokens=10_000, completion_tokens=500)
    assert cost["seconds_per_1000"] == 50.0 and cost["judgments_per_second"] == 20.0
    assert cost["prompt_tokens_per_1000"] == 200_000 and cost["completion_tokens_per_1000"] == 10_000
    assert cost["tokens_per_1000"] == 210_000 and cost["notes"] == []
    none = cost_per_1000(seconds=0.0, judgments=0, prompt_tokens=0, completion_tokens=0)
    assert none["seconds_per_1000"] is None and none["judgments_per_second"] is None and none["notes"]
    for bad in ({"seconds": float("nan"), "judgments": 1}, {"seconds": -1, "judgments": 1},
                {"seconds": 1, "judgments": 1.5}, {"seconds": 1, "judgments": True},
                {"seconds": 1, "judgments": 1, "prompt_tokens": -3}):  # fmt: skip
        with pytest.raises(ValueError):
            cost_per_1000(**bad)
    with pytest.raises(ValueError, match="wraps an evalcore Backend"):
        MeteredBackend(object())
