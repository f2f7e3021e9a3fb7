"""One way to put an interval on each kind of number Podium reports, chosen for its coverage.

Every reported number is an :class:`Estimate`: the value, its 95% interval, the number of items it rests
on, the method's name (what the exports' ``interval`` column says), and, where the method has one, the
*effective* number of items. The standard error is not estimated separately: it is the interval's
(:func:`interval_se`), so a page never prints a standard error that disagrees with the interval beside
it, and prints none where the interval is lopsided (0 of 4 right: [0, 0.53] has no symmetric error).

The kinds (coverage of each, simulated at the sizes the site shows: ``bench/intervals.py``,
docs/ratings.md "Interval coverage"; the target is [0.93, 0.975] from n = 10 and never below 0.90):

``mid-p``
    A proportion (``successes`` of ``n``): Lancaster's mid-p exact interval, the inversion of the
    binomial test that counts half the probability of the observed count. It never collapses at 0/n or
    n/n. Its exact coverage over n = 4..10,000 and p in [0.01, 0.99] is 0.919-1.000 (0.929-0.996 on the
    bench's grid of p from n = 10; conservative at small n and extreme p, where the count's discreteness
    allows nothing in the band), never below 0.90; Wilson's falls to 0.85 on that grid (n = 8, p = 0.02)
    and 0.83 between its points (n = 4-10), the plug-in normal ``p +- 1.96 sqrt(p (1 - p) / (n - 1))`` to
    0.04. (Clopper-Pearson's exact interval covers 98-99% at small n: too wide; not in the bench.)
``mid-p-effective``
    A mean of values bounded in [low, high] that are not all at the bounds (F1, pass@k over several
    samples, a judge's win/tie/loss), or a proportion whose items come in clusters: the mid-p interval
    at an effective size ``n / deff``. ``deff`` is the values' variance over the largest variance a
    bounded variable with that mean can have, ``s^2 / (m (1 - m))``, held in [0.75, 1] under 10 values
    and [0.5, 1] from 10 (the sample variance of a few values is too noisy to trust further), times the
    clusters' design effect (cluster-robust over naive variance, at least 1); with G clusters the
    effective size is further divided by ``(t_{G-1} / z)^2``. Student's t interval covers 0.22-0.98 for
    such means at n = 4 and 0.44-0.96 at n = 10 (it collapses to a point when every value is equal); this
    one 0.956-1.000 at n = 4 and 0.929-0.995 from n = 10 (above the band where the variance ratio's floor
    binds: pass@5 near 0 or 1). Clustered (passages of 4): 0.944-1.000 from 12 items, 0.944-0.974 from 25
    clusters; over-wide with 3 clusters (1.000: the t factor at 2 df is 4.8); one cluster is taken as
    independent items (0.897 at worst).
``pooled-mid-p``
    A weighted mean of parts that are each a ``mid-p``/``mid-p-effective`` number (the micro or macro
    average of a group's subtasks, a benchmark over its leaf tasks): the mid-p interval at the pooled
    effective size ``1 / sum(w_i^2 / n_i)`` (Kish; equal to the summed n for a micro average). A subtask
    at 0 of 4 counts as 4 uncertain items, never as certain. Micro averages covered 0.933-1.000; a macro
    average alone 0.651 where a 4-item part far from the rest sits beside large ones (hence ``macro``).
``pooled-mid-p+mover``
    A macro (equally weighted) average whose parts' sizes differ more than tenfold (:func:`macro`): the
    hull of the pooled mid-p and the MOVER intervals, 0.951-1.000 where it applied. Macro averages over all
    covered 0.910-1.000: under the band (0.910, 0.919) where the sizes differ less than tenfold (pooled
    alone) and the smaller parts have the larger ``p (1 - p)``.
``mover``
    A weighted mean of parts of any kind (the board's average over benchmarks, on the raw or the
    normalised scale): Zou & Donner's method of variance estimates recovery, built from the parts' own
    intervals: ``L = v - sqrt(sum w_i^2 (v_i - l_i)^2)``, ``U = v + sqrt(sum w_i^2 (u_i - v_i)^2)``. A part
    whose interval is [0, 0.49] adds that uncertainty; a plug-in standard error of 0 would add none.
    Board averages covered 0.945-0.996.
``delta-t``
    Ratios of sums (perplexity, bits per byte over documents, :func:`ratio_of_sums`): the delta-method
    standard error of ``R = sum(a) / sum(b)`` with Student's t at the documents' effective number less
    one. It covered 0.925-0.961 at n = 4..1,000 (under the band, 0.925-0.926, at n = 30-100 where a few
    long documents dominate the sums); the percentile bootstrap it replaced 0.77-0.95.
``delta-mid-p``
    The LC win rate: the mid-p interval at the effective size ``p (1 - p) / se^2`` of its delta-method
    error, at most 2n (``evalcore.ratings.lc.lc_estimate``). Not simulated in the bench.
``newcombe-mid-p``
    A difference of two rates: Newcombe's hybrid score interval from the two mid-p intervals. Not
    simulated in the bench.
``t`` / ``t-clustered``
    A mean of unbounded values: Student's t with n - 1 (or clusters - 1) degrees of freedom, the
    cluster-robust (CR1) standard error where items share a cluster.
``bootstrap``
    Ratio metrics where a document has no units, and corpus-level metrics: the percentile bootstrap over
    documents (on ratios it covered 0.77 at n = 4 and 0.87-0.89 at n = 10).
Normalised scores (:func:`mapped`) keep their method: the interval is mapped through the same
normalisation as the score and clipped to the same range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import betainc, ndtri, stdtrit

from evalcore.boundary.validation import check_level

LEVEL = 0.95
DEFF_FLOOR = 0.5  # smallest variance ratio trusted from a sample (see mid-p-effective)
DEFF_FLOOR_SMALL = 0.75  # ... below SMALL_N values (pass@k at n = 4 covered 0.89 with 0.5)
SMALL_N = 10
SPREAD_RATIO = 10.0  # a macro average whose parts' sizes differ more than this takes the hull with MOVER
SYMMETRY = 0.1  # an interval is symmetric enough for a standard error when its arms differ by < 10% of its width
_BISECTIONS = 56  # bounds to ~1e-17: float precision
METHODS = {
    "mid-p": "Lancaster's mid-p exact interval for a proportion",
    "mid-p-effective": "mid-p interval at the effective size n / design effect (bounded means, clustered items)",
    "pooled-mid-p": "mid-p interval at the pooled effective size 1 / sum(w_i^2 / n_i) (group and benchmark averages)",
    "mover": "Zou & Donner's MOVER: the parts' intervals combined (the board average)",
    "pooled-mid-p+mover": "the wider of the pooled mid-p and MOVER bounds (a macro average of parts of very different sizes)",
    "delta-t": "delta-method t interval of a ratio of sums on the log scale (perplexities, bits per byte)",
    "delta-mid-p": "mid-p at the effective size p(1-p)/se^2 of a delta-method error, at most 2n (the LC win rate)",
    "newcombe-mid-p": "Newcombe's hybrid score interval for a difference of rates, built from the two mid-p intervals",
    "t": "Student's t interval, n - 1 degrees of freedom",
    "t-clustered": "Student's t with the cluster-robust (CR1) standard error, clusters - 1 degrees of freedom",
    "bootstrap": "percentile bootstrap over documents (1,000 rounds, seeded)",
}


@dataclass(frozen=True)
class Estimate:
    """A reported number with its interval.

    Attributes
    ----------
    value : float
    ci_low, ci_high : float or None
        None only where no interval can be made (one item, or a custom aggregation).
    n : int
        Items (documents, questions, pairs) the number rests on.
    method : str
        A key of :data:`METHODS`.
    level : float
    effective_n : float or None
        The size the mid-p interval was taken at (``mid-p*`` methods); what a pooled average weighs.
    stderr : float or None
        The method's own standard error where it has one (Student's t: ``sd / sqrt(n)``, the interval
        being ``value +- t_q stderr``); otherwise the interval's (:func:`interval_se`).
    """

    value: float
    ci_low: float | None
    ci_high: float | None
    n: int
    method: str
    level: float = LEVEL
    effective_n: float | None = None
    stderr: float | None = None

    @property
    def se(self) -> float | None:
        implied = interval_se(self.value, self.ci_low, self.ci_high, self.level)
        if implied is None or self.stderr is None:
            return implied  # lopsided (a t interval clipped at a bound included): none
        return self.stderr

    def as_dict(self) -> dict:
        return {
            "value": self.value, "stderr": self.se, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n,
            "interval": self.method, "level": self.level, "effective_n": self.effective_n,
        }  # fmt: skip

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in other units (``factor`` > 0, e.g. 100 for percent)."""
        return replace(
            self, value=self.value * factor,
            ci_low=None if self.ci_low is None else self.ci_low * factor,
            ci_high=None if self.ci_high is None else self.ci_high * factor,
            stderr=None if self.stderr is None else self.stderr * factor,
        )  # fmt: skip


