"""Win matrices: observed win rates and battle counts per pair, and BT-predicted win probabilities."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalcore.ratings.counts import PairCounts, win_weights
from evalcore.ratings.result import RatingResult


@dataclass(frozen=True)
class WinMatrix:
    """Observed head-to-head results.

    Attributes
    ----------
    models : tuple of str, shape (m,)
    win_rate : ndarray, shape (m, m)
        ``win_rate[i, j]``: share of i's battles against j that i won (ties per the ties policy);
        NaN where the pair never met (and on the diagonal).
    battles : ndarray, shape (m, m)
        Battles between i and j counted under the ties policy (symmetric).
    ties : str
    """

    models: tuple[str, ...]
    win_rate: np.ndarray
    battles: np.ndarray
    ties: str


def win_matrix(counts: PairCounts, *, ties: str = "half") -> WinMatrix:
    """Observed win-rate and battle-count matrices from pair counts."""
    m = counts.n_models
    w_ij, w_ji = win_weights(counts.cells(), ties)
    wins = np.zeros((m, m))
    wins[counts.i, counts.j] = w_ij
    wins[counts.j, counts.i] = w_ji
    battles = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(battles > 0, wins / battles, np.nan)
    return WinMatrix(counts.models, rate, battles, ties)


def predicted_win_matrix(result: RatingResult, *, scale: float = 400.0, base: float = 10.0) -> np.ndarray:
    """Predicted ``P(i beats j)``, shape (m, m), from Elo-scale ratings: ``1 / (1 + base ** ((r_j - r_i) / scale))``.

    The diagonal is 0.5. Valid for Bradley-Terry and style-controlled ratings (and, loosely, for online Elo).
    """
    r = np.asarray(result.ratings, dtype=np.float64)
    return 1.0 / (1.0 + np.power(base, (r[None, :] - r[:, None]) / scale))
