"""grade_summary: means of 1-10 grades with Student's t intervals over questions (a question's turns one
cluster), per category and turn, clipped to the grading scale when it is given."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from evalcore.judging.scores import grade_summary, json_safe, split_turn

SCORES = {
    "a": {"q1/t1": 8, "q1/t2": 6, "q2/t1": 7, "q2/t2": None, "q3/t1": 9, "q3/t2": 5},
    "b": {"q1/t1": 5, "q1/t2": 4, "q2/t1": 6, "q2/t2": 3, "q3/t1": 7, "q3/t2": 2},
}


def test_means_failed_counts_and_json():
    out = grade_summary(SCORES, rounds=200, seed=1)
    assert out["a"]["mean"] == pytest.approx((8 + 6 + 7 + 9 + 5) / 5) and out["a"]["n"] == 5
    assert out["a"]["failed"] == 1 and out["b"]["failed"] == 0
    assert out["b"]["mean"] == pytest.approx(27 / 6)
    for entry in out.values():
        assert entry["ci_low"] <= entry["mean"] <= entry["ci_high"]
    json.dumps(out, allow_nan=False)


def test_a_shifted_model_gets_a_shifted_interval():
    """b = a + 1 on every item: b's interval is a's shifted by exactly 1 (same spread, same questions)."""
    a = {f"q{i}": float(i % 7) for i in range(30)}
    out = grade_summary({"a": a, "b": {k: v + 1 for k, v in a.items()}}, rounds=300, seed=3)
    assert out["b"]["ci_low"] == pytest.approx(out["a"]["ci_low"] + 1, abs=1e-4)
    assert out["b"]["ci_high"] == pytest.approx(out["a"]["ci_high"] + 1, abs=1e-4)


def test_the_interval_is_cluster_robust_t_over_questions():
    """Recomputed by hand: mean over graded turns, CR1 standard error with questions as clusters,
    Student's t with questions - 1 degrees of freedom."""
    row = SCORES["a"]  # q2/t2 failed: q2 is a cluster of one graded turn
    got = grade_summary({"a": row})["a"]
    values = {k: v for k, v in row.items() if v is not None}
    x = np.array(list(values.values()), dtype=float)
    mean = x.mean()
    by_question = {}
    for item, v in values.items():
        by_question.setdefault(item.split("/")[0], []).append(v - mean)
    g, n = len(by_question), len(x)
    cr1 = g / (g - 1) * sum(sum(r) ** 2 for r in by_question.values()) / n**2
    naive = x.var(ddof=1) / n
    se = math.sqrt(max(cr1, naive))  # the design effect is held at 1 or more
    half = stats.t.ppf(0.975, g - 1) * se
    assert got["interval"] == "t-clustered"
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((mean - half, mean + half), abs=1e-4)
    # Every item its own question: plain Student's t.
    plain = grade_summary({"a": {"x": 2.0, "y": 5.0, "z": 9.0}})["a"]
    half = stats.t.ppf(0.975, 2) * np.std([2, 5, 9], ddof=1) / math.sqrt(3)
    assert plain["interval"] == "t" and plain["ci_low"] == pytest.approx(16 / 3 - half, abs=1e-4)


def test_small_samples_are_wide_and_clipped_to_the_scale():
    """At 4 questions the interval is as wide as the evidence says, never outside 1-10 when the scale is
    given; the seed and rounds (a bootstrap's) change nothing."""
    row = {"q1/t1": 9, "q1/t2": 3, "q2/t1": 10, "q2/t2": 8, "q3/t1": 2, "q3/t2": 7, "q4/t1": 10, "q4/t2": 9}
    free = grade_summary({"a": row})["a"]
    scaled = grade_summary({"a": row}, bounds=(1, 10), seed=9, rounds=5)["a"]
    assert free["ci_high"] > 10 and scaled["ci_high"] == 10.0 and scaled["ci_low"] == pytest.approx(free["ci_low"], abs=1e-4)
    assert scaled["ci_high"] - scaled["ci_low"] > 3
    # Every grade equal (a judge that gives 9 to everything): on the scale, no collapse to a point
    same = grade_summary({"a": {f"q{i}/t{t}": 9 for i in range(4) for t in (1, 2)}}, bounds=(1, 10))["a"]
    assert same["interval"] == "mid-p-effective" and same["ci_low"] < 6 and same["ci_high"] > 9.9
    unscaled = grade_summary({"a": {f"q{i}/t{t}": 9 for i in range(4) for t in (1, 2)}})["a"]
    assert unscaled["ci_low"] == unscaled["ci_high"] == 9.0 and any("no width" in n for n in unscaled["notes"])
    # values outside the scale (FastChat keeps an 11): the clip is not applied
    odd = grade_summary({"a": {**row, "q4/t2": 11}}, bounds=(1, 10))["a"]
    assert odd["ci_high"] > 10
    with pytest.raises(ValueError, match="bounds"):
        grade_summary({"a": row}, bounds=(10, 1))