def _z(level: float) -> float:
    return float(ndtri(0.5 + level / 2))


def interval_se(value, low, high, level: float = LEVEL) -> float | None:
    """The standard error an interval implies, ``(high - low) / (2 z)``, or None where it has none.

    None when a bound is missing or the interval is lopsided about the value (its two arms differ by more
    than a tenth of its width): there, value +- z se would not be the interval, so no standard error is
    printed beside it.
    """
    if value is None or low is None or high is None:
        return None
    if not all(math.isfinite(x) for x in (value, low, high)):
        return None
    width = high - low
    if width <= 0:
        return 0.0 if width == 0 and low == value else None
    if abs((high - value) - (value - low)) > SYMMETRY * width:
        return None
    return float(width / (2 * _z(level)))


def midp_bounds(successes, n, level: float = LEVEL):
    """Mid-p exact bounds for ``successes`` of ``n`` (arrays or floats; real values allowed, for effective sizes).

    The lower bound solves ``P(X > x) + P(X = x) / 2 = alpha / 2`` and the upper ``P(X < x) + P(X = x) / 2 =
    alpha / 2`` for X ~ Binomial(n, p), with the binomial tails written as regularised incomplete beta
    functions so that x and n may be fractional. 0 successes give a lower bound of 0, n an upper bound of 1.
    Solved by bisection (monotone in p), vectorised.
    """
    check_level(level)
    x = np.asarray(successes, dtype=np.float64)
    size = np.asarray(n, dtype=np.float64)
    x, size = np.broadcast_arrays(x, size)
    if np.any(~np.isfinite(x)) or np.any(~np.isfinite(size)) or np.any(size <= 0):
        raise ValueError("a proportion needs a finite positive n and finite successes")
    if np.any(x < -1e-9) or np.any(x > size + 1e-9):
        raise ValueError("successes must lie between 0 and n")
    x = np.clip(x, 0.0, size)
    tail = (1 - level) / 2
    tiny = 1e-300
    at_zero, at_n = x <= 1e-12, x >= size - 1e-12
    a_lo, b_lo = np.maximum(x, tiny), size - x + 1  # P(X >= x) = I_p(x, n - x + 1)
    a_hi, b_hi = x + 1, np.maximum(size - x, tiny)  # P(X >= x + 1) = I_p(x + 1, n - x)

    def upper_tail(p):  # P(X > x) + P(X = x) / 2 = (P(X >= x) + P(X >= x + 1)) / 2, increasing in p
        ge = np.where(at_zero, 1.0, betainc(a_lo, b_lo, p))
        gt = np.where(at_n, 0.0, betainc(a_hi, b_hi, p))
        return 0.5 * (ge + gt)

    def lower_tail(p):  # P(X < x) + P(X = x) / 2, decreasing in p
        return 1.0 - upper_tail(p)

    def solve(f, increasing: bool):
        lo, hi = np.zeros_like(x), np.ones_like(x)
        for _ in range(_BISECTIONS):
            mid = (lo + hi) / 2
            below = (f(mid) < tail) if increasing else (f(mid) > tail)
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return (lo + hi) / 2

    low = np.where(at_zero, 0.0, solve(upper_tail, True))
    high = np.where(at_n, 1.0, solve(lower_tail, False))
    rate = x / size
    low, high = np.minimum(low, rate), np.maximum(high, rate)  # the bounds hold the observed rate exactly
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


