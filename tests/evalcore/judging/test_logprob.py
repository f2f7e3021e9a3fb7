"""Log-prob verdicts equal the plain transformers computation, whatever the batching."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from evalcore.judging import PairItem, judge_pairs, load_protocol, pair_outcomes, read_pairs


def plain_p_first(judge, messages, prefix):
    """The issue's definition, written out with transformers alone."""
    tok, model = judge.tokenizer, judge.model
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tok(rendered, add_special_tokens=False)["input_ids"] + tok.encode(prefix, add_special_tokens=False)
    id_a = tok.encode("A", add_special_tokens=False)[0]
    id_b = tok.encode("B", add_special_tokens=False)[0]
    with torch.inference_mode():
        probs = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].double(), dim=-1)
    return float(probs[id_a] / (probs[id_a] + probs[id_b]))


@pytest.fixture(scope="module")
def short_pairs(llmbar):
    pairs = read_pairs(llmbar)
    return sorted(pairs, key=lambda p: len(p.question) + len(p.answer_1) + len(p.answer_2))[:3]


@pytest.mark.parametrize("budget", [1024, 65536])
def test_p_first_matches_plain_transformers(judge, short_pairs, budget):
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    judgments = judge_pairs(judge, protocol, short_pairs, token_budget=budget)
    assert [(j.pair_id, j.order) for j in judgments] == [(p.pair_id, o) for p in short_pairs for o in ("ab", "ba")]
    for pair, ab, ba in zip(short_pairs, judgments[::2], judgments[1::2]):
        for judgment, (first, second) in ((ab, (pair.answer_1, pair.answer_2)), (ba, (pair.answer_2, pair.answer_1))):
            messages = protocol.messages(question=pair.question, answer_a=first, answer_b=second)
            assert judgment.status == "ok"
            assert judgment.p_first == pytest.approx(plain_p_first(judge, messages, protocol.verdict.prefix), abs=1e-4)


def test_identical_answers_give_exactly_one_half(judge, short_pairs):
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    pair = short_pairs[0]
    same = [dataclasses.replace(pair, answer_2=pair.answer_1), PairItem("x", "Say hi.", "Hi!", "Hi!")]
    judgments = judge_pairs(judge, protocol, [*same, short_pairs[1]])
    outcomes, failed = pair_outcomes(judgments)
    assert not failed
    assert [o.swap_average for o in outcomes[:2]] == [0.5, 0.5]
    assert outcomes[2].swap_average != 0.5


def test_a_prompt_over_the_window_fails_that_judgment_only(judge, short_pairs):
    protocol = load_protocol("alpacaeval-logprob", tokenizer=judge.tokenizer)
    long = PairItem("long", "Repeat.", "word " * 9000, "ok")
    judgments = judge_pairs(judge, protocol, [long, short_pairs[0]])
    assert [j.status for j in judgments] == ["failed", "failed", "ok", "ok"]
    assert "more than the judge's window" in judgments[0].error and judgments[0].p_first is None


def test_batches_pad_little_even_with_a_large_budget():
    """The plan puts similar lengths together and never pads a batch by more than MAX_PADDING of its
    real tokens: a large budget (a GPU's) no longer pads short pairs to the longest one."""
    from evalcore.judging import logprob

    rng = torch.Generator().manual_seed(0)
    groups = [[2 * g, 2 * g + 1] for g in range(40)]
    stems = [int(torch.randint(8, 60, (1,), generator=rng)) for _ in groups]
    lengths = []
    for g in range(40):
        rest = int(torch.randint(30, 700, (1,), generator=rng))
        lengths += [stems[g] + rest, stems[g] + rest + int(torch.randint(0, 3, (1,), generator=rng))]
    for budget in (1024, 8192, 65536):
        batches = logprob._plan(groups, stems, lengths, budget)
        assert sorted(g for b in batches for g in b) == list(range(40))
        for batch in batches:
            rest_w = max(lengths[r] - stems[g] for g in batch for r in groups[g])
            cost = len(batch) * max(stems[g] for g in batch) + 2 * len(batch) * rest_w
            real = sum(stems[g] + sum(lengths[r] - stems[g] for r in groups[g]) for g in batch)
            assert len(batch) == 1 or (cost <= budget and cost <= (1 + logprob.MAX_PADDING) * real)
    assert len(logprob._plan(groups, stems, lengths, 65536)) < 40  # similar lengths still share passes
