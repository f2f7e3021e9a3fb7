"""Both human-labelled sets read with read_pairs, and audit_report's agreement figures carry intervals:
mid-p for rates (Lancaster; checked against scipy's binomial, tests/midp_reference.py), mid-p at the
effective size for a clustered rate and for the mean preference probability."""

from __future__ import annotations

import numpy as np
import pytest

from evalcore.judging import Judgment, audit_report, read_pairs
from evalcore.judging.audit import verbosity_report
from tests.midp_reference import clustered_effective, midp, midp_effective, symmetric_se


@pytest.mark.parametrize("name, count", [("mtbench_human_majority.json", 200), ("llmbar_natural.json", 100)])
def test_human_labelled_sets_are_readable(shared_data, name, count):
    pairs = read_pairs(shared_data / "judges" / name)
    assert len(pairs) == count and {p.label for p in pairs} == {1, 2}
    assert all(p.question.strip() and p.answer_1.strip() and p.answer_2.strip() for p in pairs)


def test_audit_agreement_has_midp_and_kappa_intervals(shared_data):
    pairs = read_pairs(shared_data / "judges" / "mtbench_human_majority.json")[:40]
    labels = {p.pair_id: p.label for p in pairs}
    judgments = []
    for k, p in enumerate(pairs):  # a judge right on 3 of 4 pairs, in both orders
        prefers_1 = (p.label == 1) == (k % 4 != 3)
        judgments += [Judgment(p.pair_id, "ab", "x", "ok", p_first=0.9 if prefers_1 else 0.1),
                      Judgment(p.pair_id, "ba", "x", "ok", p_first=0.1 if prefers_1 else 0.9)]  # fmt: skip
    report = audit_report(judgments, labels, rounds=200, seed=0)
    accuracy = report["accuracy_swap_average"]
    assert accuracy["value"] == 0.75 and accuracy["interval"] == "mid-p" and accuracy["n"] == 40
    # 30 of 40: mid-p 95% is (0.5995, 0.8655) (Wilson's was (0.5981, 0.8577)).
    assert (accuracy["ci_low"], accuracy["ci_high"]) == pytest.approx(midp(30, 40), abs=1e-4)
    assert accuracy["ci_low"] == pytest.approx(0.59946, abs=1e-4) and accuracy["ci_high"] == pytest.approx(0.86546, abs=1e-4)
    assert accuracy["stderr"] == pytest.approx(symmetric_se(0.75, *midp(30, 40)), abs=1e-4)
    kappa = report["kappa"]
    assert kappa["interval"] == "bootstrap" and kappa["ci_low"] < kappa["value"] < kappa["ci_high"]


def _judgments(p_firsts: list[tuple[float, float]]) -> list[Judgment]:
    """Both orders of pairs 0, 1, ...: (p_first in the ab order, p_first in the ba order)."""
    return [j for k, (ab, ba) in enumerate(p_firsts)
            for j in (Judgment(k, "ab", "x", "ok", p_first=ab), Judgment(k, "ba", "x", "ok", p_first=ba))]  # fmt: skip


def test_a_judge_wrong_on_every_pair_has_an_interval_above_zero():
    """0 of 4 right: the mid-p upper bound solves P(X = 0) / 2 = (1 - p)^4 / 2 = 0.025, p = 1 - 0.05^(1/4) =
    0.5271, not a point at 0."""
    report = audit_report(_judgments([(0.2, 0.8)] * 4), {k: 1 for k in range(4)}, rounds=50, seed=0)
    accuracy = report["accuracy_swap_average"]
    assert accuracy["value"] == 0.0 and accuracy["n"] == 4 and accuracy["interval"] == "mid-p"
    assert accuracy["ci_low"] == 0.0 and accuracy["ci_high"] == pytest.approx(midp(0, 4)[1], abs=1e-4)
    assert accuracy["ci_high"] == pytest.approx(1 - 0.05**0.25, abs=1e-4) and accuracy["ci_high"] > 0
    assert accuracy["stderr"] is None  # [0, 0.53] about 0 has no symmetric standard error


def test_first_position_rate_counts_a_pair_as_one_cluster():
    """A judge that picks the first-shown answer in both orders of 3 pairs and the second in both orders of
    3 others: 6 of 12 judgments, but the two of a pair agree, so the interval is taken at n / deff with deff
    the CR1 design effect: 6 / 5 * 6 * 1 / 144 over (12 * 0.25 / 11) / 12 = 2.2, then over (t_5 / z)^2 (a
    design effect estimated from 6 clusters is itself uncertain)."""
    report = audit_report(_judgments([(0.9, 0.9)] * 3 + [(0.1, 0.1)] * 3), {k: 1 for k in range(6)}, rounds=50, seed=0)
    first = report["first_position_rate"]
    assert first["value"] == 0.5 and first["n"] == 12 and first["interval"] == "mid-p-effective"
    effective = clustered_effective([1, 1] * 3 + [0, 0] * 3, [k // 2 for k in range(12)])
    assert effective == pytest.approx(12 / 2.2 / (2.570582 / 1.959964) ** 2, rel=1e-4)
    assert (first["ci_low"], first["ci_high"]) == pytest.approx(midp_effective(0.5 * effective, effective), abs=1e-4)
    assert first["ci_high"] - first["ci_low"] > np.subtract(*midp(6, 12)[::-1])  # wider than 12 independent ones


def test_mean_preference_probability_is_a_bounded_mean():
    """Swap averages 0, 0.5 (x4), 1 for the padded copy: mean 0.5, sample variance 0.1, below half the 0.25 a
    [0, 1] variable with that mean can have, so the ratio is held at its floor, 0.75 under 10 values: the
    mid-p interval at 6 / 0.75 = 8, 4 of 8 (exact: a whole count)."""
    # padded preference = 1 - swap; swap = 0.5 + (ab - ba) / 2
    report = verbosity_report(_judgments([(0.0, 1.0)] + [(0.5, 0.5)] * 4 + [(1.0, 0.0)]))
    mean = report["prefers_padded"]["mean_probability"]
    assert mean["value"] == 0.5 and mean["n"] == 6 and mean["interval"] == "mid-p-effective"
    assert (mean["ci_low"], mean["ci_high"]) == pytest.approx(midp(4, 8), abs=1e-4)
    never = verbosity_report(_judgments([(0.9, 0.1)] * 5))["prefers_padded"]  # the padded copy never preferred
    assert never["share"]["value"] == 0.0 and never["share"]["n"] == 5 and never["share"]["ci_high"] == pytest.approx(midp(0, 5)[1])
    assert never["mean_probability"]["value"] == pytest.approx(0.1) and never["mean_probability"]["ci_high"] > 0.1