def proportion(successes, n, *, level: float = LEVEL) -> Estimate:
    """``successes`` of ``n`` with the mid-p exact interval."""
    if isinstance(successes, bool) or isinstance(n, bool):
        raise ValueError("successes and n must be numbers, not booleans")
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"a proportion needs n >= 1 items, got {n!r}")
    low, high = midp_bounds(float(successes), float(n), level)
    return Estimate(float(successes) / n, low, high, int(n), "mid-p", level, float(n))


def _as_values(values, name: str = "values") -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def cluster_design_effect(values, clusters) -> tuple[float, int]:
    """(design effect, clusters): cluster-robust (CR1) variance of the mean over the naive one, at least 1.

    1.0 with fewer than two clusters' worth of information (every item its own cluster, or one cluster:
    then the clusters cannot be told apart and the items are taken as independent; the caller says so).
    """
    y = _as_values(values)
    labels = np.asarray(clusters, dtype=object)
    if labels.shape != y.shape:
        raise ValueError(f"clusters must have one label per value ({y.size}), got {labels.size}")
    _, inv = np.unique(labels.astype(str), return_inverse=True)
    g = int(inv.max()) + 1
    n = y.size
    if g < 2 or g == n:
        return 1.0, g
    resid = np.bincount(inv, y - y.mean())
    robust = g / (g - 1) * float(np.sum(resid**2)) / n**2
    naive = float(y.var(ddof=1)) / n
    if naive <= 0:
        return 1.0, g
    return max(1.0, robust / naive), g


