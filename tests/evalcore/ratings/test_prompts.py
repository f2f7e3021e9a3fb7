"""Duplicate prompts: normalised keys, and prompts beyond the 99.9th percentile of prompt counts counting once."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.ratings import duplicate_prompt_mask, normalise_prompt, prompt_key


def test_prompt_keys_ignore_case_unicode_form_and_white_space():
    assert normalise_prompt("  Hello\n\tWORLD ") == "hello world"
    assert prompt_key(["Hello   World"]) == prompt_key(["hello world\n"]) == prompt_key(["ｈｅｌｌｏ world"])
    assert prompt_key(["hello world"]) != prompt_key(["hello", "world"])  # turns stay apart
    assert prompt_key([]) == prompt_key(["  "]) == ""
    assert len(prompt_key(["x"])) == 64


def test_prompts_beyond_the_percentile_count_once_keeping_the_first():
    # 2,500 distinct prompts seen once or twice, one seen 40 times, one seen 3 times.
    keys = [f"p{k}" for k in range(2500)] + [f"p{k}" for k in range(300)] + ["spam"] * 40 + ["q"] * 3
    rng = np.random.default_rng(0)
    order = rng.permutation(len(keys))
    shuffled = [keys[k] for k in order]
    out = duplicate_prompt_mask(shuffled)
    assert out.threshold == 2.0  # the 99.9th percentile of the counts, an observed count
    assert out.prompts == 2  # "spam" (40) and "q" (3)
    assert out.dropped == 39 + 2
    kept = [k for k, keep in zip(shuffled, out.keep) if keep]
    assert kept.count("spam") == 1 and kept.count("q") == 1 and kept.count("p0") == 2
    first_spam = shuffled.index("spam")
    assert out.keep[first_spam]


def test_few_distinct_prompts_never_drop_anything_and_unknown_prompts_are_left_alone():
    out = duplicate_prompt_mask(["a"] * 50 + ["b"] * 2 + [""] * 100)
    assert out.dropped == 0 and out.keep.all()
    assert duplicate_prompt_mask([]).dropped == 0
    many = [f"p{k}" for k in range(1100)] + [""] * 500 + ["spam"] * 5
    out = duplicate_prompt_mask(many)
    assert out.dropped == 4 and out.keep[1100:1600].all()


def test_percentile_is_checked():
    with pytest.raises(ValueError, match="percentile"):
        duplicate_prompt_mask(["a"], percentile=0)
    assert duplicate_prompt_mask(["a", "a", "a", "b", "c"], percentile=50).dropped == 2
