"""Reference values for the intervals of ``evalcore.stats.estimates``, computed independently of it.

Lancaster's mid-p interval (Lancaster 1961; Agresti & Gottard 2007, "Nonconservative exact small-sample
inference for discrete data"): the lower bound solves ``P(X > x) + P(X = x) / 2 = alpha / 2`` and the upper
``P(X < x) + P(X = x) / 2 = alpha / 2`` for X ~ Binomial(n, p). Solved here with ``scipy.optimize.brentq``
over ``scipy.stats.binom`` (whole counts), or over ``scipy.stats.beta`` (the binomial tail written as a
Beta distribution function, for the fractional counts of an effective size), not by the library's bisection.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import beta, binom, norm

EPS = 1e-15


def midp(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Mid-p bounds for ``successes`` of ``n`` (whole numbers), from the binomial distribution itself."""
    tail = (1 - level) / 2
    low = (
        0.0
        if successes == 0
        else brentq(
            lambda p: binom.sf(successes, n, p) + binom.pmf(successes, n, p) / 2 - tail,
            EPS,
            1 - EPS,
            xtol=1e-15,
        )
    )
    high = (
        1.0
        if successes == n
        else brentq(
            lambda p: binom.cdf(successes - 1, n, p) + binom.pmf(successes, n, p) / 2 - tail,
            EPS,
            1 - EPS,
            xtol=1e-15,
        )
    )
    return low, high


def midp_effective(successes: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Mid-p bounds at a fractional size: ``P(X >= x) = Beta(x, n - x + 1).cdf(p)`` and ``P(X >= x + 1) =
    Beta(x + 1, n - x).cdf(p)``, the mid-p tail their mean."""
    tail = (1 - level) / 2

    def above(p):  # P(X > x) + P(X = x) / 2
        ge = 1.0 if successes <= 0 else beta.cdf(p, successes, n - successes + 1)
        gt = 0.0 if successes >= n else beta.cdf(p, successes + 1, n - successes)
        return (ge + gt) / 2

    low = 0.0 if successes <= 0 else brentq(lambda p: above(p) - tail, EPS, 1 - EPS, xtol=1e-15)
    high = 1.0 if successes >= n else brentq(lambda p: (1 - above(p)) - tail, EPS, 1 - EPS, xtol=1e-15)
    return low, high


def z(level: float = 0.95) -> float:
    return float(norm.ppf(0.5 + level / 2))


def symmetric_se(value: float, low: float, high: float, level: float = 0.95) -> float | None:
    """The standard error an interval implies, (high - low) / (2 z), or None where its arms differ by more
    than a tenth of its width (the rule of ``interval_se``)."""
    if abs((high - value) - (value - low)) > 0.1 * (high - low):
        return None
    return (high - low) / (2 * z(level))


def logit_interval(p: float, se: float, level: float = 0.95) -> tuple[float, float]:
    """The delta-method interval on the logit scale, mapped back: ``expit(logit(p) -+ z se / (p (1 - p)))``."""
    eta, half = math.log(p / (1 - p)), z(level) * se / (p * (1 - p))
    return 1 / (1 + math.exp(-(eta - half))), 1 / (1 + math.exp(-(eta + half)))


def clustered_effective(values, clusters, level: float = 0.95) -> float:
    """The effective size of a clustered mean of values in [0, 1] (the rule of ``bounded_mean``): n over the
    variance ratio (1 for 0/1 values, else s^2 / (m (1 - m)) held in [0.5, 1], [0.75, 1] under 10 values) and
    the CR1 design effect (Cameron & Miller 2015, at least 1), then over (t_{G-1} / z)^2 for G clusters."""
    from scipy.stats import t as student_t

    y, labels = np.asarray(values, dtype=float), np.asarray(clusters)
    n, groups = y.size, sorted(set(labels.tolist()))
    m = y.mean()
    binary = bool(np.all((y == 0) | (y == 1)))
    floor = 0.75 if n < 10 else 0.5
    ratio = 1.0 if binary or m * (1 - m) <= 0 else min(1.0, max(floor, y.var(ddof=1) / (m * (1 - m))))
    robust = len(groups) / (len(groups) - 1) * sum((y[labels == c] - m).sum() ** 2 for c in groups) / n**2
    naive = y.var(ddof=1) / n
    deff = max(1.0, robust / naive) if naive > 0 else 1.0
    widen = (student_t.ppf(0.5 + level / 2, len(groups) - 1) / z(level)) ** 2
    return n / (ratio * deff) / widen