def bounded_mean(values, *, low: float = 0.0, high: float = 1.0, clusters=None, level: float = LEVEL) -> Estimate:
    """Mean of values bounded in [low, high], with a mid-p interval at its effective size.

    All values at the bounds (a proportion) and no clusters: the exact mid-p interval (``mid-p``).
    Otherwise ``mid-p-effective`` at ``n / deff``, ``deff = clip(s^2 / (m (1 - m)), 0.5, 1)`` on the
    [0, 1] scale, times the clusters' design effect (:func:`cluster_design_effect`). One value: no interval.
    """
    x = _as_values(values)
    if not (math.isfinite(low) and math.isfinite(high) and high > low):
        raise ValueError(f"bounds must be finite with low < high, got [{low}, {high}]")
    if np.any(x < low - 1e-9) or np.any(x > high + 1e-9):
        raise ValueError(f"values must lie in [{low}, {high}]")
    span = high - low
    u = np.clip((x - low) / span, 0.0, 1.0)
    n = u.size
    m = float(u.mean())
    value = low + span * m
    if n == 1:
        return Estimate(value, None, None, 1, "mid-p", level, None)
    binary = bool(np.all((u == 0.0) | (u == 1.0)))
    cluster_deff, groups = 1.0, n
    if clusters is not None:
        cluster_deff, groups = cluster_design_effect(u, clusters)
    clustered = 2 <= groups < n
    if binary and not clustered:
        lo, hi = midp_bounds(float(u.sum()), float(n), level)
        return Estimate(value, low + span * lo, low + span * hi, n, "mid-p", level, float(n))
    bound_var = m * (1 - m)
    floor = DEFF_FLOOR_SMALL if n < SMALL_N else DEFF_FLOOR
    ratio = 1.0 if binary or bound_var <= 0 else min(1.0, max(floor, float(u.var(ddof=1)) / bound_var))
    effective = n / (ratio * cluster_deff)
    if clustered:
        # A design effect estimated from G clusters is itself uncertain: widen as Student's t with G - 1
        # degrees of freedom widens the normal (rare outcomes in 25 clusters covered 0.87 without this).
        effective /= (float(stdtrit(groups - 1, 0.5 + level / 2)) / _z(level)) ** 2
    lo, hi = midp_bounds(m * effective, effective, level)
    return Estimate(value, low + span * lo, low + span * hi, n, "mid-p-effective", level, float(effective))