def test_deterministic_and_order_free():
    a = {f"q{i}": float((i * 37) % 10 + 1) for i in range(40)}
    assert grade_summary({"a": a}, seed=5) == grade_summary({"a": a}, seed=6)
    # The order of the models or items in the dicts changes nothing.
    reordered = dict(reversed(list(a.items())))
    assert grade_summary({"a": reordered})["a"] == grade_summary({"a": a})["a"]


def test_categories_by_item_then_by_question_and_turns():
    cats = {"q1": "writing", "q2": "math", "q3/t2": "math"}  # q3/t1 has none
    out = grade_summary(SCORES, categories=cats, rounds=100)
    b = out["b"]
    assert b["by_category"]["writing"]["mean"] == pytest.approx(4.5) and b["by_category"]["writing"]["n"] == 2
    assert b["by_category"]["math"]["mean"] == pytest.approx((6 + 3 + 2) / 3)
    assert any("1 item(s) have no category" in note for note in b["notes"])
    assert b["by_turn"]["t1"]["mean"] == pytest.approx(6.0) and b["by_turn"]["t2"]["mean"] == pytest.approx(3.0)
    assert list(b["by_turn"]) == ["t1", "t2"]
    assert "by_turn" not in grade_summary({"a": {"x": 1.0, "y": 2.0}})["a"]
    assert split_turn("q81/t2") == ("q81", "t2") and split_turn("q81/x") == ("q81/x", None)


def test_degenerate_inputs_give_none_and_a_note():
    assert grade_summary({}) == {}
    failed = grade_summary({"a": {"x": None, "y": None}})["a"]
    assert failed["mean"] is None and failed["ci_low"] is None and failed["failed"] == 2 and failed["notes"]
    one = grade_summary({"a": {"x": 7}})["a"]
    assert one["mean"] == 7.0 and one["ci_low"] is None and one["ci_high"] is None and one["notes"]
    # Two turns of one question are one cluster: still no interval.
    turns = grade_summary({"a": {"q/t1": 7, "q/t2": 3}})["a"]
    assert turns["mean"] == 5.0 and turns["ci_low"] is None
    assert grade_summary({"a": {}})["a"]["mean"] is None
    constant = grade_summary({"a": {"x": 4, "y": 4, "z": 4}})["a"]
    assert constant["ci_low"] == constant["ci_high"] == 4.0


@pytest.mark.parametrize("bad, message", [
    ({"a": {"q1": float("nan")}}, "model 'a', item 'q1': score nan is not finite"),
    ({"a": {"q1": math.inf}}, "model 'a', item 'q1': score inf is not finite"),
    ({"a": {"q1": True}}, "model 'a', item 'q1': score True is not a number"),
    ({"a": {"q1": "7"}}, "model 'a', item 'q1': score '7' is not a number"),
    ({"a": [7]}, "model 'a' must map item ids"),
    ([("a", {})], "scores must be a dict"),
    ({"": {"q": 1}}, "model name '' must be"),
    ({"a": {None: 1}}, "item id None"),
])  # fmt: skip
def test_hostile_inputs_are_refused_with_the_place(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        grade_summary(bad)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="rounds"):
        grade_summary(SCORES, rounds=0)
    with pytest.raises(ValueError, match="categories"):
        grade_summary(SCORES, categories={"q1": 3})


def test_json_safe_guard():
    assert json_safe({"a": np.float64("nan"), "b": (np.int64(3), float("inf"), 0.5), "c": "x"}) == \
        {"a": None, "b": [3, None, 0.5], "c": "x"}
