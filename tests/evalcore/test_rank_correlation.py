"""Spearman's rho pinned against scipy.stats.spearmanr, with a bootstrap interval over items."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from evalcore.stats.rank_correlation import spearman, spearman_interval


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, size=30).astype(float)
    y = x + rng.normal(size=30)
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_interval_contains_the_estimate_and_is_reproducible():
    x = [1200, 1150, 1100, 1000, 980, 900]
    y = [60, 55, 50, 52, 30, 20]
    r = spearman_interval(x, y, rounds=500, seed=4)
    assert r.value == pytest.approx(spearmanr(x, y).statistic)
    assert r.ci_low <= r.value <= r.ci_high <= 1.0
    assert spearman_interval(x, y, rounds=500, seed=4) == r
    few = spearman_interval([1, 2], [2, 1])
    assert few.value is None and few.n == 2


@pytest.mark.parametrize(("x", "y", "message"), [([1, 2, 3], [1, 2], "one length"), ([1, 2, np.nan], [1, 2, 3], "finite")])
def test_bad_input_is_refused(x, y, message):
    with pytest.raises(ValueError, match=message):
        spearman_interval(x, y)
