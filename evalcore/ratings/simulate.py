"""Simulated votes from known ratings: for tests, coverage studies and benchmarks."""

from __future__ import annotations

import numpy as np

from evalcore.ratings.battles import A_WINS, B_WINS, BOTHBAD, TIE, Battles
from evalcore.ratings.result import ELO_PER_LOGIT


def simulate_battles(
    true_ratings: np.ndarray,
    n: int,
    *,
    rng: np.random.Generator,
    models: tuple[str, ...] | None = None,
    pair_weights: np.ndarray | None = None,
    tie_rate: float = 0.0,
    bothbad_share: float = 0.0,
) -> Battles:
    """Draw ``n`` battles under the Bradley-Terry model on the Elo scale.

    Parameters
    ----------
    true_ratings : ndarray, shape (m,)
        Elo-scale ratings; ``P(a beats b | decisive) = 1 / (1 + 10 ** ((r_b - r_a) / 400))``.
    n : int
    rng : numpy Generator
    models : tuple of str, shape (m,), optional
        Names; default ``m0, m1, ...`` (zero-padded so alphabetical order is index order).
    pair_weights : ndarray, shape (m, m), optional
        Relative frequency of each ordered pair (diagonal ignored); default uniform.
    tie_rate : float
        Probability that a battle is a tie (of either kind), independent of the pair.
    bothbad_share : float
        Share of ties recorded as "tie (bothbad)".

    Returns
    -------
    Battles
        With ``tstamp`` = 0, 1, ..., n - 1 (the order drawn).
    """
    r = np.asarray(true_ratings, dtype=np.float64)
    m = r.shape[0]
    if models is None:
        width = len(str(m - 1))
        models = tuple(f"m{k:0{width}d}" for k in range(m))
    if pair_weights is None:
        pair_weights = np.ones((m, m))
    w = np.array(pair_weights, dtype=np.float64)
    np.fill_diagonal(w, 0.0)
    flat = w.ravel() / w.sum()
    pair = rng.choice(m * m, size=n, p=flat)
    a = (pair // m).astype(np.int32)
    b = (pair % m).astype(np.int32)
    p_a = 1.0 / (1.0 + np.exp(-(r[a] - r[b]) / ELO_PER_LOGIT))
    u = rng.random(n)
    outcome = np.where(u < p_a, A_WINS, B_WINS).astype(np.int8)
    if tie_rate > 0:
        tie = rng.random(n) < tie_rate
        bothbad = rng.random(n) < bothbad_share
        outcome[tie] = np.where(bothbad[tie], BOTHBAD, TIE)
    return Battles(tuple(models), a, b, outcome, np.arange(n, dtype=np.float64))
