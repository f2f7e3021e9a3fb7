"""Spearman's rank correlation with a percentile bootstrap interval over items (e.g. models).

AlpacaEval's headline check of a judge: how well its scores rank models the way people do (arena
ratings). Few models make a wide interval; it is reported, never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_ITEMS = 3


@dataclass(frozen=True)
class RankCorrelation:
    """``value`` is Spearman's rho (None below 3 items); ``ci_low``/``ci_high`` the percentile
    bootstrap interval at ``level`` (None when fewer than half the resamples could be ranked)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    rounds: int
    level: float
    degenerate_rounds: int


def spearman(x, y) -> float | None:
    """Spearman's rho of two equal-length sequences (average ranks for ties); None if either is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"spearman needs two 1-d arrays of one length, got shapes {x.shape} and {y.shape}")
    from scipy.stats import rankdata  # here: scipy.stats costs 0.45 s to import in every process

    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return None if denom == 0 else float((rx * ry).sum() / denom)


def spearman_interval(x, y, *, rounds: int = 2000, level: float = 0.95, seed: int = 0) -> RankCorrelation:
    """Spearman's rho of ``x`` and ``y`` (shape (n,)) with a bootstrap over the n items.

    Resamples whose ranks are constant (every draw the same item) are skipped and counted.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("spearman_interval needs finite values")
    n = int(x.size)
    if n < MIN_ITEMS:
        return RankCorrelation(None, None, None, n, rounds, level, 0)
    value = spearman(x, y)
    rng = np.random.default_rng(seed)
    draws, degenerate = [], 0
    for _ in range(rounds):
        idx = rng.integers(0, n, size=n)
        rho = spearman(x[idx], y[idx])
        if rho is None:
            degenerate += 1
        else:
            draws.append(rho)
    if len(draws) < rounds / 2:
        return RankCorrelation(value, None, None, n, rounds, level, degenerate)
    tail = (1 - level) / 2
    low, high = np.quantile(np.array(draws), [tail, 1 - tail])
    return RankCorrelation(value, float(low), float(high), n, rounds, level, degenerate)
