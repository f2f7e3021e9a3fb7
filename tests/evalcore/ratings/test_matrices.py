"""Win matrices: observed rates agree with the BT prediction on simulated data."""

from __future__ import annotations

import numpy as np

from evalcore.ratings import aggregate, fit_bradley_terry, simulate_battles
from evalcore.ratings.matrices import predicted_win_matrix, win_matrix


def test_observed_and_predicted_win_matrices():
    true = np.array([200.0, 0.0, -200.0])
    counts = aggregate(simulate_battles(true, 30_000, rng=np.random.default_rng(0), tie_rate=0.1))
    observed = win_matrix(counts)
    assert np.isnan(observed.win_rate[0, 0])
    np.testing.assert_allclose(observed.win_rate + observed.win_rate.T, np.where(np.eye(3), np.nan, 1.0))
    assert observed.battles.sum() / 2 == counts.total.sum()
    predicted = predicted_win_matrix(fit_bradley_terry(counts))
    np.testing.assert_allclose(np.diag(predicted), 0.5)
    off = ~np.eye(3, dtype=bool)
    np.testing.assert_allclose(predicted[off], observed.win_rate[off], atol=0.02)
    # 200 Elo points: 1 / (1 + 10 ** -0.5) = 0.76 before ties pull it towards 0.5.
    assert 0.70 < predicted[0, 1] < 0.77


def test_unmet_pairs_are_nan():
    counts = aggregate(simulate_battles(np.zeros(3), 50, rng=np.random.default_rng(1), pair_weights=np.array(
        [[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float)))  # fmt: skip
    observed = win_matrix(counts, ties="drop")
    assert np.isnan(observed.win_rate[0, 2]) and observed.battles[0, 2] == 0
