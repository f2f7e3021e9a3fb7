"""Sample size and power for comparing two models on the same items, and best-of-K inflation."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import ndtr, ndtri

from evalcore.boundary.validation import check_integer, check_probability


def _paired_sd(sd_a: float, sd_b: float, rho: float) -> float:
    if not -1 <= rho <= 1:
        raise ValueError("rho must be between -1 and 1")
    if sd_a < 0 or sd_b < 0:
        raise ValueError("standard deviations must be non-negative")
    var = sd_a**2 + sd_b**2 - 2 * rho * sd_a * sd_b
    return math.sqrt(max(var, 0.0))


def _item_sd(p: float | None, sd: float | None) -> float:
    if sd is not None:
        return float(sd)
    if p is None:
        raise ValueError("give either sd (per-item score SD) or p (accuracy, for 0/1 scores)")
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    return math.sqrt(p * (1 - p))


@dataclass(frozen=True)
class SampleSize:
    """Items needed to detect a difference.

    Attributes
    ----------
    n : int
        Items (each scored for both models), rounded up.
    difference, alpha, power, rho : float
        The inputs.
    sd_difference : float
        Per-item standard deviation of the score difference, ``sqrt(sa^2 + sb^2 - 2 rho sa sb)``.
    """

    n: int
    difference: float
    alpha: float
    power: float
    rho: float
    sd_difference: float


def required_sample_size(
    difference: float,
    *,
    p: float | None = None,
    sd: float | None = None,
    rho: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> SampleSize:
    """Items needed for a two-sided paired test to detect ``difference`` between two models.

    ``n = (z_{1 - alpha/2} + z_{power})^2 * sd_d^2 / difference^2`` with
    ``sd_d^2 = 2 s^2 (1 - rho)``, ``s`` the per-item score SD (``sqrt(p(1-p))`` for 0/1 scores) and
    ``rho`` the correlation of the two models' per-item scores (pairing helps when rho > 0).

    Parameters
    ----------
    difference : float
        Smallest difference in mean score worth detecting (e.g. 0.02 for two accuracy points).
    p, sd : float
        Accuracy (0/1 scores) or per-item SD; one of them.
    rho, alpha, power : float
    """
    if difference == 0:
        raise ValueError("difference must be non-zero")
    check_probability(alpha, "alpha")
    check_probability(power, "power")
    s = _item_sd(p, sd)
    sd_d = _paired_sd(s, s, rho)
    z = ndtri(1 - alpha / 2) + ndtri(power)
    n = math.ceil((z * sd_d / abs(difference)) ** 2 - 1e-9)
    return SampleSize(max(n, 1), float(difference), alpha, power, rho, sd_d)


def power_for_sample_size(
    n: int,
    difference: float,
    *,
    p: float | None = None,
    sd: float | None = None,
    rho: float = 0.0,
    alpha: float = 0.05,
) -> float:
    """Power of the two-sided paired z-test with ``n`` items to detect ``difference`` (both tails)."""
    check_integer(n, "n", minimum=1)
    check_probability(alpha, "alpha")
    s = _item_sd(p, sd)
    sd_d = _paired_sd(s, s, rho)
    if sd_d == 0:
        return 1.0
    shift = abs(difference) * math.sqrt(n) / sd_d
    z = ndtri(1 - alpha / 2)
    return float(ndtr(shift - z) + ndtr(-shift - z))


def expected_max_standard_normal(k: int) -> float:
    """``E[max of k independent standard normals]`` (0 for k = 1; 1/sqrt(pi) for k = 2)."""
    check_integer(k, "k", minimum=1)
    if k == 1:
        return 0.0

    from scipy import integrate
    from scipy.stats import norm

    def integrand(x):
        return x * k * norm.pdf(x) * norm.cdf(x) ** (k - 1)

    value, _ = integrate.quad(integrand, -12, 12, limit=200)
    return float(value)


@dataclass(frozen=True)
class BestOfKInflation:
    """How much the best of K equally good variants overstates their common true score.

    Attributes
    ----------
    k : int
    se : float
        Standard error of one variant's measured score.
    expected_inflation : float
        ``se * E[max of k standard normals]``: the expected excess of the best measured score.
    max_z : float
        ``E[max of k standard normals]``.
    """

    k: int
    se: float
    expected_inflation: float
    max_z: float


def best_of_k_inflation(k: int, *, se: float | None = None, p: float | None = None, n: int | None = None):
    """Expected inflation of the best of ``k`` equally good variants (e.g. private variants of one model).

    Give the per-variant standard error ``se`` directly, or an accuracy ``p`` measured on ``n`` items
    (``se = sqrt(p (1 - p) / n)``). Assumes independent, normally distributed measurement errors; variants
    evaluated on the same items are positively correlated, which makes the real inflation smaller.
    """
    check_integer(k, "k", minimum=1)
    if se is None:
        if p is None or n is None:
            raise ValueError("give se, or p and n")
        check_integer(n, "n", minimum=1)
        se = math.sqrt(p * (1 - p) / n)
    if se < 0:
        raise ValueError("se must be non-negative")
    z = expected_max_standard_normal(int(k))
    return BestOfKInflation(int(k), float(se), float(se) * z, z)


__all__ = [
    "BestOfKInflation",
    "SampleSize",
    "best_of_k_inflation",
    "expected_max_standard_normal",
    "power_for_sample_size",
    "required_sample_size",
]
