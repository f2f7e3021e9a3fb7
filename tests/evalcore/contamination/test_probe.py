"""Memorisation probe: the split, the hit rule, mid-p rates and Newcombe's construction of the difference,
and runs on the real SmolLM2."""

from __future__ import annotations

import math

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
from tests.midp_reference import midp, symmetric_se

Z95 = 1.959963984540054


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson's (1927) score interval, the closed form."""
    p = successes / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return centre - half, centre + half


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


def test_newcombe_construction_matches_the_published_example():
    """Newcombe (1998), Statistics in Medicine 17:873-890, Table II example (a): 56/70 - 48/80,
    method 10 (from the two Wilson score intervals, hybrid): 0.2000, [0.0524, 0.3339]."""
    a = SplitRate("test", 70, 56, 0.8, *wilson(56, 70), 0, "wilson")
    b = SplitRate("train", 80, 48, 0.6, *wilson(48, 80), 0, "wilson")
    d, low, high = newcombe_difference(a, b)
    assert (d, low, high) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-4)


def test_rates_are_midp_and_the_difference_is_built_from_them():
    """The probe's rates carry Lancaster's mid-p interval (scipy's binomial, tests/midp_reference.py), and
    the difference the same construction from those: d -+ sqrt((arm of a)^2 + (other arm of b)^2)."""
    a = _split_rate("test", [_record(k < 56) for k in range(70)], 0, 0.95)
    b = _split_rate("train", [_record(k < 48) for k in range(80)], 0, 0.95)
    (la, ua), (lb, ub) = midp(56, 70), midp(48, 80)
    assert (a.ci_low, a.ci_high, a.interval, a.n, a.hits) == (pytest.approx(la, abs=1e-4), pytest.approx(ua, abs=1e-4), "mid-p", 70, 56)
    assert a.stderr == pytest.approx(symmetric_se(0.8, la, ua), abs=1e-4)
    d, low, high = newcombe_difference(a, b)
    assert d == pytest.approx(0.2, abs=1e-4)
    assert low == pytest.approx(0.2 - math.hypot(0.8 - la, ub - 0.6), abs=1e-4)
    assert high == pytest.approx(0.2 + math.hypot(ua - 0.8, 0.6 - lb), abs=1e-4)


def test_rates_at_zero_keep_an_honest_interval():
    """0 of 200: the mid-p upper bound solves (1 - p)^200 / 2 = 0.025, 1 - 0.05^(1/200) = 0.0149 (Wilson's
    was 0.0188), not a point at 0; n recorded; no standard error beside a lopsided interval."""
    zero = _split_rate("train", [_record(False)] * 200, 0, 0.95)
    assert zero.rate == 0 and zero.n == 200 and zero.ci_low == 0.0
    assert zero.ci_high == pytest.approx(1 - 0.05 ** (1 / 200), abs=1e-4) and zero.ci_high > 0
    assert zero.stderr is None and zero.interval == "mid-p"
    d, low, high = newcombe_difference(zero, zero)
    assert d == 0 and low < 0 < high
    assert high == pytest.approx(zero.ci_high, abs=1e-4)  # sqrt(u^2 + 0^2)
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
