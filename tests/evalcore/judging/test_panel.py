"""Judge panels: z-score panel of graded answers, pooled Bradley-Terry of pairwise judgments, agreement."""

from __future__ import annotations

import json
import math

import pytest

from evalcore.judging.panel import panel_grades, panel_pairwise
from tests.midp_reference import midp, midp_effective

ROOT5 = math.sqrt(5)
TWO_JUDGES = {
    "wide": {"a": {"1": 8, "2": 6}, "b": {"1": 4, "2": 2}},  # mean 5, population sd sqrt(5)
    "lenient": {"a": {"1": 9, "2": 9}, "b": {"1": 7, "2": 7}},  # mean 8, sd 1
}


def test_two_judge_z_score_panel_by_hand():
    out = panel_grades(TWO_JUDGES, rounds=200)
    # z(wide) = (3, 1, -1, -3) / sqrt(5); z(lenient) = (1, 1, -1, -1); the panel is their mean per cell.
    assert out["models"]["a"]["mean"] == pytest.approx(((3 / ROOT5 + 1) / 2 + (1 / ROOT5 + 1) / 2) / 2)
    assert out["models"]["b"]["mean"] == pytest.approx(-(1 / ROOT5 + 0.5))
    wide = out["judges"]["wide"]
    assert wide["mean"] == 5 and wide["sd"] == pytest.approx(ROOT5) and wide["model_means"] == {"a": 7, "b": 3}
    assert wide["kendall_tau"]["value"] == 1.0
    # Pearson of (8, 6, 4, 2) with the other judge's z (1, 1, -1, -1): 8 / sqrt(20 * 4).
    assert wide["pearson"]["value"] == pytest.approx(2 / ROOT5) and wide["pearson"]["cells"] == 4
    assert out["most_disagreeing"] is None  # two judges: each one's agreement is the other's
    json.dumps(out, allow_nan=False)


def test_three_judges_by_hand_and_a_lenient_judge_does_not_dominate():
    judges = {
        "j1": {"a": {"1": 8, "2": 6}, "b": {"1": 4, "2": 2}},
        "j2": {"a": {"1": 3, "2": 3}, "b": {"1": 1, "2": 1}},  # z = (1, 1, -1, -1)
        "j3": {"a": {"1": 5, "2": 4}, "b": {"1": 5, "2": 2}},  # mean 4, z = (1, 0, 1, -2) / sqrt(1.5)
    }
    s = math.sqrt(1.5)
    out = panel_grades(judges, rounds=100)
    cells = [((3 / ROOT5) + 1 + 1 / s) / 3, ((1 / ROOT5) + 1 + 0) / 3,
             ((-1 / ROOT5) - 1 + 1 / s) / 3, ((-3 / ROOT5) - 1 - 2 / s) / 3]  # fmt: skip
    assert out["models"]["a"]["mean"] == pytest.approx((cells[0] + cells[1]) / 2)
    assert out["models"]["b"]["mean"] == pytest.approx((cells[2] + cells[3]) / 2)
    # Adding 5 to every score of a judge, or doubling its spread, leaves the panel where it was.
    shifted = {**judges, "j2": {m: {i: v + 5 for i, v in row.items()} for m, row in judges["j2"].items()}}
    stretched = {**judges, "j1": {m: {i: 2 * v - 3 for i, v in row.items()} for m, row in judges["j1"].items()}}
    for variant in (shifted, stretched):
        got = panel_grades(variant, rounds=100)["models"]
        assert got["a"]["mean"] == pytest.approx(out["models"]["a"]["mean"])
        assert got["a"]["ci_low"] == pytest.approx(out["models"]["a"]["ci_low"])


def _graded(quality: dict[str, float], invert: bool = False, offset: float = 0.0) -> dict:
    items = [str(i) for i in range(12)]
    sign = -1 if invert else 1
    return {m: {i: 5.5 + offset + sign * (q + ((int(i) * 7) % 5 - 2) * 0.3) for i in items}
            for m, q in quality.items()}  # fmt: skip


def test_a_judge_that_inverts_everyone_is_most_disagreeing():
    quality = {"a": 3.0, "b": 1.0, "c": -1.0, "d": -3.0}
    judges = {"j1": _graded(quality), "j2": _graded(quality, offset=1.0), "bad": _graded(quality, invert=True)}
    out = panel_grades(judges, rounds=200)
    assert out["most_disagreeing"] == "bad"
    bad = out["judges"]["bad"]
    assert bad["kendall_tau"]["value"] == -1.0 and bad["pearson"]["value"] < -0.9
    assert out["judges"]["j1"]["kendall_tau"]["ci_low"] is not None
    order = sorted(out["models"], key=lambda m: -out["models"][m]["mean"])
    assert order == ["a", "b", "c", "d"]  # two honest judges outvote one inverted