def t_mean(values, *, clusters=None, bounds: tuple[float, float] | None = None, level: float = LEVEL) -> Estimate:
    """Mean of unbounded values with Student's t interval (cluster-robust where clusters are given).

    ``bounds``: the metric's possible range, to which the interval is clipped (the interval is then
    lopsided and carries no standard error). One value: no interval.
    """
    x = _as_values(values)
    check_level(level)
    n = x.size
    mean = float(x.mean())
    if n == 1:
        return Estimate(mean, None, None, 1, "t", level, None)
    se = float(x.std(ddof=1) / math.sqrt(n))
    df, method = n - 1, "t"
    if clusters is not None:
        deff, g = cluster_design_effect(x, clusters)
        if 2 <= g < n:
            se, df, method = se * math.sqrt(deff), g - 1, "t-clustered"
    q = float(stdtrit(df, 0.5 + level / 2))
    low, high = mean - q * se, mean + q * se
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    return Estimate(mean, low, high, n, method, level, None, se)


def _weights(parts: list[Estimate], weights) -> np.ndarray:
    if not parts:
        raise ValueError("an average needs at least one part")
    if weights is None:
        return np.full(len(parts), 1.0 / len(parts))
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(parts),) or np.any(~np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be one non-negative number per part, not all zero")
    return w / w.sum()


def pooled(parts: list[Estimate], weights=None, *, bounds: tuple[float, float] = (0.0, 1.0),
           level: float = LEVEL) -> Estimate:  # fmt: skip
    """Weighted mean of bounded parts (each with an ``effective_n``) with the pooled mid-p interval.

    ``weights``: None for the macro average (equal), the parts' n for the micro average. The pooled
    effective size is ``1 / sum(w_i^2 / effective_n_i)``: with micro weights, the summed effective sizes.
    """
    w = _weights(parts, weights)
    if any(p.effective_n is None or p.effective_n <= 0 for p in parts):
        raise ValueError("a pooled interval needs every part's effective size (mid-p parts)")
    span = bounds[1] - bounds[0]
    value = float(sum(wi * p.value for wi, p in zip(w, parts)))
    effective = 1.0 / float(sum(wi * wi / p.effective_n for wi, p in zip(w, parts) if wi > 0))
    m = min(1.0, max(0.0, (value - bounds[0]) / span))
    lo, hi = midp_bounds(m * effective, effective, level)
    n = int(sum(p.n for wi, p in zip(w, parts) if wi > 0))
    return Estimate(value, bounds[0] + span * lo, bounds[0] + span * hi, n, "pooled-mid-p", level, effective)


def mover(parts: list[Estimate], weights=None, *, bounds: tuple[float, float] | None = None,
          level: float = LEVEL) -> Estimate:  # fmt: skip
    """Weighted mean of parts with Zou & Donner's MOVER interval from the parts' own intervals.

    A part without an interval leaves the average without one. ``bounds`` clips the result.
    """
    w = _weights(parts, weights)
    value = float(sum(wi * p.value for wi, p in zip(w, parts)))
    n = int(sum(p.n for wi, p in zip(w, parts) if wi > 0))
    if any(p.ci_low is None or p.ci_high is None for wi, p in zip(w, parts) if wi > 0):
        return Estimate(value, None, None, n, "mover", level, None)
    down = math.sqrt(sum((wi * (p.value - p.ci_low)) ** 2 for wi, p in zip(w, parts)))
    up = math.sqrt(sum((wi * (p.ci_high - p.value)) ** 2 for wi, p in zip(w, parts)))
    low, high = value - down, value + up
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    return Estimate(value, min(low, value), max(high, value), n, "mover", level, None)


def macro(parts: list[Estimate], *, bounds: tuple[float, float] = (0.0, 1.0), level: float = LEVEL) -> Estimate:
    """Equally weighted mean of mid-p parts: pooled, or, where the parts' sizes differ more than tenfold, the
    hull of the pooled and the MOVER intervals.

    The pooled size gives every part the average's variance; a small part far from the rest (4 items at 0.5
    beside nine of 1,000 at 0.02) then covered 0.65. MOVER alone falls to 0.86 on many 4-item parts; the
    hull covered 0.951-1.000 in the cells of bench/intervals.py where it applies. Parts within tenfold of
    each other whose smaller ones sit nearer 0.5 can still fall to 0.91 (the pooled variance too small).
    """
    pool = pooled(parts, None, bounds=bounds, level=level)
    sizes = [p.n for p in parts]
    if max(sizes) <= SPREAD_RATIO * min(sizes):
        return pool
    other = mover(parts, None, bounds=bounds, level=level)
    if other.ci_low is None:
        return pool
    return replace(pool, ci_low=min(pool.ci_low, other.ci_low), ci_high=max(pool.ci_high, other.ci_high),
                   method="pooled-mid-p+mover")  # fmt: skip


def ratio_of_sums(numerators, denominators, *, level: float = LEVEL) -> tuple[float, float, float, float]:
    """``R = sum(a) / sum(b)`` with a delta-method t interval: (R, low, high, degrees of freedom).

    ``var(R) = n / (n - 1) * sum((a_i - R b_i)^2) / sum(b)^2`` (the linearised ratio estimator), Student's t
    with ``sum(b)^2 / sum(b^2) - 1`` degrees of freedom (the documents' effective number, at least 1). The
    percentile bootstrap it replaces covered 0.77 at n = 4 and 0.87-0.89 at n = 10 (bench/intervals.py).
    """
    a, b = _as_values(numerators, "numerators"), _as_values(denominators, "denominators")
    if a.shape != b.shape:
        raise ValueError("numerators and denominators differ in length")
    if np.any(b <= 0):
        raise ValueError("denominators must be positive")
    n, total = a.size, float(b.sum())
    ratio = float(a.sum()) / total
    if n < 2:
        return ratio, float("nan"), float("nan"), 0.0
    resid = a - ratio * b
    se = math.sqrt(n / (n - 1) * float(np.sum(resid**2))) / total
    df = max(1.0, total**2 / float(np.sum(b**2)) - 1.0)
    q = float(stdtrit(df, 0.5 + level / 2))
    return ratio, ratio - q * se, ratio + q * se, df


def mapped(estimate: Estimate, scale: float, offset: float, *, bounds: tuple[float, float]) -> Estimate:
    """``offset + scale * estimate`` (``scale`` > 0), the interval mapped the same way and both clipped to ``bounds``.

    The board's normalisation ``(v - baseline) / (1 - baseline) * 100`` is ``scale = 100 / (1 - baseline)``,
    ``offset = -baseline * scale``, bounds ``(-baseline * scale, 100)``.
    """
    if not (scale > 0 and math.isfinite(scale) and math.isfinite(offset)):
        raise ValueError("a normalisation needs a finite positive scale")

    def f(v):
        return None if v is None else min(bounds[1], max(bounds[0], offset + scale * v))

    return replace(estimate, value=f(estimate.value), ci_low=f(estimate.ci_low), ci_high=f(estimate.ci_high))
