"""evalcore.stats.estimates against closed forms, scipy's distributions, and simulation.

Expected bounds are solved here from scipy.stats (binomial tails, Student's t) with brentq, never by
calling the code under test; the simulations are small and seeded (the full coverage table is
bench/intervals.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binom
from scipy.stats import t as student_t

from evalcore.engine.metrics import group_value, mean_value
from evalcore.stats import estimates as est
from evalcore.stats.intervals import clustered_standard_error


def midp_reference(x: int, n: int, level: float = 0.95) -> tuple[float, float]:
    tail = (1 - level) / 2
    low = 0.0 if x == 0 else brentq(lambda p: binom.sf(x, n, p) + binom.pmf(x, n, p) / 2 - tail, 1e-14, 1 - 1e-14)
    high = 1.0 if x == n else brentq(lambda p: binom.cdf(x - 1, n, p) + binom.pmf(x, n, p) / 2 - tail, 1e-14, 1 - 1e-14)
    return low, high


@pytest.mark.parametrize("x,n", [(0, 4), (1, 4), (2, 4), (4, 4), (0, 10), (1, 10), (7, 30), (34, 114), (81, 263),
                                 (500, 1000), (9990, 10000)])  # fmt: skip
def test_mid_p_matches_the_binomial_test_it_inverts(x, n):
    e = est.proportion(x, n)
    assert (e.ci_low, e.ci_high) == pytest.approx(midp_reference(x, n), abs=1e-4)
    assert e.method == "mid-p" and e.n == n and e.effective_n == n and e.ci_low <= x / n <= e.ci_high


def test_mid_p_closed_forms_at_the_ends_and_other_levels():
    for n in (1, 4, 10, 100):
        # 0 of n: P(X = 0) / 2 = (1 - p)^n / 2 = alpha / 2  ->  p = 1 - alpha^(1/n)
        assert est.proportion(0, n).ci_high == pytest.approx(1 - 0.05 ** (1 / n), abs=1e-4)
        assert est.proportion(n, n).ci_low == pytest.approx(0.05 ** (1 / n), abs=1e-4)
    assert est.midp_bounds(3, 20, level=0.9) == pytest.approx(midp_reference(3, 20, 0.9), abs=1e-4)
    lows, highs = est.midp_bounds(np.array([0, 5, 10]), 10)
    assert highs[0] == pytest.approx(1 - 0.05**0.1) and lows[2] == pytest.approx(0.05**0.1)


def test_mid_p_at_0_of_4_is_not_a_point_and_has_no_standard_error():
    e = est.proportion(0, 4)
    assert e.value == 0.0 and e.ci_low == 0.0 and e.ci_high == pytest.approx(0.5271, abs=1e-4)
    assert e.se is None  # lopsided: value +- 1.96 se could not be this interval
    mid = est.proportion(57, 114)
    assert mid.se == pytest.approx((mid.ci_high - mid.ci_low) / 2 / 1.959964, rel=1e-4)
    plug_in = math.sqrt(0.25 / 114)
    assert mid.se == pytest.approx(plug_in, rel=0.03)  # at a symmetric interval, close to the textbook error


def test_hostile_inputs_are_clear_errors():
    for bad in [(5, 4), (-1, 4), (1, 0), (True, 4), (1, 2.5), (float("nan"), 4)]:
        with pytest.raises(ValueError):
            est.proportion(*bad)
    for values in ([], [float("nan")], [[0, 1]], [0.5, 2.0]):
        with pytest.raises(ValueError):
            est.bounded_mean(values)
    with pytest.raises(ValueError):
        est.bounded_mean([0, 1], low=1, high=0)
    with pytest.raises(ValueError, match="clusters"):
        est.bounded_mean([0, 1, 1], clusters=["a", "b"])
    with pytest.raises(ValueError, match="effective"):
        est.pooled([est.t_mean([1.0, 2.0])])
    with pytest.raises(ValueError, match="weights"):
        est.mover([est.proportion(1, 2)], weights=[-1])
    with pytest.raises(ValueError):
        est.midp_bounds(1, 2, level=1.5)


def test_bounded_means_use_the_effective_size():
    binary = est.bounded_mean([1, 0, 0, 1, 1])
    assert binary.method == "mid-p" and (binary.ci_low, binary.ci_high) == pytest.approx(midp_reference(3, 5), abs=1e-4)
    values = np.array([0.0, 0.5, 1.0, 0.5, 1.0, 0.5])
    m, s2 = values.mean(), values.var(ddof=1)
    effective = len(values) / min(1.0, max(0.75, s2 / (m * (1 - m))))  # under 10 values: floor 0.75
    e = est.bounded_mean(values)
    assert e.method == "mid-p-effective" and e.effective_n == pytest.approx(effective)
    low, high = est.midp_bounds(m * effective, effective)
    assert (e.ci_low, e.ci_high) == pytest.approx((low, high))
    scaled = est.bounded_mean(values * 10, low=0, high=10)  # the same on a 0..10 scale
    assert (scaled.ci_low, scaled.ci_high) == pytest.approx((10 * low, 10 * high))
    same = est.bounded_mean([0.4] * 12)  # no spread observed: trust at most twice the size
    assert same.effective_n == 24 and same.ci_low < 0.4 < same.ci_high
    few = est.bounded_mean([0.4, 0.4, 0.4, 0.4])  # under 10 values: at most 4 / 0.75
    assert few.effective_n == pytest.approx(4 / 0.75)


def test_clusters_widen_by_the_design_effect():
    rng = np.random.default_rng(3)
    passage = rng.random(30) < 0.5  # 30 passages of 5 questions, answers that follow the passage
    values = np.repeat(passage, 5).astype(float)
    flips = rng.random(150) < 0.1
    values[flips] = 1 - values[flips]
    clusters = np.repeat(np.arange(30), 5)
    deff, g = est.cluster_design_effect(values, clusters)
    reference = clustered_standard_error(values, clusters)
    assert g == 30 and deff == pytest.approx(max(1.0, reference.design_effect), rel=1e-4) and deff > 2
    clustered, plain = est.bounded_mean(values, clusters=clusters), est.bounded_mean(values)
    # The design effect, then Student's t with 29 degrees of freedom over the normal, squared.
    widen = (student_t.ppf(0.975, 29) / 1.959963984540054) ** 2
    assert clustered.method == "mid-p-effective" and clustered.effective_n == pytest.approx(150 / deff / widen)
    assert clustered.ci_high - clustered.ci_low > 1.4 * (plain.ci_high - plain.ci_low)
    t_clustered = est.t_mean(values, clusters=clusters)
    q = student_t.ppf(0.975, 29)
    assert t_clustered.method == "t-clustered"
    assert t_clustered.ci_high - t_clustered.value == pytest.approx(q * reference.se_clustered, rel=1e-4)


def test_t_interval_matches_scipy_and_its_standard_error_is_the_textbook_one():
    values = [2.0, 3.5, 1.0, 7.0, 4.5]
    e = est.t_mean(values)
    low, high = student_t.interval(0.95, 4, loc=np.mean(values), scale=np.std(values, ddof=1) / math.sqrt(5))
    assert (e.ci_low, e.ci_high) == pytest.approx((low, high)) and e.method == "t"
    assert e.se == pytest.approx(np.std(values, ddof=1) / math.sqrt(5))
    clipped = est.t_mean([0.0, 0.0, 0.1], bounds=(0.0, 1.0))
    assert clipped.ci_low == 0.0 and clipped.se is None  # cut at a bound: lopsided, no standard error


def test_pooled_micro_average_of_proportions_is_the_pooled_count():
    parts = [est.proportion(0, 4), est.proportion(15, 20), est.proportion(21, 30)]
    micro = est.pooled(parts, [4, 20, 30])
    assert micro.value == pytest.approx(36 / 54) and micro.effective_n == pytest.approx(54)
    assert (micro.ci_low, micro.ci_high) == pytest.approx(midp_reference(36, 54), abs=1e-4)
    macro = est.pooled(parts)  # equal weights: effective size 1 / sum((1/3)^2 / n_i)
    assert macro.effective_n == pytest.approx(1 / sum(1 / 9 / n for n in (4, 20, 30)))
    assert macro.ci_high > macro.value > macro.ci_low > 0


def test_a_macro_average_of_very_different_sizes_takes_the_hull_with_mover():
    small, big = est.proportion(2, 4), est.proportion(20, 1000)
    hull = est.macro([small] + [big] * 9)
    pool, other = est.pooled([small] + [big] * 9), est.mover([small] + [big] * 9)
    assert hull.method == "pooled-mid-p+mover"
    assert (hull.ci_low, hull.ci_high) == (min(pool.ci_low, other.ci_low), max(pool.ci_high, other.ci_high))
    alike = est.macro([est.proportion(3, 20), est.proportion(30, 100)])  # sizes within 10x: pooled
    assert alike.method == "pooled-mid-p"


def test_mover_combines_the_parts_intervals():
    a, b = est.proportion(0, 4), est.proportion(34, 114)
    avg = est.mover([a, b])
    assert avg.value == pytest.approx(34 / 114 / 2)
    assert avg.ci_low == pytest.approx(avg.value - math.hypot(0.0, b.value - b.ci_low) / 2)
    assert avg.ci_high == pytest.approx(avg.value + math.hypot(a.ci_high, b.ci_high - b.value) / 2)
    assert avg.ci_high - avg.ci_low > 0.26  # the plug-in average of issue 49 gave 0.09
    assert est.mover([a, est.Estimate(0.5, None, None, 3, "t")]).ci_low is None  # no interval in, none out


def test_mapping_clips_the_interval_as_the_score():
    raw = est.proportion(34, 114)
    norm = est.mapped(raw, 100 / 0.75, -25 / 0.75, bounds=(0.0, 100.0))
    assert norm.value == pytest.approx((34 / 114 - 0.25) / 0.75 * 100)
    assert norm.ci_low == 0.0 and norm.ci_high == pytest.approx((raw.ci_high - 0.25) / 0.75 * 100)
    below = est.mapped(est.proportion(20, 114), 100 / 0.75, -25 / 0.75, bounds=(0.0, 100.0))
    assert below.value == 0.0 and below.ci_low == 0.0 and below.ci_high > 0  # 17.5%, the interval reaches 25.6%
    far = est.mapped(est.proportion(10, 114), 100 / 0.75, -25 / 0.75, bounds=(0.0, 100.0))
    assert far.ci_high == 0.0  # wholly below guessing: 0, as the score (the raw score beside it says how far)


def test_engine_metrics_and_groups_use_these_intervals():
    v = mean_value([0, 0, 0, 0])
    assert (v.ci_low, v.ci_high, v.stderr, v.interval) == (0.0, pytest.approx(1 - 0.05**0.25), None, "mid-p")
    passk = mean_value([0.0, 0.2, 0.0, 1.0], metric="pass@10")
    assert passk.interval == "mid-p-effective"
    big, small = mean_value([1] * 90 + [0] * 10), mean_value([0] * 4)
    micro = group_value([big, small], weight_by_size=True)
    assert micro.interval == "pooled-mid-p" and (micro.ci_low, micro.ci_high) == pytest.approx(midp_reference(90, 104), abs=1e-4)
    ppl = mean_value([3.0, 5.0, 4.0], metric="score")
    mixed = group_value([big, ppl], weight_by_size=False)
    assert mixed.interval == "mover"


@pytest.mark.parametrize("n,p", [(10, 0.3), (30, 0.05), (200, 0.5)])
def test_coverage_by_simulation_is_near_nominal(n, p):
    # Exact coverage of the mid-p interval: sum the binomial probabilities of the counts whose interval holds p.
    lows, highs = est.midp_bounds(np.arange(n + 1), n)
    coverage = binom.pmf(np.arange(n + 1), n, p)[(lows <= p) & (p <= highs)].sum()
    assert 0.93 <= coverage <= 0.99
    # Bounded means (a judge's win / tie / loss), simulated: at least 0.93 here, where Student's t gives less.
    rng = np.random.default_rng(7)
    draws = rng.choice([0.0, 0.5, 1.0], p=[0.5, 0.2, 0.3], size=(400, n))
    truth = 0.2 * 0.5 + 0.3
    hits = 0
    for row in draws:
        e = est.bounded_mean(row)
        hits += e.ci_low <= truth <= e.ci_high
    assert hits / 400 >= 0.91  # Monte Carlo error 0.011 at 400 rounds
