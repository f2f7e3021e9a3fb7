"""Prompt rendering, few-shot sampling, filters and metrics: small checkable facts."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from evalcore.engine import task_config_from_mapping
from evalcore.engine.filters import pipelines
from evalcore.engine.metrics import (
    exact_match,
    group_value,
    mean_value,
    multiple_choice_scores,
    pass_at_k,
    ratio_value,
)
from evalcore.engine.prompts import FewshotSampler, Prompter, TemplateError
from evalcore.engine.textnorm import f1_score


def config(**overrides):
    raw = {"task": "t", "dataset_path": "json", "output_type": "multiple_choice", "doc_to_text": "{{question}}\nAnswer:",
           "doc_to_choice": ["A", "B"], "doc_to_target": "answer"}  # fmt: skip
    raw.update(overrides)
    return task_config_from_mapping(raw)


def test_doc_to_fields_follow_the_harness_rules():
    prompter = Prompter(config(doc_to_target="{{answer}}"))
    doc = {"question": "Q?", "answer": 1}
    assert prompter.text(doc) == "Q?\nAnswer:"
    assert prompter.target(doc) == 1  # digits become an index when the task has choices
    assert Prompter(config(doc_to_text="question")).text(doc) == "Q?"  # a field name returns the field
    listed = Prompter(config(doc_to_choice="{{[a, b]}}"))
    assert listed.choices({"a": "x", "b": "y"}) == ["x", "y"]


def test_missing_template_field_names_the_field_and_the_document_fields():
    with pytest.raises(TemplateError, match="'question' is undefined.*\\['answer', 'prompt'\\]"):
        Prompter(config()).text({"prompt": "?", "answer": 0})


def test_fewshot_context_layout():
    prompter = Prompter(config(description="About maths.\n\n", target_delimiter=" ", fewshot_delimiter="\n\n"))
    shots = [{"question": "1?", "answer": 0}, {"question": "2?", "answer": 1}]
    context = prompter.context({"question": "3?", "answer": 0}, shots)
    assert context == "About maths.\n\n1?\nAnswer: A\n\n2?\nAnswer: B\n\n3?\nAnswer:"


def test_seeded_sampler_draws_like_the_harness_and_first_n_skips_the_document():
    pool = [{"i": i} for i in range(50)]
    sampler = FewshotSampler(pool, sampler="default", seed=1234, same_split=False)
    reference = random.Random(1234)
    for _ in range(3):  # successive documents consume one generator, in document order
        assert [pool[i] for i in sampler.sample(5, {"i": -1})] == reference.sample(pool, 5)
    first = FewshotSampler(pool, sampler="first_n", seed=0, same_split=True)
    assert first.sample(3, pool[1]) == [0, 2, 3]
    same = FewshotSampler(pool, sampler="default", seed=1, same_split=True)
    assert all(pool[i] != pool[7] for i in same.sample(10, pool[7]))


def test_gsm8k_filters_and_exact_match_options():
    filter_list = [
        {"name": "strict-match", "filter": [{"function": "regex", "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"}, {"function": "take_first"}]},
        {"name": "flexible-extract", "filter": [
            {"function": "regex", "group_select": -1, "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)"},
            {"function": "take_first"}]},
    ]  # fmt: skip
    named = dict(pipelines(filter_list))
    response = " She pays 3 * $4 = $12.\nThen 12 + 6 = 1,018.\n#### 1,018"
    assert named["strict-match"]([response]) == ["1,018"]
    assert named["flexible-extract"]([response]) == ["1,018"]
    assert named["strict-match"](["no answer"]) == ["[invalid]"]
    options = {"ignore_case": True, "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"]}
    assert exact_match("1,018", "Janet sells... #### 1018", **options) == 1.0
    assert exact_match("$18.", "18", **options) == 1.0
    assert exact_match("Yes", "yes") == 0.0 and exact_match("Yes", "yes", ignore_case=True) == 1.0
    assert exact_match("yes!", "yes", ignore_punctuation=True) == 1.0
    votes = dict(pipelines([{"name": "maj", "filter": [{"function": "majority_vote"}]}]))["maj"]
    assert votes(["7", "8", "8", "7", "8"]) == ["8"]


def test_drop_f1_number_normalisation_survives_newlines_and_punctuation():
    # The DROP leaderboard split on spaces only: "10\n\npassage..." was one token and scored 0.
    assert f1_score("10\n\nPassage: the next drive", "10") > 0.0
    assert f1_score("10\n\n", "10") == 1.0
    assert f1_score("10.", "10") == 1.0
    assert f1_score("1,000 yards", "1000 yards") == 1.0
    assert f1_score("11", "10") == 0.0  # wrong number, no partial credit
    assert f1_score("the Denver Broncos", "Broncos, Denver") == 1.0


def brute_force_pass_at_k(n, c, k):
    """Probability that a random k-subset of n samples (c correct) contains a correct one."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n, c, k", [(5, 0, 1), (5, 2, 1), (5, 2, 3), (10, 3, 5), (6, 6, 2), (8, 1, 8)])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