def test_grades_deterministic_failed_and_degenerate():
    judges = {"j1": _graded({"a": 1.0, "b": 0.0, "c": 2.0}), "j2": _graded({"a": 0.5, "b": 0.0, "c": 1.0})}
    judges["j1"]["a"]["3"] = None
    assert panel_grades(judges, seed=4) == panel_grades(judges, seed=4)
    assert panel_grades(judges, seed=4) != panel_grades(judges, seed=5)
    assert panel_grades(judges)["judges"]["j1"]["failed"] == 1
    one = panel_grades({"only": _graded({"a": 1.0, "b": 0.0})})
    assert one["judges"]["only"]["kendall_tau"]["value"] is None and one["most_disagreeing"] is None
    assert any("at least 2" in note for note in one["notes"])
    single_model = panel_grades({"j1": {"a": {"1": 3, "2": 4}}, "j2": {"a": {"1": 5, "2": 9}}})
    assert single_model["judges"]["j1"]["kendall_tau"]["value"] is None
    assert any("1 model(s)" in note for note in single_model["notes"])
    flat = panel_grades({"flat": {"a": {"1": 5, "2": 5}, "b": {"1": 5, "2": 5}}, "j2": TWO_JUDGES["wide"]})
    assert flat["judges"]["flat"]["pearson"]["value"] is None
    assert any("one score to everything" in note for note in flat["notes"])
    empty = panel_grades({})
    assert empty["models"] == {} and empty["judges"] == {} and empty["most_disagreeing"] is None
    for result in (one, single_model, flat, empty):
        json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("bad, message", [
    ({"j1": {"a": {"q1": float("nan")}}}, "judge 'j1': model 'a', item 'q1': score nan is not finite"),
    ({"j1": {"a": {"q1": -math.inf}}}, "judge 'j1': model 'a', item 'q1': score -inf is not finite"),
    ({"j1": [1, 2]}, "judge 'j1' must be a dict"),
    ({"j1": {"a": 3}}, "judge 'j1': model 'a' must map item ids"),
    ("j1", "per_judge must be a dict"),
    ({3: {}}, "judge name 3"),
])  # fmt: skip
def test_hostile_grades_refused(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        panel_grades(bad)


def _rows(order: list[str], items: int, *, invert: bool = False, first: str | None = None) -> list[tuple]:
    """Every pair of ``order`` (best first) on ``items`` items; the better one wins (or loses, inverted)."""
    rows = []
    for item in range(items):
        for x in range(len(order)):
            for y in range(x + 1, len(order)):
                better, worse = order[x], order[y]
                score = 0.0 if invert else 1.0
                if item % 4 == 3:  # an upset now and then, so that every rating is finite
                    score = 1.0 - score
                rows.append((better, worse, f"i{item}", score) if (item + x) % 2 else (worse, better, f"i{item}", 1 - score))
    return rows


def test_pooled_bradley_terry_recovers_the_ordering_and_pools_votes():
    order = ["a", "b", "c"]
    per_judge = {"j1": _rows(order, 8), "j2": _rows(order, 8), "j3": _rows(order, 4)}
    out = panel_pairwise(per_judge, rounds=200, seed=0)
    ratings = out["ratings"]
    assert ratings["a"]["rating"] > ratings["b"]["rating"] > ratings["c"]["rating"]
    for r in ratings.values():
        assert r["ci_low"] <= r["rating"] <= r["ci_high"]
    pooled = panel_pairwise({"everyone": per_judge["j1"] + per_judge["j2"] + per_judge["j3"]}, rounds=200, seed=0)
    assert pooled["ratings"] == ratings  # each judgment is one vote, whoever cast it
    assert out == panel_pairwise(per_judge, rounds=200, seed=0)
    json.dumps(out, allow_nan=False)


def test_an_inverting_judge_is_most_disagreeing_with_midp_values():
    order = ["a", "b", "c"]
    per_judge = {"j1": _rows(order, 4), "j2": _rows(order, 4), "bad": _rows(order, 4, invert=True)}
    out = panel_pairwise(per_judge, rounds=50)
    assert out["most_disagreeing"] == "bad"
    bad = out["judges"]["bad"]["agreement"]
    assert bad["value"] == 0.0 and bad["n"] == 12 and bad["interval"] == "mid-p"
    # Mid-p 95% for 0 of 12: the upper bound solves (1 - p)^12 / 2 = 0.025, p = 1 - 0.05^(1/12) (not a point at 0).
    assert bad["ci_low"] == 0.0 and bad["ci_high"] == pytest.approx(1 - 0.05 ** (1 / 12), abs=1e-4)
    assert bad["ci_high"] > 0 and bad["stderr"] is None
    # With three judges the honest ones have no majority to agree with (the others split), so the
    # pairwise figure decides: each honest judge matches half of the others' verdicts. Its two comparisons
    # per judgment (one match, one miss) are a cluster whose design effect is 1, but estimated from 12
    # clusters: the size is divided by (t_11 / z)^2, so the interval is wider than 12 of 24's exact one.
    assert out["judges"]["j1"]["agreement"]["value"] is None
    pairwise = out["judges"]["j1"]["agreement_pairwise"]
    assert pairwise["value"] == 0.5 and pairwise["n"] == 24 and pairwise["interval"] == "mid-p-effective"
    effective = 24 / (2.200985 / 1.959964) ** 2
    assert (pairwise["ci_low"], pairwise["ci_high"]) == pytest.approx(midp_effective(0.5 * effective, effective), abs=1e-4)
    assert pairwise["ci_low"] < midp(12, 24)[0]
    four = panel_pairwise({**per_judge, "j4": _rows(order, 4)}, rounds=50)
    assert four["judges"]["j1"]["agreement"]["value"] == 1.0 and four["most_disagreeing"] == "bad"


def test_midp_interval_against_the_binomial():
    """3 of 4 agreeing: mid-p 95% is (0.2423, 0.9875), the bounds where P(X > 3) + P(X = 3) / 2 and
    P(X < 3) + P(X = 3) / 2 are 0.025 (Wilson's (0.3006, 0.9544) covers 85% near p = 0.01 at n = 4)."""
    rows = [("a", "b", f"i{k}", 1.0) for k in range(4)]
    others = [("a", "b", f"i{k}", 1.0) for k in range(4)]
    mine = [("a", "b", "i0", 1.0), ("a", "b", "i1", 1.0), ("b", "a", "i2", 0.0), ("b", "a", "i3", 1.0)]
    out = panel_pairwise({"x": rows, "y": others, "me": mine}, rounds=20)
    got = out["judges"]["me"]["agreement"]
    assert got["value"] == 0.75 and got["n"] == 4 and got["interval"] == "mid-p"
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(midp(3, 4), abs=1e-4)
    assert got["ci_low"] == pytest.approx(0.24229, abs=1e-4) and got["ci_high"] == pytest.approx(0.98750, abs=1e-4)
    assert out["most_disagreeing"] == "me"


def test_pairwise_agreement_counts_a_judgments_comparisons_as_one_cluster():
    """x and y agree everywhere; "me" matches both on two items and neither on two: 4 of 8 comparisons, but
    the two of one judgment are alike, so the interval is taken at 8 / deff, deff the CR1 design effect
    (4 / 3 * 4 * 1^2 / 64) / ((8 * 0.25 / 7) / 8) = 7 / 3, then over (t_3 / z)^2 for 4 clusters."""
    rows = [("a", "b", f"i{k}", 1.0) for k in range(4)]
    mine = [("a", "b", "i0", 1.0), ("a", "b", "i1", 1.0), ("a", "b", "i2", 0.0), ("a", "b", "i3", 0.0)]
    got = panel_pairwise({"x": rows, "y": list(rows), "me": mine}, rounds=20)["judges"]["me"]["agreement_pairwise"]
    assert got["value"] == 0.5 and got["n"] == 8 and got["interval"] == "mid-p-effective"
    effective = 8 / (7 / 3) / (3.182446 / 1.959964) ** 2
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(midp_effective(0.5 * effective, effective), abs=1e-4)


def test_failed_and_degenerate_pairwise():
    out = panel_pairwise({"j1": [("a", "b", "i", None), ("a", "b", "j", 1.0), ("a", "b", "k", 0.0)]}, rounds=20)
    assert out["judges"]["j1"]["failed"] == 1 and out["judges"]["j1"]["judgments"] == 3
    assert out["judges"]["j1"]["agreement"]["value"] is None and out["most_disagreeing"] is None
    assert out["ratings"] is not None and any("at least 2" in note for note in out["notes"])
    none = panel_pairwise({"j1": [("a", "b", "i", None)]})
    assert none["ratings"] is None and any("no ratings" in note for note in none["notes"])
    assert panel_pairwise({})["ratings"] is None
    # A model that never wins: fitted with a weak prior and said so.
    sweep = panel_pairwise({"j1": [("a", "b", f"i{k}", 1.0) for k in range(5)]}, rounds=20)
    assert sweep["prior"] == 1.0 and any("prior=1.0" in note for note in sweep["notes"])
    for result in (out, none, sweep):
        json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("bad, message", [
    ({"j1": [("a", "b", "i1", float("nan"))]}, "judge 'j1', judgment 0 (model 'a', item 'i1'): score nan"),
    ({"j1": [("a", "b", "i1", math.inf)]}, "judge 'j1', judgment 0 (model 'a', item 'i1'): score inf"),
    ({"j1": [("a", "b", "i1", 1.5)]}, "outside [0, 1]"),
    ({"j1": [("a", "a", "i1", 1.0)]}, "compared with itself"),
    ({"j1": [("a", "b", 1.0)]}, "expected (model, other, item_id, score)"),
    ({"j1": "ab"}, "judge 'j1': judgments must be a list"),
    ({"j1": {"a": 1}}, "judge 'j1': judgments must be a list"),
    ([("a", "b", "i", 1.0)], "per_judge must be a dict"),
    ({"j1": [("a", "", "i1", 1.0)]}, "model name ''"),
    ({"j1": [("a", "b", "i1", True)]}, "score True"),
])  # fmt: skip
def test_hostile_pairwise_refused(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        panel_pairwise(bad)
