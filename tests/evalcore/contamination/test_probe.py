"""Memorisation probe: the split, the hit rule, Newcombe's interval, and runs on the real SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.contamination.items import BenchmarkItem
from evalcore.contamination.probe import (
    ProbeRecord,
    SplitRate,
    _split_rate,
    is_hit,
    memorisation_probe,
    newcombe_difference,
    probe_items,
    split_item,
)
from evalcore.models.base import GenerationRequest


def test_split_item_gives_the_first_half_and_the_next_words():
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen."
    prompt, expected = split_item(text, words=8)
    assert prompt == "one two three four five six seven eight"
    assert expected == ["nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen."]
    assert split_item("too short to probe at all", words=8) is None
    assert split_item("Question: a\nb c d", words=2) == ("Question: a", ["b", "c"])


def test_a_hit_needs_the_next_words_exactly_with_trailing_punctuation_ignored():
    expected = ["the", "remainder", "at", "the", "farmers'", "market", "daily", "for"]
    assert is_hit(" the remainder at the farmers' market daily for $2 each.", expected)
    assert is_hit(" the remainder, at the farmers market daily for", expected)  # trailing punctuation only
    assert not is_hit(" The remainder at the farmers' market daily for", expected)  # case counts
    assert not is_hit(" the rest at the farmers' market daily for", expected)
    assert not is_hit(" the remainder at the", expected)  # too few words


def test_newcombe_interval_matches_the_published_example():
    """Newcombe (1998), Statistics in Medicine 17:873-890, Table II example (a): 56/70 - 48/80,
    method 10 (score interval, hybrid): 0.2000, [0.0524, 0.3339]."""
    a = _split_rate("test", [_record(k < 56) for k in range(70)], 0, 0.95)
    b = _split_rate("train", [_record(k < 48) for k in range(80)], 0, 0.95)
    d, low, high = newcombe_difference(a, b)
    assert (d, low, high) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-4)


def test_rates_at_zero_keep_an_honest_interval():
    zero = _split_rate("train", [_record(False)] * 200, 0, 0.95)
    assert zero.rate == 0 and zero.ci_high == pytest.approx(0.0188, abs=1e-4)
    d, low, high = newcombe_difference(zero, zero)
    assert d == 0 and low < 0 < high
    with pytest.raises(ValueError, match="long enough to probe"):
        _split_rate("test", [], 5, 0.95)


def _record(hit: bool):
    return ProbeRecord("t", "test", 0, "", "", "", hit)


def test_an_item_the_model_completes_greedily_is_a_hit_and_an_edited_one_is_not(smollm2):
    """A positive control without training: an item made of a prompt and SmolLM2's own greedy continuation."""
    prompt = "The history of the printing press begins in the fifteenth century, when"
    (answer,) = smollm2.generate_until([GenerationRequest(prompt, until=(), max_gen_toks=40)])
    continuation = answer.text.split()[: len(prompt.split())]
    assert len(continuation) >= 8
    item = BenchmarkItem("control", 0, "test", prompt + " " + " ".join(continuation))
    edited = BenchmarkItem("control", 1, "test", prompt + " " + " ".join(["zebra", *continuation[1:]]))
    records, too_short = probe_items(smollm2, [item, edited, BenchmarkItem("control", 2, "test", "short one")])
    assert [r.hit for r in records] == [True, False] and too_short == 1
    assert records[0].prompt == prompt


def test_probe_on_gsm8k_test_and_train_splits(smollm2, data_env):
    (result,) = memorisation_probe(smollm2, ["gsm8k"], limit=3).values()
    assert (result.test.split, result.test.n, result.train.split, result.train.n) == ("test", 3, "train", 3)
    assert [r.split for r in result.records] == ["test"] * 3 + ["train"] * 3
    assert result.difference == pytest.approx(result.test.rate - result.train.rate)
    for rate in (result.test, result.train):
        assert isinstance(rate, SplitRate) and rate.ci_low <= rate.rate <= rate.ci_high
        assert rate.rate == pytest.approx(np.mean([r.hit for r in result.records if r.split == rate.split]))
    with pytest.raises(ValueError, match="unknown task"):
        memorisation_probe(smollm2, ["not_a_task"])