@pytest.mark.parametrize(
    "n, c, k, message",
    [(10.0, 3, 1, "n must be an integer, got 10.0"), (10, True, 1, "c must be an integer, got True"),
     (10, 3, 2.0, "k must be an integer, got 2.0"), (10, 3, None, "k must be an integer, got None")],
)  # fmt: skip
def test_pass_at_k_takes_integer_counts_only(n, c, k, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        pass_at_k(n, c, k)
    assert pass_at_k(np.int64(10), np.int64(3), np.int32(1)) == pytest.approx(0.3)


def test_multiple_choice_metrics():
    choices = ["a", "a much longer answer"]
    lls = [-2.0, -3.0]
    scores = multiple_choice_scores(lls, choices, 1, greedy=[False, False], unconditional=[-1.0, -4.0])
    assert scores["acc"] == 0.0  # raw log-likelihood prefers the short choice
    assert scores["acc_norm"] == 1.0  # per byte, the long one wins
    assert scores["acc_mutual_info"] == 1.0  # -3 - (-4) > -2 - (-1)
    p = np.exp(lls) / np.exp(lls).sum()
    assert scores["brier_score"] == pytest.approx((p[0] - 0) ** 2 + (p[1] - 1) ** 2)
    assert scores["exact_match"] == 0.0


def test_mean_interval_and_micro_versus_macro():
    value = mean_value([1, 0, 1, 1])
    assert value.value == 0.75 and value.n == 4
    # A proportion: the mid-p exact interval (tests/evalcore/stats/test_estimates.py); lopsided at 3 of 4,
    # so no standard error is reported beside it.
    assert value.interval == "mid-p" and value.stderr is None and value.ci_low < 0.75 < value.ci_high
    graded = mean_value([1, 0, 1, 0.5], metric="f1")  # bounded, not 0/1: mid-p at the effective size
    assert graded.interval == "mid-p-effective" and 0 < graded.ci_low < 0.625 < graded.ci_high < 1
    unbounded = mean_value([1, 0, 1, 0.5], metric="score")
    assert unbounded.interval == "t"
    assert unbounded.ci_low == pytest.approx(0.625 - 3.182446 * unbounded.stderr, abs=1e-4)  # t quantile, 3 df
    big, small = mean_value([1] * 90 + [0] * 10), mean_value([0] * 9 + [1])
    micro = group_value([big, small], weight_by_size=True)
    macro = group_value([big, small], weight_by_size=False)
    assert micro.value == pytest.approx((90 + 1) / 110)
    assert macro.value == pytest.approx((0.9 + 0.1) / 2)
    assert micro.value != pytest.approx(macro.value)


def test_ratio_metrics_use_sums_and_a_delta_method_interval():
    from scipy.stats import t as student_t

    lls, units = [-10.0, -30.0, -24.0, -12.0], [10, 20, 10, 15]
    value = ratio_value("word_perplexity", lls, units, seed=0)
    r = sum(lls) / sum(units)
    assert value.value == pytest.approx(math.exp(-r))
    # The linearised ratio estimator by hand: residuals ll_i - r u_i, t with sum(u)^2 / sum(u^2) - 1 df.
    resid = [a - r * b for a, b in zip(lls, units)]
    se = math.sqrt(4 / 3 * sum(e * e for e in resid)) / sum(units)
    q = student_t.ppf(0.975, sum(units) ** 2 / sum(u * u for u in units) - 1)
    assert value.interval == "delta-t"
    assert (value.ci_low, value.ci_high) == pytest.approx((math.exp(-(r + q * se)), math.exp(-(r - q * se))))
    bpb = ratio_value("bits_per_byte", lls, units, seed=0)
    assert bpb.value == pytest.approx(-r / math.log(2))
    assert (bpb.ci_low, bpb.ci_high) == pytest.approx(((-r - q * se) / math.log(2), (-r + q * se) / math.log(2)))
    assert bpb.stderr == pytest.approx(q * se / math.log(2) / 1.959964, rel=1e-4)  # symmetric: its own error
    empty = ratio_value("word_perplexity", [-10.0, 0.0, -20.0], [10, 0, 10], seed=0)  # a document of no words
    assert empty.interval == "bootstrap" and empty.ci_low <= empty.value <= empty.ci_high
