"""evalcore.stats against closed forms and the simulations pinned in issue 3.

pass@k values: Chen et al. 2021 estimator, ``1 - C(n-c, k) / C(n, k)`` (n=10, c=3: 0.3, 0.9167, 1.0 for
k = 1, 5, 8; n=200, c=10, k=100: 0.9992). Expected maxima of standard normals: 1/sqrt(pi) for K=2,
1.16296 for K=5, 1.53875 for K=10 (standard order-statistics tables).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import comb

from evalcore.stats import (
    best_of_k_inflation,
    clustered_standard_error,
    expected_max_standard_normal,
    mean_interval,
    paired_bootstrap_difference,
    pass_at_k,
    power_for_sample_size,
    required_sample_size,
)


def test_pass_at_k_pinned_values():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(0.9167, abs=5e-5)
    assert pass_at_k(10, 3, 8) == 1.0
    assert pass_at_k(200, 10, 100) == pytest.approx(0.9992, abs=5e-5)
    assert pass_at_k(5, 0, 3) == 0.0


def test_pass_at_k_matches_binomial_form_and_vectorises():
    n = np.array([20, 20, 50, 7])
    c = np.array([0, 5, 49, 7])
    got = pass_at_k(n, c, 4)
    want = [1 - comb(nn - cc, 4, exact=True) / comb(nn, 4, exact=True) for nn, cc in zip(n, c)]
    np.testing.assert_allclose(got, want, atol=1e-4)
    with pytest.raises(ValueError, match="exceeds"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)


def _passage_data(rng, replicates):
    """200 passages x 5 questions; passage difficulty ~ Beta(2.74, 1.83), intra-passage correlation ~0.18."""
    p = rng.beta(2.74, 1.83, size=(replicates, 200))
    return (rng.random((replicates, 200, 5)) < p[..., None]).astype(float).reshape(replicates, 1000)


def test_clustered_standard_error_passages():
    """Issue 3: naive SE about 0.0156, clustered about 0.0194, true spread 0.0204."""
    clusters = np.repeat(np.arange(200), 5)
    data = _passage_data(np.random.default_rng(0), 2000)
    true_spread = data.mean(axis=1).std()
    assert true_spread == pytest.approx(0.0204, abs=0.001)
    one = clustered_standard_error(data[0], clusters)
    assert one.se_naive == pytest.approx(0.0156, abs=0.0005)
    assert one.se_clustered == pytest.approx(0.0194, abs=0.0005)
    assert one.n_clusters == 200 and one.design_effect > 1.3
    # On average the clustered SE tracks the truth; the naive one understates it by about a quarter.
    many = [clustered_standard_error(y, clusters) for y in data[:200]]
    assert np.mean([r.se_clustered for r in many]) == pytest.approx(true_spread, rel=0.05)
    assert np.mean([r.se_naive for r in many]) < 0.8 * true_spread
    with pytest.raises(ValueError, match="two clusters"):
        clustered_standard_error([1.0, 0.0], [1, 1])


def test_mean_interval_normal_and_bootstrap():
    rng = np.random.default_rng(1)
    x = rng.random(400) < 0.7
    normal = mean_interval(x)
    boot = mean_interval(x, method="bootstrap", rounds=2000, rng=rng)
    assert normal.mean == boot.mean == pytest.approx(x.mean())
    assert normal.se == pytest.approx(math.sqrt(x.mean() * (1 - x.mean()) / 399), rel=1e-9)
    assert boot.ci_low == pytest.approx(normal.ci_low, abs=0.01)
    assert boot.ci_high == pytest.approx(normal.ci_high, abs=0.01)
    with pytest.raises(ValueError, match="rng is required"):
        mean_interval(x, method="bootstrap")
    with pytest.raises(ValueError, match="empty"):
        mean_interval([])


def test_mean_interval_coverage():
    rng = np.random.default_rng(2)
    data = rng.random((400, 300)) < 0.3
    hits = sum(mean_interval(row).ci_low <= 0.3 <= mean_interval(row).ci_high for row in data)
    assert 360 <= hits <= 400  # 95% nominal: 380 expected


def test_paired_bootstrap_difference_uses_the_pairing():
    rng = np.random.default_rng(3)
    difficulty = rng.random(2000)
    a = (rng.random(2000) < 0.2 + 0.7 * difficulty).astype(float)
    b = (rng.random(2000) < 0.15 + 0.7 * difficulty).astype(float)
    res = paired_bootstrap_difference(a, b, rng=rng, rounds=2000)
    assert res.difference == pytest.approx(a.mean() - b.mean())
    assert res.ci_low < res.difference < res.ci_high
    assert res.se == pytest.approx(np.std(a - b, ddof=1) / math.sqrt(2000), rel=0.1)
    unpaired_se = math.sqrt(a.var() / 2000 + b.var() / 2000)
    assert res.se < unpaired_se  # positively correlated scores: pairing narrows the interval
    same = paired_bootstrap_difference(a, a, rng=rng, rounds=100)
    assert same.difference == 0 and same.p_value == 1.0
    clustered = paired_bootstrap_difference(a, b, rng=rng, rounds=500, clusters=np.repeat(np.arange(400), 5))
    assert clustered.n == 400
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap_difference(a, b[:10], rng=rng)


def test_sample_size_and_power():
    # Closed form: n = (1.95996 + 0.84162)^2 * 2 * 0.21 * (1 - 0.5) / 0.02^2 = 4121 items.
    size = required_sample_size(0.02, p=0.7, rho=0.5)
    assert size.n == 4121
    assert required_sample_size(0.02, p=0.7, rho=0.0).n == 8242  # 8241.4 rounded up
    assert power_for_sample_size(size.n, 0.02, p=0.7, rho=0.5) == pytest.approx(0.8, abs=0.002)
    assert power_for_sample_size(100, 0.0, sd=0.5) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="either sd"):
        required_sample_size(0.1)


def test_best_of_k_inflation():
    assert expected_max_standard_normal(1) == 0.0
    assert expected_max_standard_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert expected_max_standard_normal(5) == pytest.approx(1.16296, abs=1e-5)
    assert expected_max_standard_normal(10) == pytest.approx(1.53875, abs=1e-5)
    infl = best_of_k_inflation(10, p=0.5, n=1000)
    assert infl.se == pytest.approx(math.sqrt(0.25 / 1000))
    assert infl.expected_inflation == pytest.approx(1.53875 * infl.se, rel=1e-5)
    # Simulated check: best of 5 noisy measurements of the same true score.
    rng = np.random.default_rng(4)
    best = (rng.random((4000, 5, 500)) < 0.6).mean(axis=2).max(axis=1)
    assert best.mean() - 0.6 == pytest.approx(
        best_of_k_inflation(5, p=0.6, n=500).expected_inflation, rel=0.05
    )


def test_wilson_bounds_are_exact_at_zero_and_one():
    """0 of n has a lower bound of exactly 0 and n of n an upper bound of exactly 1 (rounding gave 5.6e-17)."""
    for n in (1, 7, 200, 1319):
        none = mean_interval(np.zeros(n), method="wilson")
        every = mean_interval(np.ones(n), method="wilson")
        assert none.ci_low == 0.0 and 0 < none.ci_high < 1
        assert every.ci_high == 1.0 and 0 < every.ci_low < 1


def test_subset_difference_matches_a_plain_bootstrap_loop():
    """``mean(x[keep]) - mean(x)`` resampled item by item, against a loop over the same draws."""
    from evalcore.stats import subset_difference

    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, size=40).astype(float)
    keep = rng.random(40) < 0.7
    result = subset_difference(x, keep, rng=np.random.default_rng(11), rounds=300)
    draws, reference = np.random.default_rng(11), []
    while len(reference) < 300:
        w = draws.multinomial(40, np.full(40, 1 / 40), size=300 - len(reference))
        for row in w:
            if row @ keep > 0 and len(reference) < 300:
                reference.append((row @ (x * keep)) / (row @ keep) - (row @ x) / 40)
    lo, hi = np.quantile(reference, [0.025, 0.975])
    assert result.difference == pytest.approx(x[keep].mean() - x.mean(), abs=1e-4)
    assert (result.ci_low, result.ci_high) == (pytest.approx(lo, abs=1e-4), pytest.approx(hi, abs=1e-4))
    assert result.n == 40 and result.rounds == 300
    same = subset_difference(x, np.ones(40, bool), rng=np.random.default_rng(0), rounds=50)
    assert (same.difference, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="no item"):
        subset_difference(x, np.zeros(40, bool), rng=rng)
    with pytest.raises(ValueError, match="one flag per value"):
        subset_difference(x, keep[:5], rng=rng)
