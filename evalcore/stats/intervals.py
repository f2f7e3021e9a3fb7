"""Intervals for means and for paired differences, and clustered standard errors.

All functions take plain arrays and return frozen dataclasses. Bootstrap functions take an ``rng``
(``numpy.random.Generator``) and resample with multinomial weights, vectorised over rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri, stdtrit

from evalcore.boundary.validation import check_integer, check_level

_CHUNK_CELLS = 4_000_000  # rounds x items per vectorised chunk (~32 MB of float64)


@dataclass(frozen=True)
class MeanInterval:
    """A mean with its standard error and a two-sided interval.

    Attributes
    ----------
    mean, se, ci_low, ci_high : float
    n : int
        Number of values.
    level : float
    method : str
        ``"normal"`` (t-based for n < 30... see :func:`mean_interval`) or ``"bootstrap"``.
    """

    mean: float
    se: float
    ci_low: float
    ci_high: float
    n: int
    level: float
    method: str


@dataclass(frozen=True)
class PairedDifference:
    """Mean difference ``a - b`` over the same items, with a paired bootstrap interval.

    Attributes
    ----------
    difference : float
        ``mean(a) - mean(b)``.
    se : float
        Bootstrap standard deviation of the difference.
    ci_low, ci_high : float
        Percentile interval.
    p_value : float
        Two-sided bootstrap p-value for "no difference" (share of rounds on the other side of zero,
        doubled, at least ``1 / rounds``).
    n : int
        Items (or clusters when resampling clusters).
    rounds : int
    level : float
    """

    difference: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    rounds: int
    level: float


@dataclass(frozen=True)
class ClusteredSE:
    """Standard error of a mean when items come in clusters (questions sharing a passage or template).

    Attributes
    ----------
    mean : float
    se_naive : float
        ``sd / sqrt(n)``, as if items were independent.
    se_clustered : float
        Cluster-robust (CR1) standard error: ``sqrt(G / (G - 1) * sum_g (sum_{i in g} (y_i - mean))^2) / n``.
    n, n_clusters : int
    design_effect : float
        ``(se_clustered / se_naive) ** 2``.
    """

    mean: float
    se_naive: float
    se_clustered: float
    n: int
    n_clusters: int
    design_effect: float


def _as_1d(values, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _bootstrap_means(values: np.ndarray, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``rounds`` resamples of ``values`` (shape (n,)), shape (rounds,)."""
    n = values.shape[0]
    out = np.empty(rounds)
    step = max(1, _CHUNK_CELLS // n)
    uniform = np.full(n, 1.0 / n)
    for start in range(0, rounds, step):
        size = min(step, rounds - start)
        weights = rng.multinomial(n, uniform, size=size)
        out[start : start + size] = weights @ values / n
    return out


def mean_interval(
    values,
    *,
    level: float = 0.95,
    method: str = "normal",
    rounds: int = 1000,
    rng: np.random.Generator | None = None,
) -> MeanInterval:
    """Mean of ``values`` (shape (n,)) with a normal, percentile-bootstrap or Wilson interval.

    The normal interval uses Student's t quantile with n - 1 degrees of freedom (close to z for large n).
    ``"wilson"`` is the Wilson score interval for a proportion (values 0 or 1): unlike the normal one it
    does not collapse to a point when every item is right or every item is wrong (0 of 4 correct gives
    [0, 0.49], not [0, 0]). ``se`` is sd(ddof=1)/sqrt(n) whatever the method.
    """
    x = _as_1d(values, "values")
    check_level(level)
    n = x.size
    mean = float(x.mean())
    se = float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    if method == "normal":
        q = stdtrit(max(n - 1, 1), 0.5 + level / 2)
        return MeanInterval(mean, se, mean - q * se, mean + q * se, n, level, "normal")
    if method == "bootstrap":
        if rng is None:
            raise ValueError("rng is required for a bootstrap interval")
        rounds = check_integer(rounds, "rounds", minimum=1)
        means = _bootstrap_means(x, rounds, rng)
        lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
        return MeanInterval(mean, float(means.std(ddof=1)), float(lo), float(hi), n, level, "bootstrap")
    if method == "wilson":
        if not np.isin(x, (0.0, 1.0)).all():
            raise ValueError("a Wilson interval needs 0/1 values (a proportion); use 'normal' or 'bootstrap'")
        z = float(ndtri(0.5 + level / 2))
        denominator = 1 + z * z / n
        centre = (mean + z * z / (2 * n)) / denominator
        half = z * np.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / denominator
        # The bounds contain the observed rate exactly (0 of n gives a lower bound of 0, not 5.6e-17).
        low, high = min(max(0.0, centre - half), mean), max(min(1.0, centre + half), mean)
        return MeanInterval(mean, se, float(low), float(high), n, level, "wilson")
    raise ValueError(f"unknown method {method!r}; expected 'normal', 'bootstrap' or 'wilson'")


def paired_bootstrap_difference(
    scores_a,
    scores_b,
    *,
    rng: np.random.Generator,
    rounds: int = 1000,
    level: float = 0.95,
    clusters=None,
) -> PairedDifference:
    """Paired bootstrap of ``mean(a) - mean(b)`` where ``a[i]`` and ``b[i]`` score the same item.

    Parameters
    ----------
    scores_a, scores_b : array_like, shape (n,)
    rng : numpy Generator
    rounds : int
    level : float
    clusters : array_like, shape (n,), optional
        Cluster labels; when given, whole clusters are resampled (items of a passage stay together).
    """
    a = _as_1d(scores_a, "scores_a")
    b = _as_1d(scores_b, "scores_b")
    if a.shape != b.shape:
        raise ValueError(f"scores_a and scores_b differ in length: {a.size} vs {b.size}")
    check_level(level)
    rounds = check_integer(rounds, "rounds", minimum=1)
    d = a - b
    if clusters is None:
        units, sizes = d, np.ones_like(d)
    else:
        labels = np.asarray(clusters)
        if labels.shape != d.shape:
            raise ValueError("clusters must have one label per item")
        _, inv = np.unique(labels, return_inverse=True)
        units = np.bincount(inv, d)
        sizes = np.bincount(inv).astype(np.float64)
    g = units.shape[0]
    boots = np.empty(rounds)
    step = max(1, _CHUNK_CELLS // g)
    uniform = np.full(g, 1.0 / g)
    for start in range(0, rounds, step):
        size = min(step, rounds - start)
        w = rng.multinomial(g, uniform, size=size).astype(np.float64)
        boots[start : start + size] = (w @ units) / (w @ sizes)
    diff = float(d.mean())
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    below = np.mean(boots <= 0.0)
    above = np.mean(boots >= 0.0)
    p = float(min(1.0, max(2 * min(below, above), 1.0 / rounds)))
    return PairedDifference(diff, float(boots.std(ddof=1)), float(lo), float(hi), p, g, rounds, level)


def subset_difference(values, keep, *, rng: np.random.Generator, rounds: int = 1000,
                      level: float = 0.95) -> PairedDifference:  # fmt: skip
    """Paired bootstrap of ``mean(values[keep]) - mean(values)``: a subset's score against the full score.

    Both means are taken over the same resampled items in each round (the subset is the resampled
    items that are kept), so the interval reflects that the two scores share most of their items.
    Used for clean-subset scores: ``keep`` marks the items a contamination scan did not flag.

    Parameters
    ----------
    values : array_like, shape (n,)
        Per-item scores.
    keep : array_like, shape (n,), bool
        The subset; at least one item.
    rng : numpy Generator
    rounds : int
        Rounds in which no kept item was drawn are drawn again (they have no subset mean).
    level : float

    Returns
    -------
    PairedDifference
        ``n`` is the number of items, ``difference`` the subset mean minus the full mean.
    """
    x = _as_1d(values, "values")
    mask = np.asarray(keep, dtype=bool)
    if mask.shape != x.shape:
        raise ValueError(f"keep must have one flag per value: {mask.size} vs {x.size}")
    if not mask.any():
        raise ValueError("keep selects no item: the subset has no score")
    check_level(level)
    rounds = check_integer(rounds, "rounds", minimum=1)
    n = x.size
    kept = mask.astype(np.float64)
    boots = np.empty(rounds)
    filled = 0
    step = max(1, _CHUNK_CELLS // n)
    uniform = np.full(n, 1.0 / n)
    while filled < rounds:
        w = rng.multinomial(n, uniform, size=min(step, rounds - filled)).astype(np.float64)
        w = w[w @ kept > 0]
        size = min(w.shape[0], rounds - filled)
        w = w[:size]
        boots[filled : filled + size] = (w @ (x * kept)) / (w @ kept) - (w @ x) / n
        filled += size
    diff = float(x[mask].mean() - x.mean())
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    below = np.mean(boots <= 0.0)
    above = np.mean(boots >= 0.0)
    p = float(min(1.0, max(2 * min(below, above), 1.0 / rounds)))
    return PairedDifference(diff, float(boots.std(ddof=1)) if rounds > 1 else 0.0, float(lo), float(hi), p, n,
                            rounds, level)  # fmt: skip


def clustered_standard_error(values, clusters) -> ClusteredSE:
    """Naive and cluster-robust standard errors of ``mean(values)``.

    Parameters
    ----------
    values : array_like, shape (n,)
    clusters : array_like, shape (n,)
        Cluster label of each value (e.g. the passage a question belongs to).
    """
    y = _as_1d(values, "values")
    labels = np.asarray(clusters)
    if labels.shape != y.shape:
        raise ValueError(f"clusters must have one label per value ({y.size}), got shape {labels.shape}")
    n = y.size
    _, inv = np.unique(labels, return_inverse=True)
    g = int(inv.max()) + 1
    if g < 2:
        raise ValueError("need at least two clusters for a clustered standard error")
    mean = float(y.mean())
    resid_sums = np.bincount(inv, y - mean)
    se_c = float(np.sqrt(g / (g - 1) * np.sum(resid_sums**2)) / n)
    se_n = float(y.std(ddof=1) / np.sqrt(n))
    return ClusteredSE(mean, se_n, se_c, n, g, (se_c / se_n) ** 2 if se_n > 0 else float("nan"))

